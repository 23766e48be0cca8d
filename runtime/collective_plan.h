// Collective ops resolved once for a mesh: for every collective op of a program (found by its
// address in the compiled function), the group of each mesh position and the op's signature,
// which every member of a group must agree on. A compiled program keeps its plan across runs, so
// a collective's group is not recomputed (nor its signature formatted) on every call.
#ifndef SHARDJIT_RUNTIME_COLLECTIVE_PLAN_H_
#define SHARDJIT_RUNTIME_COLLECTIVE_PLAN_H_

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/collective_groups.h"
#include "ir/ir.pb.h"
#include "ir/prim.h"

namespace shardjit::runtime {

using ir::CollectiveGroup;

struct ResolvedCollective {
  const ir::Op* op = nullptr;
  // What it computes: its blocking twin for an async start (ir::CollectiveKind).
  ir::Prim kind = ir::Prim::kUnknown;
  // The op without operand/result ids, scope and location, serialized: equal on every member.
  std::string signature;
  // The group of each mesh position (an error where its groups do not cover it).
  std::vector<absl::StatusOr<CollectiveGroup>> groups;
};

class CollectivePlan {
 public:
  // Resolves every collective op in `functions` (regions included) for `mesh`.
  CollectivePlan(const ir::Mesh& mesh, const std::vector<const ir::Function*>& functions);
  explicit CollectivePlan(const ir::Mesh& mesh) : CollectivePlan(mesh, {}) {}

  const ir::Mesh& mesh() const { return mesh_; }
  // The resolution of `op`: from the plan, or (for an op the plan was not built with) resolved
  // now and kept. Thread-safe.
  const ResolvedCollective& Resolve(const ir::Op& op) const;

 private:
  std::unique_ptr<ResolvedCollective> ResolveNow(const ir::Op& op) const;
  void AddRegion(const ir::Region& region);

  ir::Mesh mesh_;
  std::unordered_map<const ir::Op*, std::unique_ptr<ResolvedCollective>> ops_;  // immutable
  mutable std::mutex late_mu_;
  mutable std::unordered_map<const ir::Op*, std::unique_ptr<ResolvedCollective>> late_;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_COLLECTIVE_PLAN_H_
