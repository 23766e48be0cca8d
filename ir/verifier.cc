#include "ir/verifier.h"

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/async.h"
#include "ir/fmt_absl.h"
#include "ir/primitive.h"
#include "ir/printer.h"
#include "ir/regions.h"
#include "ir/sharding.h"
#include "ir/types.h"

namespace shardjit::ir {
namespace {

class FunctionVerifier {
 public:
  FunctionVerifier(const Module& module, const Function& function)
      : module_(module), function_(function) {}

  absl::Status Run() {
    return VerifyRegion(function_.body(), module_.view() == PER_DEVICE, "", {});
  }

 private:
  absl::Status Define(int64_t id, const ShapedType& type, std::vector<int64_t>& scope,
                      const std::string& where) {
    if (absl::Status s = CheckTypeLimits(type); !s.ok()) {
      return Error(where, fmt::format("value {}: {}", ValueName(id), s.message()));
    }
    if (!ever_defined_.insert(id).second) {
      return Error(where, fmt::format("value {} is defined twice", ValueName(id)));
    }
    visible_[id] = type;
    scope.push_back(id);
    return absl::OkStatus();
  }

  absl::Status Error(const std::string& where, const std::string& message) {
    return absl::InvalidArgumentError(
        fmt::format("verifier: function {}{}: {}", function_.name(), where, message));
  }

  absl::StatusOr<ShapedType> Lookup(int64_t id) const {
    auto it = visible_.find(id);
    if (it == visible_.end()) {
      return absl::InvalidArgumentError(
          fmt::format("value {} is not defined before its use", ValueName(id)));
    }
    return it->second;
  }

  // `param_kinds[i]`: for a future param i (a fori_loop carry), the blocking collective of the
  // start that made it (ir/async.h); kUnknown for other params.
  absl::Status VerifyRegion(const Region& region, bool in_spmd, const std::string& where,
                            const std::vector<Prim>& param_kinds) {
    // Regions nest as deep as the recursion here; the bound keeps it off the end of the stack.
    struct Depth {
      explicit Depth(int& d) : d(d) { ++d; }
      ~Depth() { --d; }
      int& d;
    } depth(depth_);
    // The region's values stay visible until the enclosing op has typed its results
    // (CloseScope), whichever way this returns.
    std::vector<int64_t> scope;
    struct Pending {
      ~Pending() { pending.push_back(std::move(scope)); }
      std::vector<std::vector<int64_t>>& pending;
      std::vector<int64_t>& scope;
    } pending{pending_scopes_, scope};
    if (depth_ > kMaxRegionDepth) {
      return Error(where, fmt::format("regions nested more than {} deep", kMaxRegionDepth));
    }
    for (int i = 0; i < region.params_size(); ++i) {
      const Param& p = region.params(i);
      RETURN_IF_ERROR(Define(p.id(), FromProto(p.type()), scope, where));
      if (p.type().ref() && kernel_grid_rank_ < 0) {
        return Error(where, fmt::format("param {} is a ref, but only pallas_call kernels and index "
                                        "maps take refs", ValueName(p.id())));
      }
      if (p.type().semaphore() != NOT_SEMAPHORE && (!p.type().ref() || p.type().future())) {
        return Error(where, fmt::format("param {} is a semaphore array that is not a ref",
                                        ValueName(p.id())));
      }
      if (p.type().future()) {
        if (i >= static_cast<int>(param_kinds.size()) || param_kinds[i] == Prim::kUnknown) {
          return Error(where, fmt::format("param {} is a future, but only fori_loop carries may be",
                                          ValueName(p.id())));
        }
        futures_[p.id()] = {param_kinds[i], &region};
      }
    }
    absl::Status status;
    for (int i = 0; i < region.ops_size() && status.ok(); ++i) {
      const Op& op = region.ops(i);
      status = VerifyOp(op, region, in_spmd,
                        fmt::format("{}, op #{} ({})", where, i, op.opcode()), scope);
    }
    for (int k = 0; k < region.results_size() && status.ok(); ++k) {
      const int64_t id = region.results(k);
      if (!visible_.count(id)) {
        status = Error(where, fmt::format("result {} is not defined", ValueName(id)));
      } else if (visible_[id].ref) {
        status = Error(where, fmt::format("result {} is a ref; refs never leave their kernel",
                                          ValueName(id)));
      } else if (futures_.count(id) && param_kinds.empty()) {
        status = Error(where, fmt::format("result {} is a future; only a fori_loop body may "
                                          "return one (await it with its *_done)",
                                          ValueName(id)));
      } else if (futures_.count(id)) {
        // A loop body hands its future to the next iteration: the same kind as the carry.
        status = UseFuture(id, region, where, Prim::kUnknown);
        const Prim expected = k + 1 < static_cast<int>(param_kinds.size()) ? param_kinds[k + 1]
                                                                           : Prim::kUnknown;
        if (status.ok() && futures_[id].kind != expected) {
          status = Error(where, fmt::format("result {} is the future of a {}, but carry {} is {}",
                                            ValueName(id), StartName(futures_[id].kind), k,
                                            expected == Prim::kUnknown
                                                ? std::string("not a future")
                                                : "the future of a " + StartName(expected)));
        }
      }
    }
    // Every future defined here is awaited (or carried on) exactly once, here.
    for (int64_t id : scope) {
      if (!status.ok()) break;
      auto it = futures_.find(id);
      if (it != futures_.end() && it->second.uses == 0) {
        status = Error(where, fmt::format("future {} (of a {}) is never awaited", ValueName(id),
                                          StartName(it->second.kind)));
      }
    }
    return status;
  }

  void CloseScope() {
    for (int64_t id : pending_scopes_.back()) visible_.erase(id);
    pending_scopes_.pop_back();
  }

  // "ppermute_start" for kPpermute: for error messages.
  static std::string StartName(Prim blocking) { return AsyncStartOpcode(PrimName(blocking)); }

  // Counts a use of future `id` by `user` (kUnknown for a region result) in `region`.
  absl::Status UseFuture(int64_t id, const Region& region, const std::string& where, Prim user) {
    FutureInfo& f = futures_[id];
    if (f.region != &region) {
      return Error(where, fmt::format("future {} is used outside the region that defines it",
                                      ValueName(id)));
    }
    if (++f.uses > 1) return Error(where, fmt::format("future {} is used twice", ValueName(id)));
    if (IsAsyncDone(user) && AsyncBlocking(user) != f.kind) {
      return Error(where, fmt::format("{} cannot await future {} of a {}", PrimName(user),
                                      ValueName(id), StartName(f.kind)));
    }
    return absl::OkStatus();
  }

  absl::Status VerifyOp(const Op& op, const Region& region, bool in_spmd,
                        const std::string& where, std::vector<int64_t>& scope) {
    std::vector<ShapedType> operands;
    const Prim prim = PrimOf(op);
    std::vector<Prim> carry_kinds{Prim::kUnknown};  // the loop index, then one per carry
    for (int64_t id : op.operands()) {
      absl::StatusOr<ShapedType> t = Lookup(id);
      if (!t.ok()) return Error(where, std::string(t.status().message()));
      operands.push_back(*t);
      auto future = futures_.find(id);
      carry_kinds.push_back(future != futures_.end() ? future->second.kind : Prim::kUnknown);
      if (future != futures_.end() && (IsAsyncDone(prim) || op.has_fori_loop())) {
        RETURN_IF_ERROR(UseFuture(id, region, where, prim));
      }
    }
    int regions = 0;
    bool closed_region = false;
    std::unordered_map<int64_t, ShapedType> outer_of_closed_region;
    std::unordered_map<int64_t, ShapedType> region_results;  // of regions already closed
    absl::Status status;
    if (op.has_fori_loop()) {
      status = VerifyRegion(op.fori_loop().body(), in_spmd, where + " body", carry_kinds);
      ++regions;
    } else if (op.has_shard_map()) {
      // A shard_map body is closed: it sees only its own (per-device) parameters.
      std::swap(outer_of_closed_region, visible_);
      visible_.clear();
      status = VerifyRegion(op.shard_map().body(), /*in_spmd=*/true, where + " body", {});
      ++regions;
      closed_region = true;
    } else if (op.has_fusion()) {
      // A fusion body is closed too: one loop over its params.
      std::swap(outer_of_closed_region, visible_);
      visible_.clear();
      status = VerifyRegion(op.fusion().body(), in_spmd, where + " body", {});
      ++regions;
      closed_region = true;
    } else if (op.has_pallas_call()) {
      // Index maps and the kernel are closed, each sees only its params; inside them the kernel
      // ops (ref_load, program_id, ...) are allowed.
      std::swap(outer_of_closed_region, visible_);
      closed_region = true;
      const int saved_rank = std::exchange(kernel_grid_rank_, op.pallas_call().grid_size());
      const std::vector<const Region*> parts = Regions(op);
      for (size_t r = 0; r < parts.size() && status.ok(); ++r) {
        visible_.clear();
        status = VerifyRegion(*parts[r], in_spmd, where + " " + RegionName(op, r), {});
        for (int64_t id : parts[r]->results()) {
          if (absl::StatusOr<ShapedType> t = Lookup(id); t.ok()) region_results[id] = *t;
        }
        CloseScope();
      }
      kernel_grid_rank_ = saved_rank;
    } else if (!Regions(op).empty()) {
      // A loop's cond and body, the branches, the custom derivatives' regions, a checkpoint's
      // body: each sees the values around the op, none sees another's. The types of their
      // results stay known to the shape rule.
      const std::vector<const Region*> parts = Regions(op);
      for (size_t r = 0; r < parts.size() && status.ok(); ++r) {
        status = VerifyRegion(*parts[r], in_spmd, where + " " + RegionName(op, r), {});
        for (int64_t id : parts[r]->results()) {
          if (absl::StatusOr<ShapedType> t = Lookup(id); t.ok()) region_results[id] = *t;
        }
        CloseScope();
      }
    }
    absl::StatusOr<std::vector<ShapedType>> inferred;
    if (status.ok()) {
      ShapeContext ctx{&module_.mesh(), in_spmd,
                       [this, &region_results](int64_t id) -> absl::StatusOr<ShapedType> {
                         auto it = region_results.find(id);
                         return it != region_results.end() ? it->second : Lookup(id);
                       },
                       kernel_grid_rank_};
      inferred = InferResultTypes(ctx, operands, op);
    }
    for (int r = 0; r < regions; ++r) CloseScope();
    if (closed_region) visible_ = std::move(outer_of_closed_region);
    if (!status.ok()) return status;
    if (!inferred.ok()) return Error(where, std::string(inferred.status().message()));
    if (op.results_size() != static_cast<int>(inferred->size()) ||
        op.result_types_size() != op.results_size()) {
      return Error(where, fmt::format("has {} results ({} types); the shape rule gives {}",
                                      op.results_size(), op.result_types_size(),
                                      inferred->size()));
    }
    if (op.sharding_size() != 0 && op.sharding_size() != op.results_size()) {
      return Error(where, fmt::format("has {} results but {} @sharding specs", op.results_size(),
                                      op.sharding_size()));
    }
    for (int i = 0; i < op.sharding_size(); ++i) {
      if (absl::Status s = ValidateSpec(module_.mesh(), op.sharding(i),
                                        op.result_types(i).dims_size(),
                                        fmt::format("@sharding of result {}", ValueName(op.results(i))));
          !s.ok()) {
        return Error(where, std::string(s.message()));
      }
    }
    for (int i = 0; i < op.results_size(); ++i) {
      ShapedType declared = FromProto(op.result_types(i));
      if (declared != (*inferred)[i]) {
        return Error(where, fmt::format("result {} is declared {} but the shape rule gives {}",
                                        ValueName(op.results(i)), declared.ToString(),
                                        (*inferred)[i].ToString()));
      }
      RETURN_IF_ERROR(Define(op.results(i), declared, scope, where));
      if (declared.future) {
        // A start's future, or a loop's carried future: the kind of its init.
        futures_[op.results(i)] = {IsAsyncStart(prim) ? AsyncBlocking(prim) : carry_kinds[i + 1],
                                   &region};
      }
    }
    return absl::OkStatus();
  }

  struct FutureInfo {
    Prim kind = Prim::kUnknown;      // the blocking twin of the start that made it
    const Region* region = nullptr;  // where it must be used
    int uses = 0;
  };

  const Module& module_;
  const Function& function_;
  // The grid rank of the pallas_call whose regions are being verified; -1 outside them.
  int kernel_grid_rank_ = -1;
  std::unordered_map<int64_t, ShapedType> visible_;
  std::unordered_map<int64_t, FutureInfo> futures_;
  std::unordered_set<int64_t> ever_defined_;
  int depth_ = 0;  // regions being verified, nested
  std::vector<std::vector<int64_t>> pending_scopes_;
};

// The parameter and result types of `f`, as text ("f32[2], s32[] -> f32[2]").
std::string Signature(const Function& f) {
  std::vector<std::string> params, results;
  std::map<int64_t, std::string> types;
  for (const Param& p : f.body().params()) {
    params.push_back(FromProto(p.type()).ToString());
    types[p.id()] = params.back();
  }
  for (const Op& op : f.body().ops()) {
    for (int i = 0; i < op.results_size() && i < op.result_types_size(); ++i) {
      types[op.results(i)] = FromProto(op.result_types(i)).ToString();
    }
  }
  for (int64_t id : f.body().results()) results.push_back(types[id]);
  return absl::StrJoin(params, ", ") + " -> " + absl::StrJoin(results, ", ");
}

// An MPMD module names one function per mesh position, each of the entry's signature.
absl::Status VerifyPositionFunctions(const Module& module, const Function& entry) {
  if (module.position_functions_size() == 0) return absl::OkStatus();
  if (module.view() != PER_DEVICE) {
    return absl::InvalidArgumentError("position_functions need view=per_device");
  }
  if (module.position_functions_size() != MeshSize(module.mesh())) {
    return absl::InvalidArgumentError(
        fmt::format("{} position_functions for a mesh of {} positions",
                    module.position_functions_size(), MeshSize(module.mesh())));
  }
  const std::string want = Signature(entry);
  for (int p = 0; p < module.position_functions_size(); ++p) {
    const std::string& name = module.position_functions(p);
    const Function* f = nullptr;
    for (const Function& g : module.functions()) {
      if (g.name() == name) f = &g;
    }
    if (f == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("position {} runs function \"{}\", which is not defined", p, name));
    }
    if (const std::string got = Signature(*f); got != want) {
      return absl::InvalidArgumentError(fmt::format(
          "position {} runs {} ({}) but the entry {} is ({})", p, name, got, entry.name(), want));
    }
  }
  return absl::OkStatus();
}

absl::Status VerifyHeader(const Module& module) {
  auto error = [&](const std::string& m) {
    return absl::InvalidArgumentError(fmt::format("verifier: module {}: {}", module.name(), m));
  };
  if (module.view() != GLOBAL && module.view() != PER_DEVICE) return error("view is not set");
  RETURN_IF_ERROR(ValidateMesh(module.mesh(), fmt::format("verifier: module {}", module.name())));
  if (module.mesh().device_ids_size() != 0) {
    if (module.mesh().device_ids_size() != MeshSize(module.mesh())) {
      return error(fmt::format("mesh {} has {} devices but lists {} device ids",
                               MeshToString(module.mesh()), MeshSize(module.mesh()),
                               module.mesh().device_ids_size()));
    }
    std::set<int64_t> ids(module.mesh().device_ids().begin(), module.mesh().device_ids().end());
    if (static_cast<int>(ids.size()) != module.mesh().device_ids_size()) {
      return error("mesh device ids repeat");
    }
  }
  const Function* entry = nullptr;
  std::set<std::string> fnames;
  for (const Function& f : module.functions()) {
    if (!fnames.insert(f.name()).second) {
      return error(fmt::format("function {} is defined twice", f.name()));
    }
    if (f.name() == module.entry()) entry = &f;
  }
  if (entry == nullptr) return error(fmt::format("entry function \"{}\" not found", module.entry()));
  const Region& body = entry->body();
  if (module.param_shardings_size() != 0 &&
      module.param_shardings_size() != body.params_size()) {
    return error(fmt::format("{} param_shardings for {} entry params",
                             module.param_shardings_size(), body.params_size()));
  }
  if (module.result_shardings_size() != 0 &&
      module.result_shardings_size() != body.results_size()) {
    return error(fmt::format("{} result_shardings for {} entry results",
                             module.result_shardings_size(), body.results_size()));
  }
  if (absl::Status s = VerifyPositionFunctions(module, *entry); !s.ok()) {
    return error(std::string(s.message()));
  }
  for (int i = 0; i < module.param_shardings_size(); ++i) {
    if (absl::Status s = ValidateSpec(module.mesh(), module.param_shardings(i),
                                      body.params(i).type().dims_size(),
                                      fmt::format("param_shardings[{}]", i));
        !s.ok()) {
      return error(std::string(s.message()));
    }
  }
  return absl::OkStatus();
}

void Renumber(Region& region, std::unordered_map<int64_t, int64_t>& map, int64_t& next) {
  auto fresh = [&](int64_t old) {
    map[old] = next;
    return next++;
  };
  for (Param& p : *region.mutable_params()) p.set_id(fresh(p.id()));
  for (Op& op : *region.mutable_ops()) {
    for (int64_t& id : *op.mutable_operands()) id = map.count(id) ? map[id] : id;
    for (Region* r : MutableRegions(op)) Renumber(*r, map, next);
    for (int64_t& id : *op.mutable_results()) id = fresh(id);
  }
  for (int64_t& id : *region.mutable_results()) id = map.count(id) ? map[id] : id;
}

}  // namespace

absl::Status VerifyFunction(const Module& module, const Function& function) {
  return FunctionVerifier(module, function).Run();
}

absl::Status VerifyModule(const Module& module) {
  RETURN_IF_ERROR(VerifyHeader(module));
  for (const Function& f : module.functions()) {
    RETURN_IF_ERROR(VerifyFunction(module, f));
  }
  return absl::OkStatus();
}

void CanonicalizeValueIds(Function& function) {
  std::unordered_map<int64_t, int64_t> map;
  int64_t next = 0;
  Renumber(*function.mutable_body(), map, next);
}

}  // namespace shardjit::ir
