// Shape rules of the data-movement primitives: broadcast_in_dim, reshape, transpose, slice,
// dynamic_slice, dynamic_update_slice, concatenate, pad, rev.
#include <numeric>
#include <optional>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "ir/prims/rule_util.h"
#include "ir/types.h"

namespace shardjit::ir::prims {
namespace {

absl::StatusOr<Types> BroadcastInDim(const ShapeContext&, const Types& operands, const Op& op) {
  const auto& a = op.broadcast_in_dim();
  std::vector<int64_t> shape = ToVector(a.shape());
  std::vector<int64_t> bdims = ToVector(a.broadcast_dimensions());
  const ShapedType& x = operands[0];
  if (static_cast<int64_t>(bdims.size()) != x.rank()) {
    return RuleError(op, operands, "broadcast_dimensions ({}) must have one entry per operand dim",
                     absl::StrJoin(bdims, ","));
  }
  for (int64_t d : shape) {
    if (d < 0) return RuleError(op, operands, "shape has a negative dimension");
  }
  RETURN_IF_ERROR(CheckDimList(op, operands, "broadcast_dimensions", bdims,
                               static_cast<int64_t>(shape.size())));
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i > 0 && bdims[i] <= bdims[i - 1]) {
      return RuleError(op, operands, "broadcast_dimensions must be strictly increasing");
    }
    if (x.dims[i] != 1 && x.dims[i] != shape[bdims[i]]) {
      return RuleError(op, operands, "operand dim {} (size {}) cannot broadcast to size {}", i,
                       x.dims[i], shape[bdims[i]]);
    }
  }
  return Types{{x.dtype, shape}};
}

absl::StatusOr<Types> Reshape(const ShapeContext&, const Types& operands, const Op& op) {
  std::vector<int64_t> sizes = ToVector(op.reshape().new_sizes());
  for (int64_t d : sizes) {
    if (d < 0) return RuleError(op, operands, "new_sizes has a negative dimension");
  }
  std::optional<int64_t> n = CheckedNumElements(sizes);
  if (!n) {
    return RuleError(op, operands, "new_sizes ({}) has more elements than int64 holds",
                     absl::StrJoin(sizes, ","));
  }
  if (*n != operands[0].num_elements()) {
    return RuleError(op, operands, "new_sizes ({}) has {} elements, operand has {}",
                     absl::StrJoin(sizes, ","), *n, operands[0].num_elements());
  }
  return Types{{operands[0].dtype, sizes}};
}

absl::StatusOr<Types> Transpose(const ShapeContext&, const Types& operands, const Op& op) {
  std::vector<int64_t> perm = ToVector(op.transpose().permutation());
  const ShapedType& x = operands[0];
  if (static_cast<int64_t>(perm.size()) != x.rank()) {
    return RuleError(op, operands, "permutation ({}) must have one entry per dim",
                     absl::StrJoin(perm, ","));
  }
  RETURN_IF_ERROR(CheckDimList(op, operands, "permutation", perm, x.rank()));
  ShapedType out{x.dtype, {}};
  for (int64_t p : perm) out.dims.push_back(x.dims[p]);
  return Types{out};
}

absl::StatusOr<Types> Slice(const ShapeContext&, const Types& operands, const Op& op) {
  const auto& a = op.slice();
  const ShapedType& x = operands[0];
  std::vector<int64_t> start = ToVector(a.start_indices());
  std::vector<int64_t> limit = ToVector(a.limit_indices());
  std::vector<int64_t> strides = ToVector(a.strides());
  if (strides.empty()) strides.assign(x.rank(), 1);
  if (static_cast<int64_t>(start.size()) != x.rank() ||
      static_cast<int64_t>(limit.size()) != x.rank() ||
      static_cast<int64_t>(strides.size()) != x.rank()) {
    return RuleError(op, operands, "start_indices, limit_indices and strides need {} entries",
                     x.rank());
  }
  ShapedType out{x.dtype, {}};
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > x.dims[i] || strides[i] < 1) {
      return RuleError(op, operands, "bad slice [{}:{}:{}] of dim {} (size {})", start[i],
                       limit[i], strides[i], i, x.dims[i]);
    }
    // ceil((limit - start) / stride), without overflow for any stride.
    out.dims.push_back(limit[i] == start[i] ? 0 : (limit[i] - start[i] - 1) / strides[i] + 1);
  }
  return Types{out};
}

absl::Status CheckScalarIndices(const Op& op, const Types& operands, size_t first,
                                int64_t rank) {
  if (static_cast<int64_t>(operands.size() - first) != rank) {
    return RuleError(op, operands, "needs {} start indices (one per dim), got {}", rank,
                     operands.size() - first);
  }
  for (size_t i = first; i < operands.size(); ++i) {
    if (!IsInteger(operands[i].dtype) || operands[i].rank() != 0) {
      return RuleError(op, operands, "start index {} must be an integer scalar, got {}",
                       i - first, operands[i].ToString());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> DynamicSlice(const ShapeContext&, const Types& operands, const Op& op) {
  const ShapedType& x = operands[0];
  RETURN_IF_ERROR(CheckScalarIndices(op, operands, 1, x.rank()));
  std::vector<int64_t> sizes = ToVector(op.dynamic_slice().slice_sizes());
  if (static_cast<int64_t>(sizes.size()) != x.rank()) {
    return RuleError(op, operands, "slice_sizes ({}) needs {} entries", absl::StrJoin(sizes, ","),
                     x.rank());
  }
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (sizes[i] < 0 || sizes[i] > x.dims[i]) {
      return RuleError(op, operands, "slice_sizes[{}] = {} exceeds dim size {}", i, sizes[i],
                       x.dims[i]);
    }
  }
  return Types{{x.dtype, sizes}};
}

absl::StatusOr<Types> DynamicUpdateSlice(const ShapeContext&, const Types& operands,
                                         const Op& op) {
  const ShapedType& x = operands[0];
  const ShapedType& update = operands[1];
  if (update.dtype != x.dtype || update.rank() != x.rank()) {
    return RuleError(op, operands, "update must have the operand's dtype and rank");
  }
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (update.dims[i] > x.dims[i]) {
      return RuleError(op, operands, "update dim {} (size {}) exceeds operand size {}", i,
                       update.dims[i], x.dims[i]);
    }
  }
  RETURN_IF_ERROR(CheckScalarIndices(op, operands, 2, x.rank()));
  return Types{x};
}

absl::StatusOr<Types> Concatenate(const ShapeContext&, const Types& operands, const Op& op) {
  int64_t dim = op.concatenate().dimension();
  const ShapedType& first = operands[0];
  if (dim < 0 || dim >= first.rank()) {
    return RuleError(op, operands, "dimension {} is out of range for rank {}", dim, first.rank());
  }
  ShapedType out = first;
  out.dims[dim] = 0;
  for (const ShapedType& t : operands) {
    bool compatible = t.dtype == first.dtype && t.rank() == first.rank();
    for (int64_t i = 0; compatible && i < t.rank(); ++i) {
      compatible = i == dim || t.dims[i] == first.dims[i];
    }
    if (!compatible) {
      return RuleError(op, operands, "operands must agree in dtype and in every dim but {}", dim);
    }
    std::optional<int64_t> size = CheckedAdd(out.dims[dim], t.dims[dim]);
    if (!size) return RuleError(op, operands, "the sizes along dimension {} overflow", dim);
    out.dims[dim] = *size;
  }
  return Types{out};
}

// pad(operand, padding_value): each dimension gets `low` elements before, `high` after and
// `interior` between every two (low and high may be negative, removing elements).
absl::StatusOr<Types> Pad(const ShapeContext&, const Types& operands, const Op& op) {
  const ShapedType& x = operands[0];
  const auto& config = op.pad().padding_config();
  if (operands[1] != ShapedType{x.dtype, {}}) {
    return RuleError(op, operands, "padding_value must be a scalar of the operand's dtype");
  }
  if (config.size() != x.rank()) {
    return RuleError(op, operands, "padding_config has {} entries for rank {}", config.size(),
                     x.rank());
  }
  ShapedType out{x.dtype, {}};
  for (int64_t d = 0; d < x.rank(); ++d) {
    const PaddingConfigDim& c = config[d];
    if (c.interior() < 0) {
      return RuleError(op, operands, "padding_config[{}] has interior={}, which must be "
                       "nonnegative", d, c.interior());
    }
    // Bounded attributes keep the arithmetic exact: |low|, |high|, interior < 2^40.
    constexpr int64_t kBound = int64_t{1} << 40;
    if (c.interior() >= kBound || c.low() <= -kBound || c.low() >= kBound ||
        c.high() <= -kBound || c.high() >= kBound) {
      return RuleError(op, operands, "padding_config[{}]=({}, {}, {}) is out of range", d,
                       c.low(), c.high(), c.interior());
    }
    const int64_t n = x.dims[d];
    const std::optional<int64_t> spread =
        n == 0 ? std::optional<int64_t>(0) : CheckedMul(n - 1, c.interior());
    std::optional<int64_t> size = spread ? CheckedAdd(n, *spread) : std::nullopt;
    if (size) size = CheckedAdd(*size, c.low() + c.high());
    if (!size || *size < 0) {
      return RuleError(op, operands, "padding_config[{}]=({}, {}, {}) makes dimension {} of "
                       "size {} negative or too large", d, c.low(), c.high(), c.interior(), d, n);
    }
    out.dims.push_back(*size);
  }
  return Types{out};
}

absl::StatusOr<Types> Rev(const ShapeContext&, const Types& operands, const Op& op) {
  RETURN_IF_ERROR(CheckDimList(op, operands, "dimensions", ToVector(op.rev().dimensions()),
                               operands[0].rank()));
  return Types{operands[0]};
}

const bool registered = [] {
  RegisterStructural({"pad", PrimitiveKind::kStructural, 2, 2, Op::kPad, Pad});
  RegisterStructural({"rev", PrimitiveKind::kStructural, 1, 1, Op::kRev, Rev});
  RegisterStructural({"broadcast_in_dim", PrimitiveKind::kStructural, 1, 1, Op::kBroadcastInDim,
                     BroadcastInDim});
  RegisterStructural({"reshape", PrimitiveKind::kStructural, 1, 1, Op::kReshape, Reshape});
  RegisterStructural({"transpose", PrimitiveKind::kStructural, 1, 1, Op::kTranspose, Transpose});
  RegisterStructural({"slice", PrimitiveKind::kStructural, 1, 1, Op::kSlice, Slice});
  RegisterStructural(
      {"dynamic_slice", PrimitiveKind::kStructural, 1, -1, Op::kDynamicSlice, DynamicSlice});
  RegisterStructural({"dynamic_update_slice", PrimitiveKind::kStructural, 2, -1, Op::ATTRS_NOT_SET,
                     DynamicUpdateSlice});
  RegisterStructural(
      {"concatenate", PrimitiveKind::kStructural, 1, -1, Op::kConcatenate, Concatenate});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
