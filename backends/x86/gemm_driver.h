// The cache-blocked GEMM driver: loops over NC columns, KC depth and MC rows, packs the operands
// (gemm_pack.h) and calls micro-kernels (gemm_kernel.h) per MR-row strip. Single-threaded;
// gemm.cc splits work across threads and chooses the plan.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_DRIVER_H_
#define SHARDJIT_BACKENDS_X86_GEMM_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/gemm.h"
#include "backends/x86/gemm_kernel.h"

namespace shardjit::backends::x86 {

// Kernel family and cache blocking of one ISA level.
struct GemmPlan {
  IsaLevel isa = IsaLevel::kReference;  // level of the generated kernels
  PanelLayout layout = PanelLayout::kF32;
  int mr = 0, nr = 0;  // register tile
  int lanes = 0;       // f32 lanes per vector (tail masks)
  int64_t mc = 0;      // rows of A packed at once (multiple of mr)
  int64_t kc = 0;      // depth per packed block (even for bf16 pairs, a multiple of 32 for AMX)
  int64_t nc = 0;      // columns of B packed at once (multiple of nr): kc x nc stays in L2
  // Products of at most this many rows read B in place (ReadsBInPlace); 0: none do.
  int64_t max_rows_b_in_place = 0;
  bool streaming_plan = true;     // re-block streaming products (StreamingPlan)
  bool portable_kernels = false;  // run PortableMicroKernel instead of generated code
  // A call uses at most flops / min_flops_per_thread threads: 2 MFLOP is ~20 us of work. A helper
  // that is slow to wake (~27 us when asleep) costs little: the caller runs the parts no helper
  // has claimed yet.
  int64_t min_flops_per_thread = int64_t{1} << 21;
};

// The plan of `isa` (> kReference) for `type`, blocked for `caches`, for a CPU like `cpu` (int8:
// the kAvx512 VNNI plan).
GemmPlan MakePlan(IsaLevel isa, GemmType type, const CacheSizes& caches,
                  const CpuIdentity& cpu = HostCpu());

// InvalidArgument unless mc and nc are positive multiples of mr and nr and kc is positive (and
// even for bf16 pairs, a multiple of 4 for int8 quads; AMX tiles: 32x32 register tiles and kc a
// multiple of 32).
absl::Status ValidatePlan(const GemmPlan& plan);

// The blocks and micro-kernels of one product (what RunBlocked runs it with), decided and
// fetched (generated) up front so that a generation failure is reported before C is touched.
class KernelSet {
 public:
  // For `args` in `plan`'s blocks: StreamingPlan's when it streams B (unless
  // args.fixed_depth_blocks), InPlacePlan's when it reads B in place, balanced over its shape.
  absl::Status Prepare(const GemmPlan& plan, const GemmArgs& args);
  // `special`: the product's streaming kernel (StreamsB) or the one that reads B in place
  // (ReadsBInPlace; no tail panel: the tail is packed and runs on the plain kernel).
  void Call(int rows, int tail_vecs, bool special, MicroKernelArgs* args) const;
  // The product's blocks.
  const GemmPlan& plan() const { return plan_; }
  // Whether the product streams B (StreamsB, decided on the given plan).
  bool streams_b() const { return streams_b_; }
  // Whether the product reads B's full panels in place (ReadsBInPlace).
  bool b_in_place() const { return b_in_place_; }
  // k steps the streaming kernels copy per iteration (StreamRows).
  int stream_rows() const { return stream_rows_; }

 private:
  static int Index(bool partial_rows, bool tail, bool stream) {
    return (stream ? 4 : 0) + (partial_rows ? 2 : 0) + (tail ? 1 : 0);
  }

  GemmPlan plan_;
  bool streams_b_ = false;
  bool b_in_place_ = false;
  int stream_rows_ = 1;
  KernelKey keys_[8];
  MicroKernelFn fns_[8] = {};
};

// B read in place: in a product of few rows (m <= plan.max_rows_b_in_place) each element of B
// feeds one or two row tiles, so packing B costs about as much as the arithmetic. Such a product
// in f32 panels (f32 B, or bf16 widened as it is loaded) of B contiguous along n (and at least
// one full panel wide) has its full panels read by kernels straight from B
// (KernelKey::b_in_place); only a partial last panel is packed. Not for a B kept packed in a
// GemmPackCache.
bool ReadsBInPlace(const GemmPlan& plan, const GemmArgs& args);
// `plan` for such a product of `m` rows: one row tile of all of them (mr = m), its panels as
// many vectors wide as the registers hold beside the tile's accumulators, up to 64 columns (a
// row of B is then read in runs of 256 bytes, which memory serves faster than shorter ones).
GemmPlan InPlacePlan(const GemmPlan& plan, int64_t m);

// Streaming B: a product of a few row blocks (m <= kStreamRowBlocks * mc) uses each packed B
// block for a few row tiles only, so packing B from memory would take much of its time. Such a
// product keeps two packed blocks: while the kernels of the last row block's tiles compute on
// one, they also copy k steps of the next B block into the other (streaming kernels,
// gemm_kernel.h), so that the memory reads overlap the arithmetic; what they do not copy (steps
// past their share, a tail panel) is packed after them. True for products in the kF32 layout
// (f32, or bf16 widened) or the kBf16Pairs layout with B contiguous along n and more than one B
// block, unless it reads B in place.
inline constexpr int64_t kStreamRowBlocks = 4;
bool StreamsB(const GemmPlan& plan, const GemmArgs& args);
// The k steps per iteration (KernelKey::stream_rows) that the streaming kernels of a product of
// `shape` in `plan`'s blocks (balanced over it, KernelSet::plan) copy so that the last row
// block's tiles copy a whole next block between them: 1 from 8
// tiles on, up to 8 for a single tile (few rows, so few FMAs per copied byte: such a product is
// bound by B's reads either way, which then overlap its arithmetic instead of following it).
int StreamRows(const GemmPlan& plan, const GemmShape& shape);

// `plan` for a streaming product (StreamsB) of one row block of 2 tiles or more: depth blocks
// in which each row tile copies about kStreamStepsPerTile k steps of the next block (at least
// kMinStreamBlockSteps steps a block before BalancedPlan evens them out over k, never deeper than
// the cache plan; not for AMX tiles, which do not stream). A tile's copy reads one
// row of B per step it copies, all of them side by side across the block's columns; in a block
// of the cache plan's depth a few tiles read many rows at once (a 20-row f32 product: 64 rows a
// tile), which memory serves more slowly than a few (16). Such products, B read from memory,
// ran 1.2-1.5x faster with these blocks (BM_GemmWeightsFromMemory). A single tile copies a
// whole block either way and would only pay the more frequent block changes (1-row f32, B in
// L3: 0.7x), so it keeps `plan`, as do other products, and any with streaming_plan false.
inline constexpr int64_t kStreamStepsPerTile = 16;
inline constexpr int64_t kMinStreamBlockSteps = 48;
GemmPlan StreamingPlan(const GemmPlan& plan, const GemmShape& shape);

// Frees an AlignedBuffer's block (ir::FreeStorage with the size it was allocated with).
struct FreeAlignedBlock {
  size_t bytes = 0;
  void operator()(void* p) const;
};

// Grow-only page-aligned buffer.
class AlignedBuffer {
 public:
  // At least `bytes` bytes; nullptr when out of memory.
  void* Get(size_t bytes);
  // Frees the buffer if it holds more than `max_bytes`.
  void Trim(size_t max_bytes);

 private:
  std::unique_ptr<void, FreeAlignedBlock> data_;
  size_t size_ = 0;
};

// Per-thread packing buffers and the f32 staging area of bf16 outputs.
struct GemmScratch {
  AlignedBuffer a, b, c;
  AlignedBuffer col_offset;  // int8 products: a column block's MicroKernelArgs::col_offset
  // Buffers larger than this are freed after each call, so that many device threads do not each
  // keep the largest packed operand they ever saw (refilling one costs page faults only, small
  // against a GEMM that needs so much).
  static constexpr size_t kKeepBytes = size_t{32} << 20;
  // k steps of B blocks that the last RunBlocked call's kernels copied while they computed
  // (streaming B); for tests and profiles.
  int64_t streamed_steps = 0;
  void Trim() {
    a.Trim(kKeepBytes);
    b.Trim(kKeepBytes);
    c.Trim(kKeepBytes);
    col_offset.Trim(kKeepBytes);
  }
};

// `plan` with its depth and column blocks evened out over `shape`: a k of 1024 in blocks of at
// most 320 becomes 4 blocks of 256, not 3 of 320 and one of 64 (a short block pays the loads
// and stores of C of a long one, and a streaming product copies few rows of B during it).
GemmPlan BalancedPlan(const GemmPlan& plan, const GemmShape& shape);

// Runs `args` (validated, row strides and ldc resolved; `kernels` prepared for it) in the blocks
// of `kernels`, on this thread. ResourceExhausted when the scratch buffers cannot be allocated
// (before C is touched).
absl::Status RunBlocked(const GemmArgs& args, const KernelSet& kernels, GemmScratch* scratch);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_DRIVER_H_
