#include "passes/spmd/rules.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/primitive.h"
#include "ir/regions.h"
#include "passes/cost_analysis.h"
#include "passes/machine_model.h"
#include "passes/spmd/cost.h"
#include "passes/spmd/rules_internal.h"

namespace shardjit::passes::spmd {
namespace internal {

void AddUnique(std::vector<Spec>& list, const Spec& spec) {
  for (const Spec& s : list) {
    if (s == spec) return;
  }
  list.push_back(spec);
}

std::vector<Strategy> FromResultLayouts(
    const OpView& view, const std::function<std::optional<Spec>(int, const Spec&)>& from_operand,
    const std::function<Strategy(const Spec&)>& for_result) {
  std::vector<Spec> layouts;
  for (size_t i = 0; i < view.operand_specs.size(); ++i) {
    if (!view.operand_specs[i]) continue;
    if (std::optional<Spec> r = from_operand(static_cast<int>(i), *view.operand_specs[i])) {
      AddUnique(layouts, *r);
    }
  }
  for (const Spec& want : view.result_wants[0]) AddUnique(layouts, want);
  AddUnique(layouts, Replicated(view.result_types[0].rank()));
  std::vector<Strategy> out;
  for (const Spec& r : layouts) out.push_back(for_result(r));
  return out;
}

// Same-shape maps: every operand of the result's rank shares its layout; scalars (select's
// predicate) are replicated.
std::vector<Strategy> ElementwiseRule(const OpView& view) {
  const int64_t rank = view.result_types[0].rank();
  return FromResultLayouts(
      view,
      [&](int i, const Spec& s) -> std::optional<Spec> {
        if (view.operand_types[i].rank() != rank) return std::nullopt;
        return s;
      },
      [&](const Spec& r) {
        Strategy st;
        for (const ir::ShapedType& t : view.operand_types) {
          st.operands.push_back(t.rank() == rank ? r : Replicated(t.rank()));
        }
        st.results = {r};
        return st;
      });
}

}  // namespace internal

namespace {

const internal::RuleTable& Table() {
  static const auto* table = [] {
    auto* t = new internal::RuleTable();
    internal::AddDataMovementRules(*t);
    internal::AddContractionRules(*t);
    internal::AddRegionRules(*t);
    internal::AddAlongAxisRules(*t);
    internal::AddIndexingRules(*t);
    return t;
  }();
  return *table;
}

const internal::Rule* FindRule(const ir::Op& op) {
  static const internal::Rule* const kElementwise = new internal::Rule(internal::ElementwiseRule);
  const ir::Prim prim = ir::PrimOf(op);
  if (const internal::Rule* rule = Table().Find(prim)) return rule;
  return ir::IsElementwise(prim) ? kElementwise : nullptr;
}

bool ValidFor(const ir::Mesh& mesh, const std::vector<Spec>& specs,
              const std::vector<ir::ShapedType>& types) {
  if (specs.size() != types.size()) return false;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!IsValid(mesh, specs[i], types[i].dims)) return false;
  }
  return true;
}

}  // namespace

bool HasRule(const ir::Op& op) { return FindRule(op) != nullptr; }

absl::Status CheckRules(const ir::Region& region) {
  for (int i = 0; i < region.ops_size(); ++i) {
    const ir::Op& op = region.ops(i);
    if (op.has_fori_loop() || op.has_while_loop() || op.has_cond()) {
      const std::vector<const ir::Region*> regions = ir::Regions(op);
      for (size_t r = 0; r < regions.size(); ++r) {
        if (absl::Status s = CheckRules(*regions[r]); !s.ok()) {
          return absl::UnimplementedError(fmt::format("{}, in the {} of op #{} ({})", s.message(),
                                                      ir::RegionName(op, r), i, op.opcode()));
        }
      }
    }
    if (HasRule(op)) continue;
    std::vector<std::string> types;
    for (const ir::TensorType& t : op.result_types()) types.push_back(ir::FromProto(t).ToString());
    return absl::UnimplementedError(fmt::format("no partitioning rule for {} (op #{}, results {})",
                                                op.opcode(), i, absl::StrJoin(types, ", ")));
  }
  return absl::OkStatus();
}

std::vector<Strategy> Candidates(const OpView& view) {
  const internal::Rule* rule = FindRule(*view.op);
  return rule == nullptr ? std::vector<Strategy>{} : (*rule)(view);
}

bool OnlyWrapsShardMap(const ir::Region& region) {
  if (region.ops_size() != 1 || !region.ops(0).has_shard_map()) return false;
  const ir::Op& op = region.ops(0);
  if (op.operands_size() != region.params_size() || op.results_size() != region.results_size()) {
    return false;
  }
  for (int i = 0; i < op.operands_size(); ++i) {
    if (op.operands(i) != region.params(i).id()) return false;
  }
  for (int i = 0; i < op.results_size(); ++i) {
    if (op.results(i) != region.results(i)) return false;
  }
  return true;
}

bool StrategyCost::operator<(const StrategyCost& o) const {
  if (seconds != o.seconds) return seconds < o.seconds;
  return std::tie(comm.bytes, comm.collectives, block_bytes) <
         std::tie(o.comm.bytes, o.comm.collectives, o.block_bytes);
}

namespace {

int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Floating-point operations of the op on one device's blocks: dot_general, gmm and tgmm 2 per
// multiply-add, reduce_* one per operand element, an elementwise op one per result element; 0
// for data movement.
int64_t LocalFlops(const OpView& view, const Strategy& st) {
  const ir::Mesh& mesh = *view.mesh;
  const ir::Op& op = *view.op;
  auto block = [&](const Spec& spec, const ir::ShapedType& type) {
    return BlockDims(mesh, spec, type.dims);
  };
  if (op.has_dot_general()) {
    // From the operand blocks: the product is computed whole before any psum_scatter.
    return DotGeneralFlops(op.dot_general(), block(st.operands[0], view.operand_types[0]),
                           block(st.operands[1], view.operand_types[1]));
  }
  if (op.has_grouped_matmul()) {
    return GroupedMatmulFlops(op, block(st.operands[0], view.operand_types[0]),
                              block(st.operands[1], view.operand_types[1]));
  }
  if (op.has_reduce()) return NumElements(block(st.operands[0], view.operand_types[0]));
  if (ir::IsElementwise(ir::PrimOf(op))) {
    return NumElements(block(st.results[0], view.result_types[0]));
  }
  return 0;
}

}  // namespace

StrategyCost Cost(const OpView& view, const Strategy& st) {
  const ir::Mesh& mesh = *view.mesh;
  StrategyCost cost;
  cost.flops = LocalFlops(view, st);
  for (size_t i = 0; i < st.operands.size(); ++i) {
    if (view.operand_specs[i]) {
      cost.comm += ReshardCost(mesh, view.operand_types[i], *view.operand_specs[i], st.operands[i]);
    }
    cost.block_bytes += BlockBytes(mesh, st.operands[i], view.operand_types[i]);
  }
  const int64_t n = AxesSize(mesh, st.reduce_axes);
  if (n > 1) {
    const int64_t bytes = BlockBytes(mesh, st.results[0], view.result_types[0]);
    cost.comm += st.scatter_dim >= 0 ? CommCost{ReduceScatterBytes(bytes * n, n), 1}
                                     : CommCost{AllReduceBytes(bytes, n), 1};
  }
  for (size_t r = 0; r < st.results.size(); ++r) {
    cost.block_bytes += BlockBytes(mesh, st.results[r], view.result_types[r]);
    for (const Spec& want : view.result_wants[r]) {
      cost.comm += ReshardCost(mesh, view.result_types[r], st.results[r], want);
    }
  }
  cost.seconds = view.machine.Seconds(cost.flops, cost.comm.bytes, cost.comm.collectives);
  return cost;
}

absl::StatusOr<Strategy> ChooseStrategy(const OpView& view) {
  if (!HasRule(*view.op)) {
    return absl::UnimplementedError(fmt::format("no partitioning rule for {}", view.op->opcode()));
  }
  std::optional<Strategy> best;
  StrategyCost best_cost;
  for (Strategy& st : Candidates(view)) {
    if (!ValidFor(*view.mesh, st.operands, view.operand_types) ||
        !ValidFor(*view.mesh, st.results, view.result_types)) {
      continue;
    }
    StrategyCost cost = Cost(view, st);
    if (!best || cost < best_cost) {
      best = std::move(st);
      best_cost = cost;
    }
  }
  if (!best) {
    return absl::InternalError(fmt::format("{}: no valid partitioning strategy (results {})",
                                           view.op->opcode(),
                                           ir::TypesToString(view.result_types)));
  }
  return *best;
}

}  // namespace shardjit::passes::spmd
