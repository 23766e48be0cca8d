// shard_map and the control flow of jax.lax (fori_loop, while_loop, cond, switch, scan):
// primitives whose bodies are traced into regions. Loop bodies and branches may read tracers of
// the enclosing function.
#ifndef SHARDJIT_FRONTEND_CONTROL_FLOW_H_
#define SHARDJIT_FRONTEND_CONTROL_FLOW_H_

#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/ops.h"
#include "frontend/traced_function.h"

namespace shardjit {

namespace internal {

// Traces shard_map(body, mesh, in_specs, out_specs) applied to `args`: one tracer per out_spec.
// `check_vma`: the body is typed with varying manual axes (jax's check_vma).
std::vector<Tracer> ShardMap(const TracedFunction& body, const Mesh& mesh,
                             const std::vector<PartitionSpec>& in_specs,
                             const std::vector<PartitionSpec>& out_specs,
                             const std::vector<Tracer>& args, bool check_vma);

}  // namespace internal

// The result of shard_map(f, ...): callable on global-view tracers (for example inside jit).
// `Result` is what f returns: Tracer when it returns one Tracer, else std::vector<Tracer>.
template <typename Result>
class ShardMapped {
 public:
  ShardMapped(TracedFunction body, Mesh mesh, std::vector<PartitionSpec> in_specs,
              std::vector<PartitionSpec> out_specs, bool check_vma = true)
      : body_(std::move(body)),
        mesh_(std::move(mesh)),
        in_specs_(std::move(in_specs)),
        out_specs_(std::move(out_specs)),
        check_vma_(check_vma) {}

  Result operator()(const std::vector<Tracer>& args) const {
    std::vector<Tracer> out =
        internal::ShardMap(body_, mesh_, in_specs_, out_specs_, args, check_vma_);
    if constexpr (std::is_same_v<Result, Tracer>) {
      return out.empty() ? Tracer() : out[0];
    } else {
      return out;
    }
  }
  template <typename... T>
  Result operator()(Tracer first, T... rest) const {
    return (*this)(std::vector<Tracer>{std::move(first), Tracer(rest)...});
  }

  const Mesh& mesh() const { return mesh_; }

 private:
  TracedFunction body_;
  Mesh mesh_;
  std::vector<PartitionSpec> in_specs_;
  std::vector<PartitionSpec> out_specs_;
  bool check_vma_;
};

// jax.shard_map: f runs once per device of `mesh` on the local blocks of its arguments (laid
// out by in_specs); its per-device results are assembled by out_specs. Inside f, collectives
// name the mesh axes. Called on tracers, it returns one Tracer when f does, else a vector.
// `check_vma` (jax's default, true): every value of f knows the mesh axes it varies over (an
// argument those its in_spec names); an invariant value meeting varying ones gets a pvary; psum
// of an invariant value is n·x; an out_spec that claims replication of a varying result is an
// error; gradients sum a replicated argument's cotangent once (pvary transposes to psum). false:
// JAX's check_vma=False (psum transposes to psum, shard_map's transpose divides and sums).
template <typename F>
auto shard_map(F f, Mesh mesh, std::vector<PartitionSpec> in_specs,
               std::vector<PartitionSpec> out_specs, bool check_vma = true) {
  using Result = std::conditional_t<kReturnsOneTracer<F>, Tracer, std::vector<Tracer>>;
  return ShardMapped<Result>(MakeTracedFunction(std::move(f)), std::move(mesh), std::move(in_specs),
                             std::move(out_specs), check_vma);
}

namespace lax {

// for i in [lower, upper): carry = body(i, carry); i is an s32 scalar tracer. The body may read
// tracers of the enclosing function.
std::vector<Tracer> fori_loop(
    int64_t lower, int64_t upper,
    const std::function<std::vector<Tracer>(Tracer, std::vector<Tracer>)>& body,
    std::vector<Tracer> init, Loc loc = Loc::current());
Tracer fori_loop(int64_t lower, int64_t upper, const std::function<Tracer(Tracer, Tracer)>& body,
                 Tracer init, Loc loc = Loc::current());

// jax.lax.while_loop: carry = init; while cond_fun(carry) (a pred[] scalar): carry =
// body_fun(carry). body_fun returns the carry's types.
std::vector<Tracer> while_loop(
    const std::function<Tracer(std::vector<Tracer>)>& cond_fun,
    const std::function<std::vector<Tracer>(std::vector<Tracer>)>& body_fun,
    std::vector<Tracer> init, Loc loc = Loc::current());
Tracer while_loop(const std::function<Tracer(Tracer)>& cond_fun,
                  const std::function<Tracer(Tracer)>& body_fun, Tracer init,
                  Loc loc = Loc::current());

// jax.lax.switch (`switch` is a C++ keyword): branches[clamp(index, 0, n - 1)](operands), index
// an s32[] scalar. Every branch returns the same types.
using Branch = std::function<std::vector<Tracer>(std::vector<Tracer>)>;
std::vector<Tracer> switch_(Tracer index, const std::vector<Branch>& branches,
                            std::vector<Tracer> operands, Loc loc = Loc::current());

// jax.lax.cond: true_fun(operands) if pred else false_fun(operands); pred is a scalar (pred, or
// a number compared with 0).
std::vector<Tracer> cond(Tracer pred, const Branch& true_fun, const Branch& false_fun,
                         std::vector<Tracer> operands, Loc loc = Loc::current());
Tracer cond(Tracer pred, const std::function<Tracer(Tracer)>& true_fun,
            const std::function<Tracer(Tracer)>& false_fun, Tracer operand,
            Loc loc = Loc::current());

// jax.lax.scan: for i in [0, length) (from the end with `reverse`): (carry, y_i) = f(carry, x_i),
// where x_i is xs[k][i] for each xs[k] (all of leading dimension `length`); returns the final
// carry and the ys stacked along a new leading dimension. length -1: the xs' leading dimension
// (needed when there are no xs). Traced as a fori_loop that slices the xs and writes the ys.
struct ScanResult {
  std::vector<Tracer> carry;
  std::vector<Tracer> ys;
};
using ScanBody = std::function<std::pair<std::vector<Tracer>, std::vector<Tracer>>(
    std::vector<Tracer> carry, std::vector<Tracer> x)>;
ScanResult scan(const ScanBody& f, std::vector<Tracer> init, std::vector<Tracer> xs,
                int64_t length = -1, bool reverse = false, Loc loc = Loc::current());

}  // namespace lax
}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_CONTROL_FLOW_H_
