// Tests of Gemm at every ISA level this host has (capped with SetMaxIsa), of the driver and
// packing of every level through the portable micro-kernel, and against the reference
// dot_general kernel.
#include "backends/x86/gemm.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/reference/kernel.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/peak_loop.h"
#include "backends/x86/gemm_internal.h"
#include "backends/x86/gemm_kernel_amx.h"
#include "backends/x86/gemm_kernel_avx2.h"
#include "backends/x86/gemm_kernel_avx512.h"
#include "backends/x86/gemm_test_util.h"
#include "backends/x86/isa_test_util.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "ir/dtype.h"
#include "ir/tensor.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using gemm_test::Case;
using gemm_test::Problem;
using gemm_test::RandomValue;
using gemm_test::TestPool;

constexpr int64_t kSizes[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 65, 127, 128, 129, 200, 257};
constexpr int kNumSizes = sizeof(kSizes) / sizeof(kSizes[0]);

// A sample of the (m, n, k) cube over kSizes with rotating layouts and options.
std::vector<Case> SampledCases() {
  std::vector<Case> cases;
  int v = 0;
  auto add = [&](int64_t m, int64_t n, int64_t k) {
    for (bool bf16_in : {true, false}) {
      Case c;
      c.shape = {m, n, k};
      c.bf16_in = bf16_in;
      c.trans_a = v % 3 == 1;
      c.trans_b = v % 4 == 2;
      c.accumulate = v % 5 == 3;
      c.out_bf16 = v % 3 == 2;
      c.pad = v % 7 == 4 ? 3 : 0;
      c.threads = v % 4 == 1 ? 2 : 1;
      cases.push_back(c);
      ++v;
    }
  };
  for (int i = 0; i < kNumSizes; ++i) {
    add(kSizes[i], kSizes[(i * 7 + 3) % kNumSizes], kSizes[(i * 5 + 11) % kNumSizes]);
    add(kSizes[(i * 3 + 5) % kNumSizes], kSizes[i], kSizes[(i * 11 + 2) % kNumSizes]);
    add(kSizes[(i * 13 + 7) % kNumSizes], kSizes[(i * 5 + 1) % kNumSizes], kSizes[i]);
  }
  add(257, 257, 257);
  add(200, 129, 1);
  add(1, 257, 129);
  add(128, 128, 128);
  return cases;
}

TEST(Gemm, EveryHostLevelMatchesOracle) {
  std::vector<Case> cases = SampledCases();
  for (size_t i = 0; i < cases.size(); ++i) {
    Problem p(cases[i], 1000 + i);
    for (IsaLevel isa : HostIsaLevels()) {
      ScopedMaxIsa cap(isa);
      p.Check(std::string(IsaName(isa)), [](const GemmArgs& g) { return Gemm(g); });
    }
  }
}

// Each host level's own kernels, with no fall-back to a lower level (bf16 products reach the
// AMX and AVX512_BF16 kernels only this way on hosts where a higher level serves them).
TEST(Gemm, EveryHostLevelRunsItsOwnKernels) {
  std::vector<Case> cases = SampledCases();
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!cases[i].bf16_in) continue;
    Problem p(cases[i], 3000 + i);
    for (IsaLevel isa : HostIsaLevels()) {
      p.Check(fmt::format("{} only", IsaName(isa)),
              [isa](const GemmArgs& g) { return GemmAtIsa(g, isa); });
    }
  }
}

TEST(Gemm, AllOptionCombinations) {
  int seed = 0;
  for (bool bf16_in : {false, true}) {
    for (bool out_bf16 : {false, true}) {
      for (bool accumulate : {false, true}) {
        for (int t = 0; t < 4; ++t) {
          Case c;
          c.shape = {33, 65, 31};
          c.bf16_in = bf16_in;
          c.out_bf16 = out_bf16;
          c.accumulate = accumulate;
          c.trans_a = t & 1;
          c.trans_b = t & 2;
          c.pad = 2;
          Problem p(c, ++seed);
          for (IsaLevel isa : HostIsaLevels()) {
            ScopedMaxIsa cap(isa);
            p.Check(std::string(IsaName(isa)), [](const GemmArgs& g) { return Gemm(g); });
          }
        }
      }
    }
  }
}

// Small cache blocks, so that small problems cross several MC, KC and NC blocks.
GemmPlan SmallPlan(IsaLevel isa, GemmType type, bool portable) {
  GemmPlan plan = MakePlan(isa, type, HostCaches());
  plan.mc = 2 * plan.mr;
  plan.kc = plan.layout == PanelLayout::kAmxTiles ? 32 : 10;  // AMX: one k block per tile
  plan.nc = 2 * plan.nr;
  plan.portable_kernels = portable;
  plan.min_flops_per_thread = 0;
  return plan;
}

TEST(Gemm, SmallBlocksAtHostLevels) {
  const GemmShape shapes[] = {{31, 200, 33}, {13, 129, 21}, {7, 65, 10}, {25, 17, 1}};
  int seed = 0;
  for (const GemmShape& s : shapes) {
    for (int v = 0; v < 4; ++v) {
      Case c;
      c.shape = s;
      c.bf16_in = v & 1;
      c.out_bf16 = v == 1 || v == 2;
      c.accumulate = v >= 2;
      c.trans_b = v == 3;
      c.threads = 1 + (v & 1);
      Problem p(c, 500 + ++seed);
      for (IsaLevel isa : HostIsaLevels()) {
        if (isa == IsaLevel::kReference) continue;
        GemmPlan plan = SmallPlan(isa, p.args.type, /*portable=*/false);
        p.Check(std::string(IsaName(isa)) + " small blocks",
                [&](const GemmArgs& g) { return internal::GemmWithPlan(g, isa, &plan); });
      }
    }
  }
}

// The driver and packing of every level (bf16 pairs too) with the portable micro-kernel, so that
// hosts without AVX-512 still test them.
TEST(Gemm, PortableKernelsAtEveryLevel) {
  const GemmShape shapes[] = {{31, 200, 33}, {13, 129, 21}, {6, 64, 2}, {1, 1, 1}, {65, 17, 64}};
  int seed = 0;
  for (IsaLevel isa :
       {IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Bf16, IsaLevel::kAmxBf16}) {
    for (const GemmShape& s : shapes) {
      for (int v = 0; v < 4; ++v) {
        Case c;
        c.shape = s;
        c.bf16_in = v != 1;
        c.out_bf16 = v == 2;
        c.accumulate = v == 3;
        c.trans_a = v == 2;
        c.trans_b = v == 3;
        c.threads = v == 1 ? 2 : 1;
        Problem p(c, 900 + ++seed);
        for (bool small : {false, true}) {
          GemmPlan plan =
              small ? SmallPlan(isa, p.args.type, true) : MakePlan(isa, p.args.type, HostCaches());
          plan.portable_kernels = true;
          plan.min_flops_per_thread = 0;
          p.Check(fmt::format("{} portable small={}", IsaName(isa), small),
                  [&](const GemmArgs& g) { return internal::GemmWithPlan(g, isa, &plan); });
        }
      }
    }
  }
}

// Every generator emits code for its keys on any host (running it needs the ISA).
TEST(Gemm, GeneratorsEmitOnAnyHost) {
  for (PanelLayout layout : {PanelLayout::kF32, PanelLayout::kBf16Pairs}) {
    for (int rows = 1; rows <= 6; ++rows) {
      for (int tail = 0; tail <= 4; ++tail) {
        KernelKey key{
            layout, layout == PanelLayout::kF32 ? IsaLevel::kAvx512 : IsaLevel::kAvx512Bf16,
            6,      64,
            rows,   tail};
        ASSERT_TRUE(GemmKernelAvx512::Supports(key)) << key.Name();
        GemmKernelAvx512 gen(key);
        EXPECT_TRUE(gen.Create().ok()) << key.Name();
        EXPECT_GT(gen.code_size(), 100u);
      }
    }
  }
  for (int rows = 1; rows <= 6; ++rows) {
    for (int tail = 0; tail <= 2; ++tail) {
      KernelKey key{PanelLayout::kF32, IsaLevel::kAvx2, 6, 16, rows, tail};
      ASSERT_TRUE(GemmKernelAvx2::Supports(key)) << key.Name();
      GemmKernelAvx2 gen(key);
      EXPECT_TRUE(gen.Create().ok()) << key.Name();
    }
  }
  for (int rows : {1, 5, 16, 17, 31, 32}) {
    for (int tail = 0; tail <= 2; ++tail) {
      KernelKey key{PanelLayout::kAmxTiles, IsaLevel::kAmxBf16, 32, 32, rows, tail};
      ASSERT_TRUE(GemmKernelAmx::Supports(key)) << key.Name();
      GemmKernelAmx gen(key);
      EXPECT_TRUE(gen.Create().ok()) << key.Name();
    }
  }
  EXPECT_FALSE(
      GemmKernelAmx::Supports({PanelLayout::kBf16Pairs, IsaLevel::kAmxBf16, 32, 32, 32, 0}));
  EXPECT_FALSE(
      GemmKernelAmx::Supports({PanelLayout::kAmxTiles, IsaLevel::kAmxBf16, 16, 32, 16, 0}));
  EXPECT_FALSE(
      GemmKernelAvx512::Supports({PanelLayout::kAmxTiles, IsaLevel::kAmxBf16, 6, 64, 6, 0}));
  EXPECT_FALSE(GemmKernelAvx2::Supports({PanelLayout::kBf16Pairs, IsaLevel::kAvx2, 6, 16, 6, 0}));
  EXPECT_FALSE(GemmKernelAvx512::Supports({PanelLayout::kF32, IsaLevel::kAvx512, 8, 64, 8, 0}));
}

TEST(Gemm, CappedToReferenceStillWorks) {
  ScopedMaxIsa cap(IsaLevel::kReference);
  EXPECT_EQ(ActiveIsa(), IsaLevel::kReference);
  Case c;
  c.shape = {17, 33, 65};
  c.bf16_in = true;
  c.out_bf16 = true;
  c.accumulate = true;
  c.threads = 2;
  Problem p(c, 7);
  EXPECT_EQ(GemmIsaFor(p.args), IsaLevel::kReference);
  p.Check("reference", [](const GemmArgs& g) { return Gemm(g); });
}

TEST(Gemm, ThreadsSplitMAndN) {
  const GemmShape shapes[] = {{300, 40, 50}, {20, 700, 50}, {129, 257, 65}, {400, 100, 200}};
  int seed = 0;
  for (const GemmShape& s : shapes) {
    for (int threads : {2, 3, 5}) {
      Case c;
      c.shape = s;
      c.threads = threads;
      c.bf16_in = threads == 3;
      c.out_bf16 = threads == 5;
      c.trans_b = seed % 2 == 1;
      c.accumulate = seed % 3 == 1;
      Problem p(c, 300 + ++seed);
      for (IsaLevel isa : HostIsaLevels()) {
        ScopedMaxIsa cap(isa);
        p.Check(std::string(IsaName(isa)), [](const GemmArgs& g) { return Gemm(g); });
        if (isa == IsaLevel::kReference) continue;
        // Every call splits, however small.
        GemmPlan plan = MakePlan(isa, p.args.type, HostCaches());
        plan.min_flops_per_thread = 0;
        p.Check(std::string(IsaName(isa)) + " always split",
                [&](const GemmArgs& g) { return internal::GemmWithPlan(g, isa, &plan); });
      }
    }
  }
}

// Gemm with both operands' packed blocks kept in `cache`.
auto GemmKeeping(GemmPackCache& cache) {
  return [&cache](const GemmArgs& g) {
    GemmArgs cached = g;
    cached.pack_cache = &cache;
    cached.cache_a = true;
    cached.cache_b = true;
    return Gemm(cached);
  };
}

// Products reading their packed blocks from a GemmPackCache give the oracle's results: the
// first call packs and keeps, the second reads the kept blocks (hits), at every host level, for
// several blockings (small blocks: many blocks per operand), and a full cache packs as usual.
TEST(GemmPackCache, ReusedBlocksGiveTheSameProducts) {
  const GemmShape shapes[] = {{128, 128, 128}, {37, 65, 129}, {200, 129, 257}};
  int seed = 0;
  for (const GemmShape& s : shapes) {
    for (bool bf16 : {true, false}) {
      Case c;
      c.shape = s;
      c.bf16_in = bf16;
      c.trans_a = seed % 2 == 1;
      c.accumulate = seed % 3 == 2;
      Problem p(c, 900 + ++seed);
      for (IsaLevel isa : HostIsaLevels()) {
        if (isa == IsaLevel::kReference) continue;
        ScopedMaxIsa cap(isa);
        for (int64_t max_bytes : {int64_t{1} << 30, int64_t{1}}) {
          GemmPackCache cache(ir::HostAllocator(), max_bytes);
          for (int round = 0; round < 2; ++round) {
            p.Check(fmt::format("{} round {} max_bytes {}", IsaName(isa), round, max_bytes),
                    GemmKeeping(cache));
          }
          if (max_bytes > 1) {
            EXPECT_GT(cache.hits(), 0) << IsaName(isa);
          } else {
            EXPECT_EQ(cache.hits(), 0);
          }
        }
      }
    }
  }
}

// A budget below what the products keep: each product starts by dropping the least recently
// used blocks past it, and later blocks of the same size are packed into their memory. Three
// products take turns on one B (f32, 200x129 @ 129x150): every result is the oracle's, B's
// blocks (used by every product) stay and are hit, the A blocks are dropped and repacked.
TEST(GemmPackCache, DropsLeastRecentlyUsedBlocksPastItsBudget) {
  Case c;
  c.shape = {200, 150, 129};
  std::vector<Problem> problems;
  problems.reserve(3);
  for (int i = 0; i < 3; ++i) problems.emplace_back(c, 950 + i);
  for (int i = 1; i < 3; ++i) {  // one B for all
    problems[i].args.b = problems[0].args.b;
    problems[i].b_val = problems[0].b_val;
    problems[i].Recompute();
  }
  for (IsaLevel isa : HostIsaLevels()) {
    if (isa == IsaLevel::kReference) continue;
    ScopedMaxIsa cap(isa);
    // Packed B takes k x round_up(n, nr) f32; the budget holds it and less than two packed As.
    const int64_t b_bytes = 129 * 192 * 4, a_bytes = 129 * 204 * 4;
    GemmPackCache cache(ir::HostAllocator(), b_bytes + a_bytes + a_bytes / 2);
    int64_t a_blocks = 0;  // blocks of A a product packs
    for (int round = 0; round < 4; ++round) {
      for (int i = 0; i < 3; ++i) {
        problems[i].Check(fmt::format("{} round {} product {}", IsaName(isa), round, i),
                          GemmKeeping(cache));
        if (round == 0 && i == 0) a_blocks = cache.misses() - 1;
      }
    }
    cache.StartProduct();
    EXPECT_LE(cache.kept_bytes(), b_bytes + a_bytes + a_bytes / 2) << IsaName(isa);
    EXPECT_GE(a_blocks, 1) << IsaName(isa);
    EXPECT_EQ(cache.hits(), 11) << IsaName(isa);  // B in every product after the first
    EXPECT_EQ(cache.misses(), 1 + 12 * a_blocks) << IsaName(isa);  // A in every product
  }
}

TEST(Gemm, AtIsaChecksTheCpu) {
  Case c;
  c.shape = {5, 6, 7};
  Problem p(c, 1);
  for (IsaLevel isa : HostIsaLevels()) {
    p.Check(std::string(IsaName(isa)), [&](const GemmArgs& g) { return GemmAtIsa(g, isa); });
  }
  if (DetectedIsa() < IsaLevel::kAvx512Bf16) {
    std::vector<float> out(30);
    GemmArgs g = p.args;
    g.c = out.data();
    EXPECT_TRUE(absl::IsFailedPrecondition(GemmAtIsa(g, IsaLevel::kAvx512Bf16)));
  }
}

TEST(Gemm, EmptyDimensions) {
  std::vector<float> a(12, 1.0f), b(12, 1.0f), c(12, 5.0f);
  GemmArgs g;
  g.shape = {3, 4, 0};
  g.a = a.data();
  g.b = b.data();
  g.c = c.data();
  g.accumulate = true;
  ASSERT_TRUE(Gemm(g).ok());
  EXPECT_EQ(c[11], 5.0f);
  g.accumulate = false;
  ASSERT_TRUE(Gemm(g).ok());
  EXPECT_EQ(c[11], 0.0f);
  g.shape = {0, 4, 3};
  EXPECT_TRUE(Gemm(g).ok());
}

TEST(Gemm, InvalidArguments) {
  std::vector<float> buf(64);
  GemmArgs g;
  g.shape = {4, 4, 4};
  g.a = g.b = g.c = buf.data();
  g.ldc = 2;
  absl::Status s = Gemm(g);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("gemm: ldc 2 < n"), std::string::npos) << s;
  g.ldc = 0;
  g.shape.m = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(Gemm(g)));
  g.shape.m = 4;
  g.b = nullptr;
  EXPECT_TRUE(absl::IsInvalidArgument(Gemm(g)));
  g.b = buf.data();
  g.parallel.threads = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(Gemm(g)));
}

// A stop signal set before the call, a deadline passed, or a flag set by another thread while a
// long product runs: the GEMM returns the signal's error instead of finishing, at every level.
TEST(Gemm, StopsWhenAsked) {
  const int64_t n = 2048;  // 17 GFLOP: tens of milliseconds at the fastest
  std::vector<float> a(n * n, 1.0f), b(n * n, 1.0f), c(n * n);
  for (IsaLevel isa : HostIsaLevels()) {
    ScopedMaxIsa cap(isa);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("{} threads={}", IsaName(isa), threads));
      std::atomic<bool> stopped{true};
      GemmArgs g;
      g.shape = {n, n, n};
      g.a = a.data();
      g.b = b.data();
      g.c = c.data();
      g.parallel = {&TestPool(), threads, base::StopSignal{&stopped}};
      EXPECT_TRUE(absl::IsCancelled(Gemm(g)));
      g.parallel.stop = base::StopSignal{nullptr, absl::Now() - absl::Milliseconds(1)};
      EXPECT_TRUE(absl::IsDeadlineExceeded(Gemm(g)));
      stopped = false;
      g.parallel.stop = base::StopSignal{&stopped};
      // Set once the product is under way: the calling thread has spent 1 ms of CPU time in
      // Gemm (tens of milliseconds at the fastest), or Gemm returned.
      std::atomic<bool> calling{false}, returned{false};
      clockid_t caller_clock;
      ASSERT_EQ(pthread_getcpuclockid(pthread_self(), &caller_clock), 0);
      auto cpu_ns = [&] {
        timespec t;
        clock_gettime(caller_clock, &t);
        return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
      };
      std::thread stopper([&] {
        while (!calling.load()) std::this_thread::yield();
        const int64_t in_gemm = cpu_ns();
        while (cpu_ns() - in_gemm < 1'000'000 && !returned.load()) std::this_thread::yield();
        stopped = true;
      });
      const absl::Time start = absl::Now();
      calling = true;
      absl::Status s = Gemm(g);
      returned = true;
      stopper.join();
      EXPECT_TRUE(absl::IsCancelled(s)) << s << " after " << absl::Now() - start;
    }
  }
}

TEST(GemmScratch, KeepsSmallBuffersAndFreesLargeOnes) {
  GemmScratch scratch;
  void* small = scratch.a.Get(4096);
  ASSERT_NE(small, nullptr);
  scratch.Trim();
  EXPECT_EQ(scratch.a.Get(4096), small);  // kept: reused by the next call
  void* large = scratch.b.Get(GemmScratch::kKeepBytes + 1);
  ASSERT_NE(large, nullptr);
  static_cast<char*>(large)[GemmScratch::kKeepBytes] = 1;  // the whole size is usable
  scratch.Trim();
  EXPECT_EQ(scratch.a.Get(4096), small);
  void* again = scratch.b.Get(16);  // freed: a fresh, small buffer
  ASSERT_NE(again, nullptr);
  static_cast<char*>(again)[15] = 1;
}

TEST(Gemm, RejectsBadBlocking) {
  Case c;
  c.shape = {5, 6, 7};
  Problem p(c, 2);
  GemmPlan plan = MakePlan(IsaLevel::kAvx2, p.args.type, HostCaches());
  plan.portable_kernels = true;
  plan.nc = plan.nr + 1;
  std::vector<float> out(64);
  GemmArgs g = p.args;
  g.c = out.data();
  absl::Status s = internal::GemmWithPlan(g, IsaLevel::kAvx2, &plan);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

TEST(Gemm, KernelCacheRecordsGeneration) {
  if (DetectedIsa() < IsaLevel::kAvx2) GTEST_SKIP() << "no JIT level on this host";
  Case c;
  c.shape = {19, 23, 29};
  Problem p(c, 3);
  p.Check("default", [](const GemmArgs& g) { return Gemm(g); });
  KernelCacheStats before = GetKernelCacheStats();
  EXPECT_GT(before.kernels, 0);
  EXPECT_GT(before.generation_ns, 0);
  EXPECT_GT(before.code_bytes, 0);
  p.Check("cached", [](const GemmArgs& g) { return Gemm(g); });
  EXPECT_EQ(GetKernelCacheStats().kernels, before.kernels);
}

TEST(CpuFeatures, IsaNamesRoundTrip) {
  for (IsaLevel isa : kAllIsaLevels) EXPECT_EQ(ParseIsa(IsaName(isa)), isa);
  EXPECT_EQ(ParseIsa("AVX2"), IsaLevel::kAvx2);
  EXPECT_EQ(ParseIsa("avx512_core_amx"), IsaLevel::kAmxBf16);
  EXPECT_EQ(ParseIsa("sse4"), std::nullopt);
  const CacheSizes& caches = HostCaches();
  EXPECT_GE(caches.l1d, 16 << 10);
  EXPECT_GE(caches.l2, caches.l1d);
  EXPECT_GE(caches.l3, 1 << 20);
}

TEST(CpuFeatures, CapLowersActiveIsa) {
  ScopedMaxIsa cap(IsaLevel::kAvx2);
  EXPECT_LE(ActiveIsa(), IsaLevel::kAvx2);
  SetMaxIsa(IsaLevel::kAmxBf16);
  EXPECT_EQ(ActiveIsa(), DetectedIsa());
}

// Gemm against the reference backend's dot_general on [m,k] x [k,n] (plain and rhs-transposed).
TEST(Gemm, MatchesReferenceDotGeneral) {
  const reference::Kernel* dot = reference::FindKernel("dot_general");
  ASSERT_NE(dot, nullptr);
  struct DotCase {
    int64_t m, n, k;
    bool rhs_transposed;
    ir::DType dtype;
  };
  const DotCase cases[] = {{33, 65, 17, false, ir::DType::kBF16},
                           {64, 31, 129, true, ir::DType::kBF16},
                           {7, 200, 65, false, ir::DType::kF32},
                           {128, 16, 257, true, ir::DType::kF32}};
  for (const DotCase& dc : cases) {
    std::mt19937 rng(dc.m * 7 + dc.n);
    const bool bf16 = dc.dtype == ir::DType::kBF16;
    std::vector<double> lv(dc.m * dc.k), rv(dc.k * dc.n);
    for (double& v : lv) v = RandomValue(rng, bf16);
    for (double& v : rv) v = RandomValue(rng, bf16);
    std::vector<int64_t> rdims =
        dc.rhs_transposed ? std::vector<int64_t>{dc.n, dc.k} : std::vector<int64_t>{dc.k, dc.n};
    ir::Tensor lhs = ir::Tensor::FromDoubles({dc.dtype, {dc.m, dc.k}}, lv);
    ir::Tensor rhs = ir::Tensor::FromDoubles({dc.dtype, rdims}, rv);
    ir::Op op;
    op.set_opcode("dot_general");
    op.mutable_dot_general()->add_lhs_contracting_dims(1);
    op.mutable_dot_general()->add_rhs_contracting_dims(dc.rhs_transposed ? 1 : 0);
    op.mutable_dot_general()->set_preferred_element_type(ir::ToProto(ir::DType::kF32));
    *op.add_result_types() = ir::ToProto(ir::ShapedType{ir::DType::kF32, {dc.m, dc.n}});
    absl::StatusOr<std::vector<ir::Tensor>> ref = (*dot)(op, {lhs, rhs}, ir::HostAllocator());
    ASSERT_TRUE(ref.ok()) << ref.status();
    const float* want = (*ref)[0].data_as<float>();

    GemmArgs g;
    g.shape = {dc.m, dc.n, dc.k};
    g.type = bf16 ? GemmType::kBf16Bf16F32 : GemmType::kF32F32F32;
    g.a = lhs.data();
    g.b = rhs.data();
    g.b_row_stride = dc.rhs_transposed ? 1 : dc.n;
    g.b_col_stride = dc.rhs_transposed ? dc.k : 1;
    std::vector<float> out(dc.m * dc.n);
    g.c = out.data();
    for (IsaLevel isa : HostIsaLevels()) {
      ScopedMaxIsa cap(isa);
      std::fill(out.begin(), out.end(), -1.0f);
      ASSERT_TRUE(Gemm(g).ok());
      const double tol = 1e-5 * std::sqrt(static_cast<double>(dc.k));
      for (int64_t i = 0; i < dc.m * dc.n; ++i) {
        ASSERT_NEAR(out[i], want[i], tol * (std::abs(want[i]) + 3.0 * dc.k))
            << IsaName(isa) << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace shardjit::backends::x86

namespace shardjit::backends::x86 {
namespace {

// bf16 products run on vdpbf16ps only where it beats f32 FMAs on this CPU (measured once);
// f32 products never do.
TEST(GemmDispatch, Bf16DotProductsOnlyWhereTheyBeatFma) {
  GemmArgs bf16, f32;
  bf16.type = GemmType::kBf16Bf16F32;
  f32.type = GemmType::kF32F32F32;
  const IsaLevel active = ActiveIsa();
  if (active >= IsaLevel::kAmxBf16) {  // AMX tiles for every bf16 product
    EXPECT_EQ(GemmIsaFor(f32), IsaLevel::kAvx512);
    EXPECT_EQ(GemmIsaFor(bf16), IsaLevel::kAmxBf16);
    return;
  }
  if (active < IsaLevel::kAvx512Bf16) {
    EXPECT_EQ(GemmIsaFor(bf16), active);
    EXPECT_FALSE(active == DetectedIsa() && Bf16DotProductBeatsFma());
    return;
  }
  EXPECT_EQ(GemmIsaFor(f32), IsaLevel::kAvx512);
  EXPECT_EQ(GemmIsaFor(bf16),
            Bf16DotProductBeatsFma() ? IsaLevel::kAvx512Bf16 : IsaLevel::kAvx512);
}

}  // namespace
}  // namespace shardjit::backends::x86
