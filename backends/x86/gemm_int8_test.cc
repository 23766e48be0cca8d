// Tests of the int8 GEMM (GemmType::kS8S8S32): the VNNI kernels where this CPU has them, the
// driver, packing and offset correction through the portable micro-kernel on any host, the
// float GEMM on widened operands below VNNI, and the plain C++ level, each against exact int64
// sums wrapped to int32.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/x86/cpu_features.h"
#include "backends/x86/gemm.h"
#include "backends/x86/gemm_driver.h"
#include "backends/x86/gemm_internal.h"
#include "backends/x86/gemm_kernel.h"
#include "backends/x86/gemm_kernel_avx512.h"
#include "backends/x86/gemm_test_util.h"
#include "backends/x86/isa_test_util.h"
#include "fmt/format.h"
#include "gtest/gtest.h"

namespace shardjit::backends::x86 {
namespace {

using gemm_test::TestPool;

struct Int8Case {
  GemmShape shape;
  bool trans_a = false, trans_b = false, accumulate = false;
  int64_t pad = 0;  // extra elements per row of A, B and C
  int threads = 1;
  // Values: 0 uniform over [-128, 127], 1 only the extremes -128 and 127.
  int values = 0;

  std::string Name() const {
    return fmt::format("m={} n={} k={} ta={} tb={} acc={} pad={} threads={} values={}", shape.m,
                       shape.n, shape.k, trans_a, trans_b, accumulate, pad, threads, values);
  }
};

// One problem: strided operands, C with padding, and the exact result.
struct Int8Problem {
  Int8Case c;
  GemmArgs args;
  std::vector<int8_t> a, b;
  std::vector<int32_t> c_init, want;

  Int8Problem(const Int8Case& cs, uint32_t seed) : c(cs) {
    const int64_t m = c.shape.m, n = c.shape.n, k = c.shape.k;
    std::mt19937 rng(seed);
    auto value = [&]() -> int8_t {
      if (c.values == 1) return rng() % 2 ? 127 : -128;
      return static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    };
    args.shape = c.shape;
    args.type = GemmType::kS8S8S32;
    args.accumulate = c.accumulate;
    args.parallel = {&TestPool(), c.threads};
    args.a_row_stride = c.trans_a ? 1 : k + c.pad;
    args.a_col_stride = c.trans_a ? m + c.pad : 1;
    args.b_row_stride = c.trans_b ? 1 : n + c.pad;
    args.b_col_stride = c.trans_b ? k + c.pad : 1;
    args.ldc = n + c.pad;
    auto span = [](int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
      return (rows == 0 || cols == 0 ? 1 : (rows - 1) * rs + (cols - 1) * cs + 1) + 64;
    };
    // Padding holds values that would change any sum that read them.
    a.assign(span(m, k, args.a_row_stride, args.a_col_stride), 99);
    b.assign(span(k, n, args.b_row_stride, args.b_col_stride), -77);
    c_init.assign(span(m, n, args.ldc, 1), 12345);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t l = 0; l < k; ++l) a[i * args.a_row_stride + l * args.a_col_stride] = value();
    }
    for (int64_t l = 0; l < k; ++l) {
      for (int64_t j = 0; j < n; ++j) b[l * args.b_row_stride + j * args.b_col_stride] = value();
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        c_init[i * args.ldc + j] = static_cast<int32_t>(rng());
      }
    }
    args.a = a.data();
    args.b = b.data();
    want.assign(m * n, 0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t sum = c.accumulate ? c_init[i * args.ldc + j] : 0;
        for (int64_t l = 0; l < k; ++l) {
          sum += int64_t{a[i * args.a_row_stride + l * args.a_col_stride]} *
                 b[l * args.b_row_stride + j * args.b_col_stride];
        }
        want[i * n + j] = static_cast<int32_t>(static_cast<uint32_t>(sum));  // wraps
      }
    }
  }

  // Runs `run` on a fresh copy of C; every element must match and the padding stay untouched.
  template <typename Run>
  void Check(const std::string& label, Run run) {
    std::vector<int32_t> c_buf = c_init;
    GemmArgs g = args;
    g.c = c_buf.data();
    const absl::Status s = run(g);
    ASSERT_TRUE(s.ok()) << label << " " << c.Name() << ": " << s;
    int failures = 0;
    for (int64_t i = 0; i < c.shape.m && failures < 5; ++i) {
      for (int64_t j = 0; j < c.shape.n + c.pad && failures < 5; ++j) {
        const int64_t at = i * args.ldc + j;
        const int32_t want_ij = j < c.shape.n ? want[i * c.shape.n + j] : c_init[at];
        if (c_buf[at] != want_ij) {
          ++failures;
          ADD_FAILURE() << label << " " << c.Name() << ": C[" << i << "," << j
                        << "] = " << c_buf[at] << ", want " << want_ij;
        }
      }
    }
  }
};

// Odd sizes around the 6 x 64 tile and the 4-value k steps, both transposes, padding,
// accumulation, threads and extreme values.
std::vector<Int8Case> Cases() {
  std::vector<Int8Case> cases;
  const int64_t sizes[] = {1, 3, 5, 6, 7, 13, 63, 64, 65, 130};
  const int64_t depths[] = {1, 2, 3, 4, 5, 7, 31, 64, 129, 300};
  int v = 0;
  for (int64_t m : sizes) {
    for (int i = 0; i < 3; ++i) {
      Int8Case c;
      c.shape = {m, sizes[(v * 7 + 3) % 10], depths[(v * 3 + i) % 10]};
      c.trans_a = v % 3 == 1;
      c.trans_b = v % 4 == 2;
      c.accumulate = v % 5 == 3;
      c.pad = v % 7 == 4 ? 3 : 0;
      c.threads = v % 4 == 1 ? 3 : 1;
      c.values = v % 6 == 5 ? 1 : 0;
      cases.push_back(c);
      ++v;
    }
  }
  cases.push_back({{200, 257, 2100}});  // several depth blocks
  cases.push_back({{130, 300, 1000}, false, false, true, 0, 2});
  cases.push_back({{7, 70, 600}, true, true, false, 5, 1, 1});
  return cases;
}

// Small blocks, so that the tests cover several row, depth and column blocks.
GemmPlan SmallPlan(bool portable) {
  GemmPlan plan = MakePlan(IsaLevel::kAvx512, GemmType::kS8S8S32, HostCaches());
  plan.mc = 12;
  plan.kc = 40;
  plan.nc = 128;
  plan.portable_kernels = portable;
  return plan;
}

TEST(GemmInt8, DefaultDispatchMatchesExactSums) {
  uint32_t seed = 1;
  for (const Int8Case& c : Cases()) {
    Int8Problem p(c, seed++);
    p.Check("Gemm", [](const GemmArgs& g) { return Gemm(g); });
  }
}

TEST(GemmInt8, PortableKernelsOnAnyHost) {
  uint32_t seed = 100;
  for (bool small : {false, true}) {
    GemmPlan plan = small ? SmallPlan(true) : MakePlan(IsaLevel::kAvx512, GemmType::kS8S8S32,
                                                       HostCaches());
    plan.portable_kernels = true;
    for (const Int8Case& c : Cases()) {
      Int8Problem p(c, seed++);
      p.Check(fmt::format("portable small={}", small), [&](const GemmArgs& g) {
        return internal::GemmWithPlan(g, IsaLevel::kAvx512, &plan);
      });
    }
  }
}

TEST(GemmInt8, VnniKernels) {
  if (!DetectedAvx512Vnni()) GTEST_SKIP() << "this CPU lacks AVX512_VNNI";
  uint32_t seed = 200;
  for (bool small : {false, true}) {
    const GemmPlan plan = SmallPlan(false);
    for (const Int8Case& c : Cases()) {
      Int8Problem p(c, seed++);
      p.Check(fmt::format("vnni small={}", small), [&](const GemmArgs& g) {
        return small ? internal::GemmWithPlan(g, IsaLevel::kAvx512, &plan)
                     : GemmAtIsa(g, IsaLevel::kAvx512);
      });
    }
  }
}

TEST(GemmInt8, PlainCxxLevel) {
  uint32_t seed = 300;
  for (const Int8Case& c : Cases()) {
    Int8Problem p(c, seed++);
    p.Check("reference", [](const GemmArgs& g) { return GemmAtIsa(g, IsaLevel::kReference); });
  }
}

// Sums past 2^31 wrap as the integer dot's do: 140000 products of 127 * 127 (and of -128 *
// -128) are 2.26e9 (2.29e9), and the offset correction wraps with them.
void CheckSumsWrapModulo2To32() {
  for (int8_t x : {int8_t{127}, int8_t{-128}}) {
    const int64_t k = 140000;
    std::vector<int8_t> a(2 * k, x), b(k * 3, x);
    std::vector<int32_t> c(6, 0);
    GemmArgs g;
    g.shape = {2, 3, k};
    g.type = GemmType::kS8S8S32;
    g.a = a.data();
    g.b = b.data();
    g.c = c.data();
    ASSERT_TRUE(Gemm(g).ok());
    const int32_t want = static_cast<int32_t>(static_cast<uint32_t>(k * x * x));
    for (int32_t got : c) EXPECT_EQ(got, want) << int{x};
  }
}

TEST(GemmInt8, SumsWrapModulo2To32) { CheckSumsWrapModulo2To32(); }

TEST(GemmInt8, LevelsWithoutAKernelSaySo) {
  GemmArgs g;
  std::vector<int8_t> a(4, 1), b(4, 1);
  std::vector<int32_t> c(4, 0);
  g.shape = {2, 2, 2};
  g.type = GemmType::kS8S8S32;
  g.a = a.data();
  g.b = b.data();
  g.c = c.data();
  if (DetectedIsa() >= IsaLevel::kAvx2) {
    const absl::Status s = GemmAtIsa(g, IsaLevel::kAvx2);
    EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
    EXPECT_NE(s.message().find("int8"), std::string::npos) << s;
  }
  g.out_bf16 = true;
  const absl::Status s = Gemm(g);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("s8"), std::string::npos) << s;
}

// The ISA cap governs the int8 path: below kAvx512 (no VNNI) the operands are widened into the
// float GEMM at AVX2 (exact, also past 2^24 in depth blocks), below AVX2 the plain C++ level
// runs; the same results either way.
TEST(GemmInt8, BelowVnniWidensIntoTheFloatGemm) {
  GemmArgs g;
  g.type = GemmType::kS8S8S32;
  if (DetectedIsa() >= IsaLevel::kAvx2) {
    ScopedMaxIsa cap(IsaLevel::kAvx2);
    EXPECT_FALSE(Avx512VnniUsable());
    EXPECT_EQ(GemmIsaFor(g), IsaLevel::kAvx2);
    uint32_t seed = 400;
    std::vector<Int8Case> cases = Cases();
    // Depth blocks: 1024, 1025, several of them with sums far past 2^24 (3000 * 128 * 128).
    cases.push_back({{5, 70, 1024}, false, false, false, 0, 1, 1});
    cases.push_back({{9, 33, 1025}, true, false, true, 3, 1, 1});
    cases.push_back({{7, 65, 3000}, false, true, true, 0, 2, 1});
    for (const Int8Case& c : cases) {
      Int8Problem p(c, seed++);
      p.Check("widened", [](const GemmArgs& args) { return Gemm(args); });
    }
  }
  {
    ScopedMaxIsa cap(IsaLevel::kReference);
    EXPECT_EQ(GemmIsaFor(g), IsaLevel::kReference);
    Int8Problem p({{13, 70, 37}}, 7);
    p.Check("plain C++", [](const GemmArgs& args) { return Gemm(args); });
  }
  if (DetectedAvx512Vnni()) EXPECT_EQ(GemmIsaFor(g), IsaLevel::kAvx512);
}

// Widened, the depth blocks keep every f32 sum below 2^24: products of 100..127 over a depth of
// 5000 reach 8e7, where f32 would round (odd sums of mixed parity), yet C is exact.
TEST(GemmInt8, WidenedDepthBlocksKeepSumsExact) {
  if (DetectedIsa() < IsaLevel::kAvx2) GTEST_SKIP() << "this CPU lacks avx2";
  ScopedMaxIsa cap(IsaLevel::kAvx2);
  const int64_t m = 3, n = 20, k = 5000;
  std::mt19937 rng(11);
  std::vector<int8_t> a(m * k), b(k * n);
  for (int8_t& x : a) x = static_cast<int8_t>(100 + rng() % 28);
  for (int8_t& x : b) x = static_cast<int8_t>(100 + rng() % 28);
  std::vector<int32_t> c(m * n, 0);
  GemmArgs g;
  g.shape = {m, n, k};
  g.type = GemmType::kS8S8S32;
  g.a = a.data();
  g.b = b.data();
  g.c = c.data();
  ASSERT_TRUE(Gemm(g).ok());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t want = 0;
      for (int64_t l = 0; l < k; ++l) want += int64_t{a[i * k + l]} * b[l * n + j];
      EXPECT_EQ(c[i * n + j], static_cast<int32_t>(want)) << i << "," << j;
    }
  }
}

// Widened, sums past 2^31 wrap as the integer dot's do.
TEST(GemmInt8, WidenedSumsWrapModulo2To32) {
  if (DetectedIsa() < IsaLevel::kAvx2) GTEST_SKIP() << "this CPU lacks avx2";
  ScopedMaxIsa cap(IsaLevel::kAvx2);
  CheckSumsWrapModulo2To32();
}

TEST(GemmInt8, GeneratorEmitsOnAnyHost) {
  for (int rows = 1; rows <= 6; ++rows) {
    for (int tail = 0; tail <= 4; ++tail) {
      const KernelKey key{PanelLayout::kS8Quads, IsaLevel::kAvx512, 6, 64, rows, tail};
      ASSERT_TRUE(GemmKernelAvx512::Supports(key)) << key.Name();
      GemmKernelAvx512 gen(key);
      EXPECT_TRUE(gen.Create().ok()) << key.Name();
    }
  }
  // No spare register for the broadcast, or a streaming copy: not supported.
  EXPECT_FALSE(GemmKernelAvx512::Supports(
      {PanelLayout::kS8Quads, IsaLevel::kAvx512, 7, 64, 7, 0}));
  EXPECT_FALSE(GemmKernelAvx512::Supports({PanelLayout::kS8Quads, IsaLevel::kAvx512, 6, 64, 6, 0,
                                           RowSource::kF32}));
}

}  // namespace
}  // namespace shardjit::backends::x86
