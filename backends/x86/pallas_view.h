// Strided views of arrays, as the compiled pallas_call reads blocks and refs through them
// (backends/x86/pallas_program.h), and copies and fills of them. Internal to the backend.
#ifndef SHARDJIT_BACKENDS_X86_PALLAS_VIEW_H_
#define SHARDJIT_BACKENDS_X86_PALLAS_VIEW_H_

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86::pallas {

// Small shapes without heap allocation: views are made at every grid step.
using Dims = absl::InlinedVector<int64_t, 4>;

// Element (i0, i1, ...) of a view is at data + sum(i_d * strides[d]) elements.
struct View {
  char* data = nullptr;
  Dims dims;
  Dims strides;
  ir::DType dtype = ir::DType::kInvalid;
};

// Row-major strides of `dims`, the view of a whole tensor, and a copy of `src` into `dst` (the
// same dims; rows contiguous on both sides move at once).
Dims RowMajor(const Dims& dims);
View DenseView(ir::Tensor& t);
void CopyView(const View& dst, const View& src);
// Sets every element of `dst` to `element` (DTypeSize(dst.dtype) bytes).
void FillView(const View& dst, const void* element);

}  // namespace shardjit::backends::x86::pallas

#endif  // SHARDJIT_BACKENDS_X86_PALLAS_VIEW_H_
