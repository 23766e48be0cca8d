// Partitioning rules: for each primitive, the ways it can run on local blocks (Strategy), and the
// cost model that chooses among them. Sharding propagation and the SPMD partitioner both call
// ChooseStrategy, so the layouts the first records are the ones the second can realise.
#ifndef SHARDJIT_PASSES_SPMD_RULES_H_
#define SHARDJIT_PASSES_SPMD_RULES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/types.h"
#include "passes/machine_model.h"
#include "passes/spmd/reshard.h"
#include "passes/spmd/spec.h"

namespace shardjit::passes::spmd {

// How an op runs on local blocks: the layout each operand is resharded to first, the layout of
// each result once the op is done, and the cross-device reduction that finishes partial results
// (reduce_* and dot_general over sharded dimensions).
struct Strategy {
  std::vector<Spec> operands;
  std::vector<Spec> results;
  // The local results are partial over these axes: psum/pmax/pmin (or psum_scatter) over them.
  AxisList reduce_axes;
  // >= 0: the reduction is a psum_scatter on this result dimension; results[0] lists
  // `reduce_axes` last on it.
  int64_t scatter_dim = -1;
};

// What a rule sees of an op of a global-view program.
struct OpView {
  const ir::Op* op = nullptr;
  const ir::Mesh* mesh = nullptr;
  // Global types.
  std::vector<ir::ShapedType> operand_types;
  std::vector<ir::ShapedType> result_types;
  // The operands' layouts where known (unknown ones are free to take any layout).
  std::vector<std::optional<Spec>> operand_specs;
  // Per result, the layouts its users want (possibly none).
  std::vector<std::vector<Spec>> result_wants;
  // What time costs are priced by.
  MachineModel machine;
};

// Whether `op` has a partitioning rule.
bool HasRule(const ir::Op& op);
// UnimplementedError naming the first op of `region` (loop bodies and cond branches included; shard_map
// bodies are per-device code and need none) without a rule.
absl::Status CheckRules(const ir::Region& region);
// Whether `region` only passes its params to one shard_map and returns its results: such a
// module is lower-shard-map's (its layouts are the shard_map's specs), not the partitioner's.
bool OnlyWrapsShardMap(const ir::Region& region);

// The strategies the op's rule proposes (before validity checks); empty without a rule.
std::vector<Strategy> Candidates(const OpView& view);

// The estimated time of the op's own work on a device (flops, counting work every device repeats)
// and of its communication (bytes and collectives) by the machine model
// (passes/machine_model.h); among equal times, the bytes of the blocks the op reads and writes
// (less local memory).
struct StrategyCost {
  CommCost comm;
  int64_t flops = 0;  // per device
  int64_t block_bytes = 0;
  double seconds = 0;  // flops and comm by the view's machine model
  bool operator<(const StrategyCost& o) const;
};

// The cost of a strategy: resharding each known operand to the strategy's layout, the op on
// local blocks, its own reduction, and resharding each result to every layout its users want.
StrategyCost Cost(const OpView& view, const Strategy& strategy);

// The cheapest valid candidate (the first among equals); UnimplementedError without a rule.
absl::StatusOr<Strategy> ChooseStrategy(const OpView& view);

}  // namespace shardjit::passes::spmd

#endif  // SHARDJIT_PASSES_SPMD_RULES_H_
