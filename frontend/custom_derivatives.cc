#include "frontend/custom_derivatives.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "frontend/trace_region.h"
#include "frontend/trace_state.h"
#include "ir/dtype.h"

namespace shardjit {
namespace internal {
namespace {

std::string TypeList(const std::vector<ShapedType>& types) {
  std::string out;
  for (const ShapedType& t : types) out += (out.empty() ? "" : ", ") + t.ToString();
  return "(" + out + ")";
}

// A rule's outputs as a region's results: refused (recorded on `t`) unless they have `want`'s
// types; invalid entries become zeros of the wanted type when `none_is_zero`.
std::vector<Tracer> Checked(TraceState* t, std::vector<Tracer> got,
                            const std::vector<ShapedType>& want, bool none_is_zero,
                            const std::string& what, Loc loc) {
  if (!t->status().ok()) return {};
  if (got.size() != want.size()) {
    t->RecordError(absl::InvalidArgumentError(fmt::format(
                       "{}: got {} values, expected {} of types {}", what, got.size(),
                       want.size(), TypeList(want))),
                   loc);
    return {};
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i].valid() && none_is_zero) {
      got[i] = t->Constant(0, want[i], loc);
      continue;
    }
    if (!got[i].valid() || got[i].state() != t) {
      t->RecordError(absl::InvalidArgumentError(fmt::format(
                         "{}: value {} is not a value of this trace", what, i)),
                     loc);
      return {};
    }
    if (got[i].type() != want[i]) {
      t->RecordError(absl::InvalidArgumentError(fmt::format(
                         "{}: value {} is {}, but it must be {} (expected {})", what, i,
                         got[i].type().ToString(), want[i].ToString(), TypeList(want))),
                     loc);
      return {};
    }
  }
  return got;
}

std::vector<Tracer> Slice(const std::vector<Tracer>& v, size_t begin, size_t end) {
  return std::vector<Tracer>(v.begin() + static_cast<std::ptrdiff_t>(begin),
                             v.begin() + static_cast<std::ptrdiff_t>(end));
}

std::vector<ShapedType> Concat(std::vector<ShapedType> a, const std::vector<ShapedType>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The types of `region`'s results.
std::vector<ShapedType> ResultTypes(TraceState* t, const ir::Region& region) {
  std::vector<ShapedType> out;
  for (int64_t id : region.results()) out.push_back(t->builder().TypeOf(id));
  return out;
}

}  // namespace

std::vector<Tracer> CustomJvpCall(const TracedFunction& f, const CustomJvpRule& jvp,
                                  const std::vector<Tracer>& args, Loc loc) {
  TraceState* t = TraceOfArgs(args, "custom_jvp");
  if (t == nullptr) return {};
  const std::vector<ShapedType> types = TypesOf(args);
  ir::Op op;
  op.set_opcode("custom_jvp_call");
  ir::CustomJvpCallAttrs& a = *op.mutable_custom_jvp_call();
  const std::vector<ir::AxisList> vmas = VmasOf(t, args);
  if (!TraceRegion(t, f, types, "custom_jvp", a.mutable_fun(), vmas)) return {};
  const std::vector<ShapedType> out_types = ResultTypes(t, a.fun());
  const size_t n = args.size();
  const TracedFunction rule{
      [&](const std::vector<Tracer>& p) {
        JvpOut out = jvp(Slice(p, 0, n), Slice(p, n, 2 * n));
        if (out.primals_out.size() != out.tangents_out.size()) {
          t->RecordError(absl::InvalidArgumentError(fmt::format(
                             "Custom JVP rule must produce primal and tangent outputs with equal "
                             "container (pytree) structures, but got {} and {} values "
                             "respectively.", out.primals_out.size(), out.tangents_out.size())),
                         loc);
          return std::vector<Tracer>();
        }
        std::vector<Tracer> results =
            Checked(t, out.primals_out, out_types, false,
                    "custom_jvp: the JVP rule's primal outputs (those of the custom_jvp function)",
                    loc);
        std::vector<Tracer> tangents = Checked(
            t, out.tangents_out, out_types, false,
            "custom_jvp: the JVP rule's tangent outputs (of the primal outputs' shapes and dtypes)",
            loc);
        results.insert(results.end(), tangents.begin(), tangents.end());
        return results;
      },
      -1};
  std::vector<ir::AxisList> both = vmas;
  both.insert(both.end(), vmas.begin(), vmas.end());
  if (!TraceRegion(t, rule, Concat(types, types), "custom_jvp rule", a.mutable_jvp(),
                   both)) {
    return {};
  }
  return t->EmitN(std::move(op), args, out_types.size(), loc);
}

std::vector<Tracer> CustomVjpCall(const TracedFunction& f, const CustomVjpFwd& fwd,
                                  const CustomVjpBwd& bwd, const std::vector<Tracer>& args,
                                  Loc loc) {
  TraceState* t = TraceOfArgs(args, "custom_vjp");
  if (t == nullptr) return {};
  const std::vector<ShapedType> types = TypesOf(args);
  ir::Op op;
  op.set_opcode("custom_vjp_call");
  ir::CustomVjpCallAttrs& a = *op.mutable_custom_vjp_call();
  const std::vector<ir::AxisList> vmas = VmasOf(t, args);
  if (!TraceRegion(t, f, types, "custom_vjp", a.mutable_fun(), vmas)) return {};
  const std::vector<ShapedType> out_types = ResultTypes(t, a.fun());
  size_t num_residuals = 0;
  const TracedFunction fwd_rule{
      [&](const std::vector<Tracer>& p) {
        VjpFwdOut out = fwd(p);
        std::vector<Tracer> results =
            Checked(t, out.primals_out, out_types, false,
                    "custom_vjp: the fwd rule's primal outputs (those of the custom_vjp function)",
                    loc);
        num_residuals = out.residuals.size();
        results.insert(results.end(), out.residuals.begin(), out.residuals.end());
        return results;
      },
      -1};
  if (!TraceRegion(t, fwd_rule, types, "custom_vjp fwd", a.mutable_fwd(), vmas)) return {};
  const std::vector<ShapedType> fwd_types = ResultTypes(t, a.fwd());
  const std::vector<ShapedType> residual_types(fwd_types.end() - static_cast<std::ptrdiff_t>(
                                                                     num_residuals),
                                               fwd_types.end());
  const TracedFunction bwd_rule{
      [&](const std::vector<Tracer>& p) {
        std::vector<Tracer> cts = bwd(Slice(p, 0, num_residuals),
                                      Slice(p, num_residuals, p.size()));
        if (cts.size() != types.size()) {
          t->RecordError(
              absl::InvalidArgumentError(fmt::format(
                  "Custom VJP bwd rule must produce an output with the same container (pytree) "
                  "structure as the args tuple of the primal function, and in particular must "
                  "produce a tuple of length equal to the number of arguments to the primal "
                  "function, but got {} values for {} arguments.", cts.size(), types.size())),
              loc);
          return std::vector<Tracer>();
        }
        return Checked(t, std::move(cts), types, true,
                       "custom_vjp: the bwd rule's cotangents (one per primal input, of its "
                       "shape and dtype)",
                       loc);
      },
      -1};
  std::vector<ir::AxisList> bwd_vmas;  // the residuals', then the results' (their cotangents)
  for (int64_t id : a.fwd().results()) bwd_vmas.push_back(t->builder().VmaOf(id));
  std::rotate(bwd_vmas.begin(), bwd_vmas.begin() + static_cast<std::ptrdiff_t>(out_types.size()),
              bwd_vmas.end());
  if (!TraceRegion(t, bwd_rule, Concat(residual_types, out_types), "custom_vjp bwd",
                   a.mutable_bwd(), bwd_vmas)) {
    return {};
  }
  return t->EmitN(std::move(op), args, out_types.size(), loc);
}

std::vector<Tracer> Checkpoint(const TracedFunction& f, const CheckpointOptions& options,
                               const std::vector<Tracer>& args, Loc loc) {
  TraceState* t = TraceOfArgs(args, "checkpoint");
  if (t == nullptr) return {};
  ir::Op op;
  op.set_opcode("checkpoint");
  ir::CheckpointAttrs& a = *op.mutable_checkpoint();
  a.set_prevent_cse(options.prevent_cse);
  // CheckpointPolicy's enumerators in order.
  static constexpr ir::CheckpointPolicy kPolicies[] = {
      ir::NOTHING_SAVEABLE,        ir::EVERYTHING_SAVEABLE,
      ir::DOTS_SAVEABLE,           ir::DOTS_WITH_NO_BATCH_DIMS_SAVEABLE,
      ir::SAVE_ONLY_THESE_NAMES,   ir::SAVE_ANY_NAMES_BUT_THESE,
      ir::SAVE_ANYTHING_EXCEPT_THESE_NAMES};
  static_assert(std::size(kPolicies) ==
                static_cast<size_t>(CheckpointPolicy::kSaveAnythingExceptTheseNames) + 1);
  a.set_policy(kPolicies[static_cast<size_t>(options.policy)]);
  for (const std::string& name : options.names) a.add_names(name);
  for (const CheckpointSavePolicy& also : options.also_save) {
    ir::CheckpointSavePolicy& saved = *a.add_also_saved();
    saved.set_policy(kPolicies[static_cast<size_t>(also.policy)]);
    for (const std::string& name : also.names) saved.add_names(name);
  }
  if (!TraceRegion(t, f, TypesOf(args), "checkpoint", a.mutable_body(),
                   VmasOf(t, args))) {
    return {};
  }
  const size_t count = static_cast<size_t>(a.body().results_size());
  return t->EmitN(std::move(op), args, count, loc);
}

}  // namespace internal

CheckpointOptions save_from_both_policies(CheckpointOptions a, const CheckpointOptions& b) {
  a.also_save.push_back({b.policy, b.names});
  a.also_save.insert(a.also_save.end(), b.also_save.begin(), b.also_save.end());
  return a;
}

Tracer checkpoint_name(const Tracer& x, std::string name, Loc loc) {
  internal::TraceState* t = internal::TraceOfArgs({x}, "checkpoint_name");
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode("name");
  op.mutable_checkpoint_name()->set_name(std::move(name));
  return t->Emit1(std::move(op), {x}, loc);
}

namespace lax {

std::vector<Tracer> optimization_barrier(const std::vector<Tracer>& values, Loc loc) {
  internal::TraceState* t = internal::TraceOfArgs(values, "optimization_barrier");
  if (t == nullptr) return std::vector<Tracer>(values.size());
  ir::Op op;
  op.set_opcode("optimization_barrier");
  return t->EmitN(std::move(op), values, values.size(), loc);
}

}  // namespace lax
}  // namespace shardjit
