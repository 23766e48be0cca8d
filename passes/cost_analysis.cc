#include "passes/cost_analysis.h"

#include <algorithm>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/prim.h"
#include "ir/collective_groups.h"
#include "ir/fmt_absl.h"
#include "ir/primitive.h"
#include "ir/sharding.h"
#include "ir/types.h"
#include "ir/regions.h"

namespace shardjit::passes {
namespace {

class Analyzer {
 public:
  Analyzer(const ir::Mesh& mesh, const CostOptions& options) : mesh_(mesh), options_(options) {}

  absl::Status Region(const ir::Region& region, int64_t count) {
    for (const ir::Param& p : region.params()) types_[p.id()] = ir::FromProto(p.type());
    for (const ir::Op& op : region.ops()) {
      for (int i = 0; i < op.results_size(); ++i) {
        types_[op.results(i)] = ir::FromProto(op.result_types(i));
      }
      RETURN_IF_ERROR(Op(op, count));
    }
    return absl::OkStatus();
  }

  CostReport& report() { return report_; }

 private:
  absl::Status Op(const ir::Op& op, int64_t count) {
    if (op.has_fori_loop()) {
      const int64_t trips = std::max<int64_t>(0, op.fori_loop().upper() - op.fori_loop().lower());
      return Region(op.fori_loop().body(), count * trips);
    }
    if (op.has_shard_map()) return Region(op.shard_map().body(), count);
    if (op.has_while_loop() || op.has_cond()) {
      // Trip counts and branches are decided at run time: cond, body and every branch count once.
      for (const ir::Region* r : ir::Regions(op)) RETURN_IF_ERROR(Region(*r, count));
      return absl::OkStatus();
    }
    report_.flops += count * Flops(op);
    const ir::Prim prim = ir::PrimOf(op);
    // A *_done moves nothing: its start is counted.
    // A precv moves nothing of its own: its psend is counted.
    if (!ir::IsCollective(prim) || op.has_axis() || ir::IsAsyncDone(prim) || op.has_precv()) {
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(CollectiveCost c, Collective(op));
    c.count = count;
    c.bytes_sent *= count;
    report_.bytes_communicated += c.bytes_sent;
    report_.collectives.push_back(std::move(c));
    return absl::OkStatus();
  }

  static bool Floating(const ir::ShapedType& t) { return ir::IsFloating(t.dtype); }

  int64_t Flops(const ir::Op& op) const {
    if (op.results_size() == 0) return 0;
    const ir::ShapedType result = ir::FromProto(op.result_types(0));
    if (op.has_dot_general()) {
      // dot_accumulate's operands are (acc, lhs, rhs, starts...); its product may be smaller
      // than the acc it lands in, so count from the operands: 2 * lhs elements * rhs free ones.
      const int first = ir::PrimOf(op) == ir::Prim::kDotAccumulate ? 1 : 0;
      return DotGeneralFlops(op.dot_general(), types_.at(op.operands(first)).dims,
                             types_.at(op.operands(first + 1)).dims);
    }
    if (op.has_grouped_matmul()) {
      return GroupedMatmulFlops(op, types_.at(op.operands(0)).dims,
                                types_.at(op.operands(1)).dims);
    }
    if (op.has_reduce()) return types_.at(op.operands(0)).num_elements();
    if (op.has_fusion()) {
      int64_t per_element = 0;
      std::unordered_map<int64_t, ir::ShapedType> body_types;
      for (const ir::Param& p : op.fusion().body().params()) {
        body_types[p.id()] = ir::FromProto(p.type());
      }
      for (const ir::Op& inner : op.fusion().body().ops()) {
        for (int i = 0; i < inner.results_size(); ++i) {
          body_types[inner.results(i)] = ir::FromProto(inner.result_types(i));
        }
        if (IsFloatingElementwise(inner, body_types)) ++per_element;
      }
      return per_element * result.num_elements();
    }
    return IsFloatingElementwise(op, types_) ? result.num_elements() : 0;
  }

  static bool IsFloatingElementwise(const ir::Op& op,
                                    const std::unordered_map<int64_t, ir::ShapedType>& types) {
    if (!ir::IsElementwise(ir::PrimOf(op))) return false;
    if (op.results_size() > 0 && Floating(ir::FromProto(op.result_types(0)))) return true;
    for (int64_t id : op.operands()) {
      auto it = types.find(id);
      if (it != types.end() && Floating(it->second)) return true;
    }
    return false;
  }

  // This device's index along the combined `axes`, or -1 when no device is chosen.
  int64_t AxisIndex(const ir::AxisList& axes) const {
    return options_.device < 0 ? -1 : ir::CombinedAxisIndex(mesh_, options_.device, axes);
  }

  absl::StatusOr<CollectiveCost> Collective(const ir::Op& op) const {
    if (!op.has_all_reduce() && !op.has_all_gather() && !op.has_psum_scatter() &&
        !op.has_all_to_all() && !op.has_ragged_all_to_all() && !op.has_ppermute() &&
        !op.has_pbroadcast()) {
      return absl::UnimplementedError(
          fmt::format("cost analysis: no cost rule for collective {}", op.opcode()));
    }
    const ir::AxisList axes = ir::CollectiveAxes(op);
    absl::StatusOr<int64_t> n =
        ir::GroupSize(mesh_, options_.device, axes, ir::CollectiveAxisGroups(op));
    if (!n.ok()) {
      return absl::Status(n.status().code(), fmt::format("cost analysis: {}: {}", op.opcode(),
                                                         n.status().message()));
    }
    const ir::ShapedType& operand = types_.at(op.operands(0));
    const int64_t in = operand.byte_size();
    const int64_t out = ir::FromProto(op.result_types(0)).Awaited().byte_size();
    CollectiveCost c{op.opcode(), "(" + absl::StrJoin(axes, ",") + ")", operand.ToString(), *n};
    if (*n > 0) {
      if (op.has_all_reduce()) {
        c.bytes_sent = 2 * in * (*n - 1) / *n;
      } else if (op.has_all_gather()) {
        c.bytes_sent = out * (*n - 1) / *n;
      } else if (op.has_ppermute()) {
        const int64_t me = AxisIndex(axes);
        bool source = false;  // sends to another device (a pair to itself moves nothing)
        for (const ir::PermutePair& p : op.ppermute().perm()) {
          source = source || (me < 0 ? p.source() != p.target()
                                     : p.source() == me && p.target() != me);
        }
        c.bytes_sent = source ? in : 0;
      } else if (op.has_pbroadcast()) {
        const int64_t me = AxisIndex(axes);
        c.bytes_sent = me < 0 || me == op.pbroadcast().source() ? in * (*n - 1) : 0;
      } else {
        // psum_scatter, all_to_all; for ragged_all_to_all, what leaves if all rows are sent.
        c.bytes_sent = in * (*n - 1) / *n;
      }
    }
    return c;
  }

  const ir::Mesh& mesh_;
  const CostOptions& options_;
  std::unordered_map<int64_t, ir::ShapedType> types_;
  CostReport report_;
};

}  // namespace

int64_t DotGeneralFlops(const ir::DotGeneralAttrs& dims, const std::vector<int64_t>& lhs,
                        const std::vector<int64_t>& rhs) {
  int64_t lhs_elements = 1, rhs_elements = 1, rhs_shared = 1;  // shared: batch and contracting
  for (int64_t d : lhs) lhs_elements *= d;
  for (int64_t d : rhs) rhs_elements *= d;
  for (int64_t d : dims.rhs_batch_dims()) rhs_shared *= rhs[d];
  for (int64_t d : dims.rhs_contracting_dims()) rhs_shared *= rhs[d];
  return 2 * lhs_elements * (rhs_elements / std::max<int64_t>(1, rhs_shared));
}

int64_t GroupedMatmulFlops(const ir::Op& op, const std::vector<int64_t>& lhs,
                           const std::vector<int64_t>& rhs) {
  int64_t lhs_elements = 1;
  for (int64_t d : lhs) lhs_elements *= d;
  // n: rhs [g,k,n] (gmm), [g,n,k] (gmm, transpose_rhs) or [m,n] (tgmm).
  const bool gmm_untransposed =
      ir::PrimOf(op) == ir::Prim::kGmm && !op.grouped_matmul().transpose_rhs();
  const int64_t n = gmm_untransposed ? rhs[2] : rhs[1];
  return 2 * lhs_elements * n;
}

std::string CostReport::ToString() const {
  std::string s = fmt::format("flops: {}\nbytes communicated: {}\nestimated time: {:.1f} us\n",
                              flops, bytes_communicated, estimated_seconds * 1e6);
  for (const CollectiveCost& c : collectives) {
    s += fmt::format("  {}[axes={}] {} n={} x{}: {} bytes\n", c.op, c.axes, c.operand,
                     c.group_size, c.count, c.bytes_sent);
  }
  return s;
}

absl::StatusOr<CostReport> AnalyzeCost(const ir::Module& module, const CostOptions& options) {
  if (options.device >= ir::MeshSize(module.mesh())) {
    return absl::InvalidArgumentError(fmt::format(
        "cost analysis: device {} is not a position of mesh {}", options.device,
        ir::MeshToString(module.mesh())));
  }
  for (const ir::Function& f : module.functions()) {
    if (f.name() != module.entry()) continue;
    Analyzer analyzer(module.mesh(), options);
    RETURN_IF_ERROR(analyzer.Region(f.body(), 1));
    CostReport& report = analyzer.report();
    int64_t runs = 0;
    for (const CollectiveCost& c : report.collectives) runs += c.count;
    report.estimated_seconds =
        options.machine.Seconds(report.flops, report.bytes_communicated, runs);
    return std::move(report);
  }
  return absl::NotFoundError(
      fmt::format("cost analysis: module {} has no entry function \"{}\"", module.name(),
                  module.entry()));
}

}  // namespace shardjit::passes
