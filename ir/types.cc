#include "ir/types.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"

namespace shardjit::ir {

int64_t ShapedType::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::optional<int64_t> CheckedNumElements(const std::vector<int64_t>& dims) {
  std::optional<int64_t> n = 1;
  for (int64_t d : dims) {
    if (d < 0 || !(n = CheckedMul(*n, d))) return std::nullopt;
  }
  return n;
}

std::optional<int64_t> CheckedByteSize(const std::vector<int64_t>& dims, int64_t dtype_bytes) {
  std::optional<int64_t> n = CheckedNumElements(dims);
  return n ? CheckedMul(*n, dtype_bytes) : std::nullopt;
}

absl::Status CheckTypeLimits(const ShapedType& t) {
  if (t.rank() > kMaxRank) {
    return absl::InvalidArgumentError(
        fmt::format("type {} has rank {}, more than {}", t.ToString(), t.rank(), kMaxRank));
  }
  for (int64_t d : t.dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          fmt::format("type {} has a negative dimension", t.ToString()));
    }
  }
  // Zero dims count as ones, so that strides and offsets (products of trailing dims) of an
  // empty array stay in range too.
  std::vector<int64_t> extent;
  for (int64_t d : t.dims) extent.push_back(std::max<int64_t>(d, 1));
  std::optional<int64_t> bytes = CheckedByteSize(extent, DTypeSize(t.dtype));
  if (!bytes || *bytes > kMaxArrayBytes) {
    return absl::InvalidArgumentError(fmt::format(
        "type {} has more than {} bytes (2^48; zero dims counted as ones), the largest array a "
        "module may hold",
        t.ToString(), kMaxArrayBytes));
  }
  return absl::OkStatus();
}

std::string ShapedType::ToString() const {
  const std::string_view element = semaphore == Semaphore::kRegular ? "sem"
                                   : semaphore == Semaphore::kDma   ? "dma_sem"
                                                                    : DTypeName(dtype);
  std::string array = fmt::format("{}[{}]", element, absl::StrJoin(dims, ","));
  if (ref) return fmt::format("ref[{}]", array);
  return future ? fmt::format("future[{}]", array) : array;
}

ShapedType FromProto(const TensorType& t) {
  return ShapedType{FromProto(t.dtype()), {t.dims().begin(), t.dims().end()}, t.future(),
                    t.ref(), static_cast<Semaphore>(t.semaphore())};
}

TensorType ToProto(const ShapedType& t) {
  TensorType p;
  p.set_dtype(ToProto(t.dtype));
  for (int64_t d : t.dims) p.add_dims(d);
  p.set_future(t.future);
  p.set_ref(t.ref);
  p.set_semaphore(static_cast<SemaphoreKind>(t.semaphore));
  return p;
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * dims[i + 1];
  }
  return strides;
}

std::string MeshToString(const Mesh& mesh) {
  std::vector<std::string> parts;
  for (const MeshAxis& a : mesh.axes()) parts.push_back(fmt::format("{}:{}", a.name(), a.size()));
  return "{" + absl::StrJoin(parts, ", ") + "}";
}

std::string SpecToString(const PartitionSpec& spec) {
  std::vector<std::string> parts;
  for (const DimSpec& d : spec.dims()) {
    if (d.axes().empty()) {
      parts.push_back("None");
    } else if (d.axes_size() == 1) {
      parts.push_back(d.axes(0));
    } else {
      parts.push_back("(" + absl::StrJoin(d.axes(), ",") + ")");
    }
  }
  return "P(" + absl::StrJoin(parts, ", ") + ")";
}

}  // namespace shardjit::ir
