// Batching rules (jax.vmap) of the primitives: the elementwise ones on operands brought to one
// batched shape, the others with their dimension attributes shifted past the batch dimension
// (which the rules move to the front), dot_general with the batch dimension as a batch or free
// dimension (the collectives' are in batch_collectives.cc).
#include <string>
#include <unordered_map>

#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/autodiff.h"
#include "ir/batching.h"
#include "ir/prim.h"
#include "ir/prims/ad_rules.h"

namespace shardjit::ir::prims {
namespace {

using Dims = std::vector<int64_t>;
using BatchedOr = absl::StatusOr<BatchedValues>;

// Every batched operand with its batch dimension moved to the front; unbatched ones as they are
// or, with `broadcast_unbatched`, broadcast along a new front dimension.
absl::StatusOr<Dims> FrontBatched(AdEmitter& e, const BatchArgs& a, bool broadcast_unbatched) {
  Dims out;
  for (size_t i = 0; i < a.operands.size(); ++i) {
    if (a.batch_dims[i] == kNotBatched && !broadcast_unbatched) {
      out.push_back(a.operands[i]);
      continue;
    }
    ASSIGN_OR_RETURN(int64_t x, MoveBatchDim(e, a.operands[i], a.batch_dims[i], 0, a.size));
    out.push_back(x);
  }
  return out;
}

// The op on `operands`, every result batched along dimension 0.
BatchedOr EmitAllFront(AdEmitter& e, Op op, const Dims& operands) {
  ASSIGN_OR_RETURN(Dims results, e.Emit(std::move(op), operands));
  return BatchedValues{results, Dims(results.size(), 0)};
}

void Shift(google::protobuf::RepeatedField<int64_t>* dims, int64_t by = 1) {
  for (int64_t& d : *dims) d += by;
}

void Prepend(google::protobuf::RepeatedField<int64_t>* dims, int64_t value) {
  dims->Add(value);
  for (int i = dims->size() - 1; i > 0; --i) dims->SwapElements(i, i - 1);
}

BatchedOr Elementwise(AdEmitter& e, const BatchArgs& a) {
  // The per-example shape: that of the operand of highest rank.
  Dims shape;
  for (size_t i = 0; i < a.operands.size(); ++i) {
    Dims dims = e.TypeOf(a.operands[i]).dims;
    if (a.batch_dims[i] != kNotBatched) dims.erase(dims.begin() + a.batch_dims[i]);
    if (dims.size() > shape.size()) shape = dims;
  }
  Dims full = shape;
  full.insert(full.begin(), a.size);
  const Prim prim = PrimOf(a.op);
  Dims operands;
  for (size_t i = 0; i < a.operands.size(); ++i) {
    const int64_t x = a.operands[i];
    const int64_t rank = e.TypeOf(x).rank() - (a.batch_dims[i] == kNotBatched ? 0 : 1);
    // select's predicate and clamp's bounds may stay scalars.
    const bool scalar_ok = (prim == Prim::kSelect && i == 0) ||
                           (prim == Prim::kClamp && (i == 0 || i == 2));
    if (a.batch_dims[i] == kNotBatched && rank == 0 && scalar_ok) {
      operands.push_back(x);
      continue;
    }
    if (a.batch_dims[i] == kNotBatched || rank < static_cast<int64_t>(shape.size())) {
      // To the full batched shape: a batched scalar along dimension 0, the others along theirs.
      int64_t moved = x;
      Dims dims;
      if (a.batch_dims[i] != kNotBatched) {
        ASSIGN_OR_RETURN(moved, MoveBatchDim(e, x, a.batch_dims[i], 0, a.size));
        dims.push_back(0);
      }
      for (int64_t d = 0; d < rank; ++d) dims.push_back(static_cast<int64_t>(full.size()) - rank + d);
      ASSIGN_OR_RETURN(int64_t wide, e.BroadcastInDim(moved, full, dims));
      operands.push_back(wide);
      continue;
    }
    ASSIGN_OR_RETURN(int64_t moved, MoveBatchDim(e, x, a.batch_dims[i], 0, a.size));
    operands.push_back(moved);
  }
  return EmitAllFront(e, OpAttrs(a.op), operands);
}

// Ops of one operand whose dimension attributes shift past a front batch dimension.
BatchRule OneOperand(std::function<void(Op&, int64_t size)> shift) {
  return [shift](AdEmitter& e, const BatchArgs& a) -> BatchedOr {
    ASSIGN_OR_RETURN(Dims operands, FrontBatched(e, a, /*broadcast_unbatched=*/true));
    Op op = OpAttrs(a.op);
    shift(op, a.size);
    return EmitAllFront(e, std::move(op), operands);
  };
}

BatchedOr DotGeneral(AdEmitter& e, const BatchArgs& a) {
  ASSIGN_OR_RETURN(Dims operands, FrontBatched(e, a, /*broadcast_unbatched=*/false));
  Op op = OpAttrs(a.op);
  DotGeneralAttrs* d = op.mutable_dot_general();
  const bool lhs = a.batch_dims[0] != kNotBatched, rhs = a.batch_dims[1] != kNotBatched;
  if (lhs) {
    Shift(d->mutable_lhs_contracting_dims());
    Shift(d->mutable_lhs_batch_dims());
  }
  if (rhs) {
    Shift(d->mutable_rhs_contracting_dims());
    Shift(d->mutable_rhs_batch_dims());
  }
  const int64_t nb = d->lhs_batch_dims_size();
  int64_t out_dim = 0;
  if (lhs && rhs) {  // a new batch dimension, first in the result
    Prepend(d->mutable_lhs_batch_dims(), 0);
    Prepend(d->mutable_rhs_batch_dims(), 0);
  } else if (lhs) {  // the first free dimension of the lhs
    out_dim = nb;
  } else {  // the first free dimension of the rhs, after the lhs's
    const int64_t lhs_free =
        e.TypeOf(operands[0]).rank() - nb - d->lhs_contracting_dims_size();
    out_dim = nb + lhs_free;
  }
  ASSIGN_OR_RETURN(int64_t result, e.Emit1(std::move(op), operands));
  return BatchedValues{{result}, {out_dim}};
}

// gather (jax's _gather_batching_rule): a batched operand adds a leading offset dimension taken
// whole; batched indices add a leading batch position; both, an operand/indices batching pair.
BatchedOr Gather(AdEmitter& e, const BatchArgs& a) {
  ASSIGN_OR_RETURN(Dims operands, FrontBatched(e, a, /*broadcast_unbatched=*/false));
  const bool operand = a.batch_dims[0] != kNotBatched, indices = a.batch_dims[1] != kNotBatched;
  Op op = OpAttrs(a.op);
  GatherAttrs* g = op.mutable_gather();
  if (operand) {
    Shift(g->mutable_collapsed_slice_dims());
    Shift(g->mutable_start_index_map());
    Shift(g->mutable_operand_batching_dims());
  }
  if (indices) Shift(g->mutable_start_indices_batching_dims());
  Shift(g->mutable_offset_dims());
  if (operand && indices) {
    Prepend(g->mutable_operand_batching_dims(), 0);
    Prepend(g->mutable_start_indices_batching_dims(), 0);
    Prepend(g->mutable_slice_sizes(), 1);
  } else if (operand) {
    Prepend(g->mutable_offset_dims(), 0);
    Prepend(g->mutable_slice_sizes(), a.size);
  }
  return EmitAllFront(e, std::move(op), operands);
}

// The scatters (jax's _scatter_batching_rule): operand and updates batched along dimension 0
// (the operand broadcast if it is not); unbatched indices make that a leading window
// dimension, batched ones a leading operand/indices batching pair.
BatchedOr Scatter(AdEmitter& e, const BatchArgs& a) {
  ASSIGN_OR_RETURN(int64_t operand, MoveBatchDim(e, a.operands[0], a.batch_dims[0], 0, a.size));
  ASSIGN_OR_RETURN(int64_t updates, MoveBatchDim(e, a.operands[2], a.batch_dims[2], 0, a.size));
  int64_t indices = a.operands[1];
  Op op = OpAttrs(a.op);
  ScatterAttrs* s = op.mutable_scatter();
  Shift(s->mutable_inserted_window_dims());
  Shift(s->mutable_scatter_dims_to_operand_dims());
  Shift(s->mutable_operand_batching_dims());
  if (a.batch_dims[1] == kNotBatched) {
    Shift(s->mutable_update_window_dims());
    Prepend(s->mutable_update_window_dims(), 0);
  } else {
    ASSIGN_OR_RETURN(indices, MoveBatchDim(e, indices, a.batch_dims[1], 0, a.size));
    Shift(s->mutable_update_window_dims());
    Shift(s->mutable_scatter_indices_batching_dims());
    Prepend(s->mutable_operand_batching_dims(), 0);
    Prepend(s->mutable_scatter_indices_batching_dims(), 0);
  }
  return EmitAllFront(e, std::move(op), {operand, indices, updates});
}

// The start indices of a dynamic slice (operands from `first` on) as one [B, rank] index array
// in their widest dtype (s32 or s64).
absl::StatusOr<int64_t> BatchedStarts(AdEmitter& e, const BatchArgs& a, size_t first) {
  DType index_dtype = DType::kS32;
  for (size_t i = first; i < a.operands.size(); ++i) {
    if (DTypeSize(e.TypeOf(a.operands[i]).dtype) == 8) index_dtype = DType::kS64;
  }
  Dims columns;  // [B, 1] per start
  for (size_t i = first; i < a.operands.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t start, e.Convert(a.operands[i], index_dtype));
    ASSIGN_OR_RETURN(int64_t batched, MoveBatchDim(e, start, a.batch_dims[i], 0, a.size));
    ASSIGN_OR_RETURN(int64_t column, e.Reshape(batched, {a.size, 1}));
    columns.push_back(column);
  }
  Op concat;
  concat.set_opcode("concatenate");
  concat.mutable_concatenate()->set_dimension(1);
  return e.Emit1(std::move(concat), columns);
}

// dynamic_slice with batched start indices: a gather of one window per batch element (CLIP
// clamps the windows as dynamic_slice clamps its starts).
BatchedOr DynamicSliceAsGather(AdEmitter& e, const BatchArgs& a) {
  const int64_t rank = static_cast<int64_t>(a.operands.size()) - 1;  // one start per dim
  ASSIGN_OR_RETURN(int64_t indices, BatchedStarts(e, a, 1));
  Op gather;
  gather.set_opcode("gather");
  GatherAttrs* g = gather.mutable_gather();
  for (int64_t d = 0; d < rank; ++d) {
    g->add_offset_dims(d);  // per element: the window alone (Gather adds the batch)
    g->add_start_index_map(d);
    g->add_slice_sizes(a.op.dynamic_slice().slice_sizes(d));
  }
  g->set_mode(CLIP);
  return Gather(e, BatchArgs{gather, {a.operands[0], indices}, {a.batch_dims[0], 0}, a.size});
}

// dynamic_update_slice with batched start indices: a scatter of one window per batch element
// (CLIP clamps the windows as dynamic_update_slice clamps its starts), as JAX does.
BatchedOr DynamicUpdateSliceAsScatter(AdEmitter& e, const BatchArgs& a) {
  const int64_t rank = static_cast<int64_t>(a.operands.size()) - 2;
  ASSIGN_OR_RETURN(int64_t indices, BatchedStarts(e, a, 2));
  Op scatter;
  scatter.set_opcode("scatter");
  ScatterAttrs* s = scatter.mutable_scatter();
  for (int64_t d = 0; d < rank; ++d) {
    s->add_update_window_dims(d);  // per element: the update alone (Scatter adds the batch)
    s->add_scatter_dims_to_operand_dims(d);
  }
  s->set_mode(CLIP);
  return Scatter(e, BatchArgs{scatter,
                              {a.operands[0], indices, a.operands[1]},
                              {a.batch_dims[0], 0, a.batch_dims[1]},
                              a.size});
}

// dynamic_slice / dynamic_update_slice with unbatched start indices: the batch dimension is
// taken whole, from 0.
BatchedOr DynamicSlicing(AdEmitter& e, const BatchArgs& a) {
  const size_t arrays = PrimOf(a.op) == Prim::kDynamicSlice ? 1 : 2;
  for (size_t i = arrays; i < a.operands.size(); ++i) {
    if (a.batch_dims[i] == kNotBatched) continue;
    return arrays == 1 ? DynamicSliceAsGather(e, a) : DynamicUpdateSliceAsScatter(e, a);
  }
  Dims operands;
  for (size_t i = 0; i < arrays; ++i) {
    ASSIGN_OR_RETURN(int64_t x, MoveBatchDim(e, a.operands[i], a.batch_dims[i], 0, a.size));
    operands.push_back(x);
  }
  ASSIGN_OR_RETURN(int64_t zero, e.Full(0, e.TypeOf(a.operands[arrays])));
  operands.push_back(zero);
  operands.insert(operands.end(), a.operands.begin() + arrays, a.operands.end());
  Op op = OpAttrs(a.op);
  if (arrays == 1) Prepend(op.mutable_dynamic_slice()->mutable_slice_sizes(), a.size);
  return EmitAllFront(e, std::move(op), operands);
}

BatchedOr Pad(AdEmitter& e, const BatchArgs& a) {
  if (a.batch_dims[1] != kNotBatched) {
    return absl::UnimplementedError("Batching rule for 'pad' with a batched padding value not "
                                    "implemented");
  }
  ASSIGN_OR_RETURN(int64_t x, MoveBatchDim(e, a.operands[0], a.batch_dims[0], 0, a.size));
  Op op = OpAttrs(a.op);
  auto* config = op.mutable_pad()->mutable_padding_config();
  config->Add();
  for (int i = config->size() - 1; i > 0; --i) config->SwapElements(i, i - 1);
  return EmitAllFront(e, std::move(op), {x, a.operands[1]});
}

const std::unordered_map<std::string, BatchRule>& Rules() {
  static const auto* rules = [] {
    auto* m = new std::unordered_map<std::string, BatchRule>();
    auto& r = *m;
    r["broadcast_in_dim"] = OneOperand([](Op& op, int64_t size) {
      auto* b = op.mutable_broadcast_in_dim();
      Shift(b->mutable_broadcast_dimensions());
      Prepend(b->mutable_broadcast_dimensions(), 0);
      Prepend(b->mutable_shape(), size);
    });
    r["reshape"] = OneOperand([](Op& op, int64_t size) {
      Prepend(op.mutable_reshape()->mutable_new_sizes(), size);
    });
    r["transpose"] = OneOperand([](Op& op, int64_t) {
      Shift(op.mutable_transpose()->mutable_permutation());
      Prepend(op.mutable_transpose()->mutable_permutation(), 0);
    });
    for (const char* name : {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
                             "reduce_and", "reduce_or"}) {
      r[name] = OneOperand([](Op& op, int64_t) { Shift(op.mutable_reduce()->mutable_axes()); });
    }
    r["rev"] = OneOperand([](Op& op, int64_t) { Shift(op.mutable_rev()->mutable_dimensions()); });
    r["slice"] = OneOperand([](Op& op, int64_t size) {
      SliceAttrs* s = op.mutable_slice();
      Prepend(s->mutable_start_indices(), 0);
      Prepend(s->mutable_limit_indices(), size);
      if (s->strides_size() > 0) Prepend(s->mutable_strides(), 1);
    });
    r["concatenate"] = OneOperand([](Op& op, int64_t) {
      op.mutable_concatenate()->set_dimension(op.concatenate().dimension() + 1);
    });
    for (const char* name : {"argmax", "argmin"}) {
      r[name] = OneOperand([](Op& op, int64_t) {
        op.mutable_arg_min_max()->set_axis(op.arg_min_max().axis() + 1);
      });
    }
    for (const char* name : {"cumsum", "cumprod", "cummax", "cummin"}) {
      r[name] = OneOperand([](Op& op, int64_t) {
        op.mutable_cumulative()->set_axis(op.cumulative().axis() + 1);
      });
    }
    r["sort"] = OneOperand([](Op& op, int64_t) {
      op.mutable_sort()->set_dimension(op.sort().dimension() + 1);
    });
    r["top_k"] = OneOperand([](Op& op, int64_t) {
      op.mutable_top_k()->set_axis(op.top_k().axis() + 1);
    });
    // The batch dimension is not split over the mesh.
    r["with_sharding_constraint"] = OneOperand([](Op& op, int64_t) {
      auto* dims = op.mutable_with_sharding_constraint()->mutable_sharding()->mutable_dims();
      dims->Add();
      for (int i = dims->size() - 1; i > 0; --i) dims->SwapElements(i, i - 1);
    });
    r["dot_general"] = DotGeneral;
    r["gather"] = Gather;
    for (const char* name : {"scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"}) {
      r[name] = Scatter;
    }
    r["dynamic_slice"] = DynamicSlicing;
    r["dynamic_update_slice"] = DynamicSlicing;
    r["pad"] = Pad;
    return m;
  }();
  return *rules;
}

}  // namespace

BatchRule ElementwiseBatch() { return Elementwise; }

BatchRule BatchRuleFor(std::string_view name) {
  auto it = Rules().find(std::string(name));
  return it == Rules().end() ? BatchRule() : it->second;
}

}  // namespace shardjit::ir::prims
