#include "passes/collective_simplify.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/dtype.h"
#include "ir/sharding.h"
#include "ir/verifier.h"
#include "passes/collective_simplify_internal.h"
#include "passes/dce.h"

namespace shardjit::passes {
namespace collective_simplify {

std::vector<const ir::Region*> Regions(const ir::Op& op) {
  if (op.has_fori_loop()) return {&op.fori_loop().body()};
  if (op.has_shard_map()) return {&op.shard_map().body()};
  if (op.has_fusion()) return {&op.fusion().body()};
  return {};
}

std::vector<ir::Region*> MutableRegions(ir::Op& op) {
  if (op.has_fori_loop()) return {op.mutable_fori_loop()->mutable_body()};
  if (op.has_shard_map()) return {op.mutable_shard_map()->mutable_body()};
  if (op.has_fusion()) return {op.mutable_fusion()->mutable_body()};
  return {};
}

void AddTypes(const ir::Region& region, TypeMap& types) {
  for (const ir::Param& p : region.params()) types[p.id()] = ir::FromProto(p.type());
  for (const ir::Op& op : region.ops()) {
    for (int i = 0; i < op.results_size(); ++i) {
      types[op.results(i)] = ir::FromProto(op.result_types(i));
    }
    for (const ir::Region* r : Regions(op)) AddTypes(*r, types);
  }
}

ir::Op DerivedOp(const ir::Op& origin, const std::string& opcode,
                 const std::vector<int64_t>& operands, int64_t result, const ir::ShapedType& type) {
  ir::Op op;
  op.set_opcode(opcode);
  for (int64_t id : operands) op.add_operands(id);
  op.add_results(result);
  *op.add_result_types() = ir::ToProto(type);
  op.set_name_scope(origin.name_scope());
  if (origin.has_loc()) *op.mutable_loc() = origin.loc();
  return op;
}

int64_t MaxValueId(const ir::Region& region) {
  int64_t max = -1;
  for (const ir::Param& p : region.params()) max = std::max(max, p.id());
  for (const ir::Op& op : region.ops()) {
    for (int64_t id : op.results()) max = std::max(max, id);
    for (const ir::Region* r : Regions(op)) max = std::max(max, MaxValueId(*r));
  }
  return max;
}

namespace {

// Bit i: mesh axis i.
using AxisMask = uint64_t;

// Read-only facts about one SPMD region (and the loop bodies in it): producers, users, and the
// mesh axes each value may vary across.
class Facts {
 public:
  Facts(const ir::Mesh& mesh, const ir::Region& root, const std::vector<AxisMask>& param_varying)
      : mesh_(mesh) {
    AddTypes(root, types_);
    for (int i = 0; i < root.params_size(); ++i) {
      varying_[root.params(i).id()] =
          i < static_cast<int>(param_varying.size()) ? param_varying[i] : AllAxes();
    }
    Region(root);
  }

  AxisMask AllAxes() const { return (AxisMask{1} << mesh_.axes_size()) - 1; }
  AxisMask Mask(const AxisNames& axes) const {
    AxisMask m = 0;
    for (const std::string& a : axes) {
      int64_t i = ir::MeshAxisIndex(mesh_, a);
      m |= i < 0 ? AllAxes() : AxisMask{1} << i;
    }
    return m;
  }
  int64_t Size(const AxisNames& axes) const {
    int64_t n = 1;
    for (const std::string& a : axes) {
      int64_t i = ir::MeshAxisIndex(mesh_, a);
      n *= i < 0 ? 0 : mesh_.axes(i).size();
    }
    return n;
  }

  const ir::ShapedType& Type(int64_t id) const { return types_.at(id); }
  const TypeMap& types() const { return types_; }
  const ir::Op* Producer(int64_t id) const {
    auto it = producer_.find(id);
    return it == producer_.end() ? nullptr : it->second;
  }
  // The ops using `id` (once per operand slot); empty for values a region returns.
  std::vector<const ir::Op*> Users(int64_t id) const {
    if (escapes_.count(id)) return {};
    auto it = users_.find(id);
    return it == users_.end() ? std::vector<const ir::Op*>{} : it->second;
  }
  const ir::Region* Owner(int64_t id) const { return owner_.at(id); }
  AxisMask Varying(int64_t id) const {
    auto it = varying_.find(id);
    return it == varying_.end() ? AllAxes() : it->second;
  }

 private:
  void Region(const ir::Region& region) {
    for (int64_t id : region.results()) escapes_.insert(id);
    for (const ir::Op& op : region.ops()) {
      for (int64_t id : op.operands()) users_[id].push_back(&op);
      if (op.has_fori_loop()) {
        const ir::Region& body = op.fori_loop().body();
        varying_[body.params(0).id()] = 0;  // the trip index
        for (int i = 1; i < body.params_size(); ++i) varying_[body.params(i).id()] = AllAxes();
        Region(body);
      }
      AxisMask v = ResultVarying(op);
      for (int64_t id : op.results()) {
        producer_[id] = &op;
        owner_[id] = &region;
        varying_[id] = v;
      }
    }
  }

  AxisMask ResultVarying(const ir::Op& op) const {
    const std::string& name = op.opcode();
    if (op.has_fori_loop() || op.has_shard_map()) return AllAxes();
    if (name == "axis_index") return Mask(op.axis().axes());
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
    return in;  // local ops: constants, iota, axis_size and ops over operands
  }

  const ir::Mesh& mesh_;
  TypeMap types_;
  std::unordered_map<int64_t, const ir::Op*> producer_;
  std::unordered_map<int64_t, std::vector<const ir::Op*>> users_;
  std::unordered_map<int64_t, const ir::Region*> owner_;
  std::unordered_map<int64_t, AxisMask> varying_;
  std::unordered_set<int64_t> escapes_;
};

bool SameAxes(const AxisNames& a, const AxisNames& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

// The rewrites chosen for a region: values replaced by others, and ops replaced by op lists
// (keyed by the op's first result).
struct Plan {
  std::unordered_map<int64_t, int64_t> replace;
  std::unordered_map<int64_t, std::vector<ir::Op>> rewrite;
  bool empty() const { return replace.empty() && rewrite.empty(); }
};

class Matcher {
 public:
  Matcher(const Facts& facts, const CollectiveSimplifyOptions& options, int64_t& next_id)
      : facts_(facts), options_(options), next_id_(next_id) {}

  const Plan& plan() const { return plan_; }

  void Region(const ir::Region& region) {
    for (const ir::Op& op : region.ops()) {
      if (op.has_fori_loop()) Region(op.fori_loop().body());
      if (op.has_all_reduce() && op.all_reduce().axis_index_groups().empty() &&
          facts_.Size(op.all_reduce().axes()) > 1) {
        if (options_.reduce_invariant && ReduceInvariant(op)) continue;
        if (options_.psum_to_psum_scatter && op.opcode() == "psum") PsumToScatter(op);
      }
      if (options_.remove_self_all_gather && op.has_all_gather()) SelfAllGather(op);
    }
  }

 private:
  // Whether `id` is a scalar constant equal to `value`.
  bool IsScalar(int64_t id, double value) const {
    const ir::Op* p = facts_.Producer(id);
    return p != nullptr && p->has_constant() && facts_.Type(id).num_elements() == 1 &&
           p->constant().value_size() == 1 && p->constant().value(0) == value;
  }

  bool IsAxisIndex(int64_t id, const AxisNames& axes) const {
    const ir::Op* p = facts_.Producer(id);
    return p != nullptr && p->opcode() == "axis_index" && SameAxes(p->axis().axes(), axes);
  }

  // Whether `id` is axis_index(axes) * block: where this device's block starts.
  bool IsBlockStart(int64_t id, const AxisNames& axes, int64_t block) const {
    if (block == 1 && IsAxisIndex(id, axes)) return true;
    const ir::Op* p = facts_.Producer(id);
    if (p == nullptr || p->opcode() != "mul") return false;
    return (IsAxisIndex(p->operands(0), axes) && IsScalar(p->operands(1), block)) ||
           (IsAxisIndex(p->operands(1), axes) && IsScalar(p->operands(0), block));
  }

  // The dimension along which dynamic_slice `ds` takes this device's block of its operand
  // (split into blocks over `axes`), the other dimensions whole; -1 when it does not.
  int64_t OwnBlockDim(const ir::Op& ds, const AxisNames& axes) const {
    if (!ds.has_dynamic_slice()) return -1;
    const ir::ShapedType& in = facts_.Type(ds.operands(0));
    const int64_t n = facts_.Size(axes);
    int64_t found = -1;
    for (int64_t d = 0; d < in.rank(); ++d) {
      const int64_t size = ds.dynamic_slice().slice_sizes(d);
      // Starts are clamped into range, so a whole dimension starts at 0 whatever the index.
      if (size == in.dims[d]) continue;
      if (found >= 0 || size * n != in.dims[d] || !IsBlockStart(ds.operands(1 + d), axes, size)) {
        return -1;
      }
      found = d;
    }
    return found;
  }

  // psum(x) -> x * size, pmax/pmin(x) -> x, pmean(x) -> x (floats) when x is invariant.
  bool ReduceInvariant(const ir::Op& op) {
    const int64_t x = op.operands(0);
    if (facts_.Varying(x) & facts_.Mask(op.all_reduce().axes())) return false;
    const ir::ShapedType& type = facts_.Type(x);
    if (op.opcode() == "pmax" || op.opcode() == "pmin" ||
        (op.opcode() == "pmean" && ir::IsFloating(type.dtype))) {
      plan_.replace[op.results(0)] = x;
      return true;
    }
    if (op.opcode() != "psum") return false;
    ir::Op size = DerivedOp(op, "constant", {}, next_id_++, type);
    size.mutable_constant()->set_dtype(ir::ToProto(type.dtype));
    for (int64_t d : type.dims) size.mutable_constant()->add_shape(d);
    size.mutable_constant()->add_value(static_cast<double>(facts_.Size(op.all_reduce().axes())));
    ir::Op mul = DerivedOp(op, "mul", {x, size.results(0)}, op.results(0), type);
    plan_.rewrite[op.results(0)] = {std::move(size), std::move(mul)};
    return true;
  }

  // psum(x) used only by a dynamic_slice of this device's block -> psum_scatter(x).
  void PsumToScatter(const ir::Op& psum) {
    std::vector<const ir::Op*> users = facts_.Users(psum.results(0));
    if (users.size() != 1) return;
    const ir::Op& ds = *users[0];
    if (!ds.has_dynamic_slice() || ds.operands(0) != psum.results(0) ||
        facts_.Owner(ds.results(0)) != facts_.Owner(psum.results(0))) {
      return;
    }
    const int64_t dim = OwnBlockDim(ds, psum.all_reduce().axes());
    if (dim < 0) return;
    ir::Op scatter = DerivedOp(psum, "psum_scatter", {psum.operands(0)}, ds.results(0),
                               ir::FromProto(ds.result_types(0)));
    *scatter.mutable_psum_scatter()->mutable_axes() = psum.all_reduce().axes();
    scatter.mutable_psum_scatter()->set_scatter_dimension(dim);
    scatter.mutable_psum_scatter()->set_tiled(true);
    plan_.rewrite[ds.results(0)] = {std::move(scatter)};
  }

  // A tiled all_gather(x) whose every use takes back this device's own block -> x.
  void SelfAllGather(const ir::Op& gather) {
    const auto& a = gather.all_gather();
    if (!a.tiled() || !a.axis_index_groups().empty() || facts_.Size(a.axes()) <= 1) return;
    std::vector<const ir::Op*> users = facts_.Users(gather.results(0));
    if (users.empty()) return;
    for (const ir::Op* ds : users) {
      if (!ds->has_dynamic_slice() || ds->operands(0) != gather.results(0) ||
          OwnBlockDim(*ds, a.axes()) != a.axis()) {
        return;
      }
    }
    for (const ir::Op* ds : users) plan_.replace[ds->results(0)] = gather.operands(0);
  }

  const Facts& facts_;
  const CollectiveSimplifyOptions& options_;
  int64_t& next_id_;
  Plan plan_;
};

int64_t Resolve(const std::unordered_map<int64_t, int64_t>& replace, int64_t id) {
  for (auto it = replace.find(id); it != replace.end(); it = replace.find(id)) id = it->second;
  return id;
}

// Applies `plan` to `region` and the loop bodies in it.
void Apply(const Plan& plan, ir::Region& region) {
  google::protobuf::RepeatedPtrField<ir::Op> ops;
  for (ir::Op& op : *region.mutable_ops()) {
    for (int64_t& id : *op.mutable_operands()) id = Resolve(plan.replace, id);
    if (op.has_fori_loop()) Apply(plan, *op.mutable_fori_loop()->mutable_body());
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

// Calls `fn` on each SPMD region of `f` with the axes each of its params may vary across: the
// entry of a per-device module, or the shard_map bodies of a global-view one.
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

}  // namespace
}  // namespace collective_simplify

absl::StatusOr<bool> CollectiveSimplify::Run(ir::Module& module) {
  using namespace collective_simplify;  // NOLINT: this file's internals
  if (module.mesh().axes_size() == 0 || module.mesh().axes_size() > 63) return false;
  bool rewritten = false;
  for (ir::Function& f : *module.mutable_functions()) {
    int64_t next_id = MaxValueId(f.body()) + 1;
    // Rewrites can enable each other (a removed all_gather exposes a psum's slice).
    for (bool again = true; again;) {
      again = false;
      ForEachSpmdRegion(module, f, [&](ir::Region& region, std::vector<AxisMask> params) {
        Facts facts(module.mesh(), region, params);
        Matcher matcher(facts, options_, next_id);
        matcher.Region(region);
        if (matcher.plan().empty()) return;
        Apply(matcher.plan(), region);
        again = true;
      });
      rewritten |= again;
      if (again) {
        absl::StatusOr<bool> dce = DeadCodeElimination().Run(module);
        if (!dce.ok()) return dce.status();
      }
    }
  }
  bool combined = false;
  if (options_.combine_max_bytes > 0) {
    for (ir::Function& f : *module.mutable_functions()) {
      int64_t next_id = MaxValueId(f.body()) + 1;
      TypeMap types;
      AddTypes(f.body(), types);
      ForEachSpmdRegion(module, f, [&](ir::Region& region, std::vector<AxisMask>) {
        combined |= CombineCollectives(region, types, options_.combine_max_bytes, next_id);
      });
    }
  }
  if (!rewritten && !combined) return false;
  // Value names follow definition order in the text form.
  for (ir::Function& f : *module.mutable_functions()) ir::CanonicalizeValueIds(f);
  return true;
}

}  // namespace shardjit::passes
