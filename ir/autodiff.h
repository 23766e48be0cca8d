// Automatic differentiation of IR regions with the primitives' rules (ir/ad_rule.h), as JAX does
// it: forward mode applies the JVP rules; reverse mode linearizes (the primal ops go to the
// builder, the JVP's ops on tangents to a linear tape) and transposes the tape, last op first.
// Both emit into a FunctionBuilder, so that a trace can inline a gradient and a tool can build
// a whole JVP or VJP function.
#ifndef SHARDJIT_IR_AUTODIFF_H_
#define SHARDJIT_IR_AUTODIFF_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ad_rule.h"
#include "ir/builder.h"
#include "ir/ir.pb.h"
#include "ir/types.h"

namespace shardjit::ir {

struct LinearTape;

// Emits the ops that rules ask for. Forward mode sends every op to the builder. While
// linearizing, an op that reads a tangent goes to the linear tape instead (its results are
// tangent values: IsTangent), and an op on primal values only goes to the builder.
class AdEmitter {
 public:
  // Forward mode: everything into `b`.
  explicit AdEmitter(FunctionBuilder& b);
  // Linearizing: primal ops into `b`, ops on tangents onto `tape`.
  AdEmitter(FunctionBuilder& b, LinearTape* tape);

  bool IsTangent(int64_t id) const;
  ShapedType TypeOf(int64_t id) const;

  // Appends `op` (its attributes set, operands given): result ids.
  absl::StatusOr<std::vector<int64_t>> Emit(Op op, const std::vector<int64_t>& operands);
  absl::StatusOr<int64_t> Emit1(Op op, const std::vector<int64_t>& operands);

  // One op each.
  absl::StatusOr<int64_t> Unary(std::string_view opcode, int64_t x);
  absl::StatusOr<int64_t> Binary(std::string_view opcode, int64_t a, int64_t b);
  // A constant of `type`, every element `value`.
  absl::StatusOr<int64_t> Full(double value, const ShapedType& type);
  // A constant of x's type.
  absl::StatusOr<int64_t> FullLike(double value, int64_t x);
  absl::StatusOr<int64_t> Compare(int64_t a, int64_t b, ComparisonDirection direction);
  absl::StatusOr<int64_t> Select(int64_t pred, int64_t on_true, int64_t on_false);
  absl::StatusOr<int64_t> Convert(int64_t x, DType dtype);
  absl::StatusOr<int64_t> BroadcastInDim(int64_t x, const std::vector<int64_t>& shape,
                                         const std::vector<int64_t>& broadcast_dimensions);
  absl::StatusOr<int64_t> Reshape(int64_t x, const std::vector<int64_t>& shape);
  absl::StatusOr<int64_t> Transpose(int64_t x, const std::vector<int64_t>& permutation);
  absl::StatusOr<int64_t> ReduceSum(int64_t x, const std::vector<int64_t>& axes);

  // a + b where either may be kZero (kZero when both are).
  absl::StatusOr<int64_t> AddAny(int64_t a, int64_t b);
  // x, or zeros of `type` for kZero.
  absl::StatusOr<int64_t> Instantiate(int64_t x, const ShapedType& type);
  // x * factor where x may be kZero (kZero then, and no op).
  absl::StatusOr<int64_t> Scale(int64_t x, int64_t factor);

  // While linearizing: records a linear op on tangent `operands` with results of
  // `result_types` whose transpose is `transpose` (cotangents of the results, kZero where zero ->
  // cotangents of the operands), for ops whose linear part is not one primitive (shard_map,
  // fori_loop). `reads`: the primal values the transpose reads; it gets them through `primal`
  // (the tape may be replayed in another region, where they have other ids).
  using CustomTranspose = std::function<absl::StatusOr<std::vector<int64_t>>(
      FunctionBuilder&, const std::vector<int64_t>& result_cotangents,
      const std::function<int64_t(int64_t)>& primal)>;
  absl::StatusOr<std::vector<int64_t>> RecordLinear(const std::vector<int64_t>& operands,
                                                    const std::vector<ShapedType>& result_types,
                                                    const std::vector<int64_t>& reads,
                                                    CustomTranspose transpose);

 private:
  FunctionBuilder& b_;
  LinearTape* tape_ = nullptr;
};

// `op` with its attributes only (no operands, results or result types): the same op for other
// operands, as rules re-emit it.
Op OpAttrs(const Op& op);

// Every value id the regions of `op` read (operands and results of the ops inside, at any
// depth): `f(id)` may replace it. Ids are unique in a function, so replacing the ids of values
// defined outside `op` leaves the regions' own values alone.
void ForEachRegionRead(Op& op, const std::function<void(int64_t&)>& f);

// A value a region reads from an enclosing one (`region_id`), passed in explicitly: its value
// (a builder id) and, in forward mode, its tangent (kZero: none), or, when linearizing, whether
// to differentiate with respect to it.
struct CapturedValue {
  int64_t region_id = 0;
  int64_t value = 0;
  int64_t tangent = kZero;
  bool wrt = false;
};

// The result tangents of a forward-mode pass.
struct JvpResult {
  std::vector<int64_t> results;   // the region's results (primal)
  std::vector<int64_t> tangents;  // their tangents (kZero where zero)
};

// Emits `region`'s ops on `primals` (builder ids) with their tangents (builder ids, or kZero)
// into `b`. Values the region reads from enclosing regions are constants (zero tangent).
absl::StatusOr<JvpResult> EmitJvp(FunctionBuilder& b, const Region& region,
                                  const std::vector<int64_t>& primals,
                                  const std::vector<int64_t>& tangents,
                                  const std::vector<CapturedValue>& captures = {});

// Reverse mode of one region: Linearize emits its primal ops into a builder and records the
// linear part of its JVP; Transpose (any number of times, into the same builder) emits the
// cotangents of the differentiated inputs.
class Linearized {
 public:
  // `wrt[i]`: differentiate with respect to primal i (floating dtypes only); `captures`: values
  // the region reads from outside, those with `wrt` differentiated too (their cotangents follow
  // the primals' in Transpose's result); `saved`: results of the region's own ops available as
  // these builder ids (not recomputed, as a checkpoint policy keeps them).
  static absl::StatusOr<Linearized> Linearize(
      FunctionBuilder& b, const Region& region, const std::vector<int64_t>& primals,
      const std::vector<bool>& wrt, const std::vector<CapturedValue>& captures = {},
      const std::unordered_map<int64_t, int64_t>& saved = {});
  Linearized(Linearized&&);
  Linearized& operator=(Linearized&&);
  ~Linearized();

  // The region's results (builder ids).
  const std::vector<int64_t>& results() const { return results_; }
  // Cotangents of the differentiated inputs (zeros where nothing reaches them; kZero for the
  // inputs not in `wrt`) from those of the results (kZero where zero).
  absl::StatusOr<std::vector<int64_t>> Transpose(FunctionBuilder& b,
                                                 const std::vector<int64_t>& cotangents) const;
  // Transpose where the primal values the tape reads are read at `remap`'s ids instead (where
  // remapped): for a tape replayed in another region.
  absl::StatusOr<std::vector<int64_t>> Transpose(
      FunctionBuilder& b, const std::vector<int64_t>& cotangents,
      const std::unordered_map<int64_t, int64_t>& remap) const;
  // The primal values the tape reads, in order of first use.
  std::vector<int64_t> Residuals() const;

 private:
  Linearized();
  std::unique_ptr<LinearTape> tape_;
  std::vector<int64_t> results_;
  std::vector<int64_t> result_tangents_;  // tape values (or kZero)
  std::vector<int64_t> input_tangents_;   // tape values of the inputs (kZero: not in wrt)
  std::vector<ShapedType> input_types_;
};

// Whole functions, for irdump and irrun: (primals..., tangents...) -> (results..., result
// tangents...), and (primals..., result cotangents...) -> (results..., input cotangents...) with
// respect to every floating-point input (integer inputs get zero cotangents).
absl::StatusOr<Function> JvpFunction(const Function& f, const Mesh* mesh, bool per_device);
absl::StatusOr<Function> VjpFunction(const Function& f, const Mesh* mesh, bool per_device);

enum class AdTransform { kJvp, kVjp };
// "jvp" or "vjp"; nullopt for other names.
std::optional<AdTransform> ParseAdTransform(std::string_view name);
// `m` with its entry replaced by the entry's JVP or VJP function and the parameter and result
// shardings extended to match (a tangent is laid out as its primal, a cotangent as its value).
// InvalidArgument for MPMD modules (position functions).
absl::StatusOr<Module> TransformModule(const Module& m, AdTransform transform);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_AUTODIFF_H_
