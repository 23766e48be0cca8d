// Differentiation through the ops with regions: shard_map, fori_loop (and so scan), while_loop
// (forward mode) and cond, in forward mode (one op carrying tangents beside the values) and in
// reverse mode (the primal op also returns the residuals its region's linear part reads; the
// linear part is one tape op whose transpose is an op of the same kind over the region's
// transposed tape).
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/autodiff.h"
#include "ir/autodiff_internal.h"
#include "ir/dtype.h"
#include "ir/primitive.h"
#include "ir/sharding.h"

namespace shardjit::ir::autodiff_internal {

Op Named(std::string_view opcode) {
  Op op;
  op.set_opcode(std::string(opcode));
  return op;
}

absl::Status NoRule(std::string_view kind, const Op& op) {
  return absl::UnimplementedError(
      fmt::format("{} rule for '{}' not implemented", kind, op.opcode()));
}

namespace {

// P((every mesh axis), None, ...) for a rank-`rank` value stacked over the devices on dim 0.
PartitionSpec StackedSpec(const Mesh& mesh, int64_t rank) {
  PartitionSpec spec;
  DimSpec* first = spec.add_dims();
  for (const MeshAxis& a : mesh.axes()) first->add_axes(a.name());
  for (int64_t d = 1; d < rank; ++d) spec.add_dims();
  return spec;
}

// The mesh axes `spec` does not split over: a value of that spec is replicated over them.
std::vector<std::string> UnmentionedAxes(const Mesh& mesh, const PartitionSpec& spec) {
  std::vector<std::string> out;
  for (const MeshAxis& a : mesh.axes()) {
    bool mentioned = false;
    for (const DimSpec& d : spec.dims()) {
      for (const std::string& name : d.axes()) mentioned = mentioned || name == a.name();
    }
    if (!mentioned) out.push_back(a.name());
  }
  return out;
}

int64_t AxesSize(const Mesh& mesh, const std::vector<std::string>& names) {
  int64_t size = 1;
  for (const MeshAxis& a : mesh.axes()) {
    for (const std::string& n : names) size *= n == a.name() ? a.size() : 1;
  }
  return size;
}

std::vector<int64_t> WithUnitDim(const std::vector<int64_t>& dims) {
  std::vector<int64_t> out{1};
  out.insert(out.end(), dims.begin(), dims.end());
  return out;
}

// The outputs of an op that computes n results and then, from output `first_tangent` on, the
// tangents of those results with `has_tangent` (the others' are kZero).
void SplitOutputs(const std::vector<int64_t>& outs, size_t n, size_t first_tangent,
                  const std::vector<bool>& has_tangent, std::vector<int64_t>* results,
                  std::vector<int64_t>* result_tangents) {
  results->assign(outs.begin(), outs.begin() + n);
  result_tangents->clear();
  size_t next = first_tangent;
  for (size_t i = 0; i < n; ++i) result_tangents->push_back(has_tangent[i] ? outs[next++] : kZero);
}

// Appends to `out` the tangents of the floating-point ones of `values` (zeros where kZero),
// and to `is_float` which of `values` are floating point.
absl::Status AppendFloatTangents(AdEmitter& e, const std::vector<int64_t>& values,
                                 const std::vector<int64_t>& tangents, std::vector<int64_t>* out,
                                 std::vector<bool>* is_float) {
  for (size_t i = 0; i < values.size(); ++i) {
    const ShapedType type = e.TypeOf(values[i]);
    is_float->push_back(IsFloating(type.dtype));
    if (!is_float->back()) continue;
    ASSIGN_OR_RETURN(int64_t t, e.Instantiate(tangents[i], type));
    out->push_back(t);
  }
  return absl::OkStatus();
}

}  // namespace

// Records the linear part of an op with regions as one tape op (ops on the tangents `operands`,
// giving the tangents of its float results, of `types`) and sets `result_tangents` (kZero for
// its other results).
absl::Status RecordLinearResults(AdEmitter& e, const std::vector<int64_t>& operands,
                                 const std::vector<ShapedType>& types,
                                 const std::vector<size_t>& float_results, size_t num_results,
                                 const std::vector<int64_t>& reads,
                                 AdEmitter::CustomTranspose transpose,
                                 std::vector<int64_t>* result_tangents) {
  ASSIGN_OR_RETURN(std::vector<int64_t> linear,
                   e.RecordLinear(operands, types, reads, std::move(transpose)));
  result_tangents->assign(num_results, kZero);
  for (size_t k = 0; k < float_results.size(); ++k) (*result_tangents)[float_results[k]] = linear[k];
  return absl::OkStatus();
}

// Forward mode through shard_map: one shard_map computing the results and their tangents
// (tangent operands mapped by their primal's in_spec, tangents out by the result's out_spec).
absl::Status ShardMapJvp(FunctionBuilder& b, const Op& op, const std::vector<int64_t>& operands,
                         const std::vector<int64_t>& tangents, std::vector<int64_t>* results,
                         std::vector<int64_t>* result_tangents) {
  const ShardMapAttrs& sm = op.shard_map();
  const Region& body = sm.body();
  Op jvp;
  jvp.set_opcode("shard_map");
  ShardMapAttrs* out = jvp.mutable_shard_map();
  *out->mutable_in_specs() = sm.in_specs();
  *out->mutable_out_specs() = sm.out_specs();
  std::vector<int64_t> all_operands = operands;
  RegionScope guard(b, /*spmd=*/true, -1, sm.check_vma());
  std::vector<int64_t> params, tangent_params;
  for (int i = 0; i < body.params_size(); ++i) {
    params.push_back(
        b.AddParam(FromProto(body.params(i).type()), MentionedAxes(sm.in_specs(i))));
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    if (tangents[i] == kZero) {
      tangent_params.push_back(kZero);
      continue;
    }
    const PartitionSpec& spec = sm.in_specs(static_cast<int>(i));
    *out->add_in_specs() = spec;
    tangent_params.push_back(b.AddParam(b.TypeOf(params[i]), MentionedAxes(spec)));
    all_operands.push_back(tangents[i]);
  }
  ASSIGN_OR_RETURN(JvpResult inner, EmitJvp(b, body, params, tangent_params));
  std::vector<int64_t> ids = inner.results;
  std::vector<bool> has_tangent;
  AdEmitter e(b);
  for (size_t i = 0; i < inner.results.size(); ++i) {
    const ShapedType type = b.TypeOf(inner.results[i]);
    has_tangent.push_back(IsFloating(type.dtype));
    if (!has_tangent.back()) continue;
    ASSIGN_OR_RETURN(int64_t t, e.Instantiate(inner.tangents[i], type));
    ids.push_back(t);
    *out->add_out_specs() = sm.out_specs(static_cast<int>(i));
  }
  *out->mutable_body() = guard.Close(ids);
  ASSIGN_OR_RETURN(std::vector<int64_t> outs, b.AddOp(std::move(jvp), all_operands));
  SplitOutputs(outs, inner.results.size(), inner.results.size(), has_tangent, results,
               result_tangents);
  return absl::OkStatus();
}

// Reverse mode through shard_map: the primal shard_map also returns the residuals its body's
// linear part reads (stacked over the devices), and the linear part is recorded as one tape op
// whose transpose is a shard_map of the body's transposed tape.
absl::Status ShardMapLinearize(FunctionBuilder& b, AdEmitter& e, const Op& op,
                               const std::vector<int64_t>& operands,
                               const std::vector<int64_t>& tangents,
                               std::vector<int64_t>* results,
                               std::vector<int64_t>* result_tangents) {
  const ShardMapAttrs& sm = op.shard_map();
  const Region& body = sm.body();
  if (b.mesh() == nullptr) return absl::InvalidArgumentError("shard_map: no mesh");
  const Mesh mesh = *b.mesh();
  const bool check_vma = sm.check_vma();
  RegionScope guard(b, /*spmd=*/true, -1, check_vma);
  std::vector<int64_t> params;
  std::vector<ShapedType> param_types;
  std::vector<bool> wrt;
  for (int i = 0; i < body.params_size(); ++i) {
    param_types.push_back(FromProto(body.params(i).type()));
    params.push_back(b.AddParam(param_types.back(), MentionedAxes(sm.in_specs(i))));
    wrt.push_back(tangents[i] != kZero);
  }
  ASSIGN_OR_RETURN(Linearized lin, Linearized::Linearize(b, body, params, wrt));
  auto inner = std::make_shared<Linearized>(std::move(lin));
  const std::vector<int64_t> residuals = inner->Residuals();
  std::vector<ShapedType> residual_types, result_types;
  std::vector<int64_t> ids = inner->results();
  for (int64_t r : inner->results()) result_types.push_back(b.TypeOf(r));
  Op primal;
  primal.set_opcode("shard_map");
  ShardMapAttrs* p = primal.mutable_shard_map();
  *p->mutable_in_specs() = sm.in_specs();
  *p->mutable_out_specs() = sm.out_specs();
  if (check_vma) p->set_check_vma(true);
  // A residual that is a parameter of the body is the operand itself, passed again with its
  // in_spec; the others leave the primal shard_map stacked over the devices.
  AdEmitter local(b);
  std::vector<int> residual_param(residuals.size(), -1);
  for (size_t k = 0; k < residuals.size(); ++k) {
    const int64_t r = residuals[k];
    residual_types.push_back(b.TypeOf(r));
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i] == r) residual_param[k] = static_cast<int>(i);
    }
    if (residual_param[k] >= 0) continue;
    ASSIGN_OR_RETURN(int64_t stacked, local.Reshape(r, WithUnitDim(residual_types.back().dims)));
    ids.push_back(stacked);
    *p->add_out_specs() = StackedSpec(mesh, residual_types.back().rank() + 1);
  }
  *p->mutable_body() = guard.Close(ids);
  ASSIGN_OR_RETURN(std::vector<int64_t> outs, b.AddOp(std::move(primal), operands));
  const size_t n = result_types.size();
  results->assign(outs.begin(), outs.begin() + n);
  // The residuals' global values and in_specs, in residual order.
  std::vector<int64_t> stacked;
  std::vector<PartitionSpec> residual_specs;
  for (size_t k = 0, next = n; k < residuals.size(); ++k) {
    if (residual_param[k] >= 0) {
      stacked.push_back(operands[residual_param[k]]);
      residual_specs.push_back(sm.in_specs(residual_param[k]));
    } else {
      stacked.push_back(outs[next++]);
      residual_specs.push_back(StackedSpec(mesh, residual_types[k].rank() + 1));
    }
  }

  std::vector<int64_t> linear_operands;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (wrt[i]) linear_operands.push_back(tangents[i]);
  }
  std::vector<ShapedType> linear_result_types;
  std::vector<size_t> float_results;
  for (size_t i = 0; i < n; ++i) {
    if (!IsFloating(result_types[i].dtype)) continue;
    float_results.push_back(i);
    linear_result_types.push_back(b.TypeOf((*results)[i]));
  }
  AdEmitter::CustomTranspose transpose =
      [inner, residuals, residual_types, residual_param, residual_specs, result_types,
       param_types, float_results, stacked, wrt, mesh, check_vma, sm_in = sm.in_specs(),
       sm_out = sm.out_specs()](
          FunctionBuilder& b, const std::vector<int64_t>& cts,
          const std::function<int64_t(int64_t)>& primal) -> absl::StatusOr<std::vector<int64_t>> {
    Op t;
    t.set_opcode("shard_map");
    ShardMapAttrs* a = t.mutable_shard_map();
    if (check_vma) a->set_check_vma(true);
    std::vector<int64_t> operands;
    for (int64_t s : stacked) operands.push_back(primal(s));
    RegionScope guard(b, /*spmd=*/true, -1, check_vma);
    std::unordered_map<int64_t, int64_t> remap;
    AdEmitter e(b);
    for (size_t i = 0; i < residuals.size(); ++i) {
      *a->add_in_specs() = residual_specs[i];
      const AxisList vma = MentionedAxes(residual_specs[i]);
      if (residual_param[i] >= 0) {
        remap[residuals[i]] = b.AddParam(residual_types[i], vma);
        continue;
      }
      const int64_t param =
          b.AddParam({residual_types[i].dtype, WithUnitDim(residual_types[i].dims)}, vma);
      ASSIGN_OR_RETURN(remap[residuals[i]], e.Reshape(param, residual_types[i].dims));
    }
    // As jax's shard_map transpose: without vma checks a result replicated over some mesh axes
    // has its cotangent divided by their size, and an input replicated over some gets its
    // cotangent summed over them; with them, the body's pvarys and psums did what is needed.
    std::vector<int64_t> inner_cts(result_types.size(), kZero);
    for (size_t k = 0; k < float_results.size(); ++k) {
      if (cts[k] == kZero) continue;
      const size_t i = float_results[k];
      const PartitionSpec& spec = sm_out.Get(static_cast<int>(i));
      *a->add_in_specs() = spec;
      inner_cts[i] = b.AddParam(result_types[i], MentionedAxes(spec));
      operands.push_back(cts[k]);
      const int64_t replicas = check_vma ? 1 : AxesSize(mesh, UnmentionedAxes(mesh, spec));
      if (replicas > 1) {
        ASSIGN_OR_RETURN(int64_t n, e.Full(static_cast<double>(replicas), result_types[i]));
        ASSIGN_OR_RETURN(inner_cts[i], e.Binary("div", inner_cts[i], n));
      }
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> input_cts, inner->Transpose(b, inner_cts, remap));
    std::vector<int64_t> region_results;
    for (size_t i = 0; i < wrt.size(); ++i) {
      if (!wrt[i]) continue;
      const PartitionSpec& spec = sm_in.Get(static_cast<int>(i));
      ASSIGN_OR_RETURN(int64_t c, e.Instantiate(input_cts[i], param_types[i]));
      const std::vector<std::string> axes = UnmentionedAxes(mesh, spec);
      if (!check_vma && !axes.empty()) {
        Op psum;
        psum.set_opcode("psum");
        for (const std::string& name : axes) psum.mutable_all_reduce()->add_axes(name);
        ASSIGN_OR_RETURN(c, e.Emit1(std::move(psum), {c}));
      }
      region_results.push_back(c);
      *a->add_out_specs() = spec;
    }
    *a->mutable_body() = guard.Close(region_results);
    return b.AddOp(std::move(t), operands);
  };
  return RecordLinearResults(e, linear_operands, linear_result_types, float_results, n, stacked,
                             std::move(transpose), result_tangents);
}

// s32 scalar constant.
absl::StatusOr<int64_t> Index(AdEmitter& e, int64_t v) {
  return e.Full(static_cast<double>(v), {DType::kS32, {}});
}

// Forward mode through fori_loop: one loop carrying the tangents of the float carries beside
// them; values the body reads from outside that have tangents become carries (with theirs).
absl::Status ForiLoopJvp(FunctionBuilder& b, const Op& op, const std::vector<int64_t>& operands,
                         const std::vector<int64_t>& tangents,
                         const std::vector<CapturedValue>& captures,
                         std::vector<int64_t>* results, std::vector<int64_t>* result_tangents) {
  const ForiLoopAttrs& loop = op.fori_loop();
  const Region& body = loop.body();
  const size_t n = operands.size();
  AdEmitter e(b);
  std::vector<CapturedValue> carried;  // captures with tangents, carried through the loop
  std::vector<CapturedValue> plain;    // the others, read as they are
  for (const CapturedValue& c : captures) (c.tangent != kZero ? carried : plain).push_back(c);
  std::vector<int64_t> init = operands;
  for (const CapturedValue& c : carried) init.push_back(c.value);
  std::vector<bool> is_float;
  RETURN_IF_ERROR(AppendFloatTangents(e, operands, tangents, &init, &is_float));
  for (const CapturedValue& c : carried) init.push_back(c.tangent);
  RegionScope guard(b, /*spmd=*/false);
  std::vector<int64_t> primals{b.AddParam({DType::kS32, {}})}, carry_params, cap_params;
  for (int64_t v : operands) carry_params.push_back(b.AddParam(b.TypeOf(v), b.VmaOf(v)));
  primals.insert(primals.end(), carry_params.begin(), carry_params.end());
  std::vector<CapturedValue> inner = plain;
  for (const CapturedValue& c : carried) {
    cap_params.push_back(b.AddParam(b.TypeOf(c.value), b.VmaOf(c.value)));
    inner.push_back({c.region_id, cap_params.back(), kZero, false});
  }
  std::vector<int64_t> body_tangents{kZero};
  for (size_t i = 0; i < n; ++i) {
    body_tangents.push_back(
        is_float[i] ? b.AddParam(b.TypeOf(operands[i]), b.VmaOf(operands[i])) : kZero);
  }
  for (size_t j = 0; j < carried.size(); ++j) {
    inner[plain.size() + j].tangent =
        b.AddParam(b.TypeOf(carried[j].value), b.VmaOf(carried[j].value));
  }
  ASSIGN_OR_RETURN(JvpResult r, EmitJvp(b, body, primals, body_tangents, inner));
  std::vector<int64_t> ids = r.results;
  ids.insert(ids.end(), cap_params.begin(), cap_params.end());
  for (size_t i = 0; i < n; ++i) {
    if (!is_float[i]) continue;
    ASSIGN_OR_RETURN(int64_t t, e.Instantiate(r.tangents[i], b.TypeOf(r.results[i])));
    ids.push_back(t);
  }
  for (size_t j = 0; j < carried.size(); ++j) ids.push_back(inner[plain.size() + j].tangent);
  Op jvp = OpAttrs(op);
  *jvp.mutable_fori_loop()->mutable_body() = guard.Close(ids);
  ASSIGN_OR_RETURN(std::vector<int64_t> outs, b.AddOp(std::move(jvp), init));
  SplitOutputs(outs, n, n + carried.size(), is_float, results, result_tangents);
  return absl::OkStatus();
}

// Forward mode through while_loop: the tangents of the float carries carried beside them; the
// condition reads the primal carries only.
absl::Status WhileLoopJvp(FunctionBuilder& b, const Op& op, const std::vector<int64_t>& operands,
                          const std::vector<int64_t>& tangents,
                          const std::vector<CapturedValue>& captures,
                          std::vector<int64_t>* results, std::vector<int64_t>* result_tangents) {
  const size_t n = operands.size();
  AdEmitter e(b);
  std::vector<int64_t> init = operands;
  std::vector<bool> is_float;
  RETURN_IF_ERROR(AppendFloatTangents(e, operands, tangents, &init, &is_float));
  // Params of a region over (carries, tangents of the float carries).
  auto add_params = [&](std::vector<int64_t>* primals, std::vector<int64_t>* carried_tangents) {
    for (int64_t v : operands) primals->push_back(b.AddParam(b.TypeOf(v), b.VmaOf(v)));
    for (size_t i = 0; i < n; ++i) {
      carried_tangents->push_back(
          is_float[i] ? b.AddParam(b.TypeOf(operands[i]), b.VmaOf(operands[i])) : kZero);
    }
  };
  Op jvp = OpAttrs(op);
  WhileLoopAttrs* loop = jvp.mutable_while_loop();
  {
    RegionScope guard(b, /*spmd=*/false);
    std::vector<int64_t> primals, carried_tangents;
    add_params(&primals, &carried_tangents);
    ASSIGN_OR_RETURN(JvpResult r, EmitJvp(b, op.while_loop().cond(), primals,
                                          std::vector<int64_t>(n, kZero), captures));
    *loop->mutable_cond() = guard.Close(r.results);
  }
  {
    RegionScope guard(b, /*spmd=*/false);
    std::vector<int64_t> primals, carried_tangents;
    add_params(&primals, &carried_tangents);
    ASSIGN_OR_RETURN(JvpResult r,
                     EmitJvp(b, op.while_loop().body(), primals, carried_tangents, captures));
    std::vector<int64_t> ids = r.results;
    for (size_t i = 0; i < n; ++i) {
      if (!is_float[i]) continue;
      ASSIGN_OR_RETURN(int64_t t, e.Instantiate(r.tangents[i], b.TypeOf(r.results[i])));
      ids.push_back(t);
    }
    *loop->mutable_body() = guard.Close(ids);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> outs, b.AddOp(std::move(jvp), init));
  SplitOutputs(outs, n, n, is_float, results, result_tangents);
  return absl::OkStatus();
}

// Reverse mode through fori_loop (a static trip count): the primal loop also stacks, trip by
// trip, the body's values its linear part reads (into [trip, ...] buffers); the linear part is
// one tape op whose transpose is a loop over the trips in reverse, running the body's transposed
// tape on each trip's values. Values the body reads from outside that have tangents are carried
// unchanged, so their cotangents add up over the trips.
absl::Status ForiLoopLinearize(FunctionBuilder& b, AdEmitter& e, const Op& op,
                               const std::vector<int64_t>& operands,
                               const std::vector<int64_t>& tangents,
                               const std::vector<CapturedValue>& captures,
                               std::vector<int64_t>* results,
                               std::vector<int64_t>* result_tangents) {
  const ForiLoopAttrs& loop = op.fori_loop();
  const Region& body = loop.body();
  const int64_t lower = loop.lower(), upper = loop.upper(), trips = upper - lower;
  const size_t n = operands.size();
  if (trips <= 0) {  // no trip: the results are the carries
    *results = operands;
    *result_tangents = tangents;
    return absl::OkStatus();
  }
  std::vector<CapturedValue> carried, plain;
  for (const CapturedValue& c : captures) (c.tangent != kZero ? carried : plain).push_back(c);
  std::vector<ShapedType> carry_types, cap_types;
  std::vector<bool> is_float;
  for (int64_t v : operands) {
    carry_types.push_back(b.TypeOf(v));
    is_float.push_back(IsFloating(carry_types.back().dtype));
  }
  for (const CapturedValue& c : carried) cap_types.push_back(b.TypeOf(c.value));

  RegionScope guard(b, /*spmd=*/false);
  const int64_t first_inside = b.next_id();  // values from here on are the body's
  std::vector<int64_t> primals{b.AddParam({DType::kS32, {}})};
  for (const ShapedType& t : carry_types) primals.push_back(b.AddParam(t));
  std::vector<int64_t> cap_params;
  std::vector<CapturedValue> inner = plain;
  for (size_t j = 0; j < carried.size(); ++j) {
    cap_params.push_back(b.AddParam(cap_types[j]));
    inner.push_back({carried[j].region_id, cap_params.back(), kZero, true});
  }
  std::vector<bool> wrt{false};
  for (size_t i = 0; i < n; ++i) wrt.push_back(is_float[i]);
  ASSIGN_OR_RETURN(Linearized lin, Linearized::Linearize(b, body, primals, wrt, inner));
  auto body_lin = std::make_shared<Linearized>(std::move(lin));
  // The body's values its linear part reads: stacked per trip; those from outside: read as is.
  std::vector<int64_t> stacked_residuals, outside_residuals;
  for (int64_t r : body_lin->Residuals()) {
    (r >= first_inside ? stacked_residuals : outside_residuals).push_back(r);
  }
  AdEmitter local(b);
  std::vector<int64_t> ids = body_lin->results();
  ids.insert(ids.end(), cap_params.begin(), cap_params.end());
  std::vector<ShapedType> residual_types;
  ASSIGN_OR_RETURN(int64_t lower_index, Index(local, lower));
  ASSIGN_OR_RETURN(int64_t trip, local.Binary("sub", primals[0], lower_index));
  ASSIGN_OR_RETURN(int64_t zero_index, Index(local, 0));
  for (int64_t r : stacked_residuals) {
    const ShapedType type = b.TypeOf(r);
    residual_types.push_back(type);
    std::vector<int64_t> stacked_dims{trips};
    stacked_dims.insert(stacked_dims.end(), type.dims.begin(), type.dims.end());
    const int64_t buffer = b.AddParam({type.dtype, stacked_dims});
    std::vector<int64_t> one_dims{1};
    one_dims.insert(one_dims.end(), type.dims.begin(), type.dims.end());
    ASSIGN_OR_RETURN(int64_t row, local.Reshape(r, one_dims));
    std::vector<int64_t> dus_operands{buffer, row, trip};
    for (int64_t d = 0; d < type.rank(); ++d) dus_operands.push_back(zero_index);
    ASSIGN_OR_RETURN(int64_t updated, local.Emit1(Named("dynamic_update_slice"), dus_operands));
    ids.push_back(updated);
  }
  Op primal = OpAttrs(op);
  *primal.mutable_fori_loop()->mutable_body() = guard.Close(ids);
  std::vector<int64_t> init = operands;
  for (const CapturedValue& c : carried) init.push_back(c.value);
  for (const ShapedType& type : residual_types) {
    std::vector<int64_t> stacked_dims{trips};
    stacked_dims.insert(stacked_dims.end(), type.dims.begin(), type.dims.end());
    ASSIGN_OR_RETURN(int64_t zeros, local.Full(0, {type.dtype, stacked_dims}));
    init.push_back(zeros);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> outs, b.AddOp(std::move(primal), init));
  results->assign(outs.begin(), outs.begin() + n);
  const std::vector<int64_t> buffers(outs.begin() + n + carried.size(), outs.end());

  // The linear op: tangents of the float carries' initial values and of the carried captures in,
  // tangents of the float carries' final values out.
  std::vector<int64_t> linear_operands, reads = buffers;
  std::vector<size_t> operand_carry;  // which carry each of the first linear operands is
  for (size_t i = 0; i < n; ++i) {
    if (tangents[i] == kZero) continue;
    linear_operands.push_back(tangents[i]);
    operand_carry.push_back(i);
  }
  for (const CapturedValue& c : carried) linear_operands.push_back(c.tangent);
  reads.insert(reads.end(), outside_residuals.begin(), outside_residuals.end());
  std::vector<ShapedType> linear_result_types;
  std::vector<size_t> float_carries;
  for (size_t i = 0; i < n; ++i) {
    if (!is_float[i]) continue;
    float_carries.push_back(i);
    linear_result_types.push_back(carry_types[i]);
  }
  AdEmitter::CustomTranspose transpose =
      [body_lin, stacked_residuals, residual_types, outside_residuals, buffers, carry_types,
       cap_types, float_carries, operand_carry, n, trips, num_plain = plain.size()](
          FunctionBuilder& b, const std::vector<int64_t>& cts,
          const std::function<int64_t(int64_t)>& primal) -> absl::StatusOr<std::vector<int64_t>> {
    AdEmitter e(b);
    // Carries: the float carries' cotangents, then the captures' sums.
    std::vector<int64_t> init;
    for (size_t k = 0; k < float_carries.size(); ++k) {
      ASSIGN_OR_RETURN(int64_t c, e.Instantiate(cts[k], carry_types[float_carries[k]]));
      init.push_back(c);
    }
    for (const ShapedType& t : cap_types) {
      ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, t));
      init.push_back(zeros);
    }
    RegionScope guard(b, /*spmd=*/false);
    const int64_t j = b.AddParam({DType::kS32, {}});
    std::vector<int64_t> ct_params, acc_params;
    for (size_t i : float_carries) ct_params.push_back(b.AddParam(carry_types[i]));
    for (const ShapedType& t : cap_types) acc_params.push_back(b.AddParam(t));
    // Trip j of the reverse loop replays trip trips - 1 - j.
    ASSIGN_OR_RETURN(int64_t last, Index(e, trips - 1));
    ASSIGN_OR_RETURN(int64_t trip, e.Binary("sub", last, j));
    ASSIGN_OR_RETURN(int64_t zero_index, Index(e, 0));
    std::unordered_map<int64_t, int64_t> remap;
    for (int64_t r : outside_residuals) remap[r] = primal(r);
    for (size_t k = 0; k < stacked_residuals.size(); ++k) {
      const ShapedType& type = residual_types[k];
      Op slice = Named("dynamic_slice");
      slice.mutable_dynamic_slice()->add_slice_sizes(1);
      for (int64_t d : type.dims) slice.mutable_dynamic_slice()->add_slice_sizes(d);
      std::vector<int64_t> slice_operands{primal(buffers[k]), trip};
      for (int64_t d = 0; d < type.rank(); ++d) slice_operands.push_back(zero_index);
      ASSIGN_OR_RETURN(int64_t row, e.Emit1(std::move(slice), slice_operands));
      ASSIGN_OR_RETURN(remap[stacked_residuals[k]], e.Reshape(row, type.dims));
    }
    std::vector<int64_t> body_cts(n, kZero);
    for (size_t k = 0; k < float_carries.size(); ++k) body_cts[float_carries[k]] = ct_params[k];
    ASSIGN_OR_RETURN(std::vector<int64_t> in_cts, body_lin->Transpose(b, body_cts, remap));
    std::vector<int64_t> ids;
    for (size_t i : float_carries) {
      ASSIGN_OR_RETURN(int64_t c, e.Instantiate(in_cts[1 + i], carry_types[i]));
      ids.push_back(c);
    }
    for (size_t k = 0; k < acc_params.size(); ++k) {
      // The body's captures: the plain ones first, then the carried ones (Linearize's order).
      ASSIGN_OR_RETURN(int64_t sum, e.AddAny(acc_params[k], in_cts[1 + n + num_plain + k]));
      ids.push_back(sum);
    }
    Op reverse = Named("fori_loop");
    reverse.mutable_fori_loop()->set_lower(0);
    reverse.mutable_fori_loop()->set_upper(trips);
    *reverse.mutable_fori_loop()->mutable_body() = guard.Close(ids);
    ASSIGN_OR_RETURN(std::vector<int64_t> outs, b.AddOp(std::move(reverse), init));
    // Cotangents of the linear operands: the nonzero initial tangents, then the captures.
    std::vector<int64_t> operand_cts;
    for (size_t i : operand_carry) {
      for (size_t k = 0; k < float_carries.size(); ++k) {
        if (float_carries[k] == i) operand_cts.push_back(outs[k]);
      }
    }
    for (size_t k = 0; k < cap_types.size(); ++k) {
      operand_cts.push_back(outs[float_carries.size() + k]);
    }
    return operand_cts;
  };
  return RecordLinearResults(e, linear_operands, linear_result_types, float_carries, n, reads,
                             std::move(transpose), result_tangents);
}

// A constant op of zeros of `type` with a fresh value id, in no region: for a region already
// closed to take (built in a scratch region of `b`, so that the id is unique and typed).
absl::StatusOr<Op> DetachedZeros(FunctionBuilder& b, const ShapedType& type) {
  RegionScope scratch(b, /*spmd=*/false);
  AdEmitter e(b);
  RETURN_IF_ERROR(e.Full(0, type).status());
  Region made = scratch.Close({});
  return made.ops(0);
}

// Forward mode through cond: a cond of the branches' JVPs on the operands and their tangents
// (values read from outside are read with their tangents as they are).
absl::Status CondJvp(FunctionBuilder& b, const Op& op, const std::vector<int64_t>& operands,
                     const std::vector<int64_t>& tangents,
                     const std::vector<CapturedValue>& captures, std::vector<int64_t>* results,
                     std::vector<int64_t>* result_tangents) {
  AdEmitter e(b);
  const size_t n = operands.size() - 1;  // operand 0 is the index
  std::vector<int64_t> all = operands;
  std::vector<bool> operand_float;
  RETURN_IF_ERROR(AppendFloatTangents(e, {operands.begin() + 1, operands.end()},
                                      {tangents.begin() + 1, tangents.end()}, &all,
                                      &operand_float));
  Op jvp = OpAttrs(op);
  jvp.mutable_cond()->clear_branches();
  std::vector<bool> result_float;
  for (const TensorType& t : op.result_types()) result_float.push_back(IsFloating(FromProto(t).dtype));
  for (const Region& branch : op.cond().branches()) {
    RegionScope guard(b, /*spmd=*/false);
    std::vector<int64_t> params, tangent_params;
    for (size_t i = 1; i <= n; ++i) {
      params.push_back(b.AddParam(b.TypeOf(operands[i]), b.VmaOf(operands[i])));
    }
    for (size_t i = 0; i < n; ++i) {
      tangent_params.push_back(
          operand_float[i] ? b.AddParam(b.TypeOf(params[i]), b.VmaOf(params[i])) : kZero);
    }
    ASSIGN_OR_RETURN(JvpResult r, EmitJvp(b, branch, params, tangent_params, captures));
    std::vector<int64_t> ids = r.results;
    for (size_t i = 0; i < r.results.size(); ++i) {
      if (!result_float[i]) continue;
      ASSIGN_OR_RETURN(int64_t t, e.Instantiate(r.tangents[i], b.TypeOf(r.results[i])));
      ids.push_back(t);
    }
    *jvp.mutable_cond()->add_branches() = guard.Close(ids);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> outs, b.AddOp(std::move(jvp), all));
  SplitOutputs(outs, result_float.size(), result_float.size(), result_float, results,
               result_tangents);
  return absl::OkStatus();
}

// Reverse mode through cond: each branch of the primal cond also returns the values its linear
// part reads, in slots shared by all branches (zeros in the other branches' slots); the linear
// part is one tape op whose transpose is a cond, on the same index, of the branches' transposed
// tapes. Values the branches read from outside with tangents get their cotangents from it.
absl::Status CondLinearize(FunctionBuilder& b, AdEmitter& e, const Op& op,
                           const std::vector<int64_t>& operands,
                           const std::vector<int64_t>& tangents,
                           const std::vector<CapturedValue>& captures,
                           std::vector<int64_t>* results, std::vector<int64_t>* result_tangents) {
  const size_t n = operands.size() - 1;
  const int num_branches = op.cond().branches_size();
  std::vector<CapturedValue> inner = captures;  // wrt where they have tangents
  std::vector<size_t> carried;                  // indices into `inner` with tangents
  for (size_t k = 0; k < inner.size(); ++k) {
    inner[k].wrt = inner[k].tangent != kZero;
    inner[k].tangent = kZero;
    if (inner[k].wrt) carried.push_back(k);
  }
  std::vector<ShapedType> operand_types;
  std::vector<bool> wrt;
  for (size_t i = 1; i <= n; ++i) {
    operand_types.push_back(b.TypeOf(operands[i]));
    wrt.push_back(tangents[i] != kZero);
  }
  std::vector<ShapedType> result_types;
  for (const TensorType& t : op.result_types()) result_types.push_back(FromProto(t));
  // Linearize each branch in its own region (closed later, once every branch's residuals are
  // known and the slots can be filled).
  struct Branch {
    std::shared_ptr<Linearized> lin;
    std::vector<int64_t> stacked, outside;  // its values the tape reads / read from outside
    std::vector<int64_t> params;
  };
  std::vector<Branch> branches(num_branches);
  std::vector<ShapedType> slot_types;
  std::vector<std::vector<int64_t>> slot_of(num_branches);  // residual k -> slot
  std::vector<Region> regions;
  for (int bi = 0; bi < num_branches; ++bi) {
    RegionScope guard(b, /*spmd=*/false);
    const int64_t first_inside = b.next_id();
    Branch& br = branches[bi];
    for (const ShapedType& t : operand_types) br.params.push_back(b.AddParam(t));
    ASSIGN_OR_RETURN(Linearized lin, Linearized::Linearize(b, op.cond().branches(bi), br.params,
                                                           wrt, inner));
    br.lin = std::make_shared<Linearized>(std::move(lin));
    for (int64_t r : br.lin->Residuals()) {
      if (r < first_inside) {
        br.outside.push_back(r);
        continue;
      }
      br.stacked.push_back(r);
      slot_of[bi].push_back(static_cast<int64_t>(slot_types.size()));
      slot_types.push_back(b.TypeOf(r));
    }
    // Results now; the slots are appended once all are known (below).
    regions.push_back(guard.Close(br.lin->results()));
  }
  // Fill every branch's slots: its own residuals, zeros for the others'. The residuals are
  // values of its (closed) region; the zeros are added to it as constants.
  Op primal = OpAttrs(op);
  primal.mutable_cond()->clear_branches();
  for (int bi = 0; bi < num_branches; ++bi) {
    Region& region = regions[bi];
    std::vector<int64_t> fill(slot_types.size(), kZero);
    for (size_t k = 0; k < branches[bi].stacked.size(); ++k) {
      fill[slot_of[bi][k]] = branches[bi].stacked[k];
    }
    for (size_t s = 0; s < slot_types.size(); ++s) {
      if (fill[s] != kZero) {
        region.add_results(fill[s]);
        continue;
      }
      ASSIGN_OR_RETURN(Op zeros, DetachedZeros(b, slot_types[s]));
      region.add_results(zeros.results(0));
      *region.add_ops() = std::move(zeros);
    }
    *primal.mutable_cond()->add_branches() = std::move(region);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> outs, b.AddOp(std::move(primal), operands));
  const size_t m = result_types.size();
  results->assign(outs.begin(), outs.begin() + m);
  const std::vector<int64_t> slots(outs.begin() + m, outs.end());

  std::vector<int64_t> linear_operands, reads = slots;
  reads.push_back(operands[0]);
  for (const Branch& br : branches) reads.insert(reads.end(), br.outside.begin(), br.outside.end());
  std::vector<size_t> linear_operand_index;
  for (size_t i = 0; i < n; ++i) {
    if (!wrt[i]) continue;
    linear_operands.push_back(tangents[i + 1]);
    linear_operand_index.push_back(i);
  }
  for (size_t k : carried) linear_operands.push_back(captures[k].tangent);
  std::vector<ShapedType> linear_result_types;
  std::vector<size_t> float_results;
  for (size_t i = 0; i < m; ++i) {
    if (!IsFloating(result_types[i].dtype)) continue;
    float_results.push_back(i);
    linear_result_types.push_back(result_types[i]);
  }
  const int64_t index = operands[0];
  AdEmitter::CustomTranspose transpose =
      [branches, slot_of, slot_types, slots, index, operand_types, linear_operand_index, carried,
       inner, result_types, float_results, n](
          FunctionBuilder& b, const std::vector<int64_t>& cts,
          const std::function<int64_t(int64_t)>& primal) -> absl::StatusOr<std::vector<int64_t>> {
    AdEmitter e(b);
    Op t = Named("cond");
    std::vector<int64_t> args{primal(index)};
    for (int64_t s : slots) args.push_back(primal(s));
    std::vector<size_t> ct_results;  // results with a nonzero cotangent
    for (size_t k = 0; k < float_results.size(); ++k) {
      if (cts[k] == kZero) continue;
      ct_results.push_back(float_results[k]);
      args.push_back(cts[k]);
    }
    for (size_t bi = 0; bi < branches.size(); ++bi) {
      const auto& br = branches[bi];
      RegionScope guard(b, /*spmd=*/false);
      std::vector<int64_t> slot_params;
      for (const ShapedType& st : slot_types) slot_params.push_back(b.AddParam(st));
      std::vector<int64_t> body_cts(result_types.size(), kZero);
      for (size_t r : ct_results) body_cts[r] = b.AddParam(result_types[r]);
      std::unordered_map<int64_t, int64_t> remap;
      for (int64_t r : br.outside) remap[r] = primal(r);
      for (size_t k = 0; k < br.stacked.size(); ++k) {
        remap[br.stacked[k]] = slot_params[slot_of[bi][k]];
      }
      ASSIGN_OR_RETURN(std::vector<int64_t> in_cts, br.lin->Transpose(b, body_cts, remap));
      std::vector<int64_t> ids;
      for (size_t i : linear_operand_index) {
        ASSIGN_OR_RETURN(int64_t c, e.Instantiate(in_cts[i], operand_types[i]));
        ids.push_back(c);
      }
      for (size_t k : carried) {
        ASSIGN_OR_RETURN(int64_t c, e.Instantiate(in_cts[n + k], b.TypeOf(primal(inner[k].value))));
        ids.push_back(c);
      }
      *t.mutable_cond()->add_branches() = guard.Close(ids);
    }
    return b.AddOp(std::move(t), args);
  };
  return RecordLinearResults(e, linear_operands, linear_result_types, float_results, m, reads,
                             std::move(transpose), result_tangents);
}


}  // namespace shardjit::ir::autodiff_internal
