#include "backends/reference/strided_copy.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "backends/reference/kernel.h"
#include "ir/dtype.h"
#include "ir/types.h"

namespace shardjit::backends::reference {
namespace {

template <typename U>
void CopyRow(char* dst, int64_t dst_stride, const char* src, int64_t src_stride, int64_t n) {
  U* d = reinterpret_cast<U*>(dst);
  const U* s = reinterpret_cast<const U*>(src);
  for (int64_t i = 0; i < n; ++i) d[i * dst_stride] = s[i * src_stride];
}

}  // namespace

StridedLoops CollapseLoops(const std::vector<int64_t>& dims,
                           const std::vector<int64_t>& dst_strides,
                           const std::vector<int64_t>& src_strides) {
  StridedLoops loops;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0) loops.empty = true;
    if (dims[i] == 1) continue;
    if (!loops.dims.empty() && loops.dst_strides.back() == dst_strides[i] * dims[i] &&
        loops.src_strides.back() == src_strides[i] * dims[i]) {
      loops.dims.back() *= dims[i];
      loops.dst_strides.back() = dst_strides[i];
      loops.src_strides.back() = src_strides[i];
      continue;
    }
    loops.dims.push_back(dims[i]);
    loops.dst_strides.push_back(dst_strides[i]);
    loops.src_strides.push_back(src_strides[i]);
  }
  return loops;
}

void CopyStrided(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                 const std::vector<int64_t>& src_strides, const std::vector<int64_t>& dims,
                 int64_t elem) {
  CopyLoops(dst, src, CollapseLoops(dims, dst_strides, src_strides), elem);
}

void CopyLoops(void* dst, const void* src, const StridedLoops& loops, int64_t elem) {
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(src);
  if (loops.empty) return;
  if (loops.rank() == 0) {
    std::memcpy(out, in, elem);
    return;
  }
  const int64_t rank = loops.rank();
  const int64_t inner = loops.dims[rank - 1];
  const int64_t ds = loops.dst_strides[rank - 1], ss = loops.src_strides[rank - 1];
  ForEachOuterIndex(loops, rank - 1, [&](int64_t doff, int64_t soff) {
    char* d = out + doff * elem;
    const char* s = in + soff * elem;
    if (ds == 1 && ss == 1) {
      std::memcpy(d, s, inner * elem);
    } else if (elem == 1) {
      CopyRow<uint8_t>(d, ds, s, ss, inner);
    } else if (elem == 2) {
      CopyRow<uint16_t>(d, ds, s, ss, inner);
    } else if (elem == 4) {
      CopyRow<uint32_t>(d, ds, s, ss, inner);
    } else {
      CopyRow<uint64_t>(d, ds, s, ss, inner);
    }
  });
}

void FillElements(void* dst, int64_t count, const void* element, int64_t elem) {
  if (count <= 0) return;
  // Doubling the filled prefix: log2(count) copies.
  const int64_t bytes = count * elem;
  char* p = static_cast<char*>(dst);
  std::memcpy(p, element, elem);
  for (int64_t filled = elem; filled < bytes; filled *= 2) {
    std::memcpy(p + filled, p, std::min(filled, bytes - filled));
  }
}

absl::StatusOr<std::vector<int64_t>> ClampedStarts(std::string_view opcode,
                                                   const std::vector<ir::Tensor>& operands,
                                                   size_t first, const std::vector<int64_t>& dims,
                                                   const std::vector<int64_t>& sizes) {
  if (operands.size() != first + dims.size() || sizes.size() != dims.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: needs {} start indices and {} sizes for a rank-{} "
        "operand, got {} and {}",
        opcode, dims.size(), dims.size(), dims.size(), operands.size() - first, sizes.size()));
  }
  std::vector<int64_t> starts(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    const ir::Tensor& index = operands[first + i];
    if (!ir::IsInteger(index.dtype()) || index.type().rank() != 0) {
      return absl::InvalidArgumentError(
          fmt::format("{}: start index {} must be an integer scalar, got {}", opcode, i,
                      index.type().ToString()));
    }
    if (sizes[i] < 0 || sizes[i] > dims[i]) {
      return absl::InvalidArgumentError(
          fmt::format("{}: size {} of dim {} exceeds its extent {}", opcode, sizes[i], i, dims[i]));
    }
    starts[i] = std::clamp<int64_t>(IndexValue(index, 0), 0, dims[i] - sizes[i]);
  }
  return starts;
}

}  // namespace shardjit::backends::reference
