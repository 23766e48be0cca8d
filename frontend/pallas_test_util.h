// Helpers of the pallas_call tests (pallas_test.cc, pallas_compiled_test.cc,
// pallas_deferred_test.cc): inputs, an f64 matmul, a tolerance check, the accumulating matmul
// kernel, and the fixture running kernels on both backends.
#ifndef SHARDJIT_FRONTEND_PALLAS_TEST_UTIL_H_
#define SHARDJIT_FRONTEND_PALLAS_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "backends/x86/pallas_call.h"
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

// Kernels the x86 backend compiles (no interpreter) beside the interpreter's results, on one
// device with two threads (pallas_compiled_test.cc, pallas_deferred_test.cc).
class CompiledKernelTest : public ::testing::Test {
 protected:
  Runtime rt_{{.num_devices = 1, .num_threads = 2}};
  Mesh mesh_ = *make_mesh(rt_, {{"x", 1}});

  // Runs `f` on both backends; returns (reference, x86) results and checks the x86 run compiled.
  template <typename F>
  std::pair<std::vector<double>, std::vector<double>> Both(F f, const std::vector<Array>& args) {
    std::vector<double> out[2];
    for (Backend backend : {Backend::kReference, Backend::kX86}) {
      const backends::x86::PallasCallStats before = backends::x86::GetPallasCallStats();
      absl::StatusOr<std::vector<Array>> got =
          jit([&](const std::vector<Tracer>& a) { return std::vector<Tracer>{f(a)}; },
              {.backend = backend})(args);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) return {};
      out[backend == Backend::kX86] = (*got)[0].to_host()->ToDoubles();
      const backends::x86::PallasCallStats after = backends::x86::GetPallasCallStats();
      if (backend == Backend::kX86) {
        EXPECT_EQ(after.compiled, before.compiled + 1);
        EXPECT_EQ(after.interpreted, before.interpreted);
      }
    }
    return {out[0], out[1]};
  }
  Array Put(DType dtype, std::vector<int64_t> dims, std::vector<double> values) {
    return *device_put(HostTensor(dtype, std::move(dims), std::move(values)),
                       NamedSharding(mesh_, P()));
  }
};

}  // namespace shardjit::pallas_test

#endif  // SHARDJIT_FRONTEND_PALLAS_TEST_UTIL_H_
