#include "backends/reference/evaluator.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "backends/reference/kernel.h"
#include "backends/reference/pallas.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/primitive.h"
#include "ir/regions.h"

namespace shardjit::backends::reference {
namespace {

// Values visible to a region: its own, then those of the regions around it.
class Env {
 public:
  // `frame`: the grid step of a pallas_call kernel this region belongs to (else inherited).
  explicit Env(const Env* parent, const KernelFrame* frame = nullptr)
      : parent_(parent), frame_(frame != nullptr || parent == nullptr ? frame : parent->frame_) {}
  const KernelFrame* frame() const { return frame_; }
  void Set(int64_t id, ir::Tensor t) { values_[id] = std::move(t); }
  void Erase(int64_t id) { values_.erase(id); }
  // Moves a value of this region (not of the regions around it) out; false if it has none.
  bool Take(int64_t id, ir::Tensor* out) {
    auto it = values_.find(id);
    if (it == values_.end()) return false;
    *out = std::move(it->second);
    values_.erase(it);
    return true;
  }
  const ir::Tensor* Find(int64_t id) const {
    for (const Env* e = this; e != nullptr; e = e->parent_) {
      auto it = e->values_.find(id);
      if (it != e->values_.end()) return &it->second;
    }
    return nullptr;
  }

 private:
  const Env* parent_;
  const KernelFrame* frame_;
  std::unordered_map<int64_t, ir::Tensor> values_;
};

// The error for an unverified function reading a value it never defined.
absl::Status Undefined(const std::string& where, int64_t id) {
  return absl::InvalidArgumentError(
      fmt::format("{}: value {} is not defined (verify the module first)", where, id));
}

// Per region: the kernel of each op (and the reference kernel it falls back to), the operands it
// is donated and the values to release after it.
struct RegionPlan {
  std::vector<const Kernel*> kernels;
  std::vector<const Kernel*> fallbacks;
  // donated[i][k]: operand k of op i is moved out of the environment into the op's operands
  // instead of copied, because the value dies there: op i is its last use, it is a value of this
  // region (a param or an op result, not a value captured from an enclosing region), not a region
  // result, not read by op i's loop body, and k is its last position among op i's operands. A
  // kernel may then reuse the buffer when the tensor is unique() (no other holder: a caller's
  // argument, a view or another value still shares it).
  std::vector<std::vector<bool>> donated;
  std::vector<std::vector<int64_t>> release_after;
};

// The regions of `op` that may read values of the regions around it (loops, cond branches; not
// shard_map or fusion bodies).
std::vector<const ir::Region*> OpenRegions(const ir::Op& op) {
  return ir::HasClosedRegions(op) ? std::vector<const ir::Region*>{} : ir::Regions(op);
}

// Inserts every value id read in `region` and the open regions nested in it.
void CollectReads(const ir::Region& region, std::unordered_set<int64_t>& reads) {
  for (const ir::Op& op : region.ops()) {
    reads.insert(op.operands().begin(), op.operands().end());
    for (const ir::Region* r : OpenRegions(op)) CollectReads(*r, reads);
  }
  reads.insert(region.results().begin(), region.results().end());
}

class ReferenceExecutable final : public Executable {
 public:
  ReferenceExecutable(ir::Function function, KernelOverrides overrides, const Backend& backend)
      : function_(std::move(function)), overrides_(std::move(overrides)), backend_(backend) {}

  absl::Status Prepare() { return PlanRegion(function_.body()); }

  absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>& args,
                                              DeviceContext& device) const override {
    const ir::Region& body = function_.body();
    if (args.size() != static_cast<size_t>(body.params_size())) {
      return absl::InvalidArgumentError(fmt::format("{}: expects {} arguments, got {}",
                                                    function_.name(), body.params_size(),
                                                    args.size()));
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].type() != ir::FromProto(body.params(i).type())) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: argument {} is {}, expected {}", function_.name(), i,
            args[i].type().ToString(), ir::FromProto(body.params(i).type()).ToString()));
      }
    }
    // Kernel generation deeper down reports to this device's recorder.
    base::ScopedThreadSpanRecorder scoped(device.profiler());
    // A copy of `args`: the caller keeps its tensors, so none of them is ever updated in place.
    return RunRegion(body, args, nullptr, device);
  }

  const Backend& backend() const override { return backend_; }
  const ir::Function* function() const override { return &function_; }

 private:
  absl::Status PlanRegion(const ir::Region& region) {
    RegionPlan plan;
    std::unordered_map<int64_t, int> last_use;
    std::unordered_set<int64_t> local;
    for (const ir::Param& p : region.params()) local.insert(p.id());
    for (int i = 0; i < region.ops_size(); ++i) {
      const ir::Op& op = region.ops(i);
      for (int64_t id : op.operands()) last_use[id] = i;
      for (int64_t id : op.results()) local.insert(id);
      const ir::Primitive* prim = ir::FindPrimitive(ir::PrimOf(op));
      if (prim == nullptr) {
        return absl::InvalidArgumentError(fmt::format("unknown primitive \"{}\"", op.opcode()));
      }
      const Kernel* kernel = nullptr;
      const Kernel* fallback = nullptr;
      if (prim->kind == ir::PrimitiveKind::kElementwise ||
          prim->kind == ir::PrimitiveKind::kStructural) {
        fallback = FindKernel(op.opcode());
        auto it = overrides_.find(op.opcode());
        kernel = it != overrides_.end() ? &it->second : fallback;
        if (kernel == nullptr) {
          return absl::UnimplementedError(
              fmt::format("{}: no reference kernel is registered", op.opcode()));
        }
      }
      plan.kernels.push_back(kernel);
      plan.fallbacks.push_back(fallback != kernel ? fallback : nullptr);
      for (const ir::Region* r : ir::Regions(op)) {
        if (op.has_fusion()) break;  // a fusion runs as one kernel
        RETURN_IF_ERROR(PlanRegion(*r));
      }
      // A loop body reads outer values on every iteration (a branch, once the branch is
      // chosen): keep them until the op ends.
      for (const ir::Region* r : OpenRegions(op)) MarkCaptures(*r, i, last_use);
    }
    std::unordered_set<int64_t> results(region.results().begin(), region.results().end());
    plan.donated.resize(region.ops_size());
    plan.release_after.resize(region.ops_size());
    for (int i = 0; i < region.ops_size(); ++i) {
      const ir::Op& op = region.ops(i);
      std::unordered_set<int64_t> body_reads;
      for (const ir::Region* r : OpenRegions(op)) CollectReads(*r, body_reads);
      plan.donated[i].assign(op.operands_size(), false);
      std::unordered_set<int64_t> seen;
      for (int k = op.operands_size() - 1; k >= 0; --k) {
        const int64_t id = op.operands(k);
        if (!seen.insert(id).second) continue;  // not its last position
        plan.donated[i][k] =
            last_use[id] == i && local.count(id) && !results.count(id) && !body_reads.count(id);
      }
    }
    for (const auto& [id, index] : last_use) {
      if (!local.count(id) || results.count(id)) continue;
      const ir::Op& op = region.ops(index);
      bool donated = false;
      for (int k = 0; k < op.operands_size(); ++k) {
        donated |= op.operands(k) == id && plan.donated[index][k];
      }
      if (!donated) plan.release_after[index].push_back(id);
    }
    plans_[&region] = std::move(plan);
    return absl::OkStatus();
  }

  static void MarkCaptures(const ir::Region& region, int index,
                           std::unordered_map<int64_t, int>& last_use) {
    for (const ir::Op& op : region.ops()) {
      for (int64_t id : op.operands()) {
        if (last_use.count(id)) last_use[id] = std::max(last_use[id], index);
      }
      for (const ir::Region* r : OpenRegions(op)) MarkCaptures(*r, index, last_use);
    }
    for (int64_t id : region.results()) {
      if (last_use.count(id)) last_use[id] = std::max(last_use[id], index);
    }
  }

  // Runs `region` on `args`, which it owns from here on: a loop body's carries stay unique, so
  // the ops that consume them may update them in place.
  absl::StatusOr<std::vector<ir::Tensor>> RunRegion(const ir::Region& region,
                                                    std::vector<ir::Tensor> args, const Env* outer,
                                                    DeviceContext& device,
                                                    const KernelFrame* frame = nullptr) const {
    const RegionPlan& plan = plans_.at(&region);
    Env env(outer, frame);
    for (int i = 0; i < region.params_size(); ++i) {
      env.Set(region.params(i).id(), std::move(args[i]));
    }
    base::SpanRecorder* recorder = device.profiler();
    std::vector<ir::Tensor> operands;
    for (int i = 0; i < region.ops_size(); ++i) {
      const ir::Op& op = region.ops(i);
      RETURN_IF_ERROR(device.Cancelled());
      operands.clear();
      for (int k = 0; k < op.operands_size(); ++k) {
        const int64_t id = op.operands(k);
        if (plan.donated[i][k]) {
          if (!env.Take(id, &operands.emplace_back())) return Undefined(op.opcode(), id);
          continue;
        }
        const ir::Tensor* t = env.Find(id);
        if (t == nullptr) return Undefined(op.opcode(), id);
        operands.push_back(*t);
      }
      const int64_t start_ns = recorder != nullptr ? base::SpanClockNs() : 0;
      absl::StatusOr<std::vector<ir::Tensor>> results;
      std::string_view category = "kernel";
      if (plan.kernels[i] != nullptr) {
        results = (*plan.kernels[i])(op, operands, device.allocator());
        if (!results.ok() && absl::IsUnimplemented(results.status()) &&
            plan.fallbacks[i] != nullptr) {
          results = (*plan.fallbacks[i])(op, operands, device.allocator());
        }
      } else if (op.has_fori_loop()) {
        category = "control";
        results = RunLoop(op, std::move(operands), env, device);
      } else if (op.has_while_loop()) {
        category = "control";
        results = RunWhile(op, std::move(operands), env, device);
      } else if (op.has_cond()) {
        category = "control";
        results = RunCond(op, std::move(operands), env, device);
      } else if (op.has_shard_map()) {
        category = "control";
        results = device.RunShardMap(op, operands);
      } else if (op.has_pallas_call()) {
        // A backend's compiled kernels where they take the call, else interpreted here.
        category = "control";
        auto compiled = overrides_.find(op.opcode());
        if (compiled != overrides_.end()) {
          ScopedKernelPeers peers(device.kernel_peers());
          results = compiled->second(op, operands, device.allocator());
        }
        if (compiled == overrides_.end() ||
            (!results.ok() && absl::IsUnimplemented(results.status()))) {
          results = RunPallasCall(
              op, operands,
              [&](const ir::Region& r, std::vector<ir::Tensor> args, const KernelFrame& frame) {
                return RunRegion(r, std::move(args), nullptr, device, &frame);
              },
              device.allocator(), device.kernel_peers());
        }
      } else if (env.frame() != nullptr &&
                 ir::FindPrimitive(ir::PrimOf(op))->kind == ir::PrimitiveKind::kKernel) {
        results = RunKernelOp(op, operands, *env.frame(), device.allocator());
      } else {
        category = "collective";
        results = device.RunCollective(op, operands);
      }
      if (recorder != nullptr) {
        recorder->Record({op.opcode(), category, start_ns, base::SpanClockNs() - start_ns,
                          op.name_scope()});
      }
      if (!results.ok()) return results.status();
      if (results->size() != static_cast<size_t>(op.results_size())) {
        return absl::InternalError(fmt::format("{}: produced {} results, expected {}",
                                               op.opcode(), results->size(), op.results_size()));
      }
      for (int r = 0; r < op.results_size(); ++r) env.Set(op.results(r), std::move((*results)[r]));
      for (int64_t id : plan.release_after[i]) env.Erase(id);
    }
    std::vector<ir::Tensor> out;
    for (int64_t id : region.results()) {
      const ir::Tensor* t = env.Find(id);
      if (t == nullptr) return Undefined("region result", id);
      out.push_back(*t);
    }
    return out;
  }

  absl::StatusOr<std::vector<ir::Tensor>> RunLoop(const ir::Op& op,
                                                  std::vector<ir::Tensor> carry, const Env& env,
                                                  DeviceContext& device) const {
    const ir::ForiLoopAttrs& loop = op.fori_loop();
    for (int64_t i = loop.lower(); i < loop.upper(); ++i) {
      std::vector<ir::Tensor> args;
      args.reserve(carry.size() + 1);
      args.push_back(ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {static_cast<double>(i)},
                                             device.allocator()));
      for (ir::Tensor& t : carry) args.push_back(std::move(t));
      ASSIGN_OR_RETURN(std::vector<ir::Tensor> next,
                       RunRegion(loop.body(), std::move(args), &env, device));
      carry = std::move(next);
    }
    return carry;
  }

  // Runs cond on (shared copies of) the carry, then the body on the carry, until cond is false.
  absl::StatusOr<std::vector<ir::Tensor>> RunWhile(const ir::Op& op,
                                                   std::vector<ir::Tensor> carry, const Env& env,
                                                   DeviceContext& device) const {
    const ir::WhileLoopAttrs& loop = op.while_loop();
    while (true) {
      // Checked here too: a loop whose regions hold no op checks nowhere else.
      RETURN_IF_ERROR(device.Cancelled());
      ASSIGN_OR_RETURN(std::vector<ir::Tensor> go, RunRegion(loop.cond(), carry, &env, device));
      if (go[0].data_as<uint8_t>()[0] == 0) return carry;
      ASSIGN_OR_RETURN(carry, RunRegion(loop.body(), std::move(carry), &env, device));
    }
  }

  // Runs branch clamp(index, 0, n - 1) on the operands after the index.
  absl::StatusOr<std::vector<ir::Tensor>> RunCond(const ir::Op& op,
                                                  std::vector<ir::Tensor> operands,
                                                  const Env& env, DeviceContext& device) const {
    const int n = op.cond().branches_size();
    const int branch = std::clamp(operands[0].data_as<int32_t>()[0], 0, n - 1);
    std::vector<ir::Tensor> args(std::make_move_iterator(operands.begin() + 1),
                                 std::make_move_iterator(operands.end()));
    return RunRegion(op.cond().branches(branch), std::move(args), &env, device);
  }

  ir::Function function_;
  KernelOverrides overrides_;
  const Backend& backend_;
  std::unordered_map<const ir::Region*, RegionPlan> plans_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executable>> Compile(const ir::Function& function,
                                                    KernelOverrides overrides,
                                                    const Backend& backend) {
  auto exe = std::make_unique<ReferenceExecutable>(function, std::move(overrides), backend);
  RETURN_IF_ERROR(exe->Prepare());
  return exe;
}

namespace {

class ReferenceBackendImpl final : public Backend {
 public:
  std::string_view name() const override { return "reference"; }
  absl::StatusOr<std::unique_ptr<Executable>> Compile(
      const ir::Function& function) const override {
    return reference::Compile(function, {}, *this);
  }
};

}  // namespace

const Backend& ReferenceBackend() {
  static const ReferenceBackendImpl* const backend = new ReferenceBackendImpl();
  return *backend;
}

}  // namespace shardjit::backends::reference
