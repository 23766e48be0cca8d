#include "backends/x86/pallas_view.h"

#include <algorithm>
#include <cstring>

#include "backends/reference/strided_copy.h"

namespace shardjit::backends::x86::pallas {

Dims RowMajor(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * dims[d + 1];
  }
  return strides;
}

View DenseView(ir::Tensor& t) {
  Dims dims(t.dims().begin(), t.dims().end());
  Dims strides = RowMajor(dims);
  return {static_cast<char*>(t.data()), std::move(dims), std::move(strides), t.dtype()};
}

// Copies the elements of `src` to `dst` (same dims): rows contiguous on both sides at once.
void CopyView(const View& dst, const View& src) {
  const int64_t elem = ir::DTypeSize(dst.dtype);
  const int rank = static_cast<int>(dst.dims.size());
  for (int64_t d : dst.dims) {
    if (d == 0) return;
  }
  if (rank == 0) {
    std::memmove(dst.data, src.data, elem);
    return;
  }
  const bool rows = dst.strides[rank - 1] == 1 && src.strides[rank - 1] == 1;
  const int outer = rows ? rank - 1 : rank;
  const int64_t row_bytes = rows ? dst.dims[rank - 1] * elem : elem;
  Dims index(outer, 0);
  while (true) {
    int64_t d_off = 0, s_off = 0;
    for (int k = 0; k < outer; ++k) {
      d_off += index[k] * dst.strides[k];
      s_off += index[k] * src.strides[k];
    }
    std::memmove(dst.data + d_off * elem, src.data + s_off * elem, row_bytes);
    int k = outer - 1;
    for (; k >= 0; --k) {
      if (++index[k] < dst.dims[k]) break;
      index[k] = 0;
    }
    if (k < 0) return;
  }
}

void FillView(const View& dst, const void* element) {
  const int64_t elem = ir::DTypeSize(dst.dtype);
  const int rank = static_cast<int>(dst.dims.size());
  for (int64_t d : dst.dims) {
    if (d == 0) return;
  }
  const auto* bytes = static_cast<const uint8_t*>(element);
  const bool zero = std::all_of(bytes, bytes + elem, [](uint8_t b) { return b == 0; });
  const bool rows = rank > 0 && dst.strides[rank - 1] == 1;
  const int outer = rows ? rank - 1 : rank;
  const int64_t count = rows ? dst.dims[rank - 1] : 1;
  Dims index(outer, 0);
  while (true) {
    int64_t off = 0;
    for (int k = 0; k < outer; ++k) off += index[k] * dst.strides[k];
    char* at = dst.data + off * elem;
    if (zero) {
      std::memset(at, 0, count * elem);
    } else {
      reference::FillElements(at, count, element, elem);
    }
    int k = outer - 1;
    for (; k >= 0; --k) {
      if (++index[k] < dst.dims[k]) break;
      index[k] = 0;
    }
    if (k < 0) return;
  }
}

}  // namespace shardjit::backends::x86::pallas
