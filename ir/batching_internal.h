// Internal to ir/batching*.cc: the batching of the ops with regions EmitBatched hands over besides
// loops and cond: those that carry the user's differentiation choices (batching_custom.cc),
// shard_map (batching_shard_map.cc) and pallas_call (batching_pallas.cc).
#ifndef SHARDJIT_IR_BATCHING_INTERNAL_H_
#define SHARDJIT_IR_BATCHING_INTERNAL_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/batching.h"

namespace shardjit::ir::batching_internal {

// Each: the op batched through its regions (operands batched along `dims`, the values its
// regions read from the walked region in `captures`); every result batched along dimension 0.
absl::StatusOr<BatchedValues> BatchCustomJvpCall(FunctionBuilder& b, const Op& op,
                                                 const std::vector<int64_t>& operands,
                                                 const std::vector<int64_t>& dims, int64_t size,
                                                 const std::vector<BatchedCapture>& captures,
                                                 std::string_view axis_name);
absl::StatusOr<BatchedValues> BatchCustomVjpCall(FunctionBuilder& b, const Op& op,
                                                 const std::vector<int64_t>& operands,
                                                 const std::vector<int64_t>& dims, int64_t size,
                                                 const std::vector<BatchedCapture>& captures,
                                                 std::string_view axis_name);
absl::StatusOr<BatchedValues> BatchCheckpoint(FunctionBuilder& b, const Op& op,
                                              const std::vector<int64_t>& operands,
                                              const std::vector<int64_t>& dims, int64_t size,
                                              const std::vector<BatchedCapture>& captures,
                                              std::string_view axis_name);

// pallas_call (batching_pallas.cc): the batch is a new leading parallel grid axis.
absl::StatusOr<BatchedValues> BatchPallasCall(FunctionBuilder& b, const Op& op,
                                              const std::vector<int64_t>& operands,
                                              const std::vector<int64_t>& dims, int64_t size,
                                              const std::vector<BatchedCapture>& captures,
                                              std::string_view axis_name);

// shard_map (batching_shard_map.cc): the batch dimension leads every operand and result, unsplit.
absl::StatusOr<BatchedValues> BatchShardMap(FunctionBuilder& b, const Op& op,
                                            const std::vector<int64_t>& operands,
                                            const std::vector<int64_t>& dims, int64_t size,
                                            const std::vector<BatchedCapture>& captures,
                                            std::string_view axis_name);

}  // namespace shardjit::ir::batching_internal

#endif  // SHARDJIT_IR_BATCHING_INTERNAL_H_
