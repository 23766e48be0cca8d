#include "passes/inline_calls.h"

#include <unordered_map>
#include <utility>

#include "ir/prim.h"
#include "ir/regions.h"

namespace shardjit::passes {
namespace {

// Value ids are unique in a function, so the inlined ops keep theirs; uses of an inlined op's
// results (and of its region's params) are renamed as the walk meets them.
class Inliner {
 public:
  // Inlines in `region` and in the regions of its ops; true when anything changed.
  bool Region(ir::Region* region) {
    bool changed = false;
    google::protobuf::RepeatedPtrField<ir::Op> ops;
    ops.Swap(region->mutable_ops());
    for (ir::Op& op : ops) {
      for (int64_t& id : *op.mutable_operands()) id = Renamed(id);
      if ((op.has_axis() && ir::PrimOf(op) == ir::Prim::kPvary) ||  // a cast: its operand
          op.has_checkpoint_name()) {                                   // a label: its operand
        rename_[op.results(0)] = op.operands(0);
        changed = true;
        continue;
      }
      ir::Region* inlined = InlinedRegion(op);
      if (inlined == nullptr) {
        for (ir::Region* r : ir::MutableRegions(op)) changed = Region(r) || changed;
        *region->add_ops() = std::move(op);
        continue;
      }
      changed = true;
      for (int i = 0; i < inlined->params_size(); ++i) {
        rename_[inlined->params(i).id()] = op.operands(i);
      }
      Region(inlined);
      for (ir::Op& inner : *inlined->mutable_ops()) *region->add_ops() = std::move(inner);
      for (int i = 0; i < op.results_size(); ++i) rename_[op.results(i)] = inlined->results(i);
    }
    for (int64_t& id : *region->mutable_results()) id = Renamed(id);
    return changed;
  }

 private:
  static ir::Region* InlinedRegion(ir::Op& op) {
    switch (op.attrs_case()) {
      case ir::Op::kCustomJvpCall:
        return op.mutable_custom_jvp_call()->mutable_fun();
      case ir::Op::kCustomVjpCall:
        return op.mutable_custom_vjp_call()->mutable_fun();
      case ir::Op::kCheckpoint:
        return op.mutable_checkpoint()->mutable_body();
      default:
        return nullptr;
    }
  }

  int64_t Renamed(int64_t id) const {
    auto it = rename_.find(id);
    return it == rename_.end() ? id : it->second;
  }

  std::unordered_map<int64_t, int64_t> rename_;
};

}  // namespace

absl::StatusOr<bool> InlineCalls::Run(ir::Module& module) {
  bool changed = false;
  for (ir::Function& f : *module.mutable_functions()) {
    changed = Inliner().Region(f.mutable_body()) || changed;
  }
  return changed;
}

}  // namespace shardjit::passes
