// JAX's custom differentiation and rematerialisation: custom_jvp, custom_vjp, checkpoint (remat)
// with checkpoint_name, and lax::optimization_barrier. Each stages one op holding the function and its rules as
// regions; grad, vjp, jvp and vmap use the rules (ir/autodiff.h, ir/batching.h), and what runs
// is the function itself.
#ifndef SHARDJIT_FRONTEND_CUSTOM_DERIVATIVES_H_
#define SHARDJIT_FRONTEND_CUSTOM_DERIVATIVES_H_

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/autodiff.h"
#include "frontend/traced_function.h"
#include "frontend/tracer.h"

namespace shardjit {

// A custom JVP rule: (primals, tangents) -> the function's results and their tangents, linear
// in the tangents (reverse mode transposes it). An integer input's tangent is zeros of its type.
using CustomJvpRule =
    std::function<JvpOut(const std::vector<Tracer>& primals, const std::vector<Tracer>& tangents)>;

// What a custom VJP fwd rule returns: the function's results and the residuals bwd receives.
struct VjpFwdOut {
  std::vector<Tracer> primals_out;
  std::vector<Tracer> residuals;
};
using CustomVjpFwd = std::function<VjpFwdOut(const std::vector<Tracer>& primals)>;
// A custom VJP bwd rule: (residuals, cotangents of the results) -> one cotangent per input, of
// its type; an invalid Tracer (`Tracer()`, JAX's None) stands for zeros.
using CustomVjpBwd = std::function<std::vector<Tracer>(const std::vector<Tracer>& residuals,
                                                       const std::vector<Tracer>& cotangents)>;

// What jax.checkpoint's backward pass keeps instead of recomputing (jax.checkpoint_policies:
// nothing_saveable, everything_saveable, dots_saveable, dots_with_no_batch_dims_saveable,
// save_only_these_names, save_any_names_but_these, save_anything_except_these_names, and
// save_from_both_policies of them). The
// policies other than everything_saveable look at the ops of the checkpointed function itself,
// not into loops or other regions inside it; the name policies at the values checkpoint_name
// labelled there.
enum class CheckpointPolicy {
  kNothingSaveable,
  kEverythingSaveable,
  kDotsSaveable,
  kDotsWithNoBatchDimsSaveable,
  kSaveOnlyTheseNames,            // the named values whose name is in `names`
  kSaveAnyNamesButThese,          // the named values whose name is not in `names`
  kSaveAnythingExceptTheseNames,  // every value but the named ones whose name is in `names`
};
// One more policy of a checkpoint (CheckpointOptions::also_save), with the names it lists.
struct CheckpointSavePolicy {
  CheckpointPolicy policy = CheckpointPolicy::kNothingSaveable;
  std::vector<std::string> names;
};
struct CheckpointOptions {
  // Keeps common-subexpression elimination from merging the recomputation with the forward
  // pass (an optimization_barrier on the recomputation's inputs), as jax.checkpoint's
  // prevent_cse.
  bool prevent_cse = true;
  CheckpointPolicy policy = CheckpointPolicy::kNothingSaveable;
  // The names the name policies list (the arguments of jax.checkpoint_policies.save_*_names);
  // must be empty for the other policies.
  std::vector<std::string> names;
  // Further policies: a value any of them keeps is kept too (save_from_both_policies below).
  std::vector<CheckpointSavePolicy> also_save;
};

// jax.checkpoint_policies.save_from_both_policies(a, b): keeps what `a` or `b` keeps (`a`'s
// prevent_cse). Nests: save_from_both_policies(save_from_both_policies(a, b), c).
CheckpointOptions save_from_both_policies(CheckpointOptions a, const CheckpointOptions& b);

// jax.ad_checkpoint.checkpoint_name: `x` itself, labelled `name` for the checkpoint policies
// that choose saved values by name. Outside checkpoint (and once compiled) it is the identity.
Tracer checkpoint_name(const Tracer& x, std::string name, Loc loc = Loc::current());

namespace internal {

std::vector<Tracer> CustomJvpCall(const TracedFunction& f, const CustomJvpRule& jvp,
                                  const std::vector<Tracer>& args, Loc loc);
std::vector<Tracer> CustomVjpCall(const TracedFunction& f, const CustomVjpFwd& fwd,
                                  const CustomVjpBwd& bwd, const std::vector<Tracer>& args,
                                  Loc loc);
std::vector<Tracer> Checkpoint(const TracedFunction& f, const CheckpointOptions& options,
                               const std::vector<Tracer>& args, Loc loc);

template <typename F>
using TransformedResult = std::conditional_t<kReturnsOneTracer<F>, Tracer, std::vector<Tracer>>;

}  // namespace internal

// jax.custom_jvp(f) with f.defjvp(jvp): a function of f's arguments (a vector of tracers) that
// computes f, and whose derivatives (jvp, grad, vjp, linearize) come from `jvp`. Returns one
// Tracer when f does. Differentiating with respect to a value f reads from outside (instead of
// taking it as an argument) is JAX's error.
template <typename F>
auto custom_jvp(F f, CustomJvpRule jvp, Loc loc = Loc::current()) {
  using Result = internal::TransformedResult<F>;
  return [traced = MakeTracedFunction(std::move(f)), jvp = std::move(jvp),
          loc](const std::vector<Tracer>& args) -> Result {
    return internal::AsResult(internal::CustomJvpCall(traced, jvp, args, loc),
                              static_cast<Result*>(nullptr));
  };
}

// jax.custom_vjp(f) with f.defvjp(fwd, bwd): computes f; reverse mode runs fwd and then bwd on
// its residuals. Forward mode (jvp) of it is JAX's error.
template <typename F>
auto custom_vjp(F f, CustomVjpFwd fwd, CustomVjpBwd bwd, Loc loc = Loc::current()) {
  using Result = internal::TransformedResult<F>;
  return [traced = MakeTracedFunction(std::move(f)), fwd = std::move(fwd), bwd = std::move(bwd),
          loc](const std::vector<Tracer>& args) -> Result {
    return internal::AsResult(internal::CustomVjpCall(traced, fwd, bwd, args, loc),
                              static_cast<Result*>(nullptr));
  };
}

// jax.checkpoint(f) (jax.remat): computes f; under reverse-mode differentiation only f's inputs
// are kept for the backward pass, which recomputes f's intermediates.
template <typename F>
auto checkpoint(F f, CheckpointOptions options = {}, Loc loc = Loc::current()) {
  using Result = internal::TransformedResult<F>;
  return [traced = MakeTracedFunction(std::move(f)), options,
          loc](const std::vector<Tracer>& args) -> Result {
    return internal::AsResult(internal::Checkpoint(traced, options, args, loc),
                              static_cast<Result*>(nullptr));
  };
}
template <typename F>
auto remat(F f, CheckpointOptions options = {}, Loc loc = Loc::current()) {
  return checkpoint(std::move(f), options, loc);
}

namespace lax {
// jax.lax.optimization_barrier: the values themselves, which the compiler computes before any
// use of the results and does not merge with equal computations across the barrier.
std::vector<Tracer> optimization_barrier(const std::vector<Tracer>& values,
                                         Loc loc = Loc::current());
}  // namespace lax

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_CUSTOM_DERIVATIVES_H_
