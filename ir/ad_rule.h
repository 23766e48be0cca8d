// The transformation rules a primitive registers beside its shape rule (ir/primitive.h): a JVP
// rule (forward mode), for the primitives that are linear in some operands a transpose rule
// (reverse mode transposes the linear ops a JVP emits), and a batching rule (vmap).
// ir/autodiff.h and ir/batching.h apply them.
#ifndef SHARDJIT_IR_AD_RULE_H_
#define SHARDJIT_IR_AD_RULE_H_

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/types.h"

namespace shardjit::ir {

class AdEmitter;  // ir/autodiff.h

// A tangent or cotangent known to be zero: no op computes it.
inline constexpr int64_t kZero = -1;

// What a JVP rule sees: the op, its primal operands and results (value ids) and the tangents of
// its operands (kZero where zero; never all kZero).
struct JvpArgs {
  const Op& op;
  const std::vector<int64_t>& primals;
  const std::vector<int64_t>& tangents;
  const std::vector<int64_t>& results;
  // Where set, a rule that computes the op's results again together with what the tangents need
  // (sort, with the permutation) may put those here: later ops read them, and the op the walk
  // emitted first is left to dead-code elimination.
  std::vector<int64_t>* recomputed_results = nullptr;
};
// The tangents of op's results (kZero where zero), emitted through the emitter.
using JvpRule = std::function<absl::StatusOr<std::vector<int64_t>>(AdEmitter&, const JvpArgs&)>;

// What a transpose rule sees: the op, its operands (value ids, kZero for the linear operands
// whose cotangents are asked for: `linear[i]`), their types and the cotangents of its results
// (kZero where zero; never all kZero).
struct TransposeArgs {
  const Op& op;
  const std::vector<int64_t>& operands;
  const std::vector<bool>& linear;
  const std::vector<ShapedType>& operand_types;
  const std::vector<int64_t>& cotangents;
};
// The cotangents of the linear operands (kZero where zero; entries of the other operands are
// ignored), emitted through the emitter.
using TransposeRule =
    std::function<absl::StatusOr<std::vector<int64_t>>(AdEmitter&, const TransposeArgs&)>;

// Batching (vmap): the op applied to operands of which some carry a batch dimension.
inline constexpr int64_t kNotBatched = -1;
struct BatchArgs {
  const Op& op;
  const std::vector<int64_t>& operands;
  const std::vector<int64_t>& batch_dims;  // per operand: its batch dimension, or kNotBatched
  int64_t size;                            // the batch size
  // vmap's axis_name (empty: none): a collective over it acts across the batch. Its rule is
  // called for such a collective even when no operand is batched.
  std::string_view axis_name;
};
// The batched results and their batch dimensions (kNotBatched where a result has none).
struct BatchedValues {
  std::vector<int64_t> values;
  std::vector<int64_t> batch_dims;
};
using BatchRule = std::function<absl::StatusOr<BatchedValues>(AdEmitter&, const BatchArgs&)>;

// A primitive's rules; an empty jvp means "not differentiable" (JAX's "Differentiation rule for
// 'X' not implemented"), an empty transpose that the primitive is never linear in a tangent.
struct AdRules {
  JvpRule jvp;
  TransposeRule transpose;
  // Empty: JAX's "Batching rule for 'X' not implemented" when an operand is batched.
  BatchRule batch;
};

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_AD_RULE_H_
