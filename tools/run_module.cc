#include "tools/run_module.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "backends/backend.h"
#include "backends/executable.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "frontend/array.h"
#include "frontend/lowering.h"
#include "frontend/sharding.h"
#include "ir/sharding.h"
#include "ir/types.h"
#include "ir/verifier.h"
#include "runtime/runtime.h"
#include "runtime/shard_map_cache.h"

namespace shardjit::tools {
namespace {

absl::StatusOr<const ir::Function*> EntryFunction(const ir::Module& module) {
  for (const ir::Function& f : module.functions()) {
    if (f.name() == module.entry()) return &f;
  }
  return absl::InvalidArgumentError(
      fmt::format("module {} has no entry function \"{}\"", module.name(), module.entry()));
}

// The type of value `id` of a function body: a parameter or an op result.
absl::StatusOr<ir::ShapedType> ValueType(const ir::Region& body, int64_t id) {
  for (const ir::Param& p : body.params()) {
    if (p.id() == id) return ir::FromProto(p.type());
  }
  for (const ir::Op& op : body.ops()) {
    for (int i = 0; i < op.results_size(); ++i) {
      if (op.results(i) == id) return ir::FromProto(op.result_types(i));
    }
  }
  return absl::InvalidArgumentError(fmt::format("entry result {} is not defined", id));
}

// The spec at `i` (replicated when the module lists fewer).
ir::PartitionSpec SpecAt(const google::protobuf::RepeatedPtrField<ir::PartitionSpec>& specs,
                         int i) {
  return i < specs.size() ? specs[i] : ir::ReplicatedSpec();
}

std::string InputName(int i, const std::vector<std::string>& names) {
  return i < static_cast<int>(names.size()) ? fmt::format("input {} ({})", i, names[i])
                                            : fmt::format("input {}", i);
}

}  // namespace

absl::StatusOr<GlobalSignature> ModuleGlobalSignature(const ir::Module& module) {
  // The shardings and types are read below: only those of a module that verifies.
  if (absl::Status s = ir::VerifyModule(module); !s.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("module {} does not verify: {}", module.name(), s.message()));
  }
  ASSIGN_OR_RETURN(const ir::Function* entry, EntryFunction(module));
  const ir::Region& body = entry->body();
  const bool per_device = module.view() == ir::PER_DEVICE;
  // A per-device value's global type: its blocks laid out by `spec`, within the type limits.
  auto global = [&](ir::ShapedType t, const ir::PartitionSpec& spec,
                    const std::string& what) -> absl::StatusOr<ir::ShapedType> {
    if (!per_device) return t;
    ASSIGN_OR_RETURN(std::vector<int64_t> dims, ir::GlobalDims(module.mesh(), spec, t.dims, what));
    t.dims = std::move(dims);
    if (absl::Status s = ir::CheckTypeLimits(t); !s.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}: global {}", what, s.message()));
    }
    return t;
  };
  GlobalSignature sig;
  for (int i = 0; i < body.params_size(); ++i) {
    ASSIGN_OR_RETURN(ir::ShapedType t,
                     global(ir::FromProto(body.params(i).type()),
                            SpecAt(module.param_shardings(), i), fmt::format("param {}", i)));
    sig.params.push_back(std::move(t));
  }
  for (int i = 0; i < body.results_size(); ++i) {
    ASSIGN_OR_RETURN(ir::ShapedType t, ValueType(body, body.results(i)));
    ASSIGN_OR_RETURN(
        t, global(std::move(t), SpecAt(module.result_shardings(), i), fmt::format("result {}", i)));
    sig.results.push_back(std::move(t));
  }
  return sig;
}

absl::StatusOr<std::vector<ir::Tensor>> RunModule(const ir::Module& input_module,
                                                  const std::vector<ir::Tensor>& inputs,
                                                  int num_devices,
                                                  const std::vector<std::string>& input_names,
                                                  const runtime::RunOptions& options,
                                                  Backend backend) {
  if (absl::Status s = ir::VerifyModule(input_module); !s.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("module {} does not verify: {}", input_module.name(), s.message()));
  }
  ASSIGN_OR_RETURN(GlobalSignature sig, ModuleGlobalSignature(input_module));
  if (inputs.size() != sig.params.size()) {
    return absl::InvalidArgumentError(fmt::format("module {} takes {} inputs, got {}",
                                                  input_module.name(), sig.params.size(),
                                                  inputs.size()));
  }
  for (int i = 0; i < static_cast<int>(inputs.size()); ++i) {
    if (inputs[i].type() != sig.params[i]) {
      return absl::InvalidArgumentError(
          fmt::format("{}: expected {}, got {}", InputName(i, input_names),
                      sig.params[i].ToString(), inputs[i].type().ToString()));
    }
  }

  // Lowered as jit lowers (a global-view module is partitioned where the partitioner has rules);
  // the global signature stays that of the input.
  ir::Module lowered = input_module;
  if (absl::Status s = LowerModule(lowered, {.backend = backend}); !s.ok()) {
    return absl::Status(s.code(), fmt::format("module {}: {}", input_module.name(), s.message()));
  }
  const ir::Module& module = lowered;
  const backends::Backend& kernels = BackendImpl(backend);

  // The frontend mesh over the module's devices (one device when the module has no mesh).
  const ir::Mesh& mesh_proto = module.mesh();
  std::vector<std::pair<std::string, int64_t>> axes;
  for (const ir::MeshAxis& a : mesh_proto.axes()) axes.emplace_back(a.name(), a.size());
  std::vector<int64_t> device_ids(mesh_proto.device_ids().begin(), mesh_proto.device_ids().end());
  if (num_devices <= 0) {
    num_devices = static_cast<int>(ir::MeshSize(mesh_proto));
    for (int64_t id : device_ids) num_devices = std::max<int>(num_devices, id + 1);
  }
  runtime::Runtime rt({.num_devices = num_devices});
  absl::StatusOr<Mesh> mesh = make_mesh(rt, axes, device_ids);
  if (!mesh.ok()) {
    return absl::InvalidArgumentError(fmt::format("cannot place the module's mesh on a runtime of {} devices: {}",
                                                  num_devices, mesh.status().message()));
  }

  ASSIGN_OR_RETURN(const ir::Function* entry, EntryFunction(module));
  ASSIGN_OR_RETURN(std::unique_ptr<backends::Executable> exe, kernels.Compile(*entry));

  std::vector<ir::Tensor> outputs;
  if (module.view() == ir::PER_DEVICE) {
    const int64_t n = mesh->size();
    std::vector<std::vector<ir::Tensor>> local_args(n);
    for (int i = 0; i < static_cast<int>(inputs.size()); ++i) {
      NamedSharding sharding(*mesh, PartitionSpec(SpecAt(module.param_shardings(), i)));
      absl::StatusOr<Array> placed = device_put(inputs[i], sharding);
      if (!placed.ok()) {
        return absl::InvalidArgumentError(
            fmt::format("{}: {}", InputName(i, input_names), placed.status().message()));
      }
      for (int64_t p = 0; p < n; ++p) local_args[p].push_back(placed->shards()[p]);
    }
    // An MPMD module: each position runs its function (compiled once per function).
    std::vector<const backends::Executable*> programs(n, exe.get());
    std::map<std::string, std::unique_ptr<backends::Executable>> by_name;
    for (int64_t p = 0; p < module.position_functions_size(); ++p) {
      const std::string& name = module.position_functions(p);
      if (name == entry->name()) continue;
      std::unique_ptr<backends::Executable>& compiled = by_name[name];
      if (compiled == nullptr) {
        for (const ir::Function& f : module.functions()) {
          if (f.name() != name) continue;
          ASSIGN_OR_RETURN(std::unique_ptr<backends::Executable> other, kernels.Compile(f));
          compiled = std::move(other);
        }
      }
      programs[p] = compiled.get();
    }
    ASSIGN_OR_RETURN(std::vector<std::vector<ir::Tensor>> out,
                     rt.RunSpmd(mesh->proto(), programs, std::move(local_args), nullptr, options));
    for (size_t r = 0; r < sig.results.size(); ++r) {
      std::vector<ir::Tensor> shards;
      for (int64_t p = 0; p < n; ++p) shards.push_back(std::move(out[p][r]));
      NamedSharding sharding(*mesh, PartitionSpec(SpecAt(module.result_shardings(), r)));
      ASSIGN_OR_RETURN(ir::Tensor host,
                       Array(sig.results[r], sharding, std::move(shards)).to_host());
      outputs.push_back(std::move(host));
    }
  } else {
    runtime::CompileFn compile = [&kernels](const ir::Function& f) {
      return kernels.Compile(f);
    };
    runtime::Runtime::ShardMapCache cache;
    ASSIGN_OR_RETURN(std::vector<ir::Tensor> out,
                     rt.RunGlobal(mesh->proto(), *exe, inputs, compile, cache, options));
    // Host copies: nothing returned may live in the memory of a device of `rt`.
    for (const ir::Tensor& t : out) outputs.push_back(t.Copy());
  }
  return outputs;
}

}  // namespace shardjit::tools
