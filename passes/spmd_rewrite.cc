#include "passes/spmd_rewrite.h"

#include <algorithm>

#include "ir/prim.h"
#include "ir/regions.h"
#include "ir/sharding.h"

namespace shardjit::passes::spmd_rewrite {

void AddTypes(const ir::Region& region, TypeMap& types) {
  for (const ir::Param& p : region.params()) types[p.id()] = ir::FromProto(p.type());
  for (const ir::Op& op : region.ops()) {
    for (int i = 0; i < op.results_size(); ++i) {
      types[op.results(i)] = ir::FromProto(op.result_types(i));
    }
    for (const ir::Region* r : ir::Regions(op)) AddTypes(*r, types);
  }
}

int64_t MaxValueId(const ir::Region& region) {
  int64_t max = -1;
  for (const ir::Param& p : region.params()) max = std::max(max, p.id());
  for (const ir::Op& op : region.ops()) {
    for (int64_t id : op.results()) max = std::max(max, id);
    for (const ir::Region* r : ir::Regions(op)) max = std::max(max, MaxValueId(*r));
  }
  return max;
}

Facts::Facts(const ir::Mesh& mesh, const ir::Region& root,
             const std::vector<AxisMask>& param_varying)
    : mesh_(mesh) {
  AddTypes(root, types_);
  for (int i = 0; i < root.params_size(); ++i) {
    varying_[root.params(i).id()] =
        i < static_cast<int>(param_varying.size()) ? param_varying[i] : AllAxes();
  }
  Region(root);
}

AxisMask Facts::Mask(const AxisNames& axes) const {
  AxisMask m = 0;
  for (const std::string& a : axes) {
    int64_t i = ir::MeshAxisIndex(mesh_, a);
    m |= i < 0 ? AllAxes() : AxisMask{1} << i;
  }
  return m;
}

int64_t Facts::Size(const AxisNames& axes) const {
  return ir::CombinedAxisSize(mesh_, ir::ToAxisList(axes)).value_or(0);
}

bool Facts::IsAxisIndexTimes(int64_t id, const AxisNames& axes, int64_t scale) const {
  auto is_index = [&](int64_t v) {
    const ir::Op* p = Producer(v);
    return p != nullptr && ir::PrimOf(*p) == ir::Prim::kAxisIndex &&
           SameAxes(p->axis().axes(), axes);
  };
  auto is_scale = [&](int64_t v) {
    const ir::Op* p = Producer(v);
    return p != nullptr && p->has_constant() && Type(v).num_elements() == 1 &&
           p->constant().value_size() == 1 &&
           p->constant().value(0) == static_cast<double>(scale);
  };
  if (scale == 1 && is_index(id)) return true;
  const ir::Op* p = Producer(id);
  return p != nullptr && ir::PrimOf(*p) == ir::Prim::kMul &&
         ((is_index(p->operands(0)) && is_scale(p->operands(1))) ||
          (is_index(p->operands(1)) && is_scale(p->operands(0))));
}

void Facts::Region(const ir::Region& region) {
  for (int64_t id : region.results()) escapes_.insert(id);
  for (const ir::Op& op : region.ops()) {
    for (int64_t id : op.operands()) users_[id].push_back(&op);
    if (op.has_fori_loop()) {
      const ir::Region& body = op.fori_loop().body();
      varying_[body.params(0).id()] = 0;  // the trip index
      for (int i = 1; i < body.params_size(); ++i) varying_[body.params(i).id()] = AllAxes();
      Region(body);
    } else if (op.has_while_loop() || op.has_cond()) {
      // Their uses count (a value read inside is not rewritten away), though no rewrite looks
      // inside them.
      for (const ir::Region* r : ir::Regions(op)) {
        for (const ir::Param& p : r->params()) varying_[p.id()] = AllAxes();
        Region(*r);
      }
    }
    AxisMask v = ResultVarying(op);
    for (int64_t id : op.results()) {
      producer_[id] = &op;
      owner_[id] = &region;
      varying_[id] = v;
    }
  }
}

AxisMask Facts::ResultVarying(const ir::Op& op) const {
  // What an op with regions returns may vary however its regions do.
  if (!ir::Regions(op).empty()) return AllAxes();
  if (ir::PrimOf(op) == ir::Prim::kAxisIndex) return Mask(op.axis().axes());
  AxisMask in = 0;
  for (int64_t id : op.operands()) in |= Varying(id);
  if (op.has_all_reduce() && op.all_reduce().axis_index_groups().empty()) {
    return in & ~Mask(op.all_reduce().axes());
  }
  if (op.has_all_gather() && op.all_gather().axis_index_groups().empty()) {
    return in & ~Mask(op.all_gather().axes());
  }
  if (op.has_pbroadcast()) return in & ~Mask(op.pbroadcast().axes());
  if (op.has_all_reduce()) return in | Mask(op.all_reduce().axes());
  if (op.has_all_gather()) return in | Mask(op.all_gather().axes());
  if (op.has_psum_scatter()) return in | Mask(op.psum_scatter().axes());
  if (op.has_all_to_all()) return in | Mask(op.all_to_all().axes());
  if (op.has_ppermute()) return in | Mask(op.ppermute().axes());
  // What a precv or ragged_all_to_all returns depends on the device even for invariant operands.
  if (op.has_precv()) return in | Mask(op.precv().axes());
  if (op.has_ragged_all_to_all()) return in | Mask(op.ragged_all_to_all().axes());
  return in;  // local ops: constants, iota, axis_size and ops over operands
}

bool SameAxes(const AxisNames& a, const AxisNames& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

int64_t Resolve(const std::unordered_map<int64_t, int64_t>& replace, int64_t id) {
  for (auto it = replace.find(id); it != replace.end(); it = replace.find(id)) id = it->second;
  return id;
}

void Apply(const Plan& plan, ir::Region& region) {
  google::protobuf::RepeatedPtrField<ir::Op> ops;
  for (ir::Op& op : *region.mutable_ops()) {
    for (int64_t& id : *op.mutable_operands()) id = Resolve(plan.replace, id);
    if (!ir::HasClosedRegions(op)) {
      for (ir::Region* r : ir::MutableRegions(op)) Apply(plan, *r);
    }
    auto it = op.results_size() > 0 ? plan.rewrite.find(op.results(0)) : plan.rewrite.end();
    if (it == plan.rewrite.end()) {
      *ops.Add() = std::move(op);
      continue;
    }
    for (ir::Op rewritten : it->second) {
      for (int64_t& id : *rewritten.mutable_operands()) id = Resolve(plan.replace, id);
      *ops.Add() = std::move(rewritten);
    }
  }
  region.mutable_ops()->Swap(&ops);
  for (int64_t& id : *region.mutable_results()) id = Resolve(plan.replace, id);
}

void ForEachSpmdRegion(const ir::Module& module, ir::Function& f,
                       const std::function<void(ir::Region&, std::vector<AxisMask>)>& fn) {
  auto spec_mask = [&](const ir::PartitionSpec& spec) {
    AxisMask m = 0;
    for (const ir::DimSpec& d : spec.dims()) {
      for (const std::string& a : d.axes()) {
        int64_t i = ir::MeshAxisIndex(module.mesh(), a);
        m |= i < 0 ? ~AxisMask{0} : AxisMask{1} << i;
      }
    }
    return m;
  };
  if (module.view() == ir::PER_DEVICE) {
    std::vector<AxisMask> params;
    if (f.name() == module.entry()) {
      for (const ir::PartitionSpec& s : module.param_shardings()) params.push_back(spec_mask(s));
    }
    fn(*f.mutable_body(), params);
    return;
  }
  std::function<void(ir::Region&)> walk = [&](ir::Region& region) {
    for (ir::Op& op : *region.mutable_ops()) {
      if (op.has_shard_map()) {
        std::vector<AxisMask> params;
        for (const ir::PartitionSpec& s : op.shard_map().in_specs()) params.push_back(spec_mask(s));
        fn(*op.mutable_shard_map()->mutable_body(), params);
      } else if (op.has_fori_loop()) {
        walk(*op.mutable_fori_loop()->mutable_body());
      }
    }
  };
  walk(*f.mutable_body());
}

}  // namespace shardjit::passes::spmd_rewrite
