// Differentiation of the ops that carry the user's own choices: custom_jvp_call (its jvp region
// is the JVP; linearizing sends the rule's ops on tangents to the tape), custom_vjp_call (reverse
// mode only: fwd runs forward, one tape op transposes by bwd) and checkpoint (reverse mode saves
// the inputs only and, when transposed, recomputes the body behind an optimization_barrier).
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/autodiff.h"
#include "ir/autodiff_internal.h"
#include "ir/dtype.h"
#include "ir/prim.h"
#include "ir/regions.h"

namespace shardjit::ir::autodiff_internal {
namespace {

// JAX's error for a custom rule asked for the derivative with respect to a value its function
// reads from outside instead of taking it as an argument.
absl::Status CheckNoClosedOverTangent(const std::vector<CapturedValue>& captures,
                                      std::string_view kind) {
  for (const CapturedValue& c : captures) {
    if (c.tangent == kZero && !c.wrt) continue;
    return absl::InvalidArgumentError(fmt::format(
        "Detected differentiation of a {0} function with respect to a closed-over value. That "
        "isn't supported because the custom {1} rule only specifies how to differentiate the {0} "
        "function with respect to explicit input parameters. Try passing the closed-over value "
        "into the {0} function as an argument, and adapting the {0} rule.",
        kind, kind == "custom_jvp" ? "JVP" : "VJP"));
  }
  return absl::OkStatus();
}

// Emits the ops of `region` on `args` through `e` (ops reading tape values go to the tape) and
// returns its results. `captures` give the values the region reads from the walked region.
absl::StatusOr<std::vector<int64_t>> EmitRegion(AdEmitter& e, const Region& region,
                                                const std::vector<int64_t>& args,
                                                const std::vector<CapturedValue>& captures) {
  std::unordered_map<int64_t, int64_t> value;
  for (int i = 0; i < region.params_size(); ++i) value[region.params(i).id()] = args.at(i);
  for (const CapturedValue& c : captures) value[c.region_id] = c.value;
  auto mapped = [&](int64_t id) {
    auto it = value.find(id);
    return it == value.end() ? id : it->second;
  };
  for (const Op& op : region.ops()) {
    std::vector<int64_t> operands;
    for (int64_t id : op.operands()) operands.push_back(mapped(id));
    Op copy = OpAttrs(op);
    bool reads_tangent = false;
    ForEachRegionRead(copy, [&](int64_t& id) {
      id = mapped(id);
      reads_tangent = reads_tangent || e.IsTangent(id);
    });
    if (reads_tangent) {
      return absl::UnimplementedError(fmt::format(
          "a {} whose regions read tangents inside a custom JVP rule cannot be transposed",
          op.opcode()));
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> results, e.Emit(std::move(copy), operands));
    for (int i = 0; i < op.results_size(); ++i) value[op.results(i)] = results[i];
  }
  std::vector<int64_t> out;
  for (int64_t id : region.results()) out.push_back(mapped(id));
  return out;
}

// The floating-point results (those with tangents): their indices and types.
void FloatResults(const FunctionBuilder& b, const std::vector<int64_t>& results,
                  std::vector<size_t>* index, std::vector<ShapedType>* types) {
  for (size_t i = 0; i < results.size(); ++i) {
    const ShapedType t = b.TypeOf(results[i]);
    if (!IsFloating(t.dtype)) continue;
    index->push_back(i);
    types->push_back(t);
  }
}

std::vector<int64_t> Values(const std::vector<CapturedValue>& captures) {
  std::vector<int64_t> out;
  for (const CapturedValue& c : captures) out.push_back(c.value);
  return out;
}

// `captures` with their values read through `primal` (the tape may be replayed elsewhere).
std::vector<CapturedValue> Remapped(std::vector<CapturedValue> captures,
                                    const std::function<int64_t(int64_t)>& primal) {
  for (CapturedValue& c : captures) c.value = primal(c.value);
  return captures;
}

}  // namespace

absl::Status CustomJvpCallJvp(FunctionBuilder& b, AdEmitter& e, const Op& op,
                              const std::vector<int64_t>& operands,
                              const std::vector<int64_t>& tangents,
                              const std::vector<CapturedValue>& captures, bool linearizing,
                              std::vector<int64_t>* results,
                              std::vector<int64_t>* result_tangents) {
  RETURN_IF_ERROR(CheckNoClosedOverTangent(captures, "custom_jvp"));
  std::vector<int64_t> args = operands;
  for (size_t i = 0; i < operands.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t t, e.Instantiate(tangents[i], b.TypeOf(operands[i])));
    args.push_back(t);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> outs,
                   EmitRegion(e, op.custom_jvp_call().jvp(), args, captures));
  const size_t n = static_cast<size_t>(op.results_size());
  results->assign(outs.begin(), outs.begin() + static_cast<std::ptrdiff_t>(n));
  result_tangents->clear();
  for (size_t i = 0; i < n; ++i) {
    if (e.IsTangent((*results)[i])) {
      return absl::InvalidArgumentError(fmt::format(
          "custom_jvp: the JVP rule's primal output {} depends on the tangents", i));
    }
    const int64_t t = outs[n + i];
    // While linearizing, a tangent that is not on the tape does not depend on the inputs'.
    const bool zero = !IsFloating(b.TypeOf((*results)[i]).dtype) ||
                      (linearizing && !e.IsTangent(t));
    result_tangents->push_back(zero ? kZero : t);
  }
  return absl::OkStatus();
}

absl::Status CustomVjpCallLinearize(FunctionBuilder& b, AdEmitter& e, const Op& op,
                                    const std::vector<int64_t>& operands,
                                    const std::vector<int64_t>& tangents,
                                    const std::vector<CapturedValue>& captures,
                                    std::vector<int64_t>* results,
                                    std::vector<int64_t>* result_tangents) {
  RETURN_IF_ERROR(CheckNoClosedOverTangent(captures, "custom_vjp"));
  AdEmitter primal_emitter(b);
  ASSIGN_OR_RETURN(std::vector<int64_t> fwd,
                   EmitRegion(primal_emitter, op.custom_vjp_call().fwd(), operands, captures));
  const size_t n = static_cast<size_t>(op.results_size());
  results->assign(fwd.begin(), fwd.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<int64_t> residuals(fwd.begin() + static_cast<std::ptrdiff_t>(n), fwd.end());
  std::vector<int64_t> linear_operands;  // the tangents that are there, in operand order
  std::vector<size_t> linear_index;
  for (size_t i = 0; i < tangents.size(); ++i) {
    if (tangents[i] == kZero) continue;
    linear_operands.push_back(tangents[i]);
    linear_index.push_back(i);
  }
  std::vector<ShapedType> tangent_types;
  std::vector<size_t> tangent_of;  // result index of each tape result
  FloatResults(b, *results, &tangent_of, &tangent_types);
  std::vector<ShapedType> result_types;
  for (size_t i = 0; i < n; ++i) result_types.push_back(b.TypeOf((*results)[i]));
  std::vector<int64_t> reads = residuals;
  const std::vector<int64_t> outside = Values(captures);
  reads.insert(reads.end(), outside.begin(), outside.end());
  const Region bwd = op.custom_vjp_call().bwd();
  AdEmitter::CustomTranspose transpose =
      [bwd, residuals, captures, result_types, tangent_of, linear_index](
          FunctionBuilder& tb, const std::vector<int64_t>& cts,
          const std::function<int64_t(int64_t)>& primal)
      -> absl::StatusOr<std::vector<int64_t>> {
    AdEmitter te(tb);
    std::vector<int64_t> args;
    for (int64_t r : residuals) args.push_back(primal(r));
    std::vector<int64_t> result_cts(result_types.size(), kZero);
    for (size_t k = 0; k < tangent_of.size(); ++k) result_cts[tangent_of[k]] = cts[k];
    for (size_t i = 0; i < result_types.size(); ++i) {
      ASSIGN_OR_RETURN(int64_t c, te.Instantiate(result_cts[i], result_types[i]));
      args.push_back(c);
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> operand_cts,
                     EmitRegion(te, bwd, args, Remapped(captures, primal)));
    std::vector<int64_t> out;
    for (size_t i : linear_index) out.push_back(operand_cts[i]);
    return out;
  };
  return RecordLinearResults(e, linear_operands, tangent_types, tangent_of, n, reads,
                             std::move(transpose), result_tangents);
}

absl::Status CheckpointInline(FunctionBuilder& b, AdEmitter& e, const Op& op,
                              const std::vector<int64_t>& operands,
                              const std::vector<int64_t>& tangents,
                              const std::vector<CapturedValue>& captures, bool linearizing,
                              std::vector<int64_t>* results, std::vector<int64_t>* result_tangents) {
  const Region& body = op.checkpoint().body();
  std::unordered_map<int64_t, int64_t> tangent;
  for (size_t i = 0; i < tangents.size(); ++i) {
    if (tangents[i] != kZero) tangent[body.params(static_cast<int>(i)).id()] = tangents[i];
  }
  for (const CapturedValue& c : captures) {
    if (c.tangent != kZero) tangent[c.region_id] = c.tangent;
  }
  ASSIGN_OR_RETURN(*results,
                   WalkJvp(b, e, body, operands, captures, linearizing, tangent, result_tangents));
  return absl::OkStatus();
}

namespace {

// Whether `policy` (listing `names`) keeps the results of `inner`, an op of a checkpoint's body,
// as jax.checkpoint_policies decides for a primitive and its parameters.
bool SavedBy(CheckpointPolicy policy, const google::protobuf::RepeatedPtrField<std::string>& names,
             const Op& inner) {
  if (inner.results_size() == 0 || !Regions(inner).empty()) return false;
  const bool dot = PrimOf(inner) == Prim::kDotGeneral;
  const bool named = inner.has_checkpoint_name();
  const bool listed = named && absl::c_linear_search(names, inner.checkpoint_name().name());
  switch (policy) {
    case DOTS_SAVEABLE:
      return dot;
    case DOTS_WITH_NO_BATCH_DIMS_SAVEABLE:
      return dot && inner.dot_general().lhs_batch_dims_size() == 0;
    case SAVE_ONLY_THESE_NAMES:
      return listed;
    case SAVE_ANY_NAMES_BUT_THESE:
      return named && !listed;
    case SAVE_ANYTHING_EXCEPT_THESE_NAMES:
      return !listed;
    default:
      return false;
  }
}

// Whether checkpoint `a` keeps the results of `inner`: its policy or any of its also_saved ones.
bool SavedByPolicy(const CheckpointAttrs& a, const Op& inner) {
  if (SavedBy(a.policy(), a.names(), inner)) return true;
  return absl::c_any_of(a.also_saved(), [&](const CheckpointSavePolicy& also) {
    return SavedBy(also.policy(), also.names(), inner);
  });
}

}  // namespace

bool SavesEverything(const CheckpointAttrs& a) {
  return a.policy() == EVERYTHING_SAVEABLE ||
         absl::c_any_of(a.also_saved(), [](const CheckpointSavePolicy& also) {
           return also.policy() == EVERYTHING_SAVEABLE;
         });
}

absl::Status CheckpointLinearize(FunctionBuilder& b, AdEmitter& e, const Op& op,
                                 const std::vector<int64_t>& operands,
                                 const std::vector<int64_t>& tangents,
                                 const std::vector<CapturedValue>& captures,
                                 std::vector<int64_t>* results,
                                 std::vector<int64_t>* result_tangents) {
  const CheckpointAttrs& a = op.checkpoint();
  // The results of the body's own ops the policy keeps: emitted as extra results of the forward
  // pass and read, not recomputed, by the backward one.
  std::vector<int64_t> saved_ids;
  for (const Op& inner : a.body().ops()) {
    if (!SavedByPolicy(a, inner)) continue;
    saved_ids.insert(saved_ids.end(), inner.results().begin(), inner.results().end());
  }
  Region forward = a.body();
  for (int64_t id : saved_ids) forward.add_results(id);
  AdEmitter primal_emitter(b);
  ASSIGN_OR_RETURN(*results, EmitRegion(primal_emitter, forward, operands, captures));
  const std::vector<int64_t> saved_values(results->end() - saved_ids.size(), results->end());
  results->resize(results->size() - saved_ids.size());
  // The tape op reads the inputs only; its transpose recomputes the body from them.
  std::vector<int64_t> linear_operands;
  std::vector<bool> wrt;
  for (int64_t t : tangents) {
    wrt.push_back(t != kZero);
    if (t != kZero) linear_operands.push_back(t);
  }
  std::vector<CapturedValue> inner = captures;
  for (CapturedValue& c : inner) {
    c.wrt = c.tangent != kZero;
    if (c.wrt) linear_operands.push_back(c.tangent);
    c.tangent = kZero;
  }
  std::vector<ShapedType> tangent_types;
  std::vector<size_t> tangent_of;
  FloatResults(b, *results, &tangent_of, &tangent_types);
  std::vector<int64_t> reads = operands;
  for (const CapturedValue& c : inner) reads.push_back(c.value);
  reads.insert(reads.end(), saved_values.begin(), saved_values.end());
  const Region body = a.body();
  const size_t num_results = results->size();
  AdEmitter::CustomTranspose transpose =
      [body, operands, inner, wrt, tangent_of, num_results, saved_ids, saved_values,
       prevent_cse = a.prevent_cse()](
          FunctionBuilder& tb, const std::vector<int64_t>& cts,
          const std::function<int64_t(int64_t)>& primal)
      -> absl::StatusOr<std::vector<int64_t>> {
    // What the recomputation starts from: the inputs and the kept values, behind one barrier.
    std::vector<int64_t> inputs;
    for (int64_t x : operands) inputs.push_back(primal(x));
    for (const CapturedValue& c : inner) inputs.push_back(primal(c.value));
    for (int64_t v : saved_values) inputs.push_back(primal(v));
    if (prevent_cse && !inputs.empty()) {
      ASSIGN_OR_RETURN(inputs, tb.AddOp(Named("optimization_barrier"), inputs));
    }
    std::vector<int64_t> args(inputs.begin(),
                              inputs.begin() + static_cast<std::ptrdiff_t>(operands.size()));
    std::vector<CapturedValue> caps = inner;
    for (size_t k = 0; k < caps.size(); ++k) caps[k].value = inputs[operands.size() + k];
    std::unordered_map<int64_t, int64_t> saved;
    for (size_t k = 0; k < saved_ids.size(); ++k) {
      saved[saved_ids[k]] = inputs[operands.size() + caps.size() + k];
    }
    ASSIGN_OR_RETURN(Linearized lin, Linearized::Linearize(tb, body, args, wrt, caps, saved));
    std::vector<int64_t> result_cts(num_results, kZero);
    for (size_t k = 0; k < tangent_of.size(); ++k) result_cts[tangent_of[k]] = cts[k];
    ASSIGN_OR_RETURN(std::vector<int64_t> input_cts, lin.Transpose(tb, result_cts));
    std::vector<int64_t> out;
    for (size_t i = 0; i < wrt.size(); ++i) {
      if (wrt[i]) out.push_back(input_cts[i]);
    }
    for (size_t k = 0; k < caps.size(); ++k) {
      if (caps[k].wrt) out.push_back(input_cts[wrt.size() + k]);
    }
    return out;
  };
  return RecordLinearResults(e, linear_operands, tangent_types, tangent_of, num_results, reads,
                             std::move(transpose), result_tangents);
}

}  // namespace shardjit::ir::autodiff_internal
