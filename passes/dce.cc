#include "passes/dce.h"

#include <unordered_set>

#include "ir/prim.h"
#include "ir/regions.h"

namespace shardjit::passes {
namespace {

void AddUses(const ir::Region& region, std::unordered_set<int64_t>& used);

void AddOpUses(const ir::Op& op, std::unordered_set<int64_t>& used) {
  for (int64_t id : op.operands()) used.insert(id);
  for (const ir::Region* r : ir::Regions(op)) AddUses(*r, used);
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
    // psend delivers to a peer whether or not its token is used; a ref_store (or a kernel loop
    // or branch holding one) writes a ref.
    const ir::Prim prim = ir::PrimOf(op);
    bool live = ir::IsAsyncDone(prim) || prim == ir::Prim::kPsend || ir::HasEffects(op);
    for (int64_t id : op.results()) live = live || used.count(id);
    if (!live) {
      changed = true;
      continue;
    }
    keep[i] = true;
    // Open regions (loops, branches) may read what the op's users read; closed ones only their
    // own values.
    const bool closed = ir::HasClosedRegions(op);
    for (ir::Region* r : ir::MutableRegions(op)) {
      changed |= Sweep(*r, closed ? std::unordered_set<int64_t>{} : used);
    }
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
