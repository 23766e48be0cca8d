// What the shape rule, the backends and the frontend share about pallas_call's blocks: the
// kernel's ref type for a BlockSpec, block sizes and offsets, and the padding values that blocks
// overhanging an array read as.
#ifndef SHARDJIT_IR_PALLAS_H_
#define SHARDJIT_IR_PALLAS_H_

#include <cstdint>
#include <vector>

#include "ir/ir.pb.h"
#include "ir/types.h"

namespace shardjit::ir {

// The block's extent along array dimension `d` (1 for a squeezed dimension).
inline int64_t BlockExtent(const BlockSpec& spec, int d) {
  return spec.block_shape(d) == 0 ? 1 : spec.block_shape(d);
}

// The dimensions of the kernel's ref for a blocked spec: the block shape without its squeezed
// dimensions.
inline std::vector<int64_t> BlockRefDims(const BlockSpec& spec) {
  std::vector<int64_t> dims;
  for (int64_t b : spec.block_shape()) {
    if (b != 0) dims.push_back(b);
  }
  return dims;
}

// The kernel's ref type for `spec` over an array of type `array`.
inline ShapedType BlockRefType(const BlockSpec& spec, const ShapedType& array) {
  if (spec.whole()) return array.AsRef();
  return ShapedType{array.dtype, BlockRefDims(spec)}.AsRef();
}

// The grid axes sized at run time (grid entry -1); their sizes are the call's first operands.
inline int64_t NumDynamicGridAxes(const PallasCallAttrs& a) {
  int64_t n = 0;
  for (int64_t g : a.grid()) n += g == -1;
  return n;
}

// What padding and fresh outputs and scratch hold, as Pallas' interpreter fills them: NaN for
// floating dtypes, the minimum for integers, false for pred.
double PaddingValue(DType dtype);

// Per kernel param of `a`: whether a dma_start of the kernel (nested regions included) copies
// into it. An instance offers its peers its outputs, its scratch and, of its inputs, these (which
// it copies rather than alias the caller's arrays).
std::vector<bool> DmaDestinations(const PallasCallAttrs& a);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_PALLAS_H_
