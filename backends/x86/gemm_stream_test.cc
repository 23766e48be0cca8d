// Streaming B (gemm_driver.h, StreamsB): products of few rows whose micro-kernels copy the next
// packed B block while they compute. The generated streaming kernels against the portable one
// (results and copies bit for bit), whole products against the f64 oracle at every level with a
// kF32 or kBf16Pairs layout, balanced blocking, and the storage allocator that backs large
// operands with huge pages.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/x86/cpu_features.h"
#include "backends/x86/gemm_driver.h"
#include "backends/x86/gemm_internal.h"
#include "backends/x86/gemm_kernel.h"
#include "backends/x86/gemm_pack.h"
#include "backends/x86/gemm_test_util.h"
#include "backends/x86/isa_test_util.h"
#include "backends/x86/kernel_cache.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "ir/allocator.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86 {
namespace {

using gemm_test::Case;
using gemm_test::Problem;

TEST(BalancedPlan, EvensOutDepthAndColumnBlocks) {
  GemmPlan plan = MakePlan(IsaLevel::kAvx2, GemmType::kF32F32F32, CacheSizes{});
  plan.kc = 320;
  plan.nc = 192;
  GemmPlan p = BalancedPlan(plan, {64, 1024, 1024});
  EXPECT_EQ(p.kc, 256);  // 4 blocks of 256, not 3 of 320 and one of 64
  EXPECT_EQ(p.nc, 176);  // 6 blocks: 5 of 176 and one of 144
  p = BalancedPlan(plan, {64, 100, 1000});
  EXPECT_EQ(p.kc, 256);  // 4 blocks: 3 of 256, one of 232
  EXPECT_EQ(p.nc, 112);  // one block, rounded up to whole panels
  p = BalancedPlan(plan, {64, 192, 321});
  EXPECT_EQ(p.kc, 168);  // 2 blocks, rounded up to a multiple of kStreamSteps
  EXPECT_EQ(p.nc, 192);
  p = BalancedPlan(plan, {64, 0, 0});
  EXPECT_EQ(p.kc, 320);
  EXPECT_EQ(p.nc, 192);
  // Never above the plan's blocks, whatever the rounding.
  plan.kc = 10;
  plan.nc = 32;
  p = BalancedPlan(plan, {7, 33, 25});
  EXPECT_EQ(p.kc, 10);
  EXPECT_EQ(p.nc, 32);
  // AMX tiles: whole blocks of 32 in k.
  GemmPlan amx = MakePlan(IsaLevel::kAmxBf16, GemmType::kBf16Bf16F32, CacheSizes{});
  amx.kc = 512;
  EXPECT_EQ(BalancedPlan(amx, {64, 64, 600}).kc, 320);
}

// The last row block's tiles copy a whole next block between them: 1 step per iteration from 8
// tiles on (32 iterations of 8 steps in a block of 256), 2 from 4, 4 from 2, 8 for one. (The
// cache plan's blocks; StreamingPlan's, about 16 steps a tile, give the same counts.)
TEST(StreamRows, TheLastRowBlocksTilesCopyTheWholeNextBlock) {
  const GemmPlan plan = MakePlan(IsaLevel::kAvx2, GemmType::kF32F32F32, CacheSizes{});
  ASSERT_EQ(BalancedPlan(plan, {6, 1024, 1024}).kc, 256);
  ASSERT_GE(plan.mc, 60);
  // In the cache plan's blocks balanced over the product.
  auto stream_rows = [&](const GemmShape& shape) {
    return StreamRows(BalancedPlan(plan, shape), shape);
  };
  const std::pair<int64_t, int> cases[] = {{1, 8},  {6, 8},  {7, 4},  {18, 4},
                                           {19, 2}, {42, 2}, {43, 1}, {60, 1}};
  for (const auto& [m, rows] : cases) {
    EXPECT_EQ(stream_rows({m, 1024, 1024}), rows) << m;
  }
  // The last row block of two, with a single tile.
  EXPECT_EQ(stream_rows({plan.mc + 3, 1024, 1024}), 8);
  // A block shallower than one iteration copies nothing; an uneven one, all its whole iterations.
  EXPECT_EQ(stream_rows({6, 1024, 7}), 1);
  EXPECT_EQ(stream_rows({42, 1024, 1000}), 2);
}

// Streaming products of one row block of 2 tiles or more: about kStreamStepsPerTile steps per
// tile, at least kMinStreamBlockSteps, never deeper than the cache plan; the columns as planned.
TEST(StreamingPlan, FewRowsOfBPerTile) {
  GemmPlan plan = MakePlan(IsaLevel::kAvx2, GemmType::kF32F32F32, CacheSizes{});
  plan.mc = 96;
  plan.kc = 320;
  plan.nc = 192;
  const std::pair<int64_t, int64_t> cases[] = {
      {1, 320}, {6, 320}, {7, 48}, {18, 48}, {19, 64}, {20, 64}, {41, 112}, {96, 256}};
  for (const auto& [m, kc] : cases) {
    const GemmPlan p = StreamingPlan(plan, {m, 1024, 1024});
    EXPECT_EQ(p.kc, kc) << m;
    EXPECT_EQ(p.nc, 192) << m;
    EXPECT_EQ(p.mc, 96) << m;
  }
  // A streaming product's KernelSet takes these blocks, balanced over it (columns: 6 blocks of
  // 176), and kernels whose 4 tiles copy 2 steps in each of 8 iterations of a 64-step block.
  GemmArgs args;
  args.type = GemmType::kF32F32F32;
  args.shape = {20, 1024, 1024};
  args.b_row_stride = args.shape.n;
  args.b_col_stride = 1;
  plan.portable_kernels = true;
  KernelSet kernels;
  ASSERT_TRUE(kernels.Prepare(plan, args).ok());
  EXPECT_TRUE(kernels.streams_b());
  EXPECT_EQ(kernels.plan().kc, 64);
  EXPECT_EQ(kernels.plan().nc, 176);
  EXPECT_EQ(kernels.stream_rows(), 2);
  plan.portable_kernels = false;
  // Never deeper than the cache plan; two row blocks keep it.
  plan.mc = 300;
  EXPECT_EQ(StreamingPlan(plan, {300, 1024, 1024}).kc, 320);
  plan.mc = 96;
  EXPECT_EQ(StreamingPlan(plan, {97, 1024, 1024}).kc, 320);
  plan.kc = 24;
  EXPECT_EQ(StreamingPlan(plan, {20, 1024, 1024}).kc, 24);
  plan.kc = 320;
  plan.streaming_plan = false;
  EXPECT_EQ(StreamingPlan(plan, {20, 1024, 1024}).kc, 320);
  // bf16 pairs: two k values a step.
  GemmPlan pairs = MakePlan(IsaLevel::kAvx512Bf16, GemmType::kBf16Bf16F32, CacheSizes{});
  ASSERT_EQ(pairs.layout, PanelLayout::kBf16Pairs);
  ASSERT_EQ(pairs.mr, 6);
  ASSERT_GE(pairs.kc, 128);
  EXPECT_EQ(StreamingPlan(pairs, {20, 1024, 1024}).kc, 128);
  // AMX tiles (which never stream) keep their blocks of whole tiles.
  const GemmPlan amx = MakePlan(IsaLevel::kAmxBf16, GemmType::kBf16Bf16F32, CacheSizes{});
  EXPECT_EQ(StreamingPlan(amx, {20, 1024, 1024}).kc, amx.kc);
}

TEST(StreamsB, ProductsOfFewRowBlocksWithSeveralBBlocks) {
  const GemmPlan plan = MakePlan(IsaLevel::kAvx2, GemmType::kF32F32F32, CacheSizes{});
  GemmArgs args;
  args.type = GemmType::kF32F32F32;
  args.shape = {plan.mc, plan.nc + 1, 16};
  args.b_row_stride = args.shape.n;
  args.b_col_stride = 1;
  EXPECT_TRUE(StreamsB(plan, args));
  GemmArgs row_blocks = args;
  row_blocks.shape.m = kStreamRowBlocks * plan.mc;
  EXPECT_TRUE(StreamsB(plan, row_blocks));
  GemmArgs more_rows = args;
  more_rows.shape.m = kStreamRowBlocks * plan.mc + 1;
  EXPECT_FALSE(StreamsB(plan, more_rows));
  GemmArgs one_block = args;
  one_block.shape.n = plan.nc;
  EXPECT_FALSE(StreamsB(plan, one_block));
  GemmArgs deep = one_block;
  deep.shape.k = plan.kc + 1;
  EXPECT_TRUE(StreamsB(plan, deep));
  GemmArgs transposed_b = args;
  transposed_b.b_row_stride = 1;
  transposed_b.b_col_stride = 16;
  EXPECT_FALSE(StreamsB(plan, transposed_b));
  GemmArgs bf16 = args;
  bf16.type = GemmType::kBf16Bf16F32;
  EXPECT_TRUE(StreamsB(plan, bf16));  // widened to f32 as it is copied
  const GemmPlan pairs = MakePlan(IsaLevel::kAvx512Bf16, GemmType::kBf16Bf16F32, CacheSizes{});
  EXPECT_TRUE(StreamsB(pairs, bf16));  // interleaved in pairs as it is copied
  GemmPlan narrow_pairs = pairs;  // the copy needs two vectors of B registers
  narrow_pairs.nr = narrow_pairs.lanes;
  EXPECT_FALSE(StreamsB(narrow_pairs, bf16));
  const GemmPlan amx = MakePlan(IsaLevel::kAmxBf16, GemmType::kBf16Bf16F32, CacheSizes{});
  EXPECT_FALSE(StreamsB(amx, bf16));
}

// One streaming micro-kernel call's buffers; values are small integers, so that every product
// and sum is exact and the generated kernel must match the portable one bit for bit (a packed
// f32 small integer read as a bf16 pair is (0, the same integer)).
struct KernelCall {
  std::vector<float> a, b, c, dst;
  std::vector<uint8_t> src;  // f32 or bf16 elements
  MicroKernelArgs args;

  KernelCall(const KernelKey& key, int64_t n_panels, int64_t k_steps, int64_t iters,
             int64_t panels, int tail_cols, std::mt19937& rng) {
    std::uniform_int_distribution<int> small(-3, 3);
    auto fill = [&](std::vector<float>& v, size_t size) {
      v.resize(size);
      for (float& x : v) x = static_cast<float>(small(rng));
    };
    const int64_t all_panels = n_panels + (key.tail_vecs > 0 ? 1 : 0);
    const int64_t ldc = all_panels * key.nr + 5;
    // Row-major B, padded rows; a step of bf16 pairs copies two.
    const int64_t row = (n_panels + 2) * key.nr + 3;
    const int64_t src_stride = key.layout == PanelLayout::kBf16Pairs ? 2 * row : row;
    const int64_t copied = iters * key.stream_rows;          // steps copied per panel
    const int64_t dst_panel = copied * key.nr + 16;          // room past the copied steps
    fill(a, k_steps * key.mr);
    fill(b, all_panels * k_steps * key.nr);
    fill(c, key.rows * ldc);
    const int elem = RowElementBytes(key.stream);
    src.resize((copied * src_stride + 16) * elem);
    for (size_t at = 0; at < src.size(); at += elem) {
      const float x = static_cast<float>(small(rng));
      if (elem == 4) {
        std::memcpy(&src[at], &x, 4);
      } else {
        const uint16_t h = ir::bf16::FromFloat(x);
        std::memcpy(&src[at], &h, 2);
      }
    }
    dst.assign(std::max<int64_t>(n_panels, 1) * dst_panel, -100.0f);  // untouched past the copy
    args.a = a.data();
    args.b = b.data();
    args.c = c.data();
    args.ldc = ldc * 4;
    args.k_steps = k_steps;
    args.n_panels = n_panels;
    args.b_panel_stride = k_steps * key.nr * 4;
    args.accumulate = rng() % 2;
    if (key.tail_vecs > 0) SetTailMasks(tail_cols, &args);
    args.stream_src = src.data();
    args.stream_dst = dst.data();
    args.stream_src_stride = src_stride * elem;
    args.stream_dst_panel_stride = dst_panel * 4;
    args.stream_iters = iters;
    args.stream_panels = panels;
    args.stream_last_ahead = 12345 * 64;  // only prefetched: any value is safe
    args.stream_far_wrap = -54321 * 64;
  }
};

// The bits of `v` (bf16 pairs compared as floats would take (0, -0) for (0, 0)).
std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), v.size() * 4);
  return bits;
}

// One streaming key against the portable kernel, over panel counts, depths, copied steps and
// copied panels (none, some, all).
void CheckStreamingKernel(const KernelKey& key, int lanes, std::mt19937& rng) {
  absl::StatusOr<MicroKernelFn> fn = KernelCache::Global().Get(key);
  ASSERT_TRUE(fn.ok()) << key.Name() << ": " << fn.status();
  for (int64_t n_panels : {0, 1, 3}) {
    for (int64_t k_steps : {8, 13, 24, 41}) {
      const int64_t max_iters = k_steps / kStreamSteps;
      for (int64_t iters : {int64_t{0}, int64_t{1}, max_iters}) {
        for (int64_t panels : {int64_t{0}, n_panels / 2, n_panels}) {
          if (n_panels == 0 && key.tail_vecs == 0) continue;
          const int tail_cols =
              key.tail_vecs == 0 ? 0 : (key.tail_vecs - 1) * lanes + 1 + rng() % lanes;
          const uint32_t seed = rng();
          std::mt19937 r1(seed), r2(seed);
          KernelCall want(key, n_panels, k_steps, iters, panels, tail_cols, r1);
          KernelCall got(key, n_panels, k_steps, iters, panels, tail_cols, r2);
          want.args.key = &key;
          PortableMicroKernel(&want.args);
          (*fn)(&got.args);
          const std::string label = fmt::format("{} panels={} k_steps={} iters={} streamed={}",
                                                key.Name(), n_panels, k_steps, iters, panels);
          if (iters > 0 && panels > 0) {
            // The oracle itself: the last panel's last step copied, the one after it not.
            const int64_t copied = iters * key.stream_rows;
            const float* last = want.dst.data() + (panels - 1) * (copied * key.nr + 16);
            EXPECT_NE(last[(copied - 1) * key.nr], -100.0f) << label;
            EXPECT_EQ(last[copied * key.nr], -100.0f) << label;
          }
          EXPECT_EQ(got.c, want.c) << label;
          EXPECT_EQ(Bits(got.dst), Bits(want.dst)) << label;
          EXPECT_EQ(got.src, want.src) << label;
        }
      }
    }
  }
}

// Every streaming key of `isa` with nr `nr`: f32 and bf16 sources into kF32 panels, bf16 into
// kBf16Pairs panels where `isa` has them; 1, 2, 4 and 8 steps copied per iteration.
void CheckStreamingKernels(IsaLevel isa, int nr, int lanes) {
  std::mt19937 rng(17);
  std::vector<std::pair<PanelLayout, RowSource>> kinds = {
      {PanelLayout::kF32, RowSource::kF32}, {PanelLayout::kF32, RowSource::kBf16}};
  if (isa >= IsaLevel::kAvx512Bf16) kinds.push_back({PanelLayout::kBf16Pairs, RowSource::kBf16});
  for (const auto& [layout, source] : kinds) {
    for (int rows = 1; rows <= 6; ++rows) {
      for (int tail_vecs = 0; tail_vecs <= 2; ++tail_vecs) {
        for (int stream_rows : {1, 2, 4, 8}) {
          // Every copy width with full tiles; the others with one.
          if (stream_rows != 1 && rows != 6 && rows != 1) continue;
          CheckStreamingKernel({layout, isa, 6, nr, rows, tail_vecs, source, stream_rows}, lanes,
                               rng);
        }
      }
    }
  }
}

TEST(StreamingKernels, MatchThePortableKernelAvx2) {
  if (DetectedIsa() < IsaLevel::kAvx2) GTEST_SKIP() << "this CPU lacks avx2";
  CheckStreamingKernels(IsaLevel::kAvx2, 16, 8);
}

// Hosts without AVX-512 check these kernels in the emulator (emulation/dump_kernels).
TEST(StreamingKernels, MatchThePortableKernelAvx512) {
  if (DetectedIsa() < IsaLevel::kAvx512) GTEST_SKIP() << "this CPU lacks avx512";
  CheckStreamingKernels(IsaLevel::kAvx512, 64, 16);
}

TEST(StreamingKernels, MatchThePortableKernelAvx512Bf16) {
  if (DetectedIsa() < IsaLevel::kAvx512Bf16) GTEST_SKIP() << "this CPU lacks avx512_bf16";
  CheckStreamingKernels(IsaLevel::kAvx512Bf16, 64, 16);
}

TEST(StreamingKernels, NotForAmxTilesNorF32IntoPairs) {
  EXPECT_FALSE(KernelCache::Global()
                   .Get({PanelLayout::kBf16Pairs, IsaLevel::kAvx512Bf16, 6, 64, 6, 0,
                         RowSource::kF32})
                   .ok());
  EXPECT_FALSE(
      KernelCache::Global()
          .Get({PanelLayout::kAmxTiles, IsaLevel::kAmxBf16, 32, 32, 32, 0, RowSource::kBf16})
          .ok());
  const KernelKey key{PanelLayout::kF32, IsaLevel::kAvx2, 6, 16, 6, 1, RowSource::kBf16};
  EXPECT_EQ(key.Name(), "gemm_avx2_f32_6x16_r6_t1_sbf16");
  const KernelKey wide{PanelLayout::kF32, IsaLevel::kAvx2, 6, 16, 6, 1, RowSource::kF32, 4};
  EXPECT_EQ(wide.Name(), "gemm_avx2_f32_6x16_r6_t1_sf32x4");
  for (int bad : {0, 3, 16}) {
    KernelKey k = wide;
    k.stream_rows = bad;
    absl::StatusOr<MicroKernelFn> fn = KernelCache::Global().Get(k);
    EXPECT_EQ(fn.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(fn.status().message().find("steps per iteration"), std::string::npos) << bad;
  }
  const KernelKey pairs{PanelLayout::kBf16Pairs, IsaLevel::kAvx512Bf16, 6, 64, 2, 0,
                        RowSource::kBf16};
  EXPECT_EQ(pairs.Name(), "gemm_avx512_bf16_bf16_pairs_6x64_r2_t0_sbf16");
}

// A B block packed whole (PackB) or in pieces of k steps (PackBSteps: what the kernels do not
// copy is packed so) holds the source's values, and each piece writes its own steps only: kF32
// from f32 and from bf16 (widened), bf16 pairs (an odd block's last step zero-paired), tail
// panels; packed at `packing` (kReference: the plain C++ code).
void CheckPackBSteps(IsaLevel packing) {
  ScopedMaxIsa max_isa(packing);
  std::mt19937 rng(5);
  struct Kind {
    PanelLayout layout;
    bool bf16;
    int nr;
  };
  for (const Kind& kind : {Kind{PanelLayout::kF32, false, 16}, Kind{PanelLayout::kF32, true, 64},
                           Kind{PanelLayout::kBf16Pairs, true, 64}}) {
    for (int64_t block_k : {1, 2, 7, 24, 25}) {
      for (int64_t cols : {5, 64, 130}) {
        const int64_t k0 = 3, col0 = 2, ld = col0 + cols + 9;
        std::vector<uint16_t> src16((k0 + block_k) * ld);
        std::vector<float> src32(src16.size());
        for (size_t i = 0; i < src16.size(); ++i) {
          src16[i] = static_cast<uint16_t>(rng());
          if ((src16[i] & 0x7f80) == 0x7f80) src16[i] &= 0xbfff;  // no NaN or infinity
          src32[i] = ir::bf16::ToFloat(src16[i]) + 0.25f;
        }
        const MatrixView b{kind.bf16 ? static_cast<const void*>(src16.data()) : src32.data(), ld,
                           1, kind.bf16 ? GemmType::kBf16Bf16F32 : GemmType::kF32F32F32};
        const int64_t steps = KSteps(kind.layout, block_k);
        const int64_t panels = (cols + kind.nr - 1) / kind.nr;
        const size_t bytes = panels * steps * kind.nr * 4;
        // Each packed element from the source: an f32 (bf16 widened), or the pair of rows 2s and
        // 2s + 1 (zero past the block); zero past the columns.
        std::vector<uint8_t> whole(bytes);
        for (int64_t p = 0; p < panels; ++p) {
          for (int64_t st = 0; st < steps; ++st) {
            for (int j = 0; j < kind.nr; ++j) {
              const int64_t col = p * kind.nr + j;
              uint32_t value = 0;
              if (col < cols && kind.layout == PanelLayout::kBf16Pairs) {
                const int64_t lo = (k0 + 2 * st) * ld + col0 + col;
                value = src16[lo] | (2 * st + 1 < block_k ? uint32_t{src16[lo + ld]} << 16 : 0u);
              } else if (col < cols) {
                const int64_t at = (k0 + st) * ld + col0 + col;
                const float f = kind.bf16 ? ir::bf16::ToFloat(src16[at]) : src32[at];
                std::memcpy(&value, &f, 4);
              }
              std::memcpy(&whole[((p * steps + st) * kind.nr + j) * 4], &value, 4);
            }
          }
        }
        const std::string label =
            fmt::format("packing={} layout={} bf16={} k={} cols={}", IsaName(packing),
                        static_cast<int>(kind.layout), kind.bf16, block_k, cols);
        std::vector<uint8_t> pieces(bytes, 0xcd);
        PackB(b, k0, block_k, col0, cols, kind.layout, kind.nr, pieces.data());
        EXPECT_EQ(pieces, whole) << label << " PackB";
        for (int64_t split : {int64_t{0}, steps / 2, steps - 1}) {
          std::fill(pieces.begin(), pieces.end(), 0xcd);
          PackBSteps(b, kind.layout, k0, block_k, split, steps - split, col0, cols, kind.nr,
                     pieces.data());
          // Only steps [split, steps) of each panel are written.
          for (int64_t p = 0; p < panels; ++p) {
            for (int64_t st = 0; st < steps; ++st) {
              const auto first = pieces.begin() + (p * steps + st) * kind.nr * 4;
              const std::vector<uint8_t> got(first, first + kind.nr * 4);
              const std::vector<uint8_t> want =
                  st >= split ? std::vector<uint8_t>(whole.begin() + (first - pieces.begin()),
                                                     whole.begin() + (first - pieces.begin()) +
                                                         kind.nr * 4)
                              : std::vector<uint8_t>(kind.nr * 4, 0xcd);
              EXPECT_EQ(got, want) << label << " split=" << split << " panel=" << p
                                   << " step=" << st;
            }
          }
          PackBSteps(b, kind.layout, k0, block_k, 0, split, col0, cols, kind.nr, pieces.data());
          EXPECT_EQ(pieces, whole) << label << " split=" << split;
        }
      }
    }
  }
}

TEST(PackBSteps, PiecesMakeTheWholeBlock) {
  CheckPackBSteps(IsaLevel::kReference);  // plain C++ packing
  CheckPackBSteps(DetectedIsa());
}

// Small blocks, so that small products cross several depth and column blocks: a few k
// iterations per tile, some rows left to pack after the tiles, tail panels. `deep`: a depth of
// 96 steps, which a product of one row block of 2-5 tiles takes down to StreamingPlan's 48-80.
GemmPlan SmallStreamingPlan(IsaLevel isa, GemmType type, bool portable, int tiles_per_block = 2,
                            bool deep = false) {
  GemmPlan plan = MakePlan(isa, type, CacheSizes{});
  plan.mc = tiles_per_block * plan.mr;
  plan.kc = deep ? 96 * (plan.layout == PanelLayout::kBf16Pairs ? 2 : 1) : 24;
  plan.nc = 2 * plan.nr;
  plan.portable_kernels = portable;
  plan.min_flops_per_thread = 0;
  plan.max_rows_b_in_place = 0;  // few-row f32 products stream too (gemm_in_place_test)
  return plan;
}

void CheckStreamingProducts(IsaLevel isa, bool portable) {
  int seed = 0, streamed = 0;
  for (int64_t m : {1, 5, 7, 12, 13, 30, 48}) {
    for (int64_t n : {17, 33, 64, 95, 129, 300}) {
      for (int64_t k : {8, 24, 25, 50, 73, 130}) {
        Case c;
        c.shape = {m, n, k};
        // bf16: widened as it is copied, or interleaved in pairs (kAvx512Bf16).
        c.bf16_in = seed % 2 == 1;
        c.accumulate = seed % 3 == 1;
        c.out_bf16 = seed % 5 == 2;
        c.pad = seed % 4 == 3 ? 5 : 0;
        c.threads = seed % 7 == 4 ? 2 : 1;
        const int index = seed;
        Problem p(c, 4000 + ++seed);
        // Row blocks of 2 tiles (each copies 4 or 8 steps per iteration), or of 8 (1 to 8), with
        // f32 and bf16 alike; deep blocks for every other (m, n), at every k.
        const GemmPlan plan = SmallStreamingPlan(isa, p.args.type, portable,
                                                 index / 2 % 2 == 0 ? 2 : 8, index / 6 % 2 == 1);
        streamed += StreamsB(plan, p.args);
        p.Check(fmt::format("{}{} streaming", IsaName(isa), portable ? " portable" : ""),
                [&](const GemmArgs& g) { return internal::GemmWithPlan(g, isa, &plan); });
      }
    }
  }
  EXPECT_GT(streamed, 126);  // most of the 252 cases cross several B blocks
}

constexpr IsaLevel kStreamingLevels[] = {IsaLevel::kAvx2, IsaLevel::kAvx512,
                                         IsaLevel::kAvx512Bf16};

TEST(StreamingProducts, MatchTheOracleAtHostLevels) {
  for (IsaLevel isa : kStreamingLevels) {
    if (isa > DetectedIsa()) continue;
    CheckStreamingProducts(isa, /*portable=*/false);
  }
}

// The driver, packing and copies of every streaming level, on any host.
TEST(StreamingProducts, MatchTheOracleWithPortableKernels) {
  for (IsaLevel isa : kStreamingLevels) {
    CheckStreamingProducts(isa, /*portable=*/true);
  }
}

// The kernels themselves copy rows of the next block (were they never to, the rows packed after
// the tiles would still give right results): the driver's count, per level, generated and
// portable; none for a product of more row blocks.
TEST(StreamingProducts, KernelsCopyRowsWhileTheyCompute) {
  for (IsaLevel isa : kStreamingLevels) {
    for (bool portable : {false, true}) {
      if (!portable && isa > DetectedIsa()) continue;
      for (int64_t m : {30, 100}) {
        Case c;
        c.shape = {m, 95, 50};
        c.bf16_in = isa == IsaLevel::kAvx512Bf16;  // pairs
        Problem p(c, 91);
        const GemmPlan plan = SmallStreamingPlan(isa, p.args.type, portable);
        KernelSet kernels;
        ASSERT_TRUE(kernels.Prepare(plan, p.args).ok());
        const bool streams = m <= kStreamRowBlocks * plan.mc;
        EXPECT_EQ(kernels.streams_b(), streams);
        GemmScratch scratch;
        const std::string label =
            fmt::format("{}{} m={}", IsaName(isa), portable ? " portable" : "", m);
        p.Check(label, [&](const GemmArgs& g) { return RunBlocked(g, kernels, &scratch); });
        if (streams) {
          EXPECT_GT(scratch.streamed_steps, 0) << label;
        } else {
          EXPECT_EQ(scratch.streamed_steps, 0) << label;
        }
      }
    }
  }
}

// RunBlocked takes StreamingPlan's depth: a 20-row product (4 tiles) of depth 256 in blocks of
// 64 steps, not the plan's 96 (3 blocks of 88), its kernels copying each block after the first
// whole: 192 steps (168 in the plan's blocks).
TEST(StreamingProducts, RunInStreamingPlansBlocks) {
  for (bool portable : {false, true}) {
    if (!portable && DetectedIsa() < IsaLevel::kAvx2) continue;
    Case c;
    c.shape = {20, 32, 256};  // one column block
    Problem p(c, 93);
    GemmPlan plan = SmallStreamingPlan(IsaLevel::kAvx2, p.args.type, portable, 8, /*deep=*/true);
    for (bool streaming_plan : {true, false}) {
      plan.streaming_plan = streaming_plan;
      KernelSet kernels;
      ASSERT_TRUE(kernels.Prepare(plan, p.args).ok());
      ASSERT_TRUE(kernels.streams_b());
      GemmScratch scratch;
      const std::string label = fmt::format("{} streaming_plan={}", portable ? "portable" : "avx2",
                                            streaming_plan);
      p.Check(label, [&](const GemmArgs& g) { return RunBlocked(g, kernels, &scratch); });
      EXPECT_EQ(scratch.streamed_steps, streaming_plan ? 192 : 168) << label;
    }
  }
}

// The host's own blocking: balanced depth and column blocks of full size, two row blocks; and
// one row block of 20 rows in StreamingPlan's shallower blocks.
TEST(StreamingProducts, MatchTheOracleWithHostBlocking) {
  for (IsaLevel isa : HostIsaLevels()) {
    if (isa == IsaLevel::kReference) continue;
    for (bool bf16_in : {false, true}) {
      for (bool few_rows : {false, true}) {
        Case c;
        c.bf16_in = bf16_in;
        GemmPlan plan = MakePlan(isa, c.bf16_in ? GemmType::kBf16Bf16F32 : GemmType::kF32F32F32,
                                 HostCaches());
        // Few rows, but more than the host's plan reads in place.
        const int64_t rows = std::max<int64_t>(20, plan.max_rows_b_in_place + 5);
        c.shape = few_rows ? GemmShape{rows, 4 * plan.nc + 37, 2 * plan.kc + 61}
                           : GemmShape{plan.mc + 50, 2 * plan.nc + 37, 2 * plan.kc + 61};
        c.accumulate = true;
        Problem p(c, 77);
        const std::string label =
            fmt::format("{} host blocking m={}", IsaName(isa), c.shape.m);
        EXPECT_EQ(StreamsB(plan, p.args), plan.layout != PanelLayout::kAmxTiles) << label;
        p.Check(label, [&](const GemmArgs& g) { return internal::GemmWithPlan(g, isa, &plan); });
      }
    }
  }
}

TEST(AllocateStorage, AlignsLargeBlocksToHugePages) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, ir::kHugePageBytes - 1,
                       ir::kHugePageBytes, 3 * ir::kHugePageBytes + 7}) {
    void* p = ir::AllocateStorage(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    const auto address = reinterpret_cast<uintptr_t>(p);
    EXPECT_EQ(address % 64, 0u) << bytes;
    if (bytes >= ir::kHugePageBytes) {
      EXPECT_EQ(address % ir::kHugePageBytes, 0u) << bytes;
    }
    std::memset(p, 0x5a, bytes);
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0x5a);
    ir::FreeStorage(p, bytes);
  }
}

}  // namespace
}  // namespace shardjit::backends::x86
