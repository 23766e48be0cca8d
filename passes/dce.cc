#include "passes/dce.h"

#include <unordered_set>

#include "ir/prim.h"

namespace shardjit::passes {
namespace {

void AddUses(const ir::Region& region, std::unordered_set<int64_t>& used);

void AddOpUses(const ir::Op& op, std::unordered_set<int64_t>& used) {
  for (int64_t id : op.operands()) used.insert(id);
  if (op.has_fori_loop()) AddUses(op.fori_loop().body(), used);
  if (op.has_shard_map()) AddUses(op.shard_map().body(), used);
  if (op.has_fusion()) AddUses(op.fusion().body(), used);
}

void AddUses(const ir::Region& region, std::unordered_set<int64_t>& used) {
  for (int64_t id : region.results()) used.insert(id);
  for (const ir::Op& op : region.ops()) AddOpUses(op, used);
}

// Removes dead ops of `region` (walking backwards so chains die at once); returns whether any
// op was removed. `used` holds values used outside this region.
bool Sweep(ir::Region& region, std::unordered_set<int64_t> used) {
  bool changed = false;
  for (int64_t id : region.results()) used.insert(id);
  std::vector<bool> keep(region.ops_size(), false);
  for (int i = region.ops_size() - 1; i >= 0; --i) {
    ir::Op& op = *region.mutable_ops(i);
    // A *_done completes a transfer its peers take part in: it stays, and keeps its start. A
    // psend delivers to a peer whether or not its token is used.
    const ir::Prim prim = ir::PrimOf(op);
    bool live = ir::IsAsyncDone(prim) || prim == ir::Prim::kPsend;
    for (int64_t id : op.results()) live = live || used.count(id);
    if (!live) {
      changed = true;
      continue;
    }
    keep[i] = true;
    if (op.has_fori_loop()) changed |= Sweep(*op.mutable_fori_loop()->mutable_body(), used);
    if (op.has_shard_map()) changed |= Sweep(*op.mutable_shard_map()->mutable_body(), {});
    if (op.has_fusion()) changed |= Sweep(*op.mutable_fusion()->mutable_body(), {});
    AddOpUses(op, used);
  }
  if (changed) {
    google::protobuf::RepeatedPtrField<ir::Op> kept;
    for (int i = 0; i < region.ops_size(); ++i) {
      if (keep[i]) *kept.Add() = std::move(*region.mutable_ops(i));
    }
    region.mutable_ops()->Swap(&kept);
  }
  return changed;
}

}  // namespace

absl::StatusOr<bool> DeadCodeElimination::Run(ir::Module& module) {
  bool changed = false;
  for (ir::Function& f : *module.mutable_functions()) changed |= Sweep(*f.mutable_body(), {});
  return changed;
}

}  // namespace shardjit::passes
