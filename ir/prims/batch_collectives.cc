// Batching rules (jax.vmap) of the collectives. Over mesh axes a collective acts on the local
// value, the batch dimension one more local dimension. Over vmap's axis_name it acts across the
// batch, as jax's batchers of psum_p, all_gather_p, psum_scatter, ppermute_p, all_to_all_p,
// pbroadcast and axis_index_p do: psum sums the batch (n * x for an unbatched x), all_gather
// stacks it, psum_scatter sums and splits it, ppermute permutes it, all_to_all exchanges chunks
// between its elements, axis_index is the element's position.
#include <string>
#include <unordered_map>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/autodiff.h"
#include "ir/batching.h"
#include "ir/collective_groups.h"
#include "ir/dtype.h"
#include "ir/prim.h"
#include "ir/prims/ad_rules.h"

namespace shardjit::ir::prims {
namespace {

using Dims = std::vector<int64_t>;
using BatchedOr = absl::StatusOr<BatchedValues>;

Op Named(std::string_view opcode) {
  Op op;
  op.set_opcode(std::string(opcode));
  return op;
}

// The op's axes before and after the vmapped one.
void SplitAxes(const BatchArgs& a, AxisList* before, AxisList* after) {
  bool seen = false;
  for (const std::string& axis : CollectiveAxes(a.op)) {
    if (axis == a.axis_name) {
      seen = true;
    } else {
      (seen ? after : before)->push_back(axis);
    }
  }
}

absl::Status NoAxisIndexGroups(const BatchArgs& a) {
  if (CollectiveAxisGroups(a.op).empty()) return absl::OkStatus();
  return absl::UnimplementedError(fmt::format(
      "vmap: axis_index_groups are not supported in a {} over the vmapped axis '{}' (as in JAX)",
      a.op.opcode(), a.axis_name));
}

// Collectives that move data over the vmapped axis alone.
absl::Status OnlyTheAxis(const BatchArgs& a) {
  RETURN_IF_ERROR(NoAxisIndexGroups(a));
  const AxisList axes = CollectiveAxes(a.op);
  if (axes.size() == 1) return absl::OkStatus();
  return absl::UnimplementedError(fmt::format(
      "vmap: a {} over the vmapped axis '{}' together with other axes ({}) is not supported",
      a.op.opcode(), a.axis_name, absl::StrJoin(axes, ", ")));
}

// The operand with its batch dimension at `to` (broadcast there when it has none).
absl::StatusOr<int64_t> At(AdEmitter& e, const BatchArgs& a, int64_t to) {
  return MoveBatchDim(e, a.operands[0], a.batch_dims[0], to, a.size);
}

// The collective `op` over `axes` instead of its own.
absl::StatusOr<int64_t> OverAxes(AdEmitter& e, Op op, const AxisList& axes, int64_t x) {
  op.mutable_all_reduce()->clear_axes();
  for (const std::string& name : axes) op.mutable_all_reduce()->add_axes(name);
  return e.Emit1(std::move(op), {x});
}

absl::StatusOr<int64_t> AxisScalar(AdEmitter& e, std::string_view opcode, const AxisList& axes) {
  Op op = Named(opcode);
  for (const std::string& name : axes) op.mutable_axis()->add_axes(name);
  return e.Emit1(std::move(op), {});
}

// ---- over mesh axes only: the batch dimension is a local one ----

BatchedOr Local(AdEmitter& e, const BatchArgs& a) {
  const Prim prim = PrimOf(a.op);
  if (prim == Prim::kPsum || prim == Prim::kPmean || prim == Prim::kPmax ||
      prim == Prim::kPmin || prim == Prim::kPpermute || prim == Prim::kPbroadcast ||
      prim == Prim::kPvary) {
    ASSIGN_OR_RETURN(int64_t result, e.Emit1(OpAttrs(a.op), a.operands));
    return BatchedValues{{result}, {a.batch_dims[0]}};
  }
  Op op = OpAttrs(a.op);
  switch (prim) {
    case Prim::kAllGather:
      op.mutable_all_gather()->set_axis(op.all_gather().axis() + 1);
      break;
    case Prim::kPsumScatter:
      op.mutable_psum_scatter()->set_scatter_dimension(op.psum_scatter().scatter_dimension() + 1);
      break;
    case Prim::kAllToAll:
      op.mutable_all_to_all()->set_split_axis(op.all_to_all().split_axis() + 1);
      op.mutable_all_to_all()->set_concat_axis(op.all_to_all().concat_axis() + 1);
      break;
    default:
      return absl::UnimplementedError(
          fmt::format("Batching rule for '{}' not implemented", a.op.opcode()));
  }
  ASSIGN_OR_RETURN(int64_t x, At(e, a, 0));
  ASSIGN_OR_RETURN(int64_t result, e.Emit1(std::move(op), {x}));
  return BatchedValues{{result}, {0}};
}

// ---- over the vmapped axis ----

// psum / pmean / pmax / pmin: reduced over the batch, then over the op's other axes.
BatchedOr Reduction(AdEmitter& e, const BatchArgs& a) {
  RETURN_IF_ERROR(NoAxisIndexGroups(a));
  const Prim prim = PrimOf(a.op);
  int64_t x = a.operands[0];
  if (prim == Prim::kPmean && !IsFloating(e.TypeOf(x).dtype)) {
    ASSIGN_OR_RETURN(x, e.Convert(x, DType::kF32));  // pmean of integers is f32, as jnp's mean
  }
  const int64_t d = a.batch_dims[0];
  if (d != kNotBatched) {
    Op reduce = Named(prim == Prim::kPmax   ? "reduce_max"
                      : prim == Prim::kPmin ? "reduce_min"
                                            : "reduce_sum");
    reduce.mutable_reduce()->add_axes(d);
    ASSIGN_OR_RETURN(x, e.Emit1(std::move(reduce), {x}));
    if (prim == Prim::kPmean) {
      ASSIGN_OR_RETURN(int64_t n, e.FullLike(static_cast<double>(a.size), x));
      ASSIGN_OR_RETURN(x, e.Binary("div", x, n));
    }
  } else if (prim == Prim::kPsum) {  // the same value summed over the batch
    ASSIGN_OR_RETURN(int64_t n, e.FullLike(static_cast<double>(a.size), x));
    ASSIGN_OR_RETURN(x, e.Binary("mul", x, n));
  }
  AxisList before, after;
  SplitAxes(a, &before, &after);
  before.insert(before.end(), after.begin(), after.end());
  if (!before.empty()) {
    ASSIGN_OR_RETURN(x, OverAxes(e, OpAttrs(a.op), before, x));
  }
  return BatchedValues{{x}, {kNotBatched}};
}

// axis_index: the linear index over the op's axes, the vmapped one's being the batch position.
BatchedOr AxisIndex(AdEmitter& e, const BatchArgs& a) {
  Op iota = Named("iota");
  iota.mutable_iota()->set_dtype(ToProto(DType::kS32));
  iota.mutable_iota()->add_shape(a.size);
  ASSIGN_OR_RETURN(int64_t index, e.Emit1(std::move(iota), {}));
  AxisList before, after;
  SplitAxes(a, &before, &after);
  auto plus_scaled = [&](int64_t scalar, int64_t factor, int64_t vec,
                         bool scalar_first) -> absl::StatusOr<int64_t> {
    // scalar_first: scalar * factor + vec; else vec * factor + scalar.
    ASSIGN_OR_RETURN(int64_t s, e.BroadcastInDim(scalar, {a.size}, {}));
    ASSIGN_OR_RETURN(int64_t f, e.BroadcastInDim(factor, {a.size}, {}));
    ASSIGN_OR_RETURN(int64_t scaled, e.Binary("mul", scalar_first ? s : vec, f));
    return e.Binary("add", scaled, scalar_first ? vec : s);
  };
  if (!before.empty()) {
    ASSIGN_OR_RETURN(int64_t outer, AxisScalar(e, "axis_index", before));
    ASSIGN_OR_RETURN(int64_t n, e.Full(static_cast<double>(a.size), {DType::kS32, {}}));
    ASSIGN_OR_RETURN(index, plus_scaled(outer, n, index, /*scalar_first=*/true));
  }
  if (!after.empty()) {
    ASSIGN_OR_RETURN(int64_t inner, AxisScalar(e, "axis_index", after));
    ASSIGN_OR_RETURN(int64_t stride, AxisScalar(e, "axis_size", after));
    ASSIGN_OR_RETURN(index, plus_scaled(inner, stride, index, /*scalar_first=*/false));
  }
  return BatchedValues{{index}, {0}};
}

BatchedOr AxisSize(AdEmitter& e, const BatchArgs& a) {
  ASSIGN_OR_RETURN(int64_t size, e.Full(static_cast<double>(a.size), {DType::kS32, {}}));
  AxisList before, after;
  SplitAxes(a, &before, &after);
  before.insert(before.end(), after.begin(), after.end());
  if (!before.empty()) {
    ASSIGN_OR_RETURN(int64_t others, AxisScalar(e, "axis_size", before));
    ASSIGN_OR_RETURN(size, e.Binary("mul", size, others));
  }
  return BatchedValues{{size}, {kNotBatched}};
}

// all_gather: the batch stacked at `axis` (merged into it when tiled); the same for every
// element.
BatchedOr AllGather(AdEmitter& e, const BatchArgs& a) {
  RETURN_IF_ERROR(OnlyTheAxis(a));
  const AllGatherAttrs& g = a.op.all_gather();
  ASSIGN_OR_RETURN(int64_t x, At(e, a, g.axis()));
  if (g.tiled()) {
    Dims shape = e.TypeOf(x).dims;
    shape[g.axis()] *= shape[g.axis() + 1];
    shape.erase(shape.begin() + g.axis() + 1);
    ASSIGN_OR_RETURN(x, e.Reshape(x, shape));
  }
  return BatchedValues{{x}, {kNotBatched}};
}

// psum_scatter: the batch summed, element i keeping block i of the scatter dimension.
BatchedOr PsumScatter(AdEmitter& e, const BatchArgs& a) {
  RETURN_IF_ERROR(OnlyTheAxis(a));
  const PsumScatterAttrs& p = a.op.psum_scatter();
  int64_t x = a.operands[0];
  if (a.batch_dims[0] != kNotBatched) {
    ASSIGN_OR_RETURN(x, e.ReduceSum(x, {a.batch_dims[0]}));
  } else {
    ASSIGN_OR_RETURN(int64_t n, e.FullLike(static_cast<double>(a.size), x));
    ASSIGN_OR_RETURN(x, e.Binary("mul", x, n));
  }
  const int64_t s = p.scatter_dimension();
  if (p.tiled()) {
    Dims shape = e.TypeOf(x).dims;
    shape[s] /= a.size;
    shape.insert(shape.begin() + s, a.size);
    ASSIGN_OR_RETURN(x, e.Reshape(x, shape));
  }
  return BatchedValues{{x}, {s}};
}

// ppermute: element t gets the value of the element that sends to it, zeros if none does.
BatchedOr Ppermute(AdEmitter& e, const BatchArgs& a) {
  RETURN_IF_ERROR(OnlyTheAxis(a));
  ASSIGN_OR_RETURN(int64_t x, At(e, a, 0));
  const ShapedType type = e.TypeOf(x);
  std::vector<int64_t> source_of(a.size, -1);
  for (const PermutePair& p : a.op.ppermute().perm()) source_of[p.target()] = p.source();
  ShapedType row = type;
  row.dims[0] = 1;
  Op concat = Named("concatenate");
  concat.mutable_concatenate()->set_dimension(0);
  std::vector<int64_t> rows;
  for (int64_t t = 0; t < a.size; ++t) {
    if (source_of[t] < 0) {
      ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, row));
      rows.push_back(zeros);
      continue;
    }
    Op slice = Named("slice");
    for (int64_t d = 0; d < type.rank(); ++d) {
      slice.mutable_slice()->add_start_indices(d == 0 ? source_of[t] : 0);
      slice.mutable_slice()->add_limit_indices(d == 0 ? source_of[t] + 1 : type.dims[d]);
    }
    ASSIGN_OR_RETURN(int64_t r, e.Emit1(std::move(slice), {x}));
    rows.push_back(r);
  }
  ASSIGN_OR_RETURN(int64_t out, e.Emit1(std::move(concat), rows));
  return BatchedValues{{out}, {0}};
}

// pbroadcast: every element gets the source element's value.
BatchedOr Pbroadcast(AdEmitter& e, const BatchArgs& a) {
  RETURN_IF_ERROR(OnlyTheAxis(a));
  if (a.batch_dims[0] == kNotBatched) return BatchedValues{{a.operands[0]}, {kNotBatched}};
  ASSIGN_OR_RETURN(int64_t x, At(e, a, 0));
  const ShapedType type = e.TypeOf(x);
  const int64_t source = a.op.pbroadcast().source();
  Op slice = Named("slice");
  for (int64_t d = 0; d < type.rank(); ++d) {
    slice.mutable_slice()->add_start_indices(d == 0 ? source : 0);
    slice.mutable_slice()->add_limit_indices(d == 0 ? source + 1 : type.dims[d]);
  }
  ASSIGN_OR_RETURN(int64_t row, e.Emit1(std::move(slice), {x}));
  ASSIGN_OR_RETURN(int64_t out, e.Reshape(row, Dims(type.dims.begin() + 1, type.dims.end())));
  return BatchedValues{{out}, {kNotBatched}};
}

// all_to_all: element j gets, from every element b in order, chunk j of b's split axis,
// concatenated along the concat axis (a new dimension of the batch size when not tiled).
BatchedOr AllToAll(AdEmitter& e, const BatchArgs& a) {
  RETURN_IF_ERROR(OnlyTheAxis(a));
  const AllToAllAttrs& t = a.op.all_to_all();
  const int64_t split = t.split_axis(), concat = t.concat_axis(), n = a.size;
  ASSIGN_OR_RETURN(int64_t x, At(e, a, 0));
  Dims local = e.TypeOf(x).dims;
  local.erase(local.begin());
  const int64_t rank = static_cast<int64_t>(local.size());
  // Labels of x's dimensions: kB the batch (the source), kJ the chunk (the destination), k >= 0
  // local dimension k (the split one then holding one chunk).
  constexpr int64_t kB = -1, kJ = -2;
  std::vector<int64_t> labels{kB};
  if (t.tiled()) {
    Dims shape{n};
    for (int64_t k = 0; k < rank; ++k) {
      if (k == split) {
        labels.push_back(kJ);
        shape.push_back(n);
        shape.push_back(local[k] / n);
      } else {
        shape.push_back(local[k]);
      }
      labels.push_back(k);
    }
    ASSIGN_OR_RETURN(x, e.Reshape(x, shape));
  } else {
    for (int64_t k = 0; k < rank; ++k) labels.push_back(k == split ? kJ : k);
  }
  // The destination first, then the local dimensions with the sources just before the concat
  // one (tiled: merged into it) or at position `concat` (a new dimension).
  std::vector<int64_t> order{kJ};
  if (t.tiled()) {
    for (int64_t k = 0; k < rank; ++k) {
      if (k == concat) order.push_back(kB);
      order.push_back(k);
    }
  } else {
    std::vector<int64_t> rest;
    for (int64_t k = 0; k < rank; ++k) {
      if (k != split) rest.push_back(k);
    }
    rest.insert(rest.begin() + concat, kB);
    order.insert(order.end(), rest.begin(), rest.end());
  }
  Dims perm;
  for (int64_t label : order) {
    for (size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] == label) perm.push_back(static_cast<int64_t>(i));
    }
  }
  ASSIGN_OR_RETURN(x, e.Transpose(x, perm));
  if (t.tiled()) {
    Dims shape{n};
    for (int64_t k = 0; k < rank; ++k) {
      const int64_t size = k == split ? local[k] / n : local[k];
      shape.push_back(k == concat ? size * n : size);
    }
    ASSIGN_OR_RETURN(x, e.Reshape(x, shape));
  }
  return BatchedValues{{x}, {0}};
}

// pvary over the vmapped axis: the value, unchanged (a cast of its type).
BatchedOr Pvary(AdEmitter& e, const BatchArgs& a) {
  AxisList before, after;
  SplitAxes(a, &before, &after);
  before.insert(before.end(), after.begin(), after.end());
  int64_t x = a.operands[0];
  if (!before.empty()) {
    Op op = Named("pvary");
    for (const std::string& name : before) op.mutable_axis()->add_axes(name);
    ASSIGN_OR_RETURN(x, e.Emit1(std::move(op), {x}));
  }
  return BatchedValues{{x}, {a.batch_dims[0]}};
}

BatchRule Rule(BatchedOr (*across)(AdEmitter&, const BatchArgs&)) {
  return [across](AdEmitter& e, const BatchArgs& a) -> BatchedOr {
    if (IsCollectiveOver(a.op, a.axis_name)) return across(e, a);
    return Local(e, a);
  };
}

}  // namespace

BatchRule CollectiveBatch(std::string_view name) {
  static const auto* rules = new std::unordered_map<std::string, BatchRule>{
      {"psum", Rule(Reduction)},
      {"pmean", Rule(Reduction)},
      {"pmax", Rule(Reduction)},
      {"pmin", Rule(Reduction)},
      {"all_gather", Rule(AllGather)},
      {"psum_scatter", Rule(PsumScatter)},
      {"ppermute", Rule(Ppermute)},
      {"pbroadcast", Rule(Pbroadcast)},
      {"all_to_all", Rule(AllToAll)},
      {"axis_index", Rule(AxisIndex)},
      {"axis_size", Rule(AxisSize)},
      {"pvary", Rule(Pvary)},
  };
  auto it = rules->find(std::string(name));
  return it == rules->end() ? BatchRule() : it->second;
}

}  // namespace shardjit::ir::prims
