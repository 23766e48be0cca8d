// The f64 GEMM at every level this host runs against long double sums: odd shapes across the
// tiles (6x8 AVX2, 8x24 AVX-512) and the k, row and column blocks of each level, transposed
// operands, padded C, accumulation, several threads and the empty cases.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backends/x86/gemm.h"
#include "backends/x86/isa_test_util.h"
#include "base/thread_pool.h"
#include "fmt/format.h"
#include "gtest/gtest.h"

namespace shardjit::backends::x86 {
namespace {

base::ThreadPool& Pool() {
  static base::ThreadPool* pool = new base::ThreadPool(3);
  return *pool;
}

struct Case {
  int64_t m, n, k;
  bool trans_a = false, trans_b = false, accumulate = false;
  int64_t pad = 0;  // extra elements per row of C (left untouched)
  int threads = 1;
};

void Check(const Case& c, const std::string& label) {
  SCOPED_TRACE(fmt::format("{} m={} n={} k={} trans_a={} trans_b={} accumulate={} pad={} threads={}",
                           label, c.m, c.n, c.k, c.trans_a, c.trans_b, c.accumulate, c.pad,
                           c.threads));
  std::mt19937_64 rng(c.m * 1000003 + c.n * 1009 + c.k);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> a(c.m * c.k), b(c.k * c.n);
  for (double& v : a) v = dist(rng);
  for (double& v : b) v = dist(rng);
  const int64_t ldc = c.n + c.pad;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> out(c.m * ldc, nan);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) out[i * ldc + j] = c.accumulate ? dist(rng) : nan;
  }
  const std::vector<double> before = out;
  GemmArgs g;
  g.type = GemmType::kF64F64F64;
  g.shape = {c.m, c.n, c.k};
  // A[i,l] and B[l,j] through their strides: stored transposed when asked.
  g.a = a.data();
  g.a_row_stride = c.trans_a ? 1 : c.k;
  g.a_col_stride = c.trans_a ? c.m : 1;
  g.b = b.data();
  g.b_row_stride = c.trans_b ? 1 : c.n;
  g.b_col_stride = c.trans_b ? c.k : 1;
  g.c = out.data();
  g.ldc = ldc;
  g.accumulate = c.accumulate;
  g.parallel = {&Pool(), c.threads};
  ASSERT_TRUE(Gemm(g).ok());
  int failures = 0;
  for (int64_t i = 0; i < c.m && failures < 5; ++i) {
    for (int64_t j = 0; j < ldc && failures < 5; ++j) {
      const double got = out[i * ldc + j];
      if (j >= c.n) {
        failures += !std::isnan(got);
        EXPECT_TRUE(std::isnan(got)) << "padding at " << i << "," << j;
        continue;
      }
      long double sum = c.accumulate ? before[i * ldc + j] : 0.0L, scale = std::fabs(sum);
      for (int64_t l = 0; l < c.k; ++l) {
        const long double p = static_cast<long double>(a[i * g.a_row_stride + l * g.a_col_stride]) *
                              b[l * g.b_row_stride + j * g.b_col_stride];
        sum += p;
        scale += std::fabs(p);
      }
      // f64 sums of k + 1 terms: within (k + 1) units of rounding of the sum of magnitudes.
      const double bound = static_cast<double>(c.k + 1) * 0x1p-53 * static_cast<double>(scale);
      const double err = std::fabs(got - static_cast<double>(sum));
      if (!(err <= bound)) {
        ++failures;
        ADD_FAILURE() << "C[" << i << "," << j << "] = " << got << ", want "
                      << static_cast<double>(sum) << " (error " << err << " > " << bound << ")";
      }
    }
  }
}

TEST(GemmF64, MatchesLongDoubleSumsAtEveryLevel) {
  const Case cases[] = {
      {1, 1, 1},
      {5, 7, 3},
      {6, 8, 256},
      {7, 9, 257, true, false, true, 3},
      {13, 17, 300, false, true},
      {150, 20, 513, true, true, true, 1},  // two row blocks, three k blocks
      {12, 2061, 9, false, false, false, 5},  // two column blocks
      {200, 25, 140, false, true, true, 2, 3},  // two AVX-512 row and k blocks
      {97, 45, 130, false, false, true, 0, 3},
      {300, 1, 40, false, false, false, 0, 3},
      {1, 300, 40, true, true, false, 0, 3},
  };
  for (IsaLevel isa : HostIsaLevels()) {
    ScopedMaxIsa cap(isa);
    for (const Case& c : cases) Check(c, std::string(IsaName(isa)));
  }
}

TEST(GemmF64, EmptyDimensions) {
  for (IsaLevel isa : HostIsaLevels()) {
    ScopedMaxIsa cap(isa);
    Check({0, 5, 3}, std::string(IsaName(isa)));
    Check({4, 0, 3}, std::string(IsaName(isa)));
    Check({4, 5, 0}, std::string(IsaName(isa)));                        // C = 0
    Check({4, 5, 0, false, false, true}, std::string(IsaName(isa)));  // C kept
  }
}

TEST(GemmF64, RefusesABf16Result) {
  double x = 1.0;
  GemmArgs g;
  g.type = GemmType::kF64F64F64;
  g.shape = {1, 1, 1};
  g.a = g.b = &x;
  g.c = &x;
  g.out_bf16 = true;
  const absl::Status s = Gemm(g);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("f64"), std::string::npos) << s;
}

}  // namespace
}  // namespace shardjit::backends::x86
