// Helpers of the pallas_call tests (pallas_test.cc, pallas_compiled_test.cc): inputs, an f64
// matmul, a tolerance check and the accumulating matmul kernel both files run.
#ifndef SHARDJIT_FRONTEND_PALLAS_TEST_UTIL_H_
#define SHARDJIT_FRONTEND_PALLAS_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "frontend/shardjit.h"
#include "gtest/gtest.h"

namespace shardjit::pallas_test {

inline std::vector<double> Ramp(int64_t n, double scale, double offset) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::fmod(i * scale, 7.0) - offset;
  return v;
}

inline std::vector<double> MatmulF64(const std::vector<double>& x, const std::vector<double>& y,
                              int64_t m, int64_t k, int64_t n) {
  std::vector<double> out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) out[i * n + j] += x[i * k + p] * y[p * n + j];
    }
  }
  return out;
}

inline void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
  }
}

// o[i, j] += x[i, k-block] @ y[k-block, j] over the k axis, o zeroed at k = 0: the dot
// accumulates straight into the output block (in place for inner blocks, through padding at the
// edges, on the x86 backend).
inline pl::PallasCall AccumulatingMatmul(int64_t m, int64_t k, int64_t n, int64_t bm, int64_t bk,
                                  int64_t bn, pl::GridSemantics first = pl::kParallel) {
  return pl::pallas_call(
      [=](pl::Ref xr, pl::Ref yr, pl::Ref o) {
        pl::when(lax::eq(pl::program_id(1), lax::scalar(0, DType::kS32)),
                 [&] { o.store(lax::full({bm, bn}, 0, DType::kF32)); });
        o.store(o.load() + pl::dot(xr.load(), yr.load(), DType::kF32));
      },
      {.out_shapes = {{DType::kF32, {m, n}}},
       .grid = {pl::cdiv(m, bm), pl::cdiv(k, bk), pl::cdiv(n, bn)},
       .in_specs = {pl::BlockSpec({bm, bk}, [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; }),
                    pl::BlockSpec({bk, bn}, [](pl::Idx g) { return pl::Blocks{g[1], g[2]}; })},
       .out_specs = {pl::BlockSpec({bm, bn}, [](pl::Idx g) { return pl::Blocks{g[0], g[2]}; })},
       .dimension_semantics = {first, pl::kArbitrary, pl::kArbitrary},
       .name = "matmul"});
}

}  // namespace shardjit::pallas_test

#endif  // SHARDJIT_FRONTEND_PALLAS_TEST_UTIL_H_
