#include "passes/lower_shard_map.h"

#include "ir/verifier.h"

namespace shardjit::passes {

absl::StatusOr<bool> LowerShardMap::Run(ir::Module& module) {
  if (module.view() != ir::GLOBAL) return false;
  ir::Function* entry = nullptr;
  for (ir::Function& f : *module.mutable_functions()) {
    if (f.name() == module.entry()) entry = &f;
  }
  if (entry == nullptr || entry->body().ops_size() != 1) return false;
  const ir::Region& body = entry->body();
  const ir::Op& op = body.ops(0);
  if (!op.has_shard_map() || op.operands_size() != body.params_size() ||
      op.results_size() != body.results_size()) {
    return false;
  }
  for (int i = 0; i < op.operands_size(); ++i) {
    if (op.operands(i) != body.params(i).id()) return false;
  }
  for (int i = 0; i < op.results_size(); ++i) {
    if (op.results(i) != body.results(i)) return false;
  }
  ir::ShardMapAttrs shard_map = op.shard_map();
  module.set_view(ir::PER_DEVICE);
  module.clear_param_shardings();
  module.clear_result_shardings();
  for (const ir::PartitionSpec& s : shard_map.in_specs()) *module.add_param_shardings() = s;
  for (const ir::PartitionSpec& s : shard_map.out_specs()) *module.add_result_shardings() = s;
  *entry->mutable_body() = std::move(*shard_map.mutable_body());
  ir::CanonicalizeValueIds(*entry);
  return true;
}

}  // namespace shardjit::passes
