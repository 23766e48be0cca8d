#include "passes/collective_simplify.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "base/status_macros.h"
#include "ir/dtype.h"
#include "ir/prim.h"
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
      if (op.has_fori_loop()) Region(op.fori_loop().body());
      if (op.has_all_reduce() && op.all_reduce().axis_index_groups().empty() &&
          facts_.Size(op.all_reduce().axes()) > 1) {
        if (options_.reduce_invariant && ReduceInvariant(op)) continue;
        if (options_.psum_to_psum_scatter && ir::PrimOf(op) == ir::Prim::kPsum) {
          PsumToScatter(op);
        }
      }
      if (options_.remove_self_all_gather && op.has_all_gather()) SelfAllGather(op);
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
