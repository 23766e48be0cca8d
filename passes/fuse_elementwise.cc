#include "passes/fuse_elementwise.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/broadcast_rows.h"
#include "ir/prim.h"
#include "ir/regions.h"
#include "ir/verifier.h"

namespace shardjit::passes {
namespace {

using TypeMap = std::unordered_map<int64_t, ir::TensorType>;

// How a broadcast_in_dim's operand lines up with the rows of its result (ir/broadcast_rows.h);
// nullopt when it does not.
std::optional<ir::BroadcastRows> RowsOfBroadcast(const ir::Op& op, const TypeMap& types) {
  return ir::BroadcastRowsOf(op, types.at(op.operands(0)));
}

bool IsFusible(const ir::Op& op, const TypeMap& types) {
  if (op.results_size() != 1 || op.result_types(0).dims_size() == 0) return false;
  switch (ir::PrimOf(op)) {
    // A broadcast whose operand a loop over the result's rows reads with one pointer per row.
    case ir::Prim::kBroadcastInDim:
      return op.operands_size() == 1 && RowsOfBroadcast(op, types).has_value();
    // The elementwise primitives the x86 generator emits (rem and the other math ones run on their
    // own kernels).
    case ir::Prim::kAdd:
    case ir::Prim::kSub:
    case ir::Prim::kMul:
    case ir::Prim::kDiv:
    case ir::Prim::kMax:
    case ir::Prim::kMin:
    case ir::Prim::kNeg:
    case ir::Prim::kAbs:
    case ir::Prim::kExp:
    case ir::Prim::kLog:
    case ir::Prim::kTanh:
    case ir::Prim::kSqrt:
    case ir::Prim::kRsqrt:
    case ir::Prim::kConvertElementType:
    case ir::Prim::kCompare:
    case ir::Prim::kSelect:
    case ir::Prim::kLogistic:
    case ir::Prim::kErf:
    case ir::Prim::kSin:
    case ir::Prim::kCos:
    case ir::Prim::kFloor:
    case ir::Prim::kCeil:
    case ir::Prim::kRound:
    case ir::Prim::kSign:
      return true;
    default:
      return false;
  }
}

// Math the generated loops evaluate in a few vector instructions where a kernel of its own calls
// the C library per element: worth a fusion of its own.
bool IsCostlyAlone(const ir::Op& op) {
  switch (ir::PrimOf(op)) {
    case ir::Prim::kExp:
    case ir::Prim::kLog:
    case ir::Prim::kTanh:
    case ir::Prim::kLogistic:
    case ir::Prim::kErf:
    case ir::Prim::kSin:
    case ir::Prim::kCos:
    case ir::Prim::kSqrt:
    case ir::Prim::kRsqrt:
      return true;
    default:
      return false;
  }
}

void CountCaptures(const ir::Region& region, std::unordered_map<int64_t, int>& uses);

void CountNested(const ir::Op& op, std::unordered_map<int64_t, int>& uses) {
  for (const ir::Region* r : ir::Regions(op)) CountCaptures(*r, uses);
}

// Counts every use inside `region` (and deeper) once per operand slot.
void CountCaptures(const ir::Region& region, std::unordered_map<int64_t, int>& uses) {
  for (const ir::Op& op : region.ops()) {
    for (int64_t id : op.operands()) ++uses[id];
    CountNested(op, uses);
  }
  for (int64_t id : region.results()) ++uses[id];
}

void CollectTypes(const ir::Region& region, TypeMap& types) {
  for (const ir::Param& p : region.params()) types[p.id()] = p.type();
  for (const ir::Op& op : region.ops()) {
    for (int r = 0; r < op.results_size() && r < op.result_types_size(); ++r) {
      types[op.results(r)] = op.result_types(r);
    }
    for (const ir::Region* r : ir::Regions(op)) CollectTypes(*r, types);
  }
}

class Fuser {
 public:
  // `types`: the type of every value of the function.
  Fuser(const FuseElementwiseOptions& options, TypeMap& types)
      : options_(options), next_id_(0), types_(types) {
    for (const auto& [id, type] : types) next_id_ = std::max(next_id_, id + 1);
  }

  // Fuses in `region` and the regions inside it (but fusion bodies); returns whether it changed.
  // `in_kernel`: a pallas_call kernel's region (or one inside it), whose constants and iotas the
  // backends read as such (masks, fills).
  bool Region(ir::Region& region, bool in_kernel = false) {
    bool changed = false;
    for (ir::Op& op : *region.mutable_ops()) {
      if (op.has_fusion()) continue;
      const bool kernel = in_kernel || ir::PrimOf(op) == ir::Prim::kPallasCall;
      for (ir::Region* r : ir::MutableRegions(op)) changed |= Region(*r, kernel);
    }
    if (!in_kernel) changed |= ExpandIntoBroadcasts(region);
    std::unordered_map<int64_t, int> uses;
    CountCaptures(region, uses);
    std::unordered_map<int64_t, int> producer;  // value -> op index
    for (int i = 0; i < region.ops_size(); ++i) {
      for (int64_t id : region.ops(i).results()) producer[id] = i;
    }
    std::vector<int> group_of(region.ops_size(), -1);
    std::vector<std::vector<int>> groups;
    for (int root = region.ops_size() - 1; root >= 0; --root) {
      if (group_of[root] >= 0 || !IsFusible(region.ops(root), types_)) continue;
      std::vector<int> members = Grow(region, root, uses, producer, group_of);
      const bool worth = static_cast<int>(members.size()) >= options_.min_group_size ||
                         (members.size() == 1 && IsCostlyAlone(region.ops(root)));
      if (!worth) continue;
      for (int m : members) group_of[m] = static_cast<int>(groups.size());
      groups.push_back(std::move(members));
    }
    if (groups.empty()) return changed;
    google::protobuf::RepeatedPtrField<ir::Op> out;
    for (int i = 0; i < region.ops_size(); ++i) {
      int g = group_of[i];
      if (g < 0) {
        *out.Add() = std::move(*region.mutable_ops(i));
      } else if (groups[g].back() == i) {
        *out.Add() = MakeFusion(region, groups[g]);
      }
    }
    region.mutable_ops()->Swap(&out);
    return true;
  }

 private:
  // Rewrites each splat constant and each iota of `region` that a fusible op reads as the
  // broadcast of its one element or of its one-dimensional iota, where the fused loops read
  // that broadcast by rows: a fusion then takes the small operand in and the array is never
  // built (a mask's iota, a select's zeros). The result keeps its id.
  bool ExpandIntoBroadcasts(ir::Region& region) {
    std::unordered_set<int64_t> read_by_fusible;
    for (const ir::Op& op : region.ops()) {
      if (!IsFusible(op, types_)) continue;
      for (int64_t id : op.operands()) read_by_fusible.insert(id);
    }
    bool changed = false;
    google::protobuf::RepeatedPtrField<ir::Op> out;
    for (ir::Op& op : *region.mutable_ops()) {
      std::optional<std::pair<ir::Op, ir::Op>> pair;
      if (op.results_size() == 1 && read_by_fusible.count(op.results(0))) pair = AsBroadcast(op);
      if (!pair) {
        *out.Add() = std::move(op);
        continue;
      }
      *out.Add() = std::move(pair->first);
      *out.Add() = std::move(pair->second);
      changed = true;
    }
    region.mutable_ops()->Swap(&out);
    return changed;
  }

  // A splat constant or an iota of rank >= 1 as (its small form, the broadcast of it), when the
  // fused loops read that broadcast by rows; nullopt otherwise.
  std::optional<std::pair<ir::Op, ir::Op>> AsBroadcast(const ir::Op& op) {
    const ir::Prim prim = ir::PrimOf(op);
    if (prim != ir::Prim::kConstant && prim != ir::Prim::kIota) return std::nullopt;
    const ir::TensorType& type = op.result_types(0);
    if (type.dims_size() == 0 ||
        std::find(type.dims().begin(), type.dims().end(), 0) != type.dims().end()) {
      return std::nullopt;
    }
    ir::Op small;
    small.set_opcode(op.opcode());
    small.set_name_scope(op.name_scope());
    if (op.has_loc()) *small.mutable_loc() = op.loc();
    ir::TensorType small_type;
    small_type.set_dtype(type.dtype());
    std::vector<int64_t> broadcast_dims;
    if (prim == ir::Prim::kConstant) {
      if (op.constant().value_size() != 1) return std::nullopt;
      *small.mutable_constant() = op.constant();
      small.mutable_constant()->clear_shape();
    } else {
      const int64_t d = op.iota().dimension();
      *small.mutable_iota() = op.iota();
      small.mutable_iota()->clear_shape();
      small.mutable_iota()->add_shape(type.dims(static_cast<int>(d)));
      small.mutable_iota()->set_dimension(0);
      small_type.add_dims(type.dims(static_cast<int>(d)));
      broadcast_dims.push_back(d);
    }
    if (!ir::BroadcastRowsOf(small_type.dims(), type.dims(), broadcast_dims)) return std::nullopt;
    const int64_t small_id = next_id_++;
    small.add_results(small_id);
    *small.add_result_types() = small_type;
    types_[small_id] = small_type;
    ir::Op broadcast;
    broadcast.set_opcode("broadcast_in_dim");
    broadcast.set_name_scope(op.name_scope());
    if (op.has_loc()) *broadcast.mutable_loc() = op.loc();
    *broadcast.mutable_sharding() = op.sharding();
    for (int64_t d : type.dims()) broadcast.mutable_broadcast_in_dim()->add_shape(d);
    for (int64_t d : broadcast_dims) {
      broadcast.mutable_broadcast_in_dim()->add_broadcast_dimensions(d);
    }
    broadcast.add_operands(small_id);
    broadcast.add_results(op.results(0));
    *broadcast.add_result_types() = type;
    return std::pair{std::move(small), std::move(broadcast)};
  }

  // The split into rows a broadcast member needs (-1: any), or nullopt for other ops.
  std::optional<int> SplitOf(const ir::Op& op) const {
    if (ir::PrimOf(op) != ir::Prim::kBroadcastInDim) return std::nullopt;
    return RowsOfBroadcast(op, types_)->split;
  }

  // The ops of the group rooted at `root`, in program order (root last): producers are added
  // while every use of their result is by a member, and broadcasts while they need the same
  // split into rows as the ones already in.
  std::vector<int> Grow(const ir::Region& region, int root,
                        const std::unordered_map<int64_t, int>& uses,
                        const std::unordered_map<int64_t, int>& producer,
                        const std::vector<int>& group_of) {
    const auto& root_dims = region.ops(root).result_types(0).dims();
    std::set<int> members = {root};
    int split = SplitOf(region.ops(root)).value_or(-1);
    for (bool grew = true; grew;) {
      grew = false;
      std::unordered_map<int64_t, int> inner_uses;
      for (int m : members) {
        for (int64_t id : region.ops(m).operands()) ++inner_uses[id];
      }
      for (const auto& [id, count] : inner_uses) {
        auto p = producer.find(id);
        if (p == producer.end() || members.count(p->second) || group_of[p->second] >= 0) continue;
        const ir::Op& op = region.ops(p->second);
        if (!IsFusible(op, types_) || uses.at(id) != count) continue;
        if (!std::equal(op.result_types(0).dims().begin(), op.result_types(0).dims().end(),
                        root_dims.begin(), root_dims.end())) {
          continue;
        }
        const int op_split = SplitOf(op).value_or(-1);
        if (op_split >= 0 && split >= 0 && op_split != split) continue;
        if (op_split >= 0) split = op_split;
        members.insert(p->second);
        grew = true;
      }
    }
    return {members.begin(), members.end()};
  }

  // One fusion op computing the group's root (which keeps its result id outside).
  ir::Op MakeFusion(ir::Region& region, const std::vector<int>& members) {
    std::unordered_set<int64_t> defined;
    for (int m : members) defined.insert(region.ops(m).results(0));
    ir::Op& root = *region.mutable_ops(members.back());
    ir::Op fusion;
    fusion.set_opcode("fusion");
    fusion.add_results(root.results(0));
    *fusion.add_result_types() = root.result_types(0);
    fusion.set_name_scope(root.name_scope());
    if (root.has_loc()) *fusion.mutable_loc() = root.loc();
    *fusion.mutable_sharding() = root.sharding();
    ir::Region& body = *fusion.mutable_fusion()->mutable_body();
    std::unordered_map<int64_t, int64_t> param_of;
    for (int m : members) {
      const ir::Op& op = region.ops(m);
      for (int i = 0; i < op.operands_size(); ++i) {
        int64_t id = op.operands(i);
        if (defined.count(id) || param_of.count(id)) continue;
        ir::Param& p = *body.add_params();
        p.set_id(next_id_++);
        *p.mutable_type() = types_.at(id);
        param_of[id] = p.id();
        fusion.add_operands(id);
      }
    }
    const int64_t inner_root = next_id_++;
    for (int m : members) {
      ir::Op op = std::move(*region.mutable_ops(m));
      for (int64_t& id : *op.mutable_operands()) {
        auto it = param_of.find(id);
        if (it != param_of.end()) {
          id = it->second;
        } else if (id == fusion.results(0)) {
          id = inner_root;
        }
      }
      if (m == members.back()) {
        op.set_results(0, inner_root);
        op.clear_sharding();
      }
      *body.add_ops() = std::move(op);
    }
    body.add_results(inner_root);
    return fusion;
  }

  const FuseElementwiseOptions& options_;
  int64_t next_id_;
  TypeMap& types_;
};

}  // namespace

absl::StatusOr<bool> FuseElementwise::Run(ir::Module& module) {
  bool changed = false;
  for (ir::Function& f : *module.mutable_functions()) {
    TypeMap types;
    CollectTypes(f.body(), types);
    Fuser fuser(options_, types);
    if (fuser.Region(*f.mutable_body())) {
      ir::CanonicalizeValueIds(f);
      changed = true;
    }
  }
  return changed;
}

}  // namespace shardjit::passes
