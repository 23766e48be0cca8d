#include "passes/sharding_propagation.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/status_macros.h"
#include "passes/cost_analysis.h"
#include "passes/spmd/rules.h"
#include "passes/spmd_partition.h"

namespace shardjit::passes {
namespace {

using spmd::Spec;

void AddWant(std::vector<Spec>& wants, const Spec& spec) {
  if (std::find(wants.begin(), wants.end(), spec) == wants.end()) wants.push_back(spec);
}

bool SameSpecs(const google::protobuf::RepeatedPtrField<ir::PartitionSpec>& a,
               const google::protobuf::RepeatedPtrField<ir::PartitionSpec>& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i) {
    if (a[i].SerializeAsString() != b[i].SerializeAsString()) return false;
  }
  return true;
}

struct Value {
  ir::ShapedType type;
  std::optional<Spec> spec;
  std::vector<Spec> wants;  // layouts the users want (while undecided)
};
using Values = std::unordered_map<int64_t, Value>;

// The rank of the region's i-th result (a param or an op result).
int64_t ResultRank(const ir::Region& region, int i) {
  const int64_t id = region.results(i);
  for (const ir::Param& p : region.params()) {
    if (p.id() == id) return p.type().dims_size();
  }
  for (const ir::Op& op : region.ops()) {
    for (int r = 0; r < op.results_size(); ++r) {
      if (op.results(r) == id) return op.result_types(r).dims_size();
    }
  }
  return 0;
}

// Propagates layouts through one region. `outer` holds the decided values of the enclosing
// regions, which the region may read and whose layouts it cannot change.
class Propagator {
 public:
  Propagator(const ir::Mesh& mesh, const ir::Region& body, Values outer,
             const std::vector<Spec>& param_specs, std::vector<std::optional<Spec>> result_wants,
             const MachineModel& machine, const std::map<int64_t, Spec>* forced = nullptr)
      : mesh_(mesh),
        body_(body),
        values_(std::move(outer)),
        result_wants_(std::move(result_wants)),
        machine_(machine),
        forced_(forced) {
    for (int i = 0; i < body_.params_size(); ++i) {
      ir::ShapedType type = ir::FromProto(body_.params(i).type());
      values_[body_.params(i).id()] = {type, param_specs[i], {}};
    }
  }

  absl::Status Run() {
    for (const ir::Op& op : body_.ops()) {
      for (int r = 0; r < op.results_size(); ++r) {
        Value& v = values_[op.results(r)];
        v.type = ir::FromProto(op.result_types(r));
        if (op.has_with_sharding_constraint()) {
          v.spec = spmd::FromProto(op.with_sharding_constraint().sharding(), v.type.rank());
        }
        if (forced_ != nullptr) {
          if (auto it = forced_->find(op.results(r)); it != forced_->end()) v.spec = it->second;
        }
      }
    }
    // Sharded operands first: a replicated one (a broadcast's vector, a weight) says nothing of
    // the dims its result adds, which the users' layouts then decide.
    while (true) {
      RETURN_IF_ERROR(Backward());
      ASSIGN_OR_RETURN(bool decided, Forward(Known::kSharded));
      if (decided) continue;
      ASSIGN_OR_RETURN(decided, Forward(Known::kAny));
      if (decided) continue;
      ASSIGN_OR_RETURN(decided, Forward(Known::kNone));
      if (!decided) break;
    }
    return absl::OkStatus();
  }

  // Writes the decided layouts into `region` (the region this propagator ran on), then
  // propagates into the regions of its loops and conds: a fori_loop's index is replicated and
  // every carry keeps the loop's layout in the params and results of the loop's regions (a
  // while_loop's cond returns a replicated pred); cond branches take the operands' layouts and
  // return the op's. Returns whether any layout changed.
  absl::StatusOr<bool> Annotate(ir::Region& region) {
    bool changed = false;
    for (ir::Op& op : *region.mutable_ops()) {
      google::protobuf::RepeatedPtrField<ir::PartitionSpec> specs;
      for (int64_t id : op.results()) *specs.Add() = spmd::ToProto(SpecOf(id));
      if (!SameSpecs(specs, op.sharding())) {
        *op.mutable_sharding() = std::move(specs);
        changed = true;
      }
      if (!op.has_fori_loop() && !op.has_while_loop() && !op.has_cond()) continue;
      std::vector<Spec> carries;
      std::vector<std::optional<Spec>> results;
      for (int64_t id : op.results()) {
        carries.push_back(SpecOf(id));
        results.push_back(SpecOf(id));
      }
      if (op.has_fori_loop()) {
        std::vector<Spec> params = {spmd::Replicated(0)};
        params.insert(params.end(), carries.begin(), carries.end());
        ASSIGN_OR_RETURN(bool c, Nested(*op.mutable_fori_loop()->mutable_body(), params, results));
        changed |= c;
      } else if (op.has_while_loop()) {
        ASSIGN_OR_RETURN(bool c, Nested(*op.mutable_while_loop()->mutable_cond(), carries,
                                        {spmd::Replicated(0)}));
        ASSIGN_OR_RETURN(bool d, Nested(*op.mutable_while_loop()->mutable_body(), carries, results));
        changed |= c || d;
      } else {
        std::vector<Spec> operands;
        for (int k = 1; k < op.operands_size(); ++k) operands.push_back(SpecOf(op.operands(k)));
        for (ir::Region& branch : *op.mutable_cond()->mutable_branches()) {
          ASSIGN_OR_RETURN(bool c, Nested(branch, operands, results));
          changed |= c;
        }
      }
    }
    return changed;
  }

 private:
  // Propagates into `region`, whose params have `params` layouts and whose results want
  // `results`; returns whether any layout in it changed.
  absl::StatusOr<bool> Nested(ir::Region& region, const std::vector<Spec>& params,
                              std::vector<std::optional<Spec>> results) {
    Propagator inner(mesh_, region, values_, params, std::move(results), machine_);
    RETURN_IF_ERROR(inner.Run());
    return inner.Annotate(region);
  }

  // The decided layout of `id` (replicated if undecided, which Run leaves none of).
  Spec SpecOf(int64_t id) const {
    const Value& v = values_.at(id);
    return v.spec ? *v.spec : spmd::Replicated(v.type.rank());
  }

  spmd::OpView View(const ir::Op& op) const {
    spmd::OpView view{&op, &mesh_, {}, {}, {}, {}, machine_};
    for (int64_t id : op.operands()) {
      const Value& v = values_.at(id);
      view.operand_types.push_back(v.type);
      view.operand_specs.push_back(v.spec);
    }
    for (int64_t id : op.results()) {
      const Value& v = values_.at(id);
      view.result_types.push_back(v.type);
      view.result_wants.push_back(v.spec ? std::vector<Spec>{*v.spec} : v.wants);
    }
    return view;
  }

  // Recomputes the layouts users want of each undecided value, from the returned values back.
  absl::Status Backward() {
    for (auto& [id, v] : values_) v.wants.clear();
    for (int i = 0; i < body_.results_size() && i < static_cast<int>(result_wants_.size()); ++i) {
      if (result_wants_[i]) AddWant(values_.at(body_.results(i)).wants, *result_wants_[i]);
    }
    for (int i = body_.ops_size() - 1; i >= 0; --i) {
      const ir::Op& op = body_.ops(i);
      spmd::OpView view = View(op);
      bool informed = false, open = false;
      for (const auto& wants : view.result_wants) informed = informed || !wants.empty();
      for (const auto& spec : view.operand_specs) open = open || !spec;
      if (!informed || !open) continue;
      ASSIGN_OR_RETURN(spmd::Strategy st, spmd::ChooseStrategy(view));
      for (int j = 0; j < op.operands_size(); ++j) {
        Value& v = values_.at(op.operands(j));
        if (!v.spec) AddWant(v.wants, st.operands[j]);
      }
    }
    return absl::OkStatus();
  }

  // Which undecided ops Forward decides: those with a decided operand that is sharded, with any
  // decided operand, or without operands.
  enum class Known { kSharded, kAny, kNone };

  // Decides the results of every undecided op that `known` selects. Returns whether it decided
  // any.
  absl::StatusOr<bool> Forward(Known known) {
    bool decided = false;
    for (const ir::Op& op : body_.ops()) {
      if (op.results_size() == 0 || values_.at(op.results(0)).spec) continue;
      bool any = false, sharded = false;
      for (int64_t id : op.operands()) {
        const std::optional<Spec>& spec = values_.at(id).spec;
        any = any || spec.has_value();
        sharded = sharded || (spec.has_value() && !spec->IsReplicated());
      }
      const bool selected = known == Known::kSharded ? sharded
                            : known == Known::kAny   ? any
                                                     : op.operands_size() == 0;
      if (!selected) continue;
      ASSIGN_OR_RETURN(spmd::Strategy st, spmd::ChooseStrategy(View(op)));
      for (int r = 0; r < op.results_size(); ++r) values_.at(op.results(r)).spec = st.results[r];
      decided = true;
    }
    return decided;
  }

  const ir::Mesh& mesh_;
  const ir::Region& body_;
  Values values_;
  std::vector<std::optional<Spec>> result_wants_;
  const MachineModel machine_;
  const std::map<int64_t, Spec>* forced_;  // result layouts fixed from outside; may be null
};

// Entry param `i`'s layout: its param_sharding, replicated when the module lists none.
Spec ParamSpec(const ir::Module& module, int i) {
  const int64_t rank = module.functions(0).body().params(i).type().dims_size();
  return i < module.param_shardings_size() ? spmd::FromProto(module.param_shardings(i), rank)
                                           : spmd::Replicated(rank);
}

// The type and decided layout of every entry param and annotated top-level op result.
struct AnnotatedValue {
  ir::ShapedType type;
  Spec spec;
};
std::map<int64_t, AnnotatedValue> AnnotatedValues(const ir::Module& module) {
  std::map<int64_t, AnnotatedValue> values;
  const ir::Region& body = module.functions(0).body();
  for (int i = 0; i < body.params_size(); ++i) {
    values[body.params(i).id()] = {ir::FromProto(body.params(i).type()), ParamSpec(module, i)};
  }
  for (const ir::Op& op : body.ops()) {
    for (int r = 0; r < op.results_size() && r < op.sharding_size(); ++r) {
      values[op.results(r)] = {ir::FromProto(op.result_types(r)),
                               spmd::FromProto(op.sharding(r), op.result_types(r).dims_size())};
    }
  }
  return values;
}

// Plan search bounds: modules with more top-level ops keep the propagated plan; at most this
// many alternative plans are estimated.
constexpr int kMaxSearchedOps = 64;
constexpr int kMaxEstimates = 48;

}  // namespace

absl::StatusOr<bool> PropagateShardings(ir::Module& module,
                                        const std::map<int64_t, spmd::Spec>& forced,
                                        const MachineModel& machine) {
  ir::Region& body = *module.mutable_functions(0)->mutable_body();
  std::vector<Spec> params;
  for (int i = 0; i < body.params_size(); ++i) params.push_back(ParamSpec(module, i));
  std::vector<std::optional<Spec>> wants(body.results_size());
  for (int i = 0; i < body.results_size() && i < module.result_shardings_size(); ++i) {
    wants[i] = spmd::FromProto(module.result_shardings(i), ResultRank(body, i));
  }
  Propagator propagator(module.mesh(), body, {}, params, std::move(wants), machine, &forced);
  RETURN_IF_ERROR(propagator.Run());
  return propagator.Annotate(body);
}

absl::StatusOr<double> EstimatePlanSeconds(const ir::Module& annotated,
                                           const MachineModel& machine) {
  ir::Module partitioned = annotated;
  RETURN_IF_ERROR(SpmdPartition(machine).Run(partitioned).status());
  ASSIGN_OR_RETURN(CostReport cost, AnalyzeCost(partitioned, {.machine = machine}));
  return cost.estimated_seconds;
}

std::vector<std::pair<int64_t, spmd::Spec>> AlternativeLayouts(const ir::Module& annotated) {
  const std::map<int64_t, AnnotatedValue> values = AnnotatedValues(annotated);
  const ir::Mesh& mesh = annotated.mesh();
  std::vector<std::pair<int64_t, Spec>> out;
  for (const ir::Op& op : annotated.functions(0).body().ops()) {
    if (op.results_size() != 1 || op.has_with_sharding_constraint() || !spmd::HasRule(op)) {
      continue;
    }
    spmd::OpView view{&op, &mesh, {}, {ir::FromProto(op.result_types(0))}, {}, {{}}};
    bool known = true;
    for (int64_t id : op.operands()) {
      auto it = values.find(id);
      known = known && it != values.end();
      if (!known) break;
      view.operand_types.push_back(it->second.type);
      view.operand_specs.push_back(it->second.spec);
    }
    auto result = values.find(op.results(0));
    if (!known || result == values.end()) continue;
    std::vector<Spec> seen = {result->second.spec};
    for (const spmd::Strategy& st : spmd::Candidates(view)) {
      const Spec& layout = st.results[0];
      if (!spmd::IsValid(mesh, layout, view.result_types[0].dims) ||
          std::find(seen.begin(), seen.end(), layout) != seen.end()) {
        continue;
      }
      seen.push_back(layout);
      out.push_back({op.results(0), layout});
    }
  }
  return out;
}

namespace {

// Improves the propagated plan of `module` (annotated; `original` before annotation): each plan
// with one op's result laid out by another candidate of its rule, everything else propagated
// around it, is estimated, and the fastest of them and the propagated plan wins.
absl::Status SearchPlans(const ir::Module& original, const MachineModel& machine,
                         ir::Module& module) {
  if (module.functions(0).body().ops_size() > kMaxSearchedOps) return absl::OkStatus();
  absl::StatusOr<double> best = EstimatePlanSeconds(module, machine);
  if (!best.ok()) return absl::OkStatus();  // the propagated plan stands
  std::optional<ir::Module> chosen;
  int estimates = 0;
  for (const auto& [id, layout] : AlternativeLayouts(module)) {
    if (estimates++ >= kMaxEstimates) break;
    ir::Module trial = original;
    if (!PropagateShardings(trial, {{id, layout}}, machine).ok()) continue;
    absl::StatusOr<double> seconds = EstimatePlanSeconds(trial, machine);
    if (!seconds.ok() || !(*seconds < *best * (1 - 1e-9))) continue;
    best = *seconds;
    chosen = std::move(trial);
  }
  if (chosen) module = std::move(*chosen);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> ShardingPropagation::Run(ir::Module& module) {
  if (module.view() != ir::GLOBAL || module.mesh().axes().empty() || module.functions_size() != 1 ||
      module.functions(0).name() != module.entry()) {
    return false;
  }
  const ir::Region& body = module.functions(0).body();
  if (!spmd::CheckRules(body).ok() || spmd::OnlyWrapsShardMap(body)) return false;
  const ir::Module original = module;
  absl::StatusOr<bool> changed = PropagateShardings(module, {}, machine_);
  if (!changed.ok() || !*changed) return changed;
  RETURN_IF_ERROR(SearchPlans(original, machine_, module));
  return true;
}

}  // namespace shardjit::passes
