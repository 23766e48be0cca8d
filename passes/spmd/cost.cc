#include "passes/spmd/cost.h"

#include <algorithm>
#include <unordered_map>

#include "ir/collective_groups.h"
#include "ir/types.h"

namespace shardjit::passes::spmd {
namespace {

// The largest group of the collective (its size alone when it has no axis_index_groups); 1 for
// axes the mesh lacks (the verifier rejects those).
int64_t GroupSize(const ir::Mesh& mesh, const ir::Op& op) {
  return ir::GroupSize(mesh, /*position=*/-1, op).value_or(1);
}

class Counter {
 public:
  explicit Counter(const ir::Mesh& mesh) : mesh_(mesh) {}

  int64_t Region(const ir::Region& region) {
    for (const ir::Param& p : region.params()) types_[p.id()] = ir::FromProto(p.type());
    int64_t total = 0;
    for (const ir::Op& op : region.ops()) {
      for (int i = 0; i < op.results_size(); ++i) {
        types_[op.results(i)] = ir::FromProto(op.result_types(i));
      }
      total += Op(op);
    }
    return total;
  }

 private:
  int64_t Op(const ir::Op& op) {
    auto operand_bytes = [&] { return types_[op.operands(0)].byte_size(); };
    auto result_bytes = [&] { return ir::FromProto(op.result_types(0)).byte_size(); };
    if (op.has_fori_loop()) {
      return Region(op.fori_loop().body()) *
             std::max<int64_t>(0, op.fori_loop().upper() - op.fori_loop().lower());
    }
    if (op.has_shard_map()) return Region(op.shard_map().body());
    if (op.has_all_gather()) return result_bytes() - operand_bytes();
    if (op.has_all_reduce()) return AllReduceBytes(operand_bytes(), GroupSize(mesh_, op));
    if (op.has_psum_scatter()) return operand_bytes() - result_bytes();
    if (op.has_all_to_all()) return AllToAllBytes(operand_bytes(), GroupSize(mesh_, op));
    if (op.has_ppermute()) return op.ppermute().perm().empty() ? 0 : operand_bytes();
    return 0;
  }

  const ir::Mesh& mesh_;
  std::unordered_map<int64_t, ir::ShapedType> types_;
};

}  // namespace

int64_t CommunicatedBytes(const ir::Module& module) {
  for (const ir::Function& f : module.functions()) {
    if (f.name() == module.entry()) return Counter(module.mesh()).Region(f.body());
  }
  return 0;
}

}  // namespace shardjit::passes::spmd
