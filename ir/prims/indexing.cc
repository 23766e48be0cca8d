// Shape rules of gather and the scatters (scatter, scatter_add, scatter_mul, scatter_min,
// scatter_max): XLA's dimension numbers, with the index vector in the last dimension of the
// indices (as JAX builds them) and s32 indices.
#include <algorithm>
#include <set>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "ir/indexing.h"
#include "ir/prims/ad_rules.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

using Dims = std::vector<int64_t>;

bool Contains(const Dims& dims, int64_t d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

// Distinct entries in [0, bound), increasing when `sorted`.
absl::Status CheckDims(const Op& op, const Types& operands, std::string_view attr,
                       const Dims& dims, int64_t bound, bool sorted) {
  RETURN_IF_ERROR(CheckDimList(op, operands, attr, dims, bound));
  if (sorted && !std::is_sorted(dims.begin(), dims.end())) {
    return RuleError(op, operands, "{}=({}) must be sorted", attr, absl::StrJoin(dims, ","));
  }
  return absl::OkStatus();
}

absl::Status CheckDisjoint(const Op& op, const Types& operands, std::string_view a_name,
                           const Dims& a, std::string_view b_name, const Dims& b) {
  for (int64_t d : a) {
    if (Contains(b, d)) {
      return RuleError(op, operands, "{} and {} both contain dimension {}", a_name, b_name, d);
    }
  }
  return absl::OkStatus();
}

// The indices: any integer dtype, rank >= 1, the last dimension of size `index_size`; batching dims paired
// with the operand's, of equal sizes.
absl::Status CheckIndices(const Op& op, const Types& operands, const ShapedType& indices,
                          int64_t index_size, const Dims& operand_batching,
                          std::string_view indices_batching_name, const Dims& indices_batching,
                          const ShapedType& operand) {
  if (!IsInteger(indices.dtype)) {
    return RuleError(op, operands, "indices must have an integer dtype, got {}",
                     DTypeName(indices.dtype));
  }
  if (indices.rank() < 1 || indices.dims.back() != index_size) {
    return RuleError(op, operands, "the last dimension of the indices must have size {} (one "
                     "index per mapped operand dimension)", index_size);
  }
  RETURN_IF_ERROR(
      CheckDims(op, operands, indices_batching_name, indices_batching, indices.rank() - 1, false));
  if (indices_batching.size() != operand_batching.size()) {
    return RuleError(op, operands, "operand_batching_dims and {} differ in length",
                     indices_batching_name);
  }
  for (size_t i = 0; i < operand_batching.size(); ++i) {
    if (operand.dims[operand_batching[i]] != indices.dims[indices_batching[i]]) {
      return RuleError(op, operands, "batching dimension {} of the operand (size {}) and {} of "
                       "the indices (size {}) differ", operand_batching[i],
                       operand.dims[operand_batching[i]], indices_batching[i],
                       indices.dims[indices_batching[i]]);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckMode(const Op& op, const Types& operands, GatherScatterMode mode) {
  if (!GatherScatterMode_IsValid(mode)) {
    return RuleError(op, operands, "mode={} is not a known mode (CLIP, FILL_OR_DROP or "
                     "PROMISE_IN_BOUNDS)", static_cast<int>(mode));
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> Gather(const ShapeContext&, const Types& operands, const Op& op) {
  const GatherAttrs& a = op.gather();
  const ShapedType& x = operands[0];
  const ShapedType& indices = operands[1];
  const Dims offset = ToVector(a.offset_dims()), collapsed = ToVector(a.collapsed_slice_dims());
  const Dims index_map = ToVector(a.start_index_map());
  const Dims batching = ToVector(a.operand_batching_dims());
  const Dims sizes = ToVector(a.slice_sizes());
  RETURN_IF_ERROR(CheckMode(op, operands, a.mode()));
  RETURN_IF_ERROR(CheckLiteralFits(op, operands, "fill_value", a.fill_value(), x.dtype));
  if (a.has_fill_bits() && DTypeSize(x.dtype) < 8 &&
      a.fill_bits() >> (8 * DTypeSize(x.dtype)) != 0) {
    return RuleError(op, operands, "fill_bits={} has bits past the {} bits of {}", a.fill_bits(),
                     8 * DTypeSize(x.dtype), DTypeName(x.dtype));
  }
  if (a.has_fill_bits() && x.dtype == DType::kPred && a.fill_bits() > 1) {
    return RuleError(op, operands, "fill_bits={} is not a pred (0 or 1)", a.fill_bits());
  }
  if (static_cast<int64_t>(sizes.size()) != x.rank()) {
    return RuleError(op, operands, "slice_sizes has {} entries for rank {}", sizes.size(),
                     x.rank());
  }
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (sizes[d] < 0 || sizes[d] > x.dims[d]) {
      return RuleError(op, operands, "slice_sizes[{}]={} is not in [0, {}]", d, sizes[d],
                       x.dims[d]);
    }
  }
  RETURN_IF_ERROR(CheckDims(op, operands, "collapsed_slice_dims", collapsed, x.rank(), true));
  RETURN_IF_ERROR(CheckDims(op, operands, "operand_batching_dims", batching, x.rank(), true));
  RETURN_IF_ERROR(CheckDisjoint(op, operands, "collapsed_slice_dims", collapsed,
                                "operand_batching_dims", batching));
  for (int64_t d : collapsed) {
    if (sizes[d] != 1) {
      return RuleError(op, operands, "collapsed_slice_dims has dimension {}, whose slice size "
                       "{} is not 1", d, sizes[d]);
    }
  }
  for (int64_t d : batching) {
    if (sizes[d] != 1) {
      return RuleError(op, operands, "operand_batching_dims has dimension {}, whose slice size "
                       "{} is not 1", d, sizes[d]);
    }
  }
  RETURN_IF_ERROR(CheckDims(op, operands, "start_index_map", index_map, x.rank(), false));
  RETURN_IF_ERROR(CheckDisjoint(op, operands, "start_index_map", index_map,
                                "operand_batching_dims", batching));
  RETURN_IF_ERROR(CheckIndices(op, operands, indices, static_cast<int64_t>(index_map.size()),
                               batching, "start_indices_batching_dims",
                               ToVector(a.start_indices_batching_dims()), x));
  Dims window;  // the slice sizes of the operand dims the result keeps
  for (int64_t d : WindowDims(x.rank(), collapsed, batching)) window.push_back(sizes[d]);
  const int64_t out_rank = static_cast<int64_t>(window.size()) + indices.rank() - 1;
  if (offset.size() != window.size()) {
    return RuleError(op, operands, "offset_dims has {} entries; the slice keeps {} dimensions",
                     offset.size(), window.size());
  }
  RETURN_IF_ERROR(CheckDims(op, operands, "offset_dims", offset, out_rank, true));
  ShapedType out{x.dtype, {}};
  for (int64_t d = 0, w = 0, b = 0; d < out_rank; ++d) {
    out.dims.push_back(Contains(offset, d) ? window[w++] : indices.dims[b++]);
  }
  return Types{out};
}

absl::StatusOr<Types> Scatter(const ShapeContext&, const Types& operands, const Op& op) {
  const ScatterAttrs& a = op.scatter();
  const ShapedType& x = operands[0];
  const ShapedType& indices = operands[1];
  const ShapedType& updates = operands[2];
  const Dims window = ToVector(a.update_window_dims());
  const Dims inserted = ToVector(a.inserted_window_dims());
  const Dims index_map = ToVector(a.scatter_dims_to_operand_dims());
  const Dims batching = ToVector(a.operand_batching_dims());
  RETURN_IF_ERROR(CheckMode(op, operands, a.mode()));
  if (updates.dtype != x.dtype) {
    return RuleError(op, operands, "updates must have the operand's dtype");
  }
  const Prim prim = PrimOf(op);
  if (x.dtype == DType::kPred && (prim == Prim::kScatterAdd || prim == Prim::kScatterMul)) {
    return RuleError(op, operands, "the operand must be numeric, got pred");
  }
  RETURN_IF_ERROR(CheckDims(op, operands, "inserted_window_dims", inserted, x.rank(), true));
  RETURN_IF_ERROR(CheckDims(op, operands, "operand_batching_dims", batching, x.rank(), true));
  RETURN_IF_ERROR(CheckDisjoint(op, operands, "inserted_window_dims", inserted,
                                "operand_batching_dims", batching));
  RETURN_IF_ERROR(
      CheckDims(op, operands, "scatter_dims_to_operand_dims", index_map, x.rank(), false));
  RETURN_IF_ERROR(CheckDisjoint(op, operands, "scatter_dims_to_operand_dims", index_map,
                                "operand_batching_dims", batching));
  RETURN_IF_ERROR(CheckIndices(op, operands, indices, static_cast<int64_t>(index_map.size()),
                               batching, "scatter_indices_batching_dims",
                               ToVector(a.scatter_indices_batching_dims()), x));
  const int64_t expected_rank = static_cast<int64_t>(window.size()) + indices.rank() - 1;
  if (updates.rank() != expected_rank) {
    return RuleError(op, operands, "updates have rank {}; update_window_dims and the indices' "
                     "batch dimensions make {}", updates.rank(), expected_rank);
  }
  RETURN_IF_ERROR(CheckDims(op, operands, "update_window_dims", window, updates.rank(), true));
  if (window.size() + inserted.size() + batching.size() != static_cast<size_t>(x.rank())) {
    return RuleError(op, operands, "update_window_dims ({}), inserted_window_dims ({}) and "
                     "operand_batching_dims ({}) must add up to the operand's rank {}",
                     window.size(), inserted.size(), batching.size(), x.rank());
  }
  const Dims spans = WindowDims(x.rank(), inserted, batching);
  for (int64_t u = 0, b = 0, j = 0; u < updates.rank(); ++u) {
    if (Contains(window, u)) {
      const int64_t d = spans[j++];
      if (updates.dims[u] > x.dims[d]) {
        return RuleError(op, operands, "update window dimension {} (size {}) is larger than "
                         "operand dimension {} (size {})", u, updates.dims[u], d, x.dims[d]);
      }
    } else if (updates.dims[u] != indices.dims[b++]) {
      return RuleError(op, operands, "update scatter dimension {} (size {}) differs from the "
                       "indices' dimension {} (size {})", u, updates.dims[u], b - 1,
                       indices.dims[b - 1]);
    }
  }
  return Types{x};
}

// Registers an indexing primitive with its differentiation rules, IndexingAd(name).
void RegisterIndexing(Primitive primitive) {
  primitive.ad = IndexingAd(primitive.name);
  RegisterPrimitive(std::move(primitive));
}

const bool registered = [] {
  RegisterIndexing({"gather", PrimitiveKind::kStructural, 2, 2, Op::kGather, Gather});
  for (const char* name :
       {"scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"}) {
    RegisterIndexing({name, PrimitiveKind::kStructural, 3, 3, Op::kScatter, Scatter});
  }
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
