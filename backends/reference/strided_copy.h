// Strided index spaces shared by the data-movement kernels of the reference and x86 backends: an
// index space read through the strides of two sides (a destination and a source) reduced to the
// fewest loops, a walk over its outer loops, the reference strided copy built on them, and the JAX
// clamping of dynamic start indices. Reductions walk (output, input) as (dst, src), with stride 0
// on the reduced dims of the output.
#ifndef SHARDJIT_BACKENDS_REFERENCE_STRIDED_COPY_H_
#define SHARDJIT_BACKENDS_REFERENCE_STRIDED_COPY_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference {

// An index space of `dims`: index idx is at element offset sum(idx[i] * dst_strides[i]) on the
// destination side and sum(idx[i] * src_strides[i]) on the source side.
struct StridedLoops {
  std::vector<int64_t> dims;
  std::vector<int64_t> dst_strides;
  std::vector<int64_t> src_strides;
  bool empty = false;  // some dim has size 0: the space has no element

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
};

// The same index space with size-1 dims dropped and each dim merged into the next where both sides
// are contiguous across them (rank 0: a single element). The element order is unchanged.
StridedLoops CollapseLoops(const std::vector<int64_t>& dims,
                           const std::vector<int64_t>& dst_strides,
                           const std::vector<int64_t>& src_strides);

// Calls f(dst_offset, src_offset) for every index of the outer `count` loops of `loops` (0 <= count
// <= rank), in row-major order; once with (0, 0) when count is 0, never when `loops` is empty. The
// innermost of the `count` loops runs as a tight loop.
template <typename F>
void ForEachOuterIndex(const StridedLoops& loops, int64_t count, F&& f) {
  if (loops.empty) return;
  if (count == 0) {
    f(int64_t{0}, int64_t{0});
    return;
  }
  const int64_t last = count - 1;
  const int64_t n = loops.dims[last];
  const int64_t dst_step = loops.dst_strides[last];
  const int64_t src_step = loops.src_strides[last];
  int64_t outer = 1;
  for (int64_t k = 0; k < last; ++k) outer *= loops.dims[k];
  std::vector<int64_t> idx(last, 0);
  int64_t dst = 0, src = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < n; ++i) f(dst + i * dst_step, src + i * src_step);
    for (int64_t k = last - 1; k >= 0; --k) {
      dst += loops.dst_strides[k];
      src += loops.src_strides[k];
      if (++idx[k] < loops.dims[k]) break;
      dst -= loops.dst_strides[k] * loops.dims[k];
      src -= loops.src_strides[k] * loops.dims[k];
      idx[k] = 0;
    }
  }
}

// Copies every element of the index space `dims` from src to dst (strides in elements of `elem`
// bytes: 1, 2 or 4). Runs contiguous on both sides are copied with memcpy, others element by
// element: the reference implementation.
void CopyStrided(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                 const std::vector<int64_t>& src_strides, const std::vector<int64_t>& dims,
                 int64_t elem);

// CopyStrided over an index space already reduced by CollapseLoops (dst and src are the
// destination and source sides).
void CopyLoops(void* dst, const void* src, const StridedLoops& loops, int64_t elem);

// Sets `count` elements of `elem` bytes at dst to the element at `element` (a splat).
void FillElements(void* dst, int64_t count, const void* element, int64_t elem);

// The start indices of dynamic_slice / dynamic_update_slice: operands[first + i] (s32 scalars),
// each clamped to [0, dims[i] - sizes[i]] as JAX does. InvalidArgument, naming `opcode`, when an
// index operand is missing or not s32[], or a size exceeds its dim.
absl::StatusOr<std::vector<int64_t>> ClampedStarts(std::string_view opcode,
                                                   const std::vector<ir::Tensor>& operands,
                                                   size_t first, const std::vector<int64_t>& dims,
                                                   const std::vector<int64_t>& sizes);

}  // namespace shardjit::backends::reference

#endif  // SHARDJIT_BACKENDS_REFERENCE_STRIDED_COPY_H_
