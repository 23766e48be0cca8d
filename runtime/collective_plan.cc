#include "runtime/collective_plan.h"

#include "ir/prim.h"
#include "ir/primitive.h"
#include "ir/regions.h"
#include "ir/sharding.h"

namespace shardjit::runtime {

CollectivePlan::CollectivePlan(const ir::Mesh& mesh,
                               const std::vector<const ir::Function*>& functions)
    : mesh_(mesh) {
  for (const ir::Function* f : functions) {
    if (f != nullptr) AddRegion(f->body());
  }
}

void CollectivePlan::AddRegion(const ir::Region& region) {
  for (const ir::Op& op : region.ops()) {
    // Loop bodies and cond branches run here; shard_map bodies are planned where they run.
    if (!ir::HasClosedRegions(op)) {
      for (const ir::Region* r : ir::Regions(op)) AddRegion(*r);
    }
    const ir::Prim prim = ir::PrimOf(op);
    // A *_done meets no one: its start did.
    if (ir::IsCollective(prim) && !ir::IsAsyncDone(prim) && !ops_.count(&op)) {
      ops_.emplace(&op, ResolveNow(op));
    }
  }
}

std::unique_ptr<ResolvedCollective> CollectivePlan::ResolveNow(const ir::Op& op) const {
  auto r = std::make_unique<ResolvedCollective>();
  r->op = &op;
  r->kind = ir::CollectiveKind(ir::PrimOf(op));
  ir::Op bare = op;
  bare.clear_operands();
  bare.clear_results();
  bare.clear_name_scope();
  bare.clear_loc();
  bare.clear_sharding();
  r->signature = bare.SerializeAsString();
  const ir::AxisList axes = ir::CollectiveAxes(op);
  const int64_t n = ir::MeshSize(mesh_);
  r->groups.reserve(n);
  for (int64_t p = 0; p < n; ++p) {
    r->groups.push_back(ir::GroupOf(mesh_, p, axes, ir::CollectiveAxisGroups(op)));
  }
  return r;
}

const ResolvedCollective& CollectivePlan::Resolve(const ir::Op& op) const {
  if (auto it = ops_.find(&op); it != ops_.end()) return *it->second;
  std::lock_guard<std::mutex> lock(late_mu_);
  std::unique_ptr<ResolvedCollective>& r = late_[&op];
  if (r == nullptr) r = ResolveNow(op);
  return *r;
}

}  // namespace shardjit::runtime
