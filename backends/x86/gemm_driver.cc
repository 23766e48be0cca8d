#include "backends/x86/gemm_driver.h"

#include <algorithm>
#include <list>
#include <vector>
#include <cstdlib>
#include <xmmintrin.h>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"

#include "backends/x86/gemm_pack.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "backends/x86/kernel_cache.h"
#include "ir/allocator.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86 {
namespace {

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t RoundDown(int64_t x, int64_t m) { return x / m * m; }
int64_t CeilDiv(int64_t x, int64_t m) { return (x + m - 1) / m; }

// Largest packed copy of A kept across column blocks.
constexpr int64_t kMaxKeptABytes = int64_t{64} << 20;

// dst (f32, ld_dst) = widen(src) over rows x cols.
void Widen(const uint16_t* src, int64_t ld_src, float* dst, int64_t ld_dst, int64_t rows,
           int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) dst[i * ld_dst + j] = ir::bf16::ToFloat(src[i * ld_src + j]);
  }
}

// dst (bf16, ld_dst) = round(src) over rows x cols.
void Narrow(const float* src, int64_t ld_src, uint16_t* dst, int64_t ld_dst, int64_t rows,
            int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      dst[i * ld_dst + j] = ir::bf16::FromFloat(src[i * ld_src + j]);
    }
  }
}

// Streaming B (see StreamsB): the next packed block, its k steps copied by the kernels of the
// current block's last row tiles (`per_tile` each, `stream_rows` per k iteration, in the first
// `streamed_panels` panels, those the current tiles span) and the rest packed after them. Only
// whole steps are copied (an odd block's last row, a bf16 pair without its second row, is packed
// after the tiles).
struct NextBlock {
  MatrixView b;
  PanelLayout layout = PanelLayout::kF32;
  int64_t k0 = 0, col0 = 0;    // position in B
  int64_t rows = 0, cols = 0;  // k values and columns; 0 rows: no next block
  int nr = 0;
  int stream_rows = 1;        // steps a kernel copies per k iteration
  uint8_t* packed = nullptr;  // its panels
  int64_t streamed_panels = 0, per_tile = 0;
  int64_t copied_steps = 0;  // steps [0, copied_steps) of the streamed panels are packed

  int64_t steps() const { return KSteps(layout, rows); }
  // Source rows per step, and the steps whose rows are all in the block.
  int64_t rows_per_step() const { return layout == PanelLayout::kBf16Pairs ? 2 : 1; }
  int64_t whole_steps() const { return rows / rows_per_step(); }
  // Spreads the steps over `tiles` row tiles of `iters` k iterations each, in `panels` panels.
  void Plan(int64_t tiles, int64_t iters, int64_t panels) {
    streamed_panels = rows > 0 ? std::min(panels, cols / nr) : 0;
    per_tile = std::min(iters, CeilDiv(whole_steps(), tiles * stream_rows)) * stream_rows;
  }
  // Sets the copy of the next row tile; the steps it copies (0: none, no streaming kernel).
  int64_t StartTile(MicroKernelArgs* args) const {
    // Whole iterations only: a last few steps are packed after the tiles.
    const int64_t count =
        std::min(per_tile, whole_steps() - copied_steps) / stream_rows * stream_rows;
    if (streamed_panels == 0 || count <= 0) return 0;
    const int elem = GemmInputBytes(b.type);
    const int64_t row_bytes = b.row_stride * elem, step_bytes = row_bytes * rows_per_step();
    const auto* src = static_cast<const char*>(b.data) +
                      ((k0 + copied_steps * rows_per_step()) * b.row_stride + col0) * elem;
    // The kernel prefetches each panel's rows a panel ahead, and in its last panel the first
    // panel's rows of the next tile; the first tile's are prefetched here.
    if (copied_steps == 0) {
      for (int64_t r = 0; r < count * rows_per_step(); ++r) {
        for (int64_t line = 0; line < nr * elem; line += 64) {
          _mm_prefetch(src + r * row_bytes + line, _MM_HINT_T0);
        }
      }
    }
    args->stream_last_ahead = count * step_bytes - (streamed_panels - 1) * nr * elem;
    args->stream_far_wrap = count * step_bytes - (streamed_panels - kStreamFarPanels) * nr * elem;
    args->stream_src = src;
    args->stream_dst = packed + copied_steps * nr * 4;
    args->stream_iters = count / stream_rows;
    return count;
  }
  // Packs what the kernels did not copy.
  void PackRest() {
    if (rows == 0) return;
    const int64_t done_cols = streamed_panels * nr;
    if (done_cols > 0 && copied_steps < steps()) {
      PackBSteps(b, layout, k0, rows, copied_steps, steps() - copied_steps, col0, done_cols, nr,
                 packed);
    }
    if (done_cols < cols) {
      PackBSteps(b, layout, k0, rows, 0, steps(), col0 + done_cols, cols - done_cols, nr,
                 packed + streamed_panels * steps() * nr * 4);
    }
  }
};

// The block after (jc, pc) in RunBlocked's order: the next depth block, else the next column
// block's first.
NextBlock NextBlockOf(const MatrixView& b, const GemmPlan& plan, int stream_rows, int64_t jc,
                      int64_t pc, int64_t k, int64_t n, uint8_t* packed) {
  NextBlock next;
  next.b = b;
  next.layout = plan.layout;
  next.nr = plan.nr;
  next.stream_rows = stream_rows;
  next.packed = packed;
  const bool last_k = pc + plan.kc >= k;
  next.k0 = last_k ? 0 : pc + plan.kc;
  next.col0 = last_k ? jc + plan.nc : jc;
  if (next.col0 < n) {
    next.rows = std::min(plan.kc, k - next.k0);
    next.cols = std::min(plan.nc, n - next.col0);
  }
  return next;
}

}  // namespace

GemmPlan MakePlan(IsaLevel isa, GemmType type, const CacheSizes& caches,
                  const CpuIdentity& cpu) {
  GemmPlan plan;
  plan.isa = isa;
  if (isa >= IsaLevel::kAmxBf16 && type == GemmType::kBf16Bf16F32) {
    // 2x2 tiles of 16x16 f32: 32 rows by 32 columns, 32 k values per tile product.
    plan.isa = IsaLevel::kAmxBf16;
    plan.layout = PanelLayout::kAmxTiles;
    plan.mr = 32;
    plan.nr = 32;
    plan.lanes = 16;
    // The A strip (32 x kc bf16) stays in L1 while B panels stream from L2.
    plan.kc = std::clamp<int64_t>(RoundDown(caches.l1d / (2 * plan.mr * 2), 32), 128, 1024);
    plan.nc = std::max<int64_t>(plan.nr, RoundDown(caches.l2 / (2 * plan.kc * 2), plan.nr));
    plan.mc = std::max<int64_t>(plan.mr, RoundDown(caches.l2 / (4 * plan.kc * 2), plan.mr));
    // About 1 TFLOP/s per core: 16 MFLOP is the ~20 us a thread must get to pay for waking it.
    plan.min_flops_per_thread = int64_t{1} << 24;
    return plan;
  }
  if (type == GemmType::kS8S8S32) {
    // vpdpbusd: 6 rows of 4 zmm int32 accumulators, four k values a step.
    plan.isa = IsaLevel::kAvx512;
    plan.layout = PanelLayout::kS8Quads;
    plan.mr = 6;
    plan.nr = 64;
    plan.lanes = 16;
  } else if (isa >= IsaLevel::kAvx512) {
    const bool pairs = isa >= IsaLevel::kAvx512Bf16 && type == GemmType::kBf16Bf16F32;
    plan.isa = pairs ? IsaLevel::kAvx512Bf16 : IsaLevel::kAvx512;
    plan.layout = pairs ? PanelLayout::kBf16Pairs : PanelLayout::kF32;
    plan.mr = 6;
    plan.nr = 64;
    plan.lanes = 16;
  } else {
    plan.isa = IsaLevel::kAvx2;
    plan.layout = PanelLayout::kF32;
    plan.mr = 6;
    plan.nr = 16;
    plan.lanes = 8;
  }
  // Packed bytes per k value and row/column.
  const int64_t elt = plan.layout == PanelLayout::kBf16Pairs ? 2
                      : plan.layout == PanelLayout::kS8Quads ? 1
                                                              : 4;
  // B in f32 panels (f32, or bf16 widened) is read in place by one row tile as long as its panels
  // are two vectors wide or more (InPlacePlan): up to 15 rows in zmm registers, 6 in ymm. On an
  // Intel Xeon (family 6 model 106) wider tiles of one-vector panels, and two tiles, were slower
  // than streaming (BM_GemmWeightsFromMemory, BM_Gemm; 20 rows: 870 vs 590 us); on AMD Zen 5
  // (family 26) one tile of up to 31 rows in one-vector panels is faster (20 rows from memory:
  // 276 vs 341 us, from L3 0.208 vs 0.262 ms). bf16 rows from memory want runs of 128 bytes (4
  // zmm panels, up to 7 rows): 12 rows in 2-zmm panels were 0.85x streaming.
  if (plan.layout == PanelLayout::kF32) {
    const bool bf16 = type == GemmType::kBf16Bf16F32;
    const bool zen5 = cpu.vendor == "AuthenticAMD" && cpu.family >= 26;
    plan.max_rows_b_in_place = plan.isa >= IsaLevel::kAvx512 ? (bf16 ? 7 : zen5 ? 31 : 15) : 6;
  }
  // The A strip (mr x kc) takes about a quarter of L1; the rest streams B.
  plan.kc = std::clamp<int64_t>(RoundDown(caches.l1d / (4 * plan.mr * elt), 64), 128,
                                plan.layout == PanelLayout::kS8Quads ? 2048 : 1024);
  // The B block (kc x nc) takes about half of L2.
  plan.nc = std::max<int64_t>(plan.nr, RoundDown(caches.l2 / (2 * plan.kc * elt), plan.nr));
  // An A block (mc x kc) takes about a quarter of L2.
  plan.mc = std::max<int64_t>(plan.mr, RoundDown(caches.l2 / (4 * plan.kc * elt), plan.mr));
  return plan;
}

absl::Status ValidatePlan(const GemmPlan& p) {
  const bool ok = p.mr > 0 && p.nr > 0 && p.lanes > 0 && p.mc > 0 && p.mc % p.mr == 0 &&
                  p.nc > 0 && p.nc % p.nr == 0 && p.kc > 0 &&
                  (p.layout != PanelLayout::kBf16Pairs || p.kc % 2 == 0) &&
                  (p.layout != PanelLayout::kS8Quads || p.kc % 4 == 0) &&
                  (p.layout != PanelLayout::kAmxTiles ||
                   (p.kc % 32 == 0 && p.mr == 32 && p.nr == 32 && p.lanes == 16));
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("gemm: bad blocking mr={} nr={} mc={} kc={} nc={}",
                                                p.mr, p.nr, p.mc, p.kc, p.nc));
}

bool ReadsBInPlace(const GemmPlan& plan, const GemmArgs& args) {
  if (args.pack_cache != nullptr && args.cache_b) return false;
  return plan.layout == PanelLayout::kF32 && args.type != GemmType::kS8S8S32 &&
         args.b_col_stride == 1 && args.shape.m <= plan.max_rows_b_in_place &&
         args.shape.n >= InPlacePlan(plan, args.shape.m).nr;
}

GemmPlan InPlacePlan(const GemmPlan& plan, int64_t m) {
  // Accumulators and B vectors: 32 zmm; 16 ymm less the two broadcasts (GemmKernelAvx2).
  const int64_t registers = plan.isa >= IsaLevel::kAvx512 ? 32 : 14;
  const int64_t vecs = std::min<int64_t>(64 / plan.lanes, registers / (m + 1));
  if (m < 1 || vecs < 1) return plan;
  GemmPlan p = plan;
  p.mr = static_cast<int>(m);
  p.mc = m;
  p.nr = static_cast<int>(vecs) * plan.lanes;
  p.nc = std::max<int64_t>(p.nr, RoundDown(plan.nc, p.nr));
  return p;
}

bool StreamsB(const GemmPlan& plan, const GemmArgs& args) {
  // A cached B is packed once and read from the cache after.
  if (args.pack_cache != nullptr && args.cache_b) return false;
  if (ReadsBInPlace(plan, args)) return false;
  // Decided on the cache blocking; KernelSet::Prepare then re-blocks one of a single row block
  // (StreamingPlan).
  const bool one_block = args.shape.k <= plan.kc && args.shape.n <= plan.nc;
  // A pairs kernel's copy needs two vectors of B registers (GemmKernelAvx512::Supports).
  const bool layout_streams =
      plan.layout == PanelLayout::kF32 ||
      (plan.layout == PanelLayout::kBf16Pairs && plan.nr >= 2 * plan.lanes);
  return layout_streams && args.b_col_stride == 1 &&
         args.shape.m <= kStreamRowBlocks * plan.mc && !one_block;
}

GemmPlan StreamingPlan(const GemmPlan& plan, const GemmShape& shape) {
  const int64_t tiles = CeilDiv(shape.m, plan.mr);
  if (!plan.streaming_plan || plan.layout == PanelLayout::kAmxTiles || tiles < 2 ||
      shape.m > plan.mc) {
    return plan;
  }
  const int64_t per_step = plan.layout == PanelLayout::kBf16Pairs ? 2 : 1;  // k values a step
  const int64_t steps = std::max(kMinStreamBlockSteps, kStreamStepsPerTile * tiles);
  GemmPlan p = plan;
  p.kc = std::min(plan.kc, steps * per_step);
  return p;
}

int StreamRows(const GemmPlan& plan, const GemmShape& shape) {
  const int64_t steps = KSteps(plan.layout, std::min(plan.kc, shape.k));
  const int64_t iters = steps / kStreamSteps;
  if (shape.m <= 0 || iters == 0) return 1;
  // The last row block's tiles copy the next block.
  const int64_t tiles = CeilDiv(shape.m - (shape.m - 1) / plan.mc * plan.mc, plan.mr);
  int rows = 1;
  while (rows < kStreamSteps && rows * iters * tiles < steps) rows *= 2;
  return rows;
}

absl::Status KernelSet::Prepare(const GemmPlan& given_plan, const GemmArgs& args) {
  streams_b_ = StreamsB(given_plan, args);
  b_in_place_ = ReadsBInPlace(given_plan, args);
  const bool shallow = streams_b_ && !args.fixed_depth_blocks;  // StreamingPlan's depth blocks
  plan_ = BalancedPlan(shallow       ? StreamingPlan(given_plan, args.shape)
                       : b_in_place_ ? InPlacePlan(given_plan, args.shape.m)
                                     : given_plan,
                       args.shape);
  const GemmPlan& plan = plan_;
  const int partial_rows = static_cast<int>(args.shape.m % plan.mr);
  const int tail_vecs = static_cast<int>(CeilDiv(args.shape.n % plan.nr, plan.lanes));
  stream_rows_ = streams_b_ ? StreamRows(plan, args.shape) : 1;
  // The rows streaming or in-place kernels read.
  const RowSource source = !streams_b_ && !b_in_place_             ? RowSource::kNone
                           : args.type == GemmType::kBf16Bf16F32 ? RowSource::kBf16
                                                                 : RowSource::kF32;
  // Plain kernels and, streaming, the streaming ones; in place, the in-place kernel for the full
  // panels and the plain one for a tail panel.
  auto needed = [&](bool special, bool tail) {
    return b_in_place_ ? special != tail : !special || streams_b_;
  };
  for (bool special : {false, true}) {
    for (bool partial : {false, true}) {
      for (bool tail : {false, true}) {
        if ((partial && partial_rows == 0) || (tail && tail_vecs == 0)) continue;
        if (!needed(special, tail)) continue;
        KernelKey& key = keys_[Index(partial, tail, special)];
        key = KernelKey{plan.layout,
                        plan.isa,
                        plan.mr,
                        plan.nr,
                        partial ? partial_rows : plan.mr,
                        tail ? tail_vecs : 0,
                        special && streams_b_ ? source : RowSource::kNone,
                        special && streams_b_ ? stream_rows_ : 1,
                        special && b_in_place_ ? source : RowSource::kNone};
        if (plan.portable_kernels) continue;
        ASSIGN_OR_RETURN(MicroKernelFn fn, KernelCache::Global().Get(key));
        fns_[Index(partial, tail, special)] = fn;
      }
    }
  }
  return absl::OkStatus();
}

void KernelSet::Call(int rows, int tail_vecs, bool special, MicroKernelArgs* args) const {
  const int i = Index(rows != plan_.mr, tail_vecs != 0, special);
  if (plan_.portable_kernels) {
    args->key = &keys_[i];
    PortableMicroKernel(args);
  } else {
    fns_[i](args);
  }
}

void FreeAlignedBlock::operator()(void* p) const { ir::FreeStorage(p, bytes); }

void AlignedBuffer::Trim(size_t max_bytes) {
  if (size_ <= max_bytes) return;
  data_.reset();
  size_ = 0;
}

void* AlignedBuffer::Get(size_t bytes) {
  if (bytes > size_) {
    const size_t size = RoundUp(static_cast<int64_t>(bytes), 4096);
    data_.reset();
    // Page aligned; from 2 MiB on, on huge pages (ir::AllocateStorage).
    void* p =
        size >= ir::kHugePageBytes ? ir::AllocateStorage(size) : std::aligned_alloc(4096, size);
    data_ = std::unique_ptr<void, FreeAlignedBlock>(p, FreeAlignedBlock{size});
    size_ = p == nullptr ? 0 : size;
  }
  return data_.get();
}

GemmPlan BalancedPlan(const GemmPlan& plan, const GemmShape& shape) {
  // Each block the same size, within the alignment a block needs (AMX: whole tiles in k).
  auto balanced = [](int64_t extent, int64_t block, int64_t align) {
    if (extent <= 0) return block;
    const int64_t blocks = CeilDiv(extent, block);
    return std::min(block, RoundUp(CeilDiv(extent, blocks), align));
  };
  GemmPlan p = plan;
  p.kc = balanced(shape.k, plan.kc, plan.layout == PanelLayout::kAmxTiles ? 32 : kStreamSteps);
  p.nc = balanced(shape.n, plan.nc, plan.nr);
  return p;
}

absl::Status RunBlocked(const GemmArgs& g, const KernelSet& kernels, GemmScratch* scratch) {
  const GemmPlan& plan = kernels.plan();
  const MatrixView a{g.a, g.a_row_stride, g.a_col_stride, g.type};
  const MatrixView b{g.b, g.b_row_stride, g.b_col_stride, g.type};
  const int64_t m = g.shape.m, n = g.shape.n, k = g.shape.k;
  const int mr = plan.mr, nr = plan.nr;
  // Packed blocks kept across products (GemmPackCache) when `keep`, else packed into `dst`.
  const bool cached = g.pack_cache != nullptr && g.type != GemmType::kS8S8S32;
  if (cached) g.pack_cache->StartProduct();
  auto pack_or_keep = [&](bool keep, const GemmPackCache::Key& key, int64_t rows, int tile,
                    const std::function<void(void*)>& pack, uint8_t* dst) {
    const int64_t bytes = KSteps(plan.layout, key.kc) * RoundUp(rows, tile) * 4;
    if (keep && cached) {
      if (const void* p = g.pack_cache->Get(key, bytes, pack)) return static_cast<const uint8_t*>(p);
    }
    pack(dst);
    return static_cast<const uint8_t*>(dst);
  };
  const int layout = static_cast<int>(plan.layout);
  auto pack_a = [&](int64_t ic, int64_t mc, int64_t pc, int64_t kc, uint8_t* dst) {
    return pack_or_keep(g.cache_a, {g.a, a.row_stride, a.col_stride, ic, mc, pc, kc, layout, mr, false},
                  mc, mr, [&](void* out) { PackA(a, ic, mc, pc, kc, plan.layout, mr, out); }, dst);
  };
  auto pack_b = [&](int64_t pc, int64_t kc, int64_t jc, int64_t nc, uint8_t* dst) {
    return pack_or_keep(g.cache_b, {g.b, b.row_stride, b.col_stride, jc, nc, pc, kc, layout, nr, true},
                  nc, nr, [&](void* out) { PackB(b, pc, kc, jc, nc, plan.layout, nr, out); }, dst);
  };

  const int64_t kc_max = std::min(plan.kc, k);
  const int64_t steps_max = KSteps(plan.layout, kc_max);
  const int64_t nc_max = std::min(plan.nc, RoundUp(n, nr));
  const int64_t mc_max = std::min(plan.mc, RoundUp(m, mr));
  // Streaming B: two packed blocks, the one in use and the next (see StreamsB).
  const bool stream_b = kernels.streams_b();
  const bool in_place = kernels.b_in_place();
  const int64_t b_block_bytes = steps_max * nc_max * 4;
  auto* b_buf = static_cast<uint8_t*>(scratch->b.Get((stream_b ? 2 : 1) * b_block_bytes));
  // With several column blocks, A is packed once, during the first, and kept for the others.
  const int64_t a_block_bytes = steps_max * RoundUp(m, mr) * 4;
  const int64_t k_blocks = CeilDiv(k, plan.kc);
  const bool keep_a = n > plan.nc && a_block_bytes * k_blocks <= kMaxKeptABytes;
  auto* a_buf = static_cast<uint8_t*>(
      scratch->a.Get(keep_a ? a_block_bytes * k_blocks : steps_max * mc_max * 4));
  // bf16 output: kernels write f32 rows to a staging area, narrowed after the last k block. With
  // one k block it holds one row block, else every row of the column block.
  const bool single_k = k <= plan.kc;
  const int64_t ld_stage = RoundUp(nc_max, 16) + 16;
  float* stage = nullptr;
  if (g.out_bf16) {
    stage = static_cast<float*>(scratch->c.Get((single_k ? mc_max : m) * ld_stage * 4));
  }
  // int8: -128 x each column's sum over all of k, added by the kernels in the last depth block.
  const bool s8 = g.type == GemmType::kS8S8S32;
  int32_t* col_offset =
      s8 ? static_cast<int32_t*>(scratch->col_offset.Get(nc_max * sizeof(int32_t))) : nullptr;
  if (b_buf == nullptr || a_buf == nullptr || (g.out_bf16 && stage == nullptr) ||
      (s8 && col_offset == nullptr)) {
    return absl::ResourceExhaustedError("gemm: cannot allocate packing buffers");
  }

  scratch->streamed_steps = 0;
  MicroKernelArgs args;
  // Bytes between copied steps: a row of B, two for bf16 pairs.
  args.stream_src_stride = b.row_stride * GemmInputBytes(g.type) *
                           (plan.layout == PanelLayout::kBf16Pairs ? 2 : 1);
  int packed = 0;  // streaming B: the half of b_buf that holds the current block
  const int64_t last_ic = (m - 1) / plan.mc * plan.mc;  // the row block that copies it
  if (stream_b) PackB(b, 0, kc_max, 0, std::min(plan.nc, n), plan.layout, nr, b_buf);
  for (int64_t jc = 0; jc < n; jc += plan.nc) {
    const int64_t nc = std::min(plan.nc, n - jc);
    const int tail_cols = static_cast<int>(nc % nr);
    const int tail_vecs = static_cast<int>(CeilDiv(tail_cols, plan.lanes));
    if (tail_cols != 0) SetTailMasks(tail_cols, &args);
    args.n_panels = nc / nr;
    if (s8) Int8ColumnOffsets(b, k, jc, nc, RoundUp(nc, nr), col_offset);
    for (int64_t pc = 0; pc < k; pc += plan.kc) {
      const int64_t kc = std::min(plan.kc, k - pc);
      const int64_t steps = KSteps(plan.layout, kc);
      const bool first = pc == 0, last = pc + kc >= k;
      const uint8_t* b_block = b_buf + packed * b_block_bytes;
      if (in_place) {
        // Full panels from B itself; a partial last one packed.
        if (tail_cols != 0) {
          PackB(b, pc, kc, jc + nc - tail_cols, tail_cols, plan.layout, nr, b_buf);
        }
        const int elem = GemmInputBytes(g.type);
        args.b = static_cast<const char*>(g.b) + (pc * b.row_stride + jc) * elem;
        args.b_panel_stride = nr * elem;
        args.b_step_stride = b.row_stride * elem;
      } else {
        if (!stream_b) b_block = pack_b(pc, kc, jc, nc, b_buf + packed * b_block_bytes);
        args.b = b_block;
        args.b_panel_stride = steps * nr * 4;
      }
      args.k_steps = steps;
      args.accumulate = !first || g.accumulate;
      args.col_offset = last ? col_offset : nullptr;
      NextBlock next;
      if (stream_b) {
        next = NextBlockOf(b, plan, kernels.stream_rows(), jc, pc, k, n,
                           b_buf + (1 - packed) * b_block_bytes);
        next.Plan(CeilDiv(m - last_ic, mr), steps / kStreamSteps, args.n_panels);
        args.stream_dst_panel_stride = next.steps() * nr * 4;
        args.stream_panels = next.streamed_panels;
      }
      for (int64_t ic = 0; ic < m; ic += plan.mc) {
        RETURN_IF_ERROR(g.parallel.stop.Check());
        const int64_t mc = std::min(plan.mc, m - ic);
        uint8_t* a_dst = a_buf;
        if (keep_a) a_dst += (pc / plan.kc) * a_block_bytes + ic * steps * 4;
        const uint8_t* a_block = a_dst;
        if (!keep_a || jc == 0) a_block = pack_a(ic, mc, pc, kc, a_dst);
        float* c_block;
        int64_t ldc;
        if (g.out_bf16) {
          c_block = stage + (single_k ? 0 : ic) * ld_stage;
          ldc = ld_stage;
          if (first && g.accumulate) {
            Widen(static_cast<const uint16_t*>(g.c) + ic * g.ldc + jc, g.ldc, c_block, ldc, mc, nc);
          }
        } else {
          c_block = static_cast<float*>(g.c) + ic * g.ldc + jc;
          ldc = g.ldc;
        }
        args.ldc = ldc * 4;
        for (int64_t ir = 0; ir < mc; ir += mr) {
          const int rows = static_cast<int>(std::min<int64_t>(mr, mc - ir));
          args.a = a_block + (ir / mr) * steps * mr * 4;
          args.c = c_block + ir * ldc;
          if (in_place) {
            if (args.n_panels > 0) kernels.Call(rows, 0, true, &args);
            if (tail_vecs != 0) {
              MicroKernelArgs tail = args;
              tail.b = b_buf;
              tail.b_panel_stride = steps * nr * 4;
              tail.n_panels = 0;
              tail.c = args.c + (nc - tail_cols);
              kernels.Call(rows, tail_vecs, false, &tail);
            }
            continue;
          }
          const int64_t copies = stream_b && ic == last_ic ? next.StartTile(&args) : 0;
          kernels.Call(rows, tail_vecs, copies > 0, &args);
          next.copied_steps += copies;
          scratch->streamed_steps += copies;
        }
        if (g.out_bf16 && last) {
          Narrow(c_block, ldc, static_cast<uint16_t*>(g.c) + ic * g.ldc + jc, g.ldc, mc, nc);
        }
      }
      if (stream_b) {
        next.PackRest();
        packed = 1 - packed;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace shardjit::backends::x86

namespace shardjit::backends::x86 {

bool GemmPackCache::Key::operator==(const Key& o) const {
  return src == o.src && row_stride == o.row_stride && col_stride == o.col_stride && r0 == o.r0 &&
         rows == o.rows && k0 == o.k0 && kc == o.kc && layout == o.layout && tile == o.tile &&
         b == o.b;
}

struct GemmPackCache::Impl {
  struct Hash {
    size_t operator()(const Key& k) const {
      return absl::HashOf(k.src, k.row_stride, k.col_stride, k.r0, k.rows, k.k0, k.kc, k.layout,
                          k.tile, k.b);
    }
  };
  struct Block {
    void* data;
    size_t bytes;
    std::list<Key>::iterator use;  // its place in `uses`
  };
  absl::flat_hash_map<Key, Block, Hash> blocks;
  std::list<Key> uses;  // most recently used first
  absl::flat_hash_map<size_t, std::vector<void*>> free;  // dropped blocks' memory, by size
  // Chunks blocks are carved from: the last one has `unused` bytes left at its end.
  struct Chunk {
    void* data;
    size_t bytes;
  };
  std::vector<Chunk> chunks;
  size_t unused = 0;
  int64_t chunk_bytes = 0;  // in all
};

// Large enough that a kernel's blocks take a few chunks; large chunks are on huge pages.
constexpr size_t kPackChunkBytes = size_t{4} << 20;

GemmPackCache::GemmPackCache(ir::Allocator* allocator, int64_t max_bytes)
    : impl_(std::make_unique<Impl>()), allocator_(allocator), max_bytes_(max_bytes) {}

GemmPackCache::~GemmPackCache() {
  for (const Impl::Chunk& c : impl_->chunks) allocator_->Deallocate(c.data, c.bytes);
}

void GemmPackCache::StartProduct() {
  while (kept_bytes_ > max_bytes_) {
    auto it = impl_->blocks.find(impl_->uses.back());
    impl_->free[it->second.bytes].push_back(it->second.data);
    kept_bytes_ -= static_cast<int64_t>(it->second.bytes);
    impl_->uses.pop_back();
    impl_->blocks.erase(it);
  }
}

const void* GemmPackCache::Get(const Key& key, int64_t bytes,
                               const std::function<void(void*)>& pack) {
  Impl& s = *impl_;
  if (auto it = s.blocks.find(key); it != s.blocks.end()) {
    ++hits_;
    s.uses.splice(s.uses.begin(), s.uses, it->second.use);
    return it->second.data;
  }
  ++misses_;
  // Packed panels are read with aligned loads: 64-byte alignment, as the packing buffers.
  const size_t size = static_cast<size_t>(RoundUp(bytes, 64));
  void* block = nullptr;
  if (auto f = s.free.find(size); f != s.free.end() && !f->second.empty()) {
    block = f->second.back();
    f->second.pop_back();
  } else {
    if (size > s.unused) {
      // A product may use up to twice the budget before StartProduct trims it.
      const size_t chunk =
          std::max(size, std::min(kPackChunkBytes, static_cast<size_t>(max_bytes_)));
      if (s.chunk_bytes + static_cast<int64_t>(chunk) > 2 * max_bytes_) return nullptr;
      void* data = allocator_->Allocate(chunk);
      if (data == nullptr) return nullptr;
      s.chunks.push_back({data, chunk});
      s.chunk_bytes += static_cast<int64_t>(chunk);
      s.unused = chunk;
    }
    const Impl::Chunk& last = s.chunks.back();
    block = static_cast<char*>(last.data) + (last.bytes - s.unused);
    s.unused -= size;
  }
  pack(block);
  kept_bytes_ += static_cast<int64_t>(size);
  s.uses.push_front(key);
  s.blocks.emplace(key, Impl::Block{block, size, s.uses.begin()});
  return block;
}

}  // namespace shardjit::backends::x86
