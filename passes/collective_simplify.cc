#include "passes/collective_simplify.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "base/status_macros.h"
#include "ir/dtype.h"
#include "ir/prim.h"
#include "ir/regions.h"
#include "ir/sharding.h"
#include "ir/verifier.h"
#include "passes/collective_simplify_internal.h"
#include "passes/dce.h"

namespace shardjit::passes {
namespace collective_simplify {

namespace {

class Matcher {
 public:
  Matcher(const ir::Mesh& mesh, const Facts& facts, const CollectiveSimplifyOptions& options,
          int64_t& next_id)
      : mesh_(mesh), facts_(facts), options_(options), next_id_(next_id) {}

  const Plan& plan() const { return plan_; }

  void Region(const ir::Region& region) {
    for (const ir::Op& op : region.ops()) {
      // Loop bodies and branches: rewrites stay inside them (values they return escape).
      if (op.has_fori_loop() || op.has_while_loop() || op.has_cond()) {
        for (const ir::Region* r : ir::Regions(op)) Region(*r);
      }
      if (op.has_all_reduce() && op.all_reduce().axis_index_groups().empty() &&
          facts_.Size(op.all_reduce().axes()) > 1) {
        if (options_.reduce_invariant && ReduceInvariant(op)) continue;
        if (options_.psum_to_psum_scatter && ir::PrimOf(op) == ir::Prim::kPsum) {
          PsumToScatter(op);
        }
      }
      if (options_.remove_self_all_gather && op.has_all_gather()) SelfAllGather(op);
      if (options_.scatter_of_one_block && op.has_psum_scatter()) ScatterOfOneBlock(op);
    }
  }

 private:
  // An emitter of ops that stand for `origin`.
  OpEmitter Emitter(const ir::Op& origin) const {
    OpEmitter e(mesh_, "collective-simplify", facts_.types(), &next_id_);
    e.SetOrigin(origin);
    return e;
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
      if (found >= 0 || size * n != in.dims[d] || !facts_.IsAxisIndexTimes(ds.operands(1 + d), axes, size)) {
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
    const ir::Prim prim = ir::PrimOf(op);
    if (prim == ir::Prim::kPmax || prim == ir::Prim::kPmin ||
        (prim == ir::Prim::kPmean && ir::IsFloating(type.dtype))) {
      plan_.replace[op.results(0)] = x;
      return true;
    }
    if (prim != ir::Prim::kPsum) return false;
    OpEmitter e = Emitter(op);
    const double n = static_cast<double>(facts_.Size(op.all_reduce().axes()));
    e.Emit("mul", {x, e.Constant(type, n)}, op.results(0));
    if (!e.status().ok()) return false;
    plan_.rewrite[op.results(0)] = e.Take();
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
    ir::Op scatter;
    scatter.set_opcode("psum_scatter");
    *scatter.mutable_psum_scatter()->mutable_axes() = psum.all_reduce().axes();
    scatter.mutable_psum_scatter()->set_scatter_dimension(dim);
    scatter.mutable_psum_scatter()->set_tiled(true);
    OpEmitter e = Emitter(psum);
    e.Emit(std::move(scatter), {psum.operands(0)}, ds.results(0));
    if (e.status().ok()) plan_.rewrite[ds.results(0)] = e.Take();
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

  // A tiled psum_scatter over A of zeros with one block v placed at block idx (the transpose of a
  // dynamic_slice of a gathered value), idx = axis_index(B) with B apart from A and at most as
  // large: device a's block is the group's sum of v where idx == a, zeros elsewhere ->
  // select(axis_index(A) == idx, psum(v, A), 0), which moves one block instead of all.
  void ScatterOfOneBlock(const ir::Op& scatter) {
    const auto& a = scatter.psum_scatter();
    const int64_t n = facts_.Size(a.axes());
    if (!a.tiled() || !a.axis_index_groups().empty() || n <= 1) return;
    const int64_t x = scatter.operands(0);
    const ir::Op* dus = facts_.Producer(x);
    if (dus == nullptr || ir::PrimOf(*dus) != ir::Prim::kDynamicUpdateSlice ||
        facts_.Users(x).size() != 1) {
      return;
    }
    const ir::Op* zeros = facts_.Producer(dus->operands(0));
    if (zeros == nullptr || !zeros->has_constant() || zeros->constant().value_size() != 1 ||
        zeros->constant().value(0) != 0) {
      return;
    }
    const int64_t v = dus->operands(1);
    const ir::ShapedType& xt = facts_.Type(x);
    const ir::ShapedType& vt = facts_.Type(v);
    const int64_t s = a.scatter_dimension(), block = xt.dims[s] / n;
    for (int64_t d = 0; d < xt.rank(); ++d) {
      if (vt.dims[d] != (d == s ? block : xt.dims[d])) return;
    }
    // The start along s: axis_index(B) * block (through the reshapes of a scalar that a
    // residual passed between shard_maps has).
    int64_t start = dus->operands(2 + s);
    for (const ir::Op* p = facts_.Producer(start);
         p != nullptr && ir::PrimOf(*p) == ir::Prim::kReshape &&
         facts_.Type(p->operands(0)).num_elements() == 1;
         p = facts_.Producer(start)) {
      start = p->operands(0);
    }
    const ir::Op* mul = facts_.Producer(start);
    if (mul == nullptr || ir::PrimOf(*mul) != ir::Prim::kMul) return;
    AxisNames b_axes;
    for (int64_t operand : mul->operands()) {
      const ir::Op* p = facts_.Producer(operand);
      if (p != nullptr && ir::PrimOf(*p) == ir::Prim::kAxisIndex) b_axes = p->axis().axes();
    }
    if (b_axes.empty() || !facts_.IsAxisIndexTimes(start, b_axes, block) ||
        (facts_.Mask(b_axes) & facts_.Mask(a.axes())) != 0 || facts_.Size(b_axes) > n) {
      return;
    }
    OpEmitter e = Emitter(scatter);
    ir::Op psum;
    psum.set_opcode("psum");
    *psum.mutable_all_reduce()->mutable_axes() = a.axes();
    const int64_t summed = e.Emit(std::move(psum), {v});
    ir::Op eq;
    eq.set_opcode("compare");
    eq.mutable_compare()->set_direction(ir::EQ);
    const int64_t mine = e.Emit(std::move(eq), {e.AxisIndex(ir::ToAxisList(a.axes())),
                                                e.AxisIndex(ir::ToAxisList(b_axes))});
    ir::Op broadcast;
    broadcast.set_opcode("broadcast_in_dim");
    for (int64_t d : vt.dims) broadcast.mutable_broadcast_in_dim()->add_shape(d);
    const int64_t mask = e.Emit(std::move(broadcast), {mine});
    e.Emit("select", {mask, summed, e.Constant(vt, 0)}, scatter.results(0));
    if (e.status().ok()) plan_.rewrite[scatter.results(0)] = e.Take();
  }

  const ir::Mesh& mesh_;
  const Facts& facts_;
  const CollectiveSimplifyOptions& options_;
  int64_t& next_id_;
  Plan plan_;
};

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
        Matcher matcher(module.mesh(), facts, options_, next_id);
        matcher.Region(region);
        if (matcher.plan().empty()) return;
        Apply(matcher.plan(), region);
        again = true;
      });
      rewritten |= again;
      if (again) {
        RETURN_IF_ERROR(DeadCodeElimination().Run(module).status());
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
        combined |= CombineCollectives(module.mesh(), region, types, options_.combine_max_bytes,
                                       next_id);
      });
    }
  }
  if (!rewritten && !combined) return false;
  // Value names follow definition order in the text form.
  for (ir::Function& f : *module.mutable_functions()) ir::CanonicalizeValueIds(f);
  return true;
}

}  // namespace shardjit::passes
