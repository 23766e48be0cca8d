// Internal to ir/autodiff*.cc: the linear tape, the walk over a region's ops, and the
// differentiation of the ops with regions that the walk hands over to autodiff_regions.cc
// (shard_map, fori_loop, while_loop, cond) and autodiff_custom.cc (custom_jvp_call,
// custom_vjp_call, checkpoint).
#ifndef SHARDJIT_IR_AUTODIFF_INTERNAL_H_
#define SHARDJIT_IR_AUTODIFF_INTERNAL_H_

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/autodiff.h"

namespace shardjit::ir {

// Tangent values live on the tape with ids from kTangentBase on (builder ids stay far below).
inline constexpr int64_t kTangentBase = int64_t{1} << 48;

// The linear ops of a JVP, in order, on tangent values.
struct LinearTape {
  struct Entry {
    Op op;  // attributes only
    std::vector<int64_t> operands, results;
    AdEmitter::CustomTranspose custom;  // set: transposed by it, not by op's rule
    std::vector<int64_t> reads;         // the primal values `custom` reads
  };
  std::vector<Entry> ops;
  std::unordered_map<int64_t, ShapedType> types;
  int64_t next_id = kTangentBase;

  int64_t NewValue(const ShapedType& type) {
    types[next_id] = type;
    return next_id++;
  }
};

namespace autodiff_internal {

Op Named(std::string_view opcode);
// JAX's "Differentiation rule for 'X' not implemented" (`kind`: "Differentiation", "Transpose").
absl::Status NoRule(std::string_view kind, const Op& op);

// Walks `region` once: each op is re-emitted on mapped operands and its tangents computed with
// the JVP rules through `e` (ops with regions through them). `tangent` maps region values to
// tangents (absent: zero); `captures` are the enclosing values the region reads. While
// linearizing (`linearizing`), a rule's tangent that is not a tape value does not depend on the
// input tangents: zero.
// `saved` (optional) maps results of the region's own ops to builder ids that stand for them: such
// an op is not re-emitted, only differentiated.
absl::StatusOr<std::vector<int64_t>> WalkJvp(
    FunctionBuilder& b, AdEmitter& e, const Region& region, const std::vector<int64_t>& primals,
    const std::vector<CapturedValue>& captures, bool linearizing,
    std::unordered_map<int64_t, int64_t>& tangent, std::vector<int64_t>* result_tangents,
    const std::unordered_map<int64_t, int64_t>* saved = nullptr);

// The ops with regions, differentiated through them (autodiff_regions.cc): their results and
// their results' tangents (kZero where zero). Forward mode (the Jvp ones) emits tangents into
// the builder; reverse mode (the Linearize ones) records the linear part on `e`'s tape.
absl::Status ShardMapJvp(FunctionBuilder& b, const Op& op, const std::vector<int64_t>& operands,
                         const std::vector<int64_t>& tangents, std::vector<int64_t>* results,
                         std::vector<int64_t>* result_tangents);
absl::Status ShardMapLinearize(FunctionBuilder& b, AdEmitter& e, const Op& op,
                               const std::vector<int64_t>& operands,
                               const std::vector<int64_t>& tangents,
                               std::vector<int64_t>* results,
                               std::vector<int64_t>* result_tangents);
absl::Status ForiLoopJvp(FunctionBuilder& b, const Op& op, const std::vector<int64_t>& operands,
                         const std::vector<int64_t>& tangents,
                         const std::vector<CapturedValue>& captures,
                         std::vector<int64_t>* results, std::vector<int64_t>* result_tangents);
absl::Status ForiLoopLinearize(FunctionBuilder& b, AdEmitter& e, const Op& op,
                               const std::vector<int64_t>& operands,
                               const std::vector<int64_t>& tangents,
                               const std::vector<CapturedValue>& captures,
                               std::vector<int64_t>* results,
                               std::vector<int64_t>* result_tangents);
absl::Status WhileLoopJvp(FunctionBuilder& b, const Op& op, const std::vector<int64_t>& operands,
                          const std::vector<int64_t>& tangents,
                          const std::vector<CapturedValue>& captures,
                          std::vector<int64_t>* results, std::vector<int64_t>* result_tangents);
absl::Status CondJvp(FunctionBuilder& b, const Op& op, const std::vector<int64_t>& operands,
                     const std::vector<int64_t>& tangents,
                     const std::vector<CapturedValue>& captures, std::vector<int64_t>* results,
                     std::vector<int64_t>* result_tangents);
absl::Status CondLinearize(FunctionBuilder& b, AdEmitter& e, const Op& op,
                           const std::vector<int64_t>& operands,
                           const std::vector<int64_t>& tangents,
                           const std::vector<CapturedValue>& captures,
                           std::vector<int64_t>* results, std::vector<int64_t>* result_tangents);

// Records the linear part of an op with regions as one tape op (ops on the tangents `operands`,
// giving the tangents of its float results `float_results`, of `types`) whose transpose is
// `transpose` reading `reads`, and sets `result_tangents` (kZero for its other results).
absl::Status RecordLinearResults(AdEmitter& e, const std::vector<int64_t>& operands,
                                 const std::vector<ShapedType>& types,
                                 const std::vector<size_t>& float_results, size_t num_results,
                                 const std::vector<int64_t>& reads,
                                 AdEmitter::CustomTranspose transpose,
                                 std::vector<int64_t>* result_tangents);

// The ops carrying the user's choices (autodiff_custom.cc). custom_jvp_call in either mode
// (`linearizing`: the rule's ops on tangents go to `e`'s tape); custom_vjp_call and checkpoint
// in reverse mode (forward mode: the former is an error, the latter its body, inline).
absl::Status CustomJvpCallJvp(FunctionBuilder& b, AdEmitter& e, const Op& op,
                              const std::vector<int64_t>& operands,
                              const std::vector<int64_t>& tangents,
                              const std::vector<CapturedValue>& captures, bool linearizing,
                              std::vector<int64_t>* results, std::vector<int64_t>* result_tangents);
absl::Status CustomVjpCallLinearize(FunctionBuilder& b, AdEmitter& e, const Op& op,
                                    const std::vector<int64_t>& operands,
                                    const std::vector<int64_t>& tangents,
                                    const std::vector<CapturedValue>& captures,
                                    std::vector<int64_t>* results,
                                    std::vector<int64_t>* result_tangents);
// Whether checkpoint `a` keeps every value (everything_saveable, alone or among its policies):
// then it is differentiated as its body.
bool SavesEverything(const CheckpointAttrs& a);
// checkpoint differentiated as its body, inline (forward mode; everything_saveable).
absl::Status CheckpointInline(FunctionBuilder& b, AdEmitter& e, const Op& op,
                              const std::vector<int64_t>& operands,
                              const std::vector<int64_t>& tangents,
                              const std::vector<CapturedValue>& captures, bool linearizing,
                              std::vector<int64_t>* results, std::vector<int64_t>* result_tangents);
absl::Status CheckpointLinearize(FunctionBuilder& b, AdEmitter& e, const Op& op,
                                 const std::vector<int64_t>& operands,
                                 const std::vector<int64_t>& tangents,
                                 const std::vector<CapturedValue>& captures,
                                 std::vector<int64_t>* results,
                                 std::vector<int64_t>* result_tangents);

}  // namespace autodiff_internal
}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_AUTODIFF_INTERNAL_H_
