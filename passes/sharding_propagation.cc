#include "passes/sharding_propagation.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "passes/spmd/rules.h"

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

class Propagator {
 public:
  Propagator(const ir::Module& module, const ir::Region& body) : module_(module), body_(body) {}

  absl::Status Run() {
    for (int i = 0; i < body_.params_size(); ++i) {
      ir::ShapedType type = ir::FromProto(body_.params(i).type());
      Value& v = values_[body_.params(i).id()];
      v.type = type;
      v.spec = i < module_.param_shardings_size()
                   ? spmd::FromProto(module_.param_shardings(i), type.rank())
                   : spmd::Replicated(type.rank());
    }
    for (const ir::Op& op : body_.ops()) {
      for (int r = 0; r < op.results_size(); ++r) {
        Value& v = values_[op.results(r)];
        v.type = ir::FromProto(op.result_types(r));
        if (op.has_with_sharding_constraint()) {
          v.spec = spmd::FromProto(op.with_sharding_constraint().sharding(), v.type.rank());
        }
      }
    }
    while (true) {
      if (absl::Status s = Backward(); !s.ok()) return s;
      absl::StatusOr<bool> decided = Forward(/*sources=*/false);
      if (!decided.ok()) return decided.status();
      if (*decided) continue;
      decided = Forward(/*sources=*/true);
      if (!decided.ok()) return decided.status();
      if (!*decided) break;
    }
    return absl::OkStatus();
  }

  // The decided layout of `id` (replicated if undecided, which Run leaves none of).
  Spec SpecOf(int64_t id) const {
    const Value& v = values_.at(id);
    return v.spec ? *v.spec : spmd::Replicated(v.type.rank());
  }

 private:
  struct Value {
    ir::ShapedType type;
    std::optional<Spec> spec;
    std::vector<Spec> wants;  // layouts the users want (while undecided)
  };

  spmd::OpView View(const ir::Op& op) const {
    spmd::OpView view{&op, &module_.mesh(), {}, {}, {}, {}};
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
    for (int i = 0; i < body_.results_size() && i < module_.result_shardings_size(); ++i) {
      Value& v = values_.at(body_.results(i));
      AddWant(v.wants, spmd::FromProto(module_.result_shardings(i), v.type.rank()));
    }
    for (int i = body_.ops_size() - 1; i >= 0; --i) {
      const ir::Op& op = body_.ops(i);
      spmd::OpView view = View(op);
      bool informed = false, open = false;
      for (const auto& wants : view.result_wants) informed = informed || !wants.empty();
      for (const auto& spec : view.operand_specs) open = open || !spec;
      if (!informed || !open) continue;
      absl::StatusOr<spmd::Strategy> st = spmd::ChooseStrategy(view);
      if (!st.ok()) return st.status();
      for (int j = 0; j < op.operands_size(); ++j) {
        Value& v = values_.at(op.operands(j));
        if (!v.spec) AddWant(v.wants, st->operands[j]);
      }
    }
    return absl::OkStatus();
  }

  // Decides the results of every undecided op with a decided operand (with `sources`: of every
  // undecided op without operands instead). Returns whether it decided any.
  absl::StatusOr<bool> Forward(bool sources) {
    bool decided = false;
    for (const ir::Op& op : body_.ops()) {
      if (op.results_size() == 0 || values_.at(op.results(0)).spec) continue;
      bool known = false;
      for (int64_t id : op.operands()) known = known || values_.at(id).spec.has_value();
      if (sources ? op.operands_size() != 0 : !known) continue;
      absl::StatusOr<spmd::Strategy> st = spmd::ChooseStrategy(View(op));
      if (!st.ok()) return st.status();
      for (int r = 0; r < op.results_size(); ++r) values_.at(op.results(r)).spec = st->results[r];
      decided = true;
    }
    return decided;
  }

  const ir::Module& module_;
  const ir::Region& body_;
  std::unordered_map<int64_t, Value> values_;
};

}  // namespace

absl::StatusOr<bool> ShardingPropagation::Run(ir::Module& module) {
  if (module.view() != ir::GLOBAL || module.mesh().axes().empty() || module.functions_size() != 1 ||
      module.functions(0).name() != module.entry()) {
    return false;
  }
  ir::Region& body = *module.mutable_functions(0)->mutable_body();
  if (!spmd::CheckRules(body).ok()) return false;
  Propagator propagator(module, body);
  if (absl::Status s = propagator.Run(); !s.ok()) return s;
  bool changed = false;
  for (ir::Op& op : *body.mutable_ops()) {
    google::protobuf::RepeatedPtrField<ir::PartitionSpec> specs;
    for (int64_t id : op.results()) *specs.Add() = spmd::ToProto(propagator.SpecOf(id));
    if (!SameSpecs(specs, op.sharding())) {
      *op.mutable_sharding() = std::move(specs);
      changed = true;
    }
  }
  return changed;
}

}  // namespace shardjit::passes
