// The micro-kernel ABI shared by the JIT generators, the portable C++ kernel and the blocking
// driver. A micro-kernel computes `rows` rows of C over a strip of packed B panels:
//   for each panel p (n_panels full ones, then an optional masked tail panel):
//     C[0:rows, p*NR : p*NR+NR] = (accumulate ? C : 0) + Apanel * Bpanel[p]
// with f32 accumulation, A and B read from packed panels (gemm_pack.h). A streaming kernel
// (stream != kNone) also packs part of the next B block while it computes, so that the memory
// reads of packing overlap the arithmetic: in each of the first stream_iters k iterations (of
// kStreamSteps steps) of each of the first stream_panels panels p, it packs R = stream_rows k
// steps of panel p, steps i = 0 .. R * stream_iters - 1 in all, step i from the NR elements of E
// bytes (4 for f32, 2 for bf16) at
//   src_i = stream_src + p * NR * E + i * stream_src_stride  (panel p's columns of a row-major B)
// into
//   stream_dst + p * stream_dst_panel_stride + i * NR * 4  (k step i of the packed panel p):
// in the kF32 layout the row at src_i (bf16 widened to f32); in the kBf16Pairs layout the rows
// at src_i and src_i + stream_src_stride / 2 interleaved into pairs (the step's two k values).
// It prefetches the same rows of panel p + 1 (the copy of panel p + 1 then reads cache), in the
// last streamed panel the rows stream_last_ahead bytes past the ones it copies (the driver points
// it at the first panel's rows of its next call), and into L2 those of panel p +
// kStreamFarPanels, in the kF32 layout from the kStreamFarPanels-th last panel on those of the
// next call's panel as far ahead (stream_far_wrap). A tile of few rows has few FMAs to hide its
// copy behind, but then few tiles share the block, so each must copy more: R > 1.
// A kernel that reads B in place (b_in_place: f32 or bf16 rows) takes its panels straight from a
// row-major B instead: k step s of panel p is the nr elements at b + p * b_panel_stride +
// s * b_step_stride (b_step_stride: a row of B), bf16 widened as they are loaded, full panels
// only; it prefetches each panel's rows kInPlacePrefetchSteps steps ahead of the ones it reads.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_KERNEL_H_
#define SHARDJIT_BACKENDS_X86_GEMM_KERNEL_H_

#include <cstdint>
#include <string>

#include "absl/hash/hash.h"
#include "backends/x86/cpu_features.h"

namespace shardjit::backends::x86 {

// Layout of a packed k step. kF32: one f32 per row/column and step. kBf16Pairs: two bf16 (k, k+1)
// per row/column and step, as vdpbf16ps consumes them. Either way a step holds 4 bytes per
// row (A) or column (B). kAmxTiles: bf16 pairs in blocks of 16 steps (32 k values, zero-padded),
// as AMX tiles load them: B as kBf16Pairs (a block is a B tile of 16 rows), A row-major within
// a block (row i's 32 k values at block + 64 * i: an A tile of 16 rows per 16 rows).
// kS8Quads: four int8 (k .. k+3) per row/column and step, as vpdpbusd consumes them, A stored
// as u8 (each value + 128: its sign bit flipped), B as s8; the kernel's int32 C then holds
// sum((a + 128) * b); the driver passes -128 times B's column sums as col_offset, which the
// kernel adds in the last depth block.
enum class PanelLayout : int { kF32 = 0, kBf16Pairs = 1, kAmxTiles = 2, kS8Quads = 3 };

// Byte offset of (k step, row) in a packed A panel of `mr` rows.
inline int64_t PackedAOffset(PanelLayout layout, int mr, int64_t step, int row) {
  if (layout == PanelLayout::kAmxTiles) {
    return (step / 16) * mr * 64 + row * 64 + (step % 16) * 4;
  }
  return (step * mr + row) * 4;
}

// k steps per iteration of a streaming kernel's copy; it copies 1, 2, 4 or 8 (at most this
// many) k steps of the next block per iteration (KernelKey::stream_rows).
inline constexpr int kStreamSteps = 8;

// Whether a streaming kernel can copy `rows` k steps per iteration: a divisor of kStreamSteps.
inline bool ValidStreamRows(int rows) { return rows >= 1 && kStreamSteps % rows == 0; }

// Panels ahead of the copy that a streaming kernel prefetches into L2: one panel's k loop is too
// short to hide a memory read behind when tiles have few rows.
inline constexpr int kStreamFarPanels = 4;

// k steps ahead of its loads that an in-place kernel prefetches B's rows (KernelKey::b_in_place).
inline constexpr int kInPlacePrefetchSteps = 8;

// Rows of a row-major B that a kernel reads besides its packed panels: nothing, f32 rows, or bf16
// rows. A streaming kernel copies them into the next packed block (widened to f32 in the kF32
// layout, interleaved in pairs in the kBf16Pairs layout); an in-place kernel computes from them.
enum class RowSource : int { kNone = 0, kF32 = 1, kBf16 = 2 };

// Bytes per element of such rows (0 for kNone).
inline int RowElementBytes(RowSource source) {
  return source == RowSource::kF32 ? 4 : source == RowSource::kBf16 ? 2 : 0;
}

// Identifies one generated kernel.
struct KernelKey {
  PanelLayout layout = PanelLayout::kF32;
  IsaLevel isa = IsaLevel::kReference;
  int mr = 0;         // rows of a packed A panel (its k-step stride is 4 * mr bytes)
  int nr = 0;         // columns of a packed B panel (its k-step stride is 4 * nr bytes)
  int rows = 0;       // rows computed, 1..mr
  int tail_vecs = 0;  // vectors computed in the masked tail panel; 0: no tail panel
  // Copies part of the next B block: kF32 layout (f32 or bf16 source), kBf16Pairs (bf16).
  RowSource stream = RowSource::kNone;
  // k steps a streaming kernel copies per iteration of kStreamSteps steps: 1, 2, 4 or 8.
  int stream_rows = 1;
  // Reads B's full panels in place from rows of this type (see the top): kF32 layout, no tail,
  // no stream.
  RowSource b_in_place = RowSource::kNone;

  bool operator==(const KernelKey& o) const {
    return layout == o.layout && isa == o.isa && mr == o.mr && nr == o.nr && rows == o.rows &&
           tail_vecs == o.tail_vecs && stream == o.stream && stream_rows == o.stream_rows &&
           b_in_place == o.b_in_place;
  }
  template <typename H>
  friend H AbslHashValue(H h, const KernelKey& k) {
    return H::combine(std::move(h), k.layout, k.isa, k.mr, k.nr, k.rows, k.tail_vecs, k.stream,
                      k.stream_rows, k.b_in_place);
  }
  // Whether the fields fit together: b_in_place only in the kF32 layout without a tail panel or
  // a stream; stream_rows valid (ValidStreamRows).
  bool Consistent() const {
    return ValidStreamRows(stream_rows) &&
           (b_in_place == RowSource::kNone ||
            (layout == PanelLayout::kF32 && tail_vecs == 0 && stream == RowSource::kNone));
  }
  // "gemm_avx512_bf16_pairs_6x64_r6_t2"; "..._sf32" / "..._sbf16" for a streaming kernel,
  // "..._sf32x4" for one that copies 4 steps per iteration, "..._bf32" / "..._bbf16" for one
  // that reads B in place.
  std::string Name() const;
};

// Arguments of one call; field offsets are read by generated code (offsetof).
struct MicroKernelArgs {
  const void* a = nullptr;     // packed A panel: k_steps x mr x 4 bytes
  const void* b = nullptr;     // first packed B panel: k_steps x nr x 4 bytes
  float* c = nullptr;          // C[0,0] of the strip (int32 for kS8Quads)
  int64_t ldc = 0;             // bytes between rows of C
  int64_t k_steps = 0;         // >= 1: KSteps(layout, k) (gemm_pack.h)
  int64_t n_panels = 0;        // full panels, >= 0
  int64_t b_panel_stride = 0;  // bytes between B panels
  int64_t b_step_stride = 0;   // b_in_place kernels: bytes between k steps (rows) of B
  int64_t accumulate = 0;      // 0 or 1
  // Tail panel masks (used only when the kernel has tail_vecs > 0): per vector of the tail
  // panel, an AVX-512 opmask (bit j: column j valid) and AVX2 per-lane masks (-1 valid, 0 not).
  uint32_t vec_mask[8] = {};
  int32_t lane_mask[64] = {};
  // Streaming kernels (see the top): 0 <= stream_iters <= k_steps / kStreamSteps and
  // 0 <= stream_panels <= n_panels (the tail panel never streams).
  const void* stream_src = nullptr;
  void* stream_dst = nullptr;
  int64_t stream_src_stride = 0;        // bytes between copied steps (two rows for pairs)
  int64_t stream_dst_panel_stride = 0;  // bytes between destination panels
  int64_t stream_iters = 0;
  int64_t stream_panels = 0;
  int64_t stream_last_ahead = 0;  // bytes; only prefetched, so any value is safe
  // Bytes from a row copied in the last kStreamFarPanels streamed panels to the row prefetched
  // into L2, in the next call (kF32 layout); only prefetched, so any value is safe.
  int64_t stream_far_wrap = 0;
  // kS8Quads: int32 per column of the strip (n_panels + 1 panels of nr), added to every row of
  // C before it is stored; null: nothing added.
  const int32_t* col_offset = nullptr;
  // The kernel's own key, for the portable kernel; generated code ignores it.
  const KernelKey* key = nullptr;
};

using MicroKernelFn = void (*)(const MicroKernelArgs*);

// Fills vec_mask and lane_mask for a tail panel of `cols` valid columns.
void SetTailMasks(int cols, MicroKernelArgs* args);

// The micro-kernel in plain C++ (any key): the oracle of the generated ones, and a stand-in that
// lets tests run the driver and packing of every ISA on any host.
void PortableMicroKernel(const MicroKernelArgs* args);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_KERNEL_H_
