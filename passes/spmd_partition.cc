#include "passes/spmd_partition.h"

#include <map>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/prim.h"
#include "ir/printer.h"
#include "ir/sharding.h"
#include "ir/regions.h"
#include "passes/dce.h"
#include "passes/op_emitter.h"
#include "passes/spmd/collectives.h"
#include "passes/spmd/inline.h"
#include "passes/spmd/local_ops.h"
#include "passes/spmd/rules.h"

namespace shardjit::passes {
namespace {

using spmd::Spec;

// The combining collective of an op's partial results: pmax or pmin for reduce_max or
// reduce_min, else psum.
std::string CombineOpcode(const ir::Op& op) {
  const ir::ReduceOp reduce = ir::ReductionOf(ir::PrimOf(op)).value_or(ir::ReduceOp::kSum);
  return std::string(ir::PrimName(ir::AllReduceOf(reduce)));
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
  Partitioner(const ir::Module& module, const ir::Function& entry, const MachineModel& machine)
      : module_(module),
        entry_(entry),
        machine_(machine),
        emitter_(module.mesh(), "spmd-partition") {}

  absl::StatusOr<ir::Function> Run() {
    const ir::Region& body = entry_.body();
    for (int i = 0; i < body.params_size(); ++i) {
      ir::ShapedType type = ir::FromProto(body.params(i).type());
      ir::PartitionSpec proto =
          i < module_.param_shardings_size() ? module_.param_shardings(i) : ir::ReplicatedSpec();
      ASSIGN_OR_RETURN(Spec spec,
                       CheckedSpec(mesh(), proto, type, fmt::format("param_shardings[{}]", i)));
      int64_t id = emitter_.AddParam(spmd::BlockType(mesh(), spec, type));
      values_[body.params(i).id()] = {id, spec, type};
    }
    RETURN_IF_ERROR(Ops(body));
    emitter_.SetOrigin(ir::Op());
    std::vector<int64_t> results;
    for (int i = 0; i < body.results_size(); ++i) {
      const Value& v = values_.at(body.results(i));
      Spec want = v.spec;
      if (i < module_.result_shardings_size()) {
        ASSIGN_OR_RETURN(Spec s, CheckedSpec(mesh(), module_.result_shardings(i), v.type,
                                             fmt::format("result_shardings[{}]", i)));
        want = s;
      }
      ASSIGN_OR_RETURN(int64_t id, Reshard(body.results(i), want));
      results.push_back(id);
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
    absl::StatusOr<int64_t> id = RebuiltBroadcast(global_id, to);
    if (id.ok() && *id < 0) id = spmd::EmitReshard(emitter_, v.id, v.type, v.spec, to);
    if (id.ok()) reshards_[key] = *id;
    return id;
  }

  // A replicated broadcast of a replicated operand wanted in a layout that shards only the dims
  // it adds: built again in that layout (each device its own block) instead of sliced from the
  // whole. -1 for any other value.
  absl::StatusOr<int64_t> RebuiltBroadcast(int64_t global_id, const Spec& to) {
    auto b = broadcasts_.find(global_id);
    if (b == broadcasts_.end()) return -1;
    const ir::Op& op = *b->second.op;
    const Value& v = values_.at(global_id);
    const ir::ShapedType& operand = values_.at(op.operands(0)).type;
    const auto& bdims = op.broadcast_in_dim().broadcast_dimensions();
    for (int i = 0; i < bdims.size(); ++i) {
      if (operand.dims[i] == v.type.dims[bdims[i]] && !to.dims[bdims[i]].empty()) return -1;
    }
    spmd::OpView view{&op, &mesh(), {operand}, {v.type}, {spmd::Replicated(operand.rank())},
                      {{to}}, machine_};
    spmd::Strategy st;
    st.operands = {spmd::Replicated(operand.rank())};
    st.results = {to};
    ASSIGN_OR_RETURN(std::vector<int64_t> local,
                     spmd::EmitLocalOp(emitter_, view, st, {b->second.operand}));
    return local[0];
  }

  // The global result types of `op` and the layouts it is annotated with.
  struct Results {
    std::vector<ir::ShapedType> types;
    std::vector<Spec> specs;
  };

  absl::Status Ops(const ir::Region& region) {
    for (int i = 0; i < region.ops_size(); ++i) {
      RETURN_IF_ERROR(Op(i, region.ops(i)));
    }
    return absl::OkStatus();
  }

  absl::Status Op(int index, const ir::Op& op) {
    Results res;
    for (int r = 0; r < op.results_size(); ++r) {
      ir::ShapedType type = ir::FromProto(op.result_types(r));
      ASSIGN_OR_RETURN(Spec spec,
                       CheckedSpec(mesh(), op.sharding(r), type,
                                   fmt::format("op #{} ({}) result {}", index, op.opcode(),
                                               ir::ValueName(op.results(r)))));
      res.types.push_back(type);
      res.specs.push_back(spec);
    }
    if (op.has_shard_map()) return ShardMap(op, res);
    if (op.has_fori_loop()) return ForiLoop(op, res);
    if (op.has_while_loop()) return WhileLoop(op, res);
    if (op.has_cond()) return Cond(op, res);
    spmd::OpView view{&op, &mesh(), {}, res.types, {}, {}, machine_};
    for (int64_t id : op.operands()) {
      view.operand_types.push_back(values_.at(id).type);
      view.operand_specs.push_back(values_.at(id).spec);
    }
    for (const Spec& s : res.specs) view.result_wants.push_back({s});
    ASSIGN_OR_RETURN(spmd::Strategy st, spmd::ChooseStrategy(view));
    emitter_.SetOrigin(op);
    ASSIGN_OR_RETURN(std::vector<int64_t> operands, ReshardAll(op.operands(), st.operands));
    ASSIGN_OR_RETURN(std::vector<int64_t> local, spmd::EmitLocalOp(emitter_, view, st, operands));
    if (op.has_broadcast_in_dim() && st.operands[0].IsReplicated() &&
        st.results[0].IsReplicated()) {
      broadcasts_[op.results(0)] = {&op, operands[0]};
    }
    if (!st.reduce_axes.empty()) {
      ASSIGN_OR_RETURN(int64_t combined, spmd::EmitCombine(emitter_, local[0], CombineOpcode(op),
                                                           st.reduce_axes, st.scatter_dim));
      local[0] = combined;
    }
    return Bind(op, local, st.results, res);
  }

  // shard_map: the operands are resharded to the in_specs and the body is inlined on the blocks;
  // its results are laid out by the out_specs.
  absl::Status ShardMap(const ir::Op& op, const Results& res) {
    const ir::ShardMapAttrs& a = op.shard_map();
    std::vector<Spec> in, out;
    for (int i = 0; i < op.operands_size(); ++i) {
      in.push_back(spmd::FromProto(a.in_specs(i), values_.at(op.operands(i)).type.rank()));
    }
    for (int r = 0; r < op.results_size(); ++r) {
      out.push_back(spmd::FromProto(a.out_specs(r), res.types[r].rank()));
    }
    emitter_.SetOrigin(op);
    ASSIGN_OR_RETURN(std::vector<int64_t> args, ReshardAll(op.operands(), in));
    ASSIGN_OR_RETURN(std::vector<int64_t> local, spmd::InlineRegion(emitter_, a.body(), args));
    emitter_.SetOrigin(op);
    return Bind(op, local, out, res);
  }

  // fori_loop: every carry keeps the op's layout at entry, in the body's params and results; the
  // index is replicated and values of the enclosing regions keep their layouts.
  absl::Status ForiLoop(const ir::Op& op, const Results& res) {
    emitter_.SetOrigin(op);
    ASSIGN_OR_RETURN(std::vector<int64_t> init, ReshardAll(op.operands(), res.specs));
    std::vector<Spec> params = {spmd::Replicated(0)};  // the index, then the carry
    params.insert(params.end(), res.specs.begin(), res.specs.end());
    std::vector<ir::ShapedType> types = {ir::FromProto(op.fori_loop().body().params(0).type())};
    types.insert(types.end(), res.types.begin(), res.types.end());
    ir::Op loop;
    loop.set_opcode("fori_loop");
    loop.mutable_fori_loop()->set_lower(op.fori_loop().lower());
    loop.mutable_fori_loop()->set_upper(op.fori_loop().upper());
    ASSIGN_OR_RETURN(*loop.mutable_fori_loop()->mutable_body(),
                     NestedRegion(op, op.fori_loop().body(), params, types, res.specs));
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, emitter_.Add(std::move(loop), init));
    return Bind(op, ids, res.specs, res);
  }

  // Partitions `region` into a new region whose params are blocks laid out by `params` and whose
  // results are resharded to `results`; values of the enclosing regions keep their layouts.
  absl::StatusOr<ir::Region> NestedRegion(const ir::Op& op, const ir::Region& region,
                                          const std::vector<Spec>& params,
                                          const std::vector<ir::ShapedType>& param_types,
                                          const std::vector<Spec>& results) {
    emitter_.OpenRegion(/*spmd=*/false);
    const auto saved = reshards_;
    for (int i = 0; i < region.params_size(); ++i) {
      const int64_t id = emitter_.AddParam(spmd::BlockType(mesh(), params[i], param_types[i]));
      values_[region.params(i).id()] = {id, params[i], param_types[i]};
    }
    absl::Status status = Ops(region);
    emitter_.SetOrigin(op);
    absl::StatusOr<std::vector<int64_t>> out =
        status.ok() ? ReshardAll(region.results(), results) : status;
    reshards_ = saved;
    ir::Region closed = emitter_.CloseRegion(out.ok() ? *out : std::vector<int64_t>{});
    if (!out.ok()) return out.status();
    return closed;
  }

  // while_loop: as fori_loop, every carry keeps the op's layout in both regions; cond's pred is
  // replicated.
  absl::Status WhileLoop(const ir::Op& op, const Results& res) {
    emitter_.SetOrigin(op);
    ASSIGN_OR_RETURN(std::vector<int64_t> init, ReshardAll(op.operands(), res.specs));
    ir::Op loop;
    loop.set_opcode("while_loop");
    ASSIGN_OR_RETURN(*loop.mutable_while_loop()->mutable_cond(),
                     NestedRegion(op, op.while_loop().cond(), res.specs, res.types,
                                  {spmd::Replicated(0)}));
    ASSIGN_OR_RETURN(*loop.mutable_while_loop()->mutable_body(),
                     NestedRegion(op, op.while_loop().body(), res.specs, res.types, res.specs));
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, emitter_.Add(std::move(loop), init));
    return Bind(op, ids, res.specs, res);
  }

  // cond: a replicated index; the branches take the operands in their layouts and return the
  // op's layouts.
  absl::Status Cond(const ir::Op& op, const Results& res) {
    emitter_.SetOrigin(op);
    std::vector<Spec> specs = {spmd::Replicated(0)};
    std::vector<ir::ShapedType> types;
    for (int k = 1; k < op.operands_size(); ++k) {
      const Value& v = values_.at(op.operands(k));
      specs.push_back(v.spec);
      types.push_back(v.type);
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> operands, ReshardAll(op.operands(), specs));
    const std::vector<Spec> params(specs.begin() + 1, specs.end());
    ir::Op cond;
    cond.set_opcode("cond");
    for (const ir::Region& branch : op.cond().branches()) {
      ASSIGN_OR_RETURN(*cond.mutable_cond()->add_branches(),
                       NestedRegion(op, branch, params, types, res.specs));
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, emitter_.Add(std::move(cond), operands));
    return Bind(op, ids, res.specs, res);
  }

  absl::StatusOr<std::vector<int64_t>> ReshardAll(
      const google::protobuf::RepeatedField<int64_t>& ids, const std::vector<Spec>& to) {
    std::vector<int64_t> out;
    for (int i = 0; i < ids.size(); ++i) {
      ASSIGN_OR_RETURN(int64_t id, Reshard(ids[i], to[i]));
      out.push_back(id);
    }
    return out;
  }

  // Records the op's results: the local blocks `local`, laid out by `from`, resharded to the
  // op's annotated layouts.
  absl::Status Bind(const ir::Op& op, const std::vector<int64_t>& local,
                    const std::vector<Spec>& from, const Results& res) {
    for (int r = 0; r < op.results_size(); ++r) {
      ASSIGN_OR_RETURN(int64_t id,
                       spmd::EmitReshard(emitter_, local[r], res.types[r], from[r], res.specs[r]));
      values_[op.results(r)] = {id, res.specs[r], res.types[r]};
    }
    return absl::OkStatus();
  }

  const ir::Module& module_;
  const ir::Function& entry_;
  const MachineModel machine_;  // what the strategies are priced by
  OpEmitter emitter_;
  std::unordered_map<int64_t, Value> values_;
  std::map<std::pair<int64_t, Spec>, int64_t> reshards_;
  // Replicated broadcasts of replicated operands (their ops and local operands), which
  // RebuiltBroadcast builds again in other layouts.
  struct Broadcast {
    const ir::Op* op;
    int64_t operand;
  };
  std::unordered_map<int64_t, Broadcast> broadcasts_;
  std::vector<Spec> result_specs_;
};

// FailedPreconditionError naming the first op of `region` (or of a fori_loop body in it) without
// a layout.
absl::Status CheckAnnotated(const ir::Region& region) {
  for (int i = 0; i < region.ops_size(); ++i) {
    const ir::Op& op = region.ops(i);
    if (op.sharding_size() != op.results_size()) {
      return absl::FailedPreconditionError(fmt::format(
          "op #{} ({}) has no @sharding (run sharding-propagation first)", i, op.opcode()));
    }
    if (!op.has_fori_loop() && !op.has_while_loop() && !op.has_cond()) continue;
    const std::vector<const ir::Region*> regions = ir::Regions(op);
    for (size_t r = 0; r < regions.size(); ++r) {
      if (absl::Status s = CheckAnnotated(*regions[r]); !s.ok()) {
        return absl::FailedPreconditionError(fmt::format("{}, in the {} of op #{} ({})",
                                                         s.message(), ir::RegionName(op, r), i,
                                                         op.opcode()));
      }
    }
  }
  return absl::OkStatus();
}

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
  if (spmd::OnlyWrapsShardMap(body)) {
    return absl::FailedPreconditionError("only wraps one shard_map (lower-shard-map lowers it)");
  }
  RETURN_IF_ERROR(spmd::CheckRules(body));
  return CheckAnnotated(body);
}

absl::StatusOr<bool> SpmdPartition::Run(ir::Module& module) {
  if (!CheckPartitionable(module).ok()) return false;
  const ir::Function& entry = module.functions(0);
  Partitioner partitioner(module, entry, machine_);
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
  // Inlined shard_map bodies may compute results nobody reads (the value of a function only
  // its gradient is taken from): the per-device module keeps what is used.
  RETURN_IF_ERROR(DeadCodeElimination().Run(out).status());
  module = std::move(out);
  return true;
}

}  // namespace shardjit::passes
