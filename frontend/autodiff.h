// JAX's transformations of traced functions: jvp, linearize, vjp, grad, value_and_grad and
// vmap. Each traces the function into the current trace and applies the primitives' rules to
// the staged ops (ir/autodiff.h, ir/batching.h), so they compose with jit, shard_map and each
// other as JAX's do: jit(grad(f)), grad inside shard_map, grad(grad(f)), vmap(grad(f)).
#ifndef SHARDJIT_FRONTEND_AUTODIFF_H_
#define SHARDJIT_FRONTEND_AUTODIFF_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/ops.h"
#include "frontend/traced_function.h"
#include "frontend/tracer.h"

namespace shardjit {

// What jvp returns: f's results and their tangents.
struct JvpOut {
  std::vector<Tracer> primals_out;
  std::vector<Tracer> tangents_out;
};

// What vjp returns: f's results and the pullback, which maps cotangents of the results (one per
// result, of its type) to cotangents of the inputs (zeros for integer inputs) and may be called
// any number of times within the same trace.
struct VjpOut {
  std::vector<Tracer> primals_out;
  std::function<std::vector<Tracer>(const std::vector<Tracer>&)> pullback;
};

// What linearize returns: f's results and its JVP at the primals, a linear function of tangents
// of the inputs' types (one per input) giving the results' tangents; callable any number of times
// within the same trace.
struct LinearizeOut {
  std::vector<Tracer> primals_out;
  std::function<std::vector<Tracer>(const std::vector<Tracer>&)> jvp;
};

namespace internal {

LinearizeOut Linearize(const TracedFunction& f, const std::vector<Tracer>& primals, Loc loc);
JvpOut Jvp(const TracedFunction& f, const std::vector<Tracer>& primals,
           const std::vector<Tracer>& tangents, Loc loc);
VjpOut Vjp(const TracedFunction& f, const std::vector<Tracer>& primals, Loc loc);
// The gradients of f's first result (a floating-point scalar) with respect to args[argnums];
// with `with_value` that result first; with `has_aux` f's other results after the gradients.
std::vector<Tracer> ValueAndGrad(const TracedFunction& f, const std::vector<Tracer>& args,
                                 const std::vector<int>& argnums, bool has_aux, bool with_value,
                                 Loc loc);

// f mapped over axis in_axes[i] of argument i (nullopt: not mapped; one entry: every argument),
// results stacked along out_axes (one entry: every result).
std::vector<Tracer> Vmap(const TracedFunction& f, const std::vector<Tracer>& args,
                         const std::vector<std::optional<int64_t>>& in_axes,
                         const std::vector<int64_t>& out_axes, const std::string& axis_name,
                         Loc loc);

// The results as a function returning one Tracer, or several, gives them.
inline Tracer AsResult(std::vector<Tracer> v, Tracer*) { return v.empty() ? Tracer() : v[0]; }
inline std::vector<Tracer> AsResult(std::vector<Tracer> v, std::vector<Tracer>*) { return v; }

}  // namespace internal

// jax.vmap(f, in_axes, out_axes, axis_name): f applied to every slice of its arguments along
// in_axes (std::nullopt: an argument passed whole to every application; one entry applies to
// every argument; negative axes count from the end), its results stacked along out_axes. Returns
// one Tracer when f does. With `axis_name`, collectives inside f may name the vmapped axis and
// act across the batch (psum sums it, all_gather stacks it, axis_index is the element's index).
template <typename F>
auto vmap(F f, std::vector<std::optional<int64_t>> in_axes = {0},
          std::vector<int64_t> out_axes = {0}, std::string axis_name = {},
          Loc loc = Loc::current()) {
  using Result = std::conditional_t<kReturnsOneTracer<F>, Tracer, std::vector<Tracer>>;
  return [traced = MakeTracedFunction(std::move(f)), in_axes = std::move(in_axes),
          out_axes = std::move(out_axes), axis_name = std::move(axis_name),
          loc](const std::vector<Tracer>& args) -> Result {
    return internal::AsResult(internal::Vmap(traced, args, in_axes, out_axes, axis_name, loc),
                              static_cast<Result*>(nullptr));
  };
}

// jax.jvp(f, primals, tangents): tangents of the primals' types (floating inputs; integer
// inputs take zero tangents of their own type).
template <typename F>
JvpOut jvp(F f, const std::vector<Tracer>& primals, const std::vector<Tracer>& tangents,
           Loc loc = Loc::current()) {
  return internal::Jvp(MakeTracedFunction(std::move(f)), primals, tangents, loc);
}

// jax.linearize(f, *primals). Each call of the JVP emits f's JVP at the same primals; the primal
// half of it is the ops f's results already came from, which the pipeline's common-subexpression
// elimination merges, so that what runs per call is the linear part.
template <typename F>
LinearizeOut linearize(F f, const std::vector<Tracer>& primals, Loc loc = Loc::current()) {
  return internal::Linearize(MakeTracedFunction(std::move(f)), primals, loc);
}

// jax.vjp(f, *primals).
template <typename F>
VjpOut vjp(F f, const std::vector<Tracer>& primals, Loc loc = Loc::current()) {
  return internal::Vjp(MakeTracedFunction(std::move(f)), primals, loc);
}

// jax.grad(f, argnums): a function of f's arguments giving the gradient of f's result (a
// floating-point scalar) with respect to argument `argnum`.
template <typename F>
auto grad(F f, int argnum = 0, Loc loc = Loc::current()) {
  return [traced = MakeTracedFunction(std::move(f)), argnum, loc](const std::vector<Tracer>& args) {
    std::vector<Tracer> g = internal::ValueAndGrad(traced, args, {argnum}, false, false, loc);
    return g.empty() ? Tracer() : g[0];
  };
}

// jax.grad(f, argnums=(...), has_aux): the gradients with respect to each of `argnums`, then
// (has_aux) f's results after its first.
template <typename F>
auto grad(F f, std::vector<int> argnums, bool has_aux = false, Loc loc = Loc::current()) {
  return [traced = MakeTracedFunction(std::move(f)), argnums = std::move(argnums), has_aux,
          loc](const std::vector<Tracer>& args) {
    return internal::ValueAndGrad(traced, args, argnums, has_aux, false, loc);
  };
}

// jax.value_and_grad(f, argnums, has_aux): f's first result, the gradients, then (has_aux) f's
// other results.
template <typename F>
auto value_and_grad(F f, std::vector<int> argnums = {0}, bool has_aux = false,
                    Loc loc = Loc::current()) {
  return [traced = MakeTracedFunction(std::move(f)), argnums = std::move(argnums), has_aux,
          loc](const std::vector<Tracer>& args) {
    return internal::ValueAndGrad(traced, args, argnums, has_aux, true, loc);
  };
}

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_AUTODIFF_H_
