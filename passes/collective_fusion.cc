#include "passes/collective_fusion.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "base/status_macros.h"
#include "ir/async.h"
#include "ir/prim.h"
#include "ir/regions.h"
#include "ir/verifier.h"
#include "passes/collective_fusion_internal.h"
#include "passes/dce.h"
#include "passes/spmd_rewrite.h"

namespace shardjit::passes {
namespace collective_fusion {
namespace {

using namespace spmd_rewrite;  // NOLINT: the shared region rewrite kit
using Dims = std::vector<int64_t>;

Dims ToDims(const google::protobuf::RepeatedField<int64_t>& f) { return {f.begin(), f.end()}; }

int64_t IndexOf(const Dims& dims, int64_t d) {
  auto it = std::find(dims.begin(), dims.end(), d);
  return it == dims.end() ? -1 : it - dims.begin();
}

// The free dims of one operand of a dot_general, in order.
Dims FreeDims(int64_t rank, const Dims& batch, const Dims& contracting) {
  Dims free;
  for (int64_t d = 0; d < rank; ++d) {
    if (IndexOf(batch, d) < 0 && IndexOf(contracting, d) < 0) free.push_back(d);
  }
  return free;
}

// Bytes a ring moves to take blocks of `t` along `dim` as dot operands: none when each block is
// one run of `t`'s elements (every dim before `dim` has size 1), which the backends read in place;
// otherwise each block is copied out (written, then read).
double BlockCopyBytes(const ir::ShapedType& t, int64_t dim) {
  for (int64_t d = 0; d < dim; ++d) {
    if (t.dims[d] != 1) return 2.0 * static_cast<double>(t.byte_size());
  }
  return 0;
}

class Matcher {
 public:
  Matcher(const ir::Mesh& mesh, const Facts& facts, const CollectiveFusionOptions& options,
          const MachineModel& machine, int64_t& next_id)
      : mesh_(mesh), facts_(facts), options_(options), machine_(machine), next_id_(next_id) {}

  const Plan& plan() const { return plan_; }

  void Region(const ir::Region& region) {
    for (const ir::Op& op : region.ops()) {
      if (op.has_fori_loop() || op.has_while_loop() || op.has_cond()) {
        for (const ir::Region* r : ir::Regions(op)) Region(*r);
      }
      if (options_.fold_gather_slice && op.has_all_gather()) FoldGatherSlice(op);
      if (ir::PrimOf(op) != ir::Prim::kDotGeneral || claimed_.count(op.results(0))) continue;
      if (options_.all_gather_matmul && GatherRing(op)) continue;
      if (options_.matmul_reduce_scatter && ScatterRing(op)) continue;
      if (options_.f32_partial_sums) PartialSumsInF32(op);
    }
  }

 private:
  double Seconds(double bytes) const { return bytes / machine_.bytes_per_second; }
  bool Favoured(double ring_seconds, double saved_seconds) const {
    return options_.ignore_time_model || ring_seconds < saved_seconds;
  }

  // An emitter of ops that stand for `origin`.
  OpEmitter Emitter(const ir::Op& origin) const {
    OpEmitter e(mesh_, "collective-fusion", facts_.types(), &next_id_);
    e.SetOrigin(origin);
    return e;
  }

  // The only user of `id`, in the same region; null otherwise.
  const ir::Op* OnlyUser(int64_t id) const {
    std::vector<const ir::Op*> users = facts_.Users(id);
    if (users.size() != 1 || facts_.Owner(users[0]->results(0)) != facts_.Owner(id)) {
      return nullptr;
    }
    return users[0];
  }

  // A tiled all_gather without groups over more than one device, not yet rewritten.
  bool Gatherable(const ir::Op* op) const {
    return op != nullptr && op->has_all_gather() && op->all_gather().tiled() &&
           op->all_gather().axis_index_groups().empty() &&
           facts_.Size(op->all_gather().axes()) > 1 && !claimed_.count(op->results(0));
  }

  // Replaces `op` by `ops`; `claimed` may not be rewritten again.
  void Rewrite(const ir::Op& op, std::vector<ir::Op> ops,
               std::initializer_list<const ir::Op*> claimed) {
    plan_.rewrite[op.results(0)] = std::move(ops);
    for (const ir::Op* c : claimed) claimed_.insert(c->results(0));
  }

  // all_gather feeding dot_general -> ring (free or contracting dim).
  bool GatherRing(const ir::Op& dot) {
    const ir::DotGeneralAttrs& a = dot.dot_general();
    std::optional<GatherMatmul> best;
    double best_saving = 0;
    for (int side = 0; side < 2; ++side) {
      const int64_t v = dot.operands(side);
      const ir::Op* gather = facts_.Producer(v);
      if (dot.operands(1 - side) == v || !Gatherable(gather) || OnlyUser(v) != &dot) continue;
      const Dims batch = ToDims(side == 0 ? a.lhs_batch_dims() : a.rhs_batch_dims());
      const Dims contracting =
          ToDims(side == 0 ? a.lhs_contracting_dims() : a.rhs_contracting_dims());
      const Dims other_contracting =
          ToDims(side == 0 ? a.rhs_contracting_dims() : a.lhs_contracting_dims());
      GatherMatmul gm{gather, &dot, side, gather->all_gather().axis()};
      gm.n = facts_.Size(gather->all_gather().axes());
      if (IndexOf(batch, gm.dim) >= 0) continue;
      const int64_t k = IndexOf(contracting, gm.dim);
      const double gathered = static_cast<double>(facts_.Type(v).byte_size());
      double extra = 0;  // bytes the ring copies
      if (k >= 0) {
        gm.contracting = true;
        gm.other_dim = other_contracting[k];
        extra = BlockCopyBytes(facts_.Type(dot.operands(1 - side)), gm.other_dim);
      } else {
        const int64_t lhs_rank = facts_.Type(dot.operands(0)).rank();
        const Dims lhs_free = FreeDims(lhs_rank, ToDims(a.lhs_batch_dims()),
                                       ToDims(a.lhs_contracting_dims()));
        const Dims free = FreeDims(facts_.Type(v).rank(), batch, contracting);
        gm.result_dim = static_cast<int64_t>(batch.size()) + IndexOf(free, gm.dim) +
                        (side == 1 ? static_cast<int64_t>(lhs_free.size()) : 0);
      }
      // The gather writes and reads the gathered buffer; the ring pays its steps.
      const double ring = AllGatherRingSteps(gm.n, options_.bidirectional) *
                              machine_.seconds_per_collective + Seconds(extra);
      const double saving = Seconds(2.0 * gathered) - ring;
      if (!Favoured(ring, Seconds(2.0 * gathered))) continue;
      if (!best || saving > best_saving) {
        best = gm;
        best_saving = saving;
      }
    }
    if (!best) return false;
    OpEmitter e = Emitter(dot);
    std::vector<ir::Op> ops = AllGatherMatmulRing(*best, options_.bidirectional, e);
    if (!e.status().ok()) return false;
    Rewrite(dot, std::move(ops), {&dot, best->gather});
    return true;
  }

  // dot_general whose only use is a tiled psum_scatter along a free dim -> reduce-scatter ring.
  bool ScatterRing(const ir::Op& dot) {
    const ir::Op* scatter = OnlyUser(dot.results(0));
    if (scatter == nullptr || !scatter->has_psum_scatter() || !scatter->psum_scatter().tiled() ||
        !scatter->psum_scatter().axis_index_groups().empty() ||
        scatter->operands(0) != dot.results(0)) {
      return false;
    }
    const ir::DotGeneralAttrs& a = dot.dot_general();
    MatmulScatter ms{&dot, scatter, 0, 0, facts_.Size(scatter->psum_scatter().axes())};
    if (ms.n <= 1) return false;
    const Dims lhs_free = FreeDims(facts_.Type(dot.operands(0)).rank(),
                                   ToDims(a.lhs_batch_dims()), ToDims(a.lhs_contracting_dims()));
    const Dims rhs_free = FreeDims(facts_.Type(dot.operands(1)).rank(),
                                   ToDims(a.rhs_batch_dims()), ToDims(a.rhs_contracting_dims()));
    int64_t d = scatter->psum_scatter().scatter_dimension() - a.lhs_batch_dims_size();
    if (d < 0) return false;  // a batch dim
    if (d < static_cast<int64_t>(lhs_free.size())) {
      ms.dim = lhs_free[d];
    } else {
      ms.side = 1;
      ms.dim = rhs_free[d - lhs_free.size()];
    }
    // Unfused, the full product is written, then read by the psum_scatter; the ring takes blocks
    // of the scattered operand (the running sums it receives are handed over, and added into in
    // place).
    const ir::ShapedType product = ir::FromProto(dot.result_types(0));
    const double full = static_cast<double>(product.byte_size());
    const double copied = BlockCopyBytes(facts_.Type(dot.operands(ms.side)), ms.dim);
    if (!Favoured((ms.n - 1) * machine_.seconds_per_collective + Seconds(copied),
                  Seconds(2.0 * full))) {
      return false;
    }
    OpEmitter e = Emitter(*scatter);
    std::vector<ir::Op> ops = MatmulReduceScatterRing(ms, e);
    if (!e.status().ok()) return false;
    Rewrite(*scatter, std::move(ops), {&dot, scatter});
    return true;
  }

  // dynamic_slice(all_gather(w, A), axis_index(B) * shard) taking one whole shard, w invariant
  // across B, |A| = |B| -> the shard from the device at (A = my B index, B = my A index).
  void FoldGatherSlice(const ir::Op& gather) {
    if (!Gatherable(&gather) || gather.all_gather().axes_size() != 1) return;
    const ir::Op* ds = OnlyUser(gather.results(0));
    if (ds == nullptr || !ds->has_dynamic_slice() || ds->operands(0) != gather.results(0) ||
        claimed_.count(ds->results(0))) {
      return;
    }
    const int64_t w = gather.operands(0);
    const ir::ShapedType& shard = facts_.Type(w);
    const int64_t g = gather.all_gather().axis();
    for (int64_t d = 0; d < shard.rank(); ++d) {
      const int64_t size = ds->dynamic_slice().slice_sizes(d);
      if (size != shard.dims[d]) return;  // whole along the other dims, one shard along g
    }
    const int64_t n = facts_.Size(gather.all_gather().axes());
    for (const ir::MeshAxis& axis : mesh_.axes()) {
      AxisNames b;
      b.Add(std::string(axis.name()));
      if (axis.name() == gather.all_gather().axes(0) || axis.size() != n ||
          !facts_.IsAxisIndexTimes(ds->operands(1 + g), b, shard.dims[g]) ||
          (facts_.Varying(w) & facts_.Mask(b)) != 0) {
        continue;
      }
      // Over (A, B), index a * n + b: device (A = i, B = j) needs shard j, which (A = j, B = i)
      // holds (w does not vary across B).
      ir::Op start;
      start.set_opcode(ir::AsyncStartOpcode("ppermute"));
      *start.mutable_ppermute()->mutable_axes() = gather.all_gather().axes();
      start.mutable_ppermute()->add_axes(axis.name());
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          ir::PermutePair* p = start.mutable_ppermute()->add_perm();
          p->set_source(j * n + i);
          p->set_target(i * n + j);
        }
      }
      OpEmitter e = Emitter(gather);
      const int64_t future = e.Emit(std::move(start), {w});
      std::vector<ir::Op> start_ops = e.Take();
      e.SetOrigin(*ds);
      e.AsyncDone("ppermute", future, ds->results(0));
      std::vector<ir::Op> done_ops = e.Take();
      if (!e.status().ok()) return;
      // Started where the gather was, awaited where the slice was.
      Rewrite(gather, std::move(start_ops), {&gather});
      Rewrite(*ds, std::move(done_ops), {ds});
      return;
    }
  }

  // A bf16 dot_general whose only use is a psum or psum_scatter -> f32 product and sum, one
  // rounding.
  void PartialSumsInF32(const ir::Op& dot) {
    const ir::Op* psum = OnlyUser(dot.results(0));
    const ir::Prim sum = psum != nullptr ? ir::PrimOf(*psum) : ir::Prim::kUnknown;
    if ((sum != ir::Prim::kPsum && sum != ir::Prim::kPsumScatter) ||
        ir::FromProto(dot.result_types(0)).dtype != ir::DType::kBF16 ||
        claimed_.count(psum->results(0))) {
      return;
    }
    OpEmitter e = Emitter(dot);
    ir::Op wide;
    wide.set_opcode("dot_general");
    *wide.mutable_dot_general() = dot.dot_general();
    wide.mutable_dot_general()->set_preferred_element_type(ir::F32);
    const int64_t product = e.Emit(std::move(wide), {dot.operands(0), dot.operands(1)});
    std::vector<ir::Op> dot_ops = e.Take();
    e.SetOrigin(*psum);
    e.Convert(e.Emit(*psum, {product}), ir::DType::kBF16, psum->results(0));
    std::vector<ir::Op> psum_ops = e.Take();
    if (!e.status().ok()) return;
    Rewrite(dot, std::move(dot_ops), {&dot});
    Rewrite(*psum, std::move(psum_ops), {psum});
  }

  const ir::Mesh& mesh_;
  const Facts& facts_;
  const CollectiveFusionOptions& options_;
  const MachineModel& machine_;
  int64_t& next_id_;
  Plan plan_;
  std::unordered_set<int64_t> claimed_;  // first results of ops already rewritten
};

}  // namespace
}  // namespace collective_fusion

absl::StatusOr<bool> CollectiveFusion::Run(ir::Module& module) {
  using namespace collective_fusion;  // NOLINT: this file's internals
  if (module.mesh().axes_size() == 0 || module.mesh().axes_size() > 63) return false;
  bool changed = false;
  for (ir::Function& f : *module.mutable_functions()) {
    int64_t next_id = MaxValueId(f.body()) + 1;
    ForEachSpmdRegion(module, f, [&](ir::Region& region, std::vector<AxisMask> params) {
      Facts facts(module.mesh(), region, params);
      Matcher matcher(module.mesh(), facts, options_, machine_, next_id);
      matcher.Region(region);
      if (matcher.plan().empty()) return;
      Apply(matcher.plan(), region);
      changed = true;
    });
  }
  if (!changed) return false;
  // The gathers and products the rings replaced.
  RETURN_IF_ERROR(DeadCodeElimination().Run(module).status());
  // Value names follow definition order in the text form.
  for (ir::Function& f : *module.mutable_functions()) ir::CanonicalizeValueIds(f);
  return true;
}

}  // namespace shardjit::passes
