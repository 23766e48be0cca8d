#include "passes/spmd_partition.h"

#include <map>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/printer.h"
#include "ir/sharding.h"
#include "passes/spmd/emitter.h"
#include "passes/spmd/local_ops.h"
#include "passes/spmd/rules.h"

namespace shardjit::passes {
namespace {

using spmd::Spec;

// The combining collective of an op's partial results.
std::string CombineOpcode(const std::string& opcode) {
  if (opcode == "reduce_max") return "pmax";
  if (opcode == "reduce_min") return "pmin";
  return "psum";
}

// Checks `spec` against a value of global type `type`; the error names `what`.
absl::StatusOr<Spec> CheckedSpec(const ir::Mesh& mesh, const ir::PartitionSpec& spec,
                                 const ir::ShapedType& type, const std::string& what) {
  absl::StatusOr<std::vector<int64_t>> local = ir::LocalDims(mesh, spec, type.dims, what);
  if (!local.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}; value {}", local.status().message(), type.ToString()));
  }
  return spmd::FromProto(spec, type.rank());
}

class Partitioner {
 public:
  Partitioner(const ir::Module& module, const ir::Function& entry)
      : module_(module), entry_(entry), emitter_(module.mesh()) {}

  absl::StatusOr<ir::Function> Run() {
    const ir::Region& body = entry_.body();
    for (int i = 0; i < body.params_size(); ++i) {
      ir::ShapedType type = ir::FromProto(body.params(i).type());
      ir::PartitionSpec proto =
          i < module_.param_shardings_size() ? module_.param_shardings(i) : ir::ReplicatedSpec();
      absl::StatusOr<Spec> spec =
          CheckedSpec(mesh(), proto, type, fmt::format("param_shardings[{}]", i));
      if (!spec.ok()) return spec.status();
      int64_t id = emitter_.AddParam(spmd::BlockType(mesh(), *spec, type));
      values_[body.params(i).id()] = {id, *spec, type};
    }
    for (int i = 0; i < body.ops_size(); ++i) {
      if (absl::Status s = Op(i, body.ops(i)); !s.ok()) return s;
    }
    emitter_.SetOrigin(ir::Op());
    std::vector<int64_t> results;
    for (int i = 0; i < body.results_size(); ++i) {
      const Value& v = values_.at(body.results(i));
      Spec want = v.spec;
      if (i < module_.result_shardings_size()) {
        absl::StatusOr<Spec> s = CheckedSpec(mesh(), module_.result_shardings(i), v.type,
                                             fmt::format("result_shardings[{}]", i));
        if (!s.ok()) return s.status();
        want = *s;
      }
      absl::StatusOr<int64_t> id = Reshard(body.results(i), want);
      if (!id.ok()) return id.status();
      results.push_back(*id);
      result_specs_.push_back(want);
    }
    return emitter_.Finish(entry_.name(), results);
  }

  const std::vector<Spec>& result_specs() const { return result_specs_; }

 private:
  struct Value {
    int64_t id;  // the local block
    Spec spec;
    ir::ShapedType type;  // global
  };

  const ir::Mesh& mesh() const { return module_.mesh(); }

  absl::StatusOr<int64_t> Reshard(int64_t global_id, const Spec& to) {
    const Value& v = values_.at(global_id);
    if (v.spec == to) return v.id;
    auto key = std::make_pair(global_id, to);
    auto it = reshards_.find(key);
    if (it != reshards_.end()) return it->second;
    absl::StatusOr<int64_t> id = emitter_.Reshard(v.id, v.type, v.spec, to);
    if (id.ok()) reshards_[key] = *id;
    return id;
  }

  absl::Status Op(int index, const ir::Op& op) {
    spmd::OpView view{&op, &mesh(), {}, {}, {}, {}};
    for (int64_t id : op.operands()) {
      view.operand_types.push_back(values_.at(id).type);
      view.operand_specs.push_back(values_.at(id).spec);
    }
    std::vector<Spec> annotated;
    for (int r = 0; r < op.results_size(); ++r) {
      ir::ShapedType type = ir::FromProto(op.result_types(r));
      absl::StatusOr<Spec> spec = CheckedSpec(
          mesh(), op.sharding(r), type,
          fmt::format("op #{} ({}) result {}", index, op.opcode(), ir::ValueName(op.results(r))));
      if (!spec.ok()) return spec.status();
      view.result_types.push_back(type);
      view.result_wants.push_back({*spec});
      annotated.push_back(*spec);
    }
    absl::StatusOr<spmd::Strategy> st = spmd::ChooseStrategy(view);
    if (!st.ok()) return st.status();
    emitter_.SetOrigin(op);
    std::vector<int64_t> operands;
    for (int i = 0; i < op.operands_size(); ++i) {
      absl::StatusOr<int64_t> id = Reshard(op.operands(i), st->operands[i]);
      if (!id.ok()) return id.status();
      operands.push_back(*id);
    }
    absl::StatusOr<std::vector<int64_t>> local = spmd::EmitLocalOp(emitter_, view, *st, operands);
    if (!local.ok()) return local.status();
    if (!st->reduce_axes.empty()) {
      absl::StatusOr<int64_t> combined = emitter_.Combine((*local)[0], CombineOpcode(op.opcode()),
                                                          st->reduce_axes, st->scatter_dim);
      if (!combined.ok()) return combined.status();
      (*local)[0] = *combined;
    }
    for (int r = 0; r < op.results_size(); ++r) {
      absl::StatusOr<int64_t> id =
          emitter_.Reshard((*local)[r], view.result_types[r], st->results[r], annotated[r]);
      if (!id.ok()) return id.status();
      values_[op.results(r)] = {*id, annotated[r], view.result_types[r]};
    }
    return absl::OkStatus();
  }

  const ir::Module& module_;
  const ir::Function& entry_;
  spmd::Emitter emitter_;
  std::unordered_map<int64_t, Value> values_;
  std::map<std::pair<int64_t, Spec>, int64_t> reshards_;
  std::vector<Spec> result_specs_;
};

}  // namespace

absl::Status SpmdPartition::CheckPartitionable(const ir::Module& module) {
  if (module.view() != ir::GLOBAL) {
    return absl::FailedPreconditionError("not a global-view module");
  }
  if (module.mesh().axes().empty()) return absl::FailedPreconditionError("no mesh axes");
  if (module.functions_size() != 1 || module.functions(0).name() != module.entry()) {
    return absl::FailedPreconditionError("not a module of one (entry) function");
  }
  const ir::Region& body = module.functions(0).body();
  if (absl::Status s = spmd::CheckRules(body); !s.ok()) return s;
  for (int i = 0; i < body.ops_size(); ++i) {
    if (body.ops(i).sharding_size() != body.ops(i).results_size()) {
      return absl::FailedPreconditionError(
          fmt::format("op #{} ({}) has no @sharding (run sharding-propagation first)", i,
                      body.ops(i).opcode()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> SpmdPartition::Run(ir::Module& module) {
  if (!CheckPartitionable(module).ok()) return false;
  const ir::Function& entry = module.functions(0);
  Partitioner partitioner(module, entry);
  absl::StatusOr<ir::Function> function = partitioner.Run();
  if (!function.ok()) {
    if (absl::IsUnimplemented(function.status())) return false;
    return function.status();
  }
  const int params = entry.body().params_size();
  ir::Module out = module;
  out.set_view(ir::PER_DEVICE);
  *out.mutable_functions(0) = std::move(*function);
  for (int i = out.param_shardings_size(); i < params; ++i) *out.add_param_shardings() = {};
  if (out.result_shardings_size() == 0) {
    for (const Spec& s : partitioner.result_specs()) *out.add_result_shardings() = spmd::ToProto(s);
  }
  module = std::move(out);
  return true;
}

}  // namespace shardjit::passes
