#include "ir/batching.h"

#include <unordered_map>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/batching_internal.h"
#include "ir/collective_groups.h"
#include "ir/primitive.h"
#include "ir/regions.h"

namespace shardjit::ir {

bool IsCollectiveOver(const Op& op, std::string_view axis_name) {
  if (axis_name.empty() || !IsCollective(PrimOf(op))) return false;
  for (const std::string& a : CollectiveAxes(op)) {
    if (a == axis_name) return true;
  }
  return false;
}

absl::StatusOr<int64_t> MoveBatchDim(AdEmitter& e, int64_t x, int64_t batch_dim, int64_t to,
                                     int64_t size) {
  const ShapedType type = e.TypeOf(x);
  if (batch_dim == kNotBatched) {
    std::vector<int64_t> shape = type.dims, dims;
    shape.insert(shape.begin() + to, size);
    for (int64_t d = 0; d < type.rank(); ++d) dims.push_back(d < to ? d : d + 1);
    return e.BroadcastInDim(x, shape, dims);
  }
  if (batch_dim == to) return x;
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < type.rank(); ++d) {
    if (d != batch_dim) perm.push_back(d);
  }
  perm.insert(perm.begin() + to, batch_dim);
  return e.Transpose(x, perm);
}

namespace {

// A loop carry of `type` (batched along `dim`, or kNotBatched) as the batched loop carries it:
// along dimension 0 when `batched`, else as it is.
ShapedType CarryType(ShapedType type, int64_t dim, bool batched, int64_t size) {
  if (dim != kNotBatched) type.dims.erase(type.dims.begin() + dim);
  if (batched) type.dims.insert(type.dims.begin(), size);
  return type;
}

// Adds the params of a batched loop region: the carries `operands` of the batch dims `dims`, the
// `batched` ones along dimension 0; returns their batch dims in the region.
std::vector<int64_t> AddCarryParams(FunctionBuilder& b, const std::vector<int64_t>& operands,
                                    const std::vector<int64_t>& dims,
                                    const std::vector<bool>& batched, int64_t size,
                                    std::vector<int64_t>* params) {
  std::vector<int64_t> param_dims;
  for (size_t i = 0; i < operands.size(); ++i) {
    params->push_back(b.AddParam(CarryType(b.TypeOf(operands[i]), dims[i], batched[i], size),
                                 b.VmaOf(operands[i])));
    param_dims.push_back(batched[i] ? 0 : kNotBatched);
  }
  return param_dims;
}

// The loop's initial carries: the `batched` ones moved (or broadcast) to dimension 0.
absl::StatusOr<std::vector<int64_t>> BatchedCarries(AdEmitter& e,
                                                    const std::vector<int64_t>& values,
                                                    const std::vector<int64_t>& dims,
                                                    const std::vector<bool>& batched,
                                                    int64_t size) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!batched[i]) {
      out.push_back(values[i]);
      continue;
    }
    ASSIGN_OR_RETURN(int64_t x, MoveBatchDim(e, values[i], dims[i], 0, size));
    out.push_back(x);
  }
  return out;
}

// The batched loop op `loop` run on `init`: its results, the `batched` ones along dimension 0.
absl::StatusOr<BatchedValues> RunLoop(FunctionBuilder& b, Op loop,
                                      const std::vector<int64_t>& init,
                                      const std::vector<bool>& batched) {
  BatchedValues out;
  ASSIGN_OR_RETURN(out.values, b.AddOp(std::move(loop), init));
  for (bool x : batched) out.batch_dims.push_back(x ? 0 : kNotBatched);
  return out;
}

// Batched fori_loop: the carries that are batched, or become so in the body (found by batching
// the body until no new one appears), are carried batched along dimension 0.
absl::StatusOr<BatchedValues> BatchForiLoop(FunctionBuilder& b, const Op& op,
                                            const std::vector<int64_t>& operands,
                                            const std::vector<int64_t>& dims, int64_t size,
                                            const std::vector<BatchedCapture>& captures,
                                            std::string_view axis_name) {
  const Region& body = op.fori_loop().body();
  const size_t n = operands.size();
  std::vector<bool> batched(n);
  for (size_t i = 0; i < n; ++i) batched[i] = dims[i] != kNotBatched;
  AdEmitter e(b);
  // The body on the current batched set, in the open region: the index, then the carries.
  auto run_body = [&](std::vector<int64_t>* params) -> absl::StatusOr<BatchedValues> {
    params->push_back(b.AddParam({DType::kS32, {}}));
    std::vector<int64_t> body_dims{kNotBatched};
    for (int64_t d : AddCarryParams(b, operands, dims, batched, size, params)) {
      body_dims.push_back(d);
    }
    return EmitBatched(b, body, *params, body_dims, size, captures, axis_name);
  };
  for (bool changed = true; changed;) {  // fixpoint, in scratch regions
    changed = false;
    RegionScope scratch(b, /*spmd=*/false);
    std::vector<int64_t> params;
    ASSIGN_OR_RETURN(BatchedValues out, run_body(&params));
    for (size_t i = 0; i < n; ++i) {
      if (!batched[i] && out.batch_dims[i] != kNotBatched) batched[i] = changed = true;
    }
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> init, BatchedCarries(e, operands, dims, batched, size));
  Op loop = OpAttrs(op);
  RegionScope region(b, /*spmd=*/false);
  std::vector<int64_t> params;
  ASSIGN_OR_RETURN(BatchedValues out, run_body(&params));
  ASSIGN_OR_RETURN(std::vector<int64_t> results,
                   BatchedCarries(e, out.values, out.batch_dims, batched, size));
  *loop.mutable_fori_loop()->mutable_body() = region.Close(results);
  return RunLoop(b, std::move(loop), init, batched);
}

// Batched while_loop (jax's _while_loop_batching_rule): the carries that are or become batched
// are carried batched (a fixpoint over the body and the condition); when the condition itself
// is batched, every carry is, the loop runs while any element's condition holds, and elements
// whose condition no longer holds keep their carries (selected).
absl::StatusOr<BatchedValues> BatchWhileLoop(FunctionBuilder& b, const Op& op,
                                             const std::vector<int64_t>& operands,
                                             const std::vector<int64_t>& dims, int64_t size,
                                             const std::vector<BatchedCapture>& captures,
                                             std::string_view axis_name) {
  const Region& cond = op.while_loop().cond();
  const Region& body = op.while_loop().body();
  const size_t n = operands.size();
  std::vector<bool> batched(n);
  for (size_t i = 0; i < n; ++i) batched[i] = dims[i] != kNotBatched;
  bool pred_batched = false;
  AdEmitter e(b);
  for (bool changed = true; changed;) {  // fixpoint, in scratch regions
    changed = false;
    RegionScope scratch(b, /*spmd=*/false);
    std::vector<int64_t> params;
    const std::vector<int64_t> param_dims = AddCarryParams(b, operands, dims, batched, size, &params);
    ASSIGN_OR_RETURN(BatchedValues pred,
                     EmitBatched(b, cond, params, param_dims, size, captures, axis_name));
    ASSIGN_OR_RETURN(BatchedValues out,
                     EmitBatched(b, body, params, param_dims, size, captures, axis_name));
    if (pred.batch_dims[0] != kNotBatched && !pred_batched) pred_batched = changed = true;
    for (size_t i = 0; i < n; ++i) {
      const bool now = batched[i] || out.batch_dims[i] != kNotBatched || pred_batched;
      if (now != batched[i]) batched[i] = changed = true;
    }
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> init, BatchedCarries(e, operands, dims, batched, size));
  // The condition per element, [size] (or a scalar when unbatched), of carries `params`.
  auto predicate = [&](const std::vector<int64_t>& params,
                       const std::vector<int64_t>& param_dims) -> absl::StatusOr<int64_t> {
    ASSIGN_OR_RETURN(BatchedValues p,
                     EmitBatched(b, cond, params, param_dims, size, captures, axis_name));
    if (p.batch_dims[0] == kNotBatched) return p.values[0];
    return MoveBatchDim(e, p.values[0], p.batch_dims[0], 0, size);
  };
  Op loop = OpAttrs(op);
  {
    RegionScope region(b, /*spmd=*/false);
    std::vector<int64_t> params;
    const std::vector<int64_t> param_dims = AddCarryParams(b, operands, dims, batched, size, &params);
    ASSIGN_OR_RETURN(int64_t p, predicate(params, param_dims));
    if (pred_batched) {  // while any element's holds
      Op any;
      any.set_opcode("reduce_or");
      any.mutable_reduce()->add_axes(0);
      ASSIGN_OR_RETURN(p, e.Emit1(std::move(any), {p}));
    }
    *loop.mutable_while_loop()->mutable_cond() = region.Close({p});
  }
  RegionScope region(b, /*spmd=*/false);
  std::vector<int64_t> params;
  const std::vector<int64_t> param_dims = AddCarryParams(b, operands, dims, batched, size, &params);
  ASSIGN_OR_RETURN(BatchedValues out,
                   EmitBatched(b, body, params, param_dims, size, captures, axis_name));
  ASSIGN_OR_RETURN(std::vector<int64_t> results,
                   BatchedCarries(e, out.values, out.batch_dims, batched, size));
  if (pred_batched) {  // finished elements keep their carries
    ASSIGN_OR_RETURN(int64_t live, predicate(params, param_dims));
    for (size_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(int64_t mask, e.BroadcastInDim(live, e.TypeOf(results[i]).dims, {0}));
      ASSIGN_OR_RETURN(results[i], e.Select(mask, results[i], params[i]));
    }
  }
  *loop.mutable_while_loop()->mutable_body() = region.Close(results);
  return RunLoop(b, std::move(loop), init, batched);
}

// Batched cond: on an unbatched index, a cond of the batched branches (every result batched
// along dimension 0); on a batched index, every branch computed and the results selected per
// batch element by the clamped index.
absl::StatusOr<BatchedValues> BatchCond(FunctionBuilder& b, const Op& op,
                                        const std::vector<int64_t>& operands,
                                        const std::vector<int64_t>& dims, int64_t size,
                                        const std::vector<BatchedCapture>& captures,
                                        std::string_view axis_name) {
  AdEmitter e(b);
  const std::vector<int64_t> args(operands.begin() + 1, operands.end());
  const std::vector<int64_t> arg_dims(dims.begin() + 1, dims.end());
  const int branches = op.cond().branches_size();
  auto batch_branch = [&](const Region& branch,
                          const std::vector<int64_t>& values) -> absl::StatusOr<std::vector<int64_t>> {
    ASSIGN_OR_RETURN(BatchedValues out,
                     EmitBatched(b, branch, values, arg_dims, size, captures, axis_name));
    std::vector<int64_t> results;
    for (size_t i = 0; i < out.values.size(); ++i) {
      ASSIGN_OR_RETURN(int64_t r, MoveBatchDim(e, out.values[i], out.batch_dims[i], 0, size));
      results.push_back(r);
    }
    return results;
  };
  if (dims[0] == kNotBatched) {
    Op cond = OpAttrs(op);
    cond.mutable_cond()->clear_branches();
    for (const Region& branch : op.cond().branches()) {
      RegionScope region(b, /*spmd=*/false);
      std::vector<int64_t> params;
      for (int64_t a : args) params.push_back(b.AddParam(b.TypeOf(a), b.VmaOf(a)));
      ASSIGN_OR_RETURN(std::vector<int64_t> results, batch_branch(branch, params));
      *cond.mutable_cond()->add_branches() = region.Close(results);
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> outs, b.AddOp(std::move(cond), operands));
    return BatchedValues{outs, std::vector<int64_t>(outs.size(), 0)};
  }
  // A batched index: clamp(index, 0, n - 1), then select branch by branch.
  ASSIGN_OR_RETURN(int64_t index, MoveBatchDim(e, operands[0], dims[0], 0, size));
  std::vector<std::vector<int64_t>> per_branch;
  for (const Region& branch : op.cond().branches()) {
    ASSIGN_OR_RETURN(std::vector<int64_t> results, batch_branch(branch, args));
    per_branch.push_back(std::move(results));
  }
  ASSIGN_OR_RETURN(int64_t lo, e.Full(0, e.TypeOf(index)));
  ASSIGN_OR_RETURN(int64_t hi, e.Full(branches - 1, e.TypeOf(index)));
  Op clamp;
  clamp.set_opcode("clamp");
  ASSIGN_OR_RETURN(int64_t which, e.Emit1(std::move(clamp), {lo, index, hi}));
  std::vector<int64_t> results = per_branch[0];
  for (int k = 1; k < branches; ++k) {
    ASSIGN_OR_RETURN(int64_t kk, e.Full(k, e.TypeOf(index)));
    ASSIGN_OR_RETURN(int64_t is_k, e.Compare(which, kk, EQ));
    for (size_t r = 0; r < results.size(); ++r) {
      const ShapedType type = e.TypeOf(results[r]);
      ASSIGN_OR_RETURN(int64_t pred, e.BroadcastInDim(is_k, type.dims, {0}));
      ASSIGN_OR_RETURN(results[r], e.Select(pred, per_branch[k][r], results[r]));
    }
  }
  return BatchedValues{results, std::vector<int64_t>(results.size(), 0)};
}

// Whether a collective in `op`'s regions, at any depth, names `axis_name` (then the op is
// batched through its regions even when nothing batched reaches it).
bool NamesAxisInside(const Op& op, std::string_view axis_name) {
  if (axis_name.empty()) return false;
  for (const Region* r : Regions(op)) {
    for (const Op& inner : r->ops()) {
      if (IsCollectiveOver(inner, axis_name) || NamesAxisInside(inner, axis_name)) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<BatchedValues> EmitBatched(FunctionBuilder& b, const Region& region,
                                          const std::vector<int64_t>& args,
                                          const std::vector<int64_t>& batch_dims, int64_t size,
                                          const std::vector<BatchedCapture>& captures,
                                          std::string_view axis_name) {
  if (args.size() != static_cast<size_t>(region.params_size()) ||
      batch_dims.size() != args.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "vmap: the region takes {} values, got {} (and {} batch dims)", region.params_size(),
        args.size(), batch_dims.size()));
  }
  AdEmitter e(b);
  std::unordered_map<int64_t, int64_t> value, batch_dim;  // region id -> builder id, batch dim
  for (int i = 0; i < region.params_size(); ++i) {
    value[region.params(i).id()] = args[i];
    if (batch_dims[i] != kNotBatched) batch_dim[region.params(i).id()] = batch_dims[i];
  }
  for (const BatchedCapture& c : captures) {
    value[c.region_id] = c.value;
    if (c.batch_dim != kNotBatched) batch_dim[c.region_id] = c.batch_dim;
  }
  auto mapped = [&](int64_t id) {
    auto it = value.find(id);
    return it == value.end() ? id : it->second;
  };
  auto dim_of = [&](int64_t id) {
    auto it = batch_dim.find(id);
    return it == batch_dim.end() ? kNotBatched : it->second;
  };
  for (const Op& op : region.ops()) {
    std::vector<int64_t> operands, dims;
    bool any_batched = false;
    for (int64_t id : op.operands()) {
      operands.push_back(mapped(id));
      dims.push_back(dim_of(id));
      any_batched = any_batched || dims.back() != kNotBatched;
    }
    Op copy = OpAttrs(op);
    bool reads_batched = false;
    std::vector<BatchedCapture> inner;  // this region's values the op's regions read
    std::unordered_map<int64_t, bool> seen;
    ForEachRegionRead(copy, [&](int64_t& id) {
      if ((value.count(id) > 0 || batch_dim.count(id) > 0) && !seen[id]) {
        seen[id] = true;
        inner.push_back({id, mapped(id), dim_of(id)});
      }
      reads_batched = reads_batched || dim_of(id) != kNotBatched;
      id = mapped(id);
    });
    using RegionBatcher = absl::StatusOr<BatchedValues> (*)(
        FunctionBuilder&, const Op&, const std::vector<int64_t>&, const std::vector<int64_t>&,
        int64_t, const std::vector<BatchedCapture>&, std::string_view);
    RegionBatcher through_regions = nullptr;
    switch (PrimOf(op)) {
      case Prim::kForiLoop: through_regions = BatchForiLoop; break;
      case Prim::kWhileLoop: through_regions = BatchWhileLoop; break;
      case Prim::kCond: through_regions = BatchCond; break;
      case Prim::kCustomJvpCall: through_regions = batching_internal::BatchCustomJvpCall; break;
      case Prim::kCustomVjpCall: through_regions = batching_internal::BatchCustomVjpCall; break;
      case Prim::kCheckpoint: through_regions = batching_internal::BatchCheckpoint; break;
      case Prim::kShardMap: through_regions = batching_internal::BatchShardMap; break;
      case Prim::kPallasCall: through_regions = batching_internal::BatchPallasCall; break;
      default: break;
    }
    const bool axis_inside = NamesAxisInside(op, axis_name);
    if ((any_batched || reads_batched || axis_inside) && through_regions != nullptr) {
      ASSIGN_OR_RETURN(BatchedValues out,
                       through_regions(b, op, operands, dims, size, inner, axis_name));
      for (int i = 0; i < op.results_size(); ++i) {
        value[op.results(i)] = out.values[i];
        if (out.batch_dims[i] != kNotBatched) batch_dim[op.results(i)] = out.batch_dims[i];
      }
      continue;
    }
    const Primitive* prim = FindPrimitive(op.opcode());
    // A collective over the vmapped axis acts across the batch, batched operand or not.
    const bool names_axis = IsCollectiveOver(op, axis_name);
    if (reads_batched || axis_inside ||
        ((any_batched || names_axis) && (prim == nullptr || !prim->ad.batch))) {
      return absl::UnimplementedError(
          fmt::format("Batching rule for '{}' not implemented", op.opcode()));
    }
    if (!any_batched && !names_axis) {
      ASSIGN_OR_RETURN(std::vector<int64_t> results, b.AddOp(std::move(copy), operands));
      for (int i = 0; i < op.results_size(); ++i) value[op.results(i)] = results[i];
      continue;
    }
    ASSIGN_OR_RETURN(BatchedValues out,
                     prim->ad.batch(e, BatchArgs{op, operands, dims, size, axis_name}));
    if (out.values.size() != static_cast<size_t>(op.results_size())) {
      return absl::InternalError(fmt::format("{}: its batching rule gave {} results for {}",
                                             op.opcode(), out.values.size(), op.results_size()));
    }
    for (int i = 0; i < op.results_size(); ++i) {
      value[op.results(i)] = out.values[i];
      if (out.batch_dims[i] != kNotBatched) batch_dim[op.results(i)] = out.batch_dims[i];
    }
  }
  BatchedValues result;
  for (int64_t id : region.results()) {
    result.values.push_back(mapped(id));
    result.batch_dims.push_back(dim_of(id));
  }
  return result;
}

}  // namespace shardjit::ir
