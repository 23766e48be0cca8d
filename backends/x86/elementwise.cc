#include "backends/x86/elementwise.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "backends/backend.h"
#include "backends/executable.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/elementwise_kernel.h"
#include "backends/x86/elementwise_plan.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

// Generator levels, best first; the reference kernels come after them.
constexpr IsaLevel kGeneratorLevels[] = {IsaLevel::kAvx512, IsaLevel::kAvx2};

// Generated kernels by "<active isa>|<plan key>"; failures are cached too.
class ElementwiseCache {
 public:
  static ElementwiseCache& Global() {
    static ElementwiseCache* cache = new ElementwiseCache();
    return *cache;
  }

  absl::StatusOr<const ElementwiseKernel*> Get(const ElementwisePlan& plan, IsaLevel isa) {
    if (isa < IsaLevel::kAvx2) {
      return absl::UnimplementedError(
          fmt::format("elementwise kernel: ISA capped to {}", IsaName(isa)));
    }
    std::string key = fmt::format("{}|{}", IsaName(isa), plan.Key());
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      const int64_t start_ns = base::SpanClockNs();
      Entry entry = Generate(plan, isa);
      if (base::SpanRecorder* recorder = base::ThreadSpanRecorder(); recorder != nullptr) {
        const std::string name = "elementwise kernel " + plan.Key();
        recorder->Record({name, "compile", start_ns, base::SpanClockNs() - start_ns, {}});
      }
      it = entries_.emplace(key, std::move(entry)).first;
    }
    if (!it->second.status.ok()) return it->second.status;
    return it->second.kernel.get();
  }

  void RecordRun() {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.runs;
  }

  // Counts a fallback; logs its reason the first time it is seen.
  void RecordFallback(const absl::Status& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.fallbacks;
    LogOnce(fmt::format("fusion falls back to the reference kernel: {}", reason.message()));
  }

  ElementwiseStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  struct Entry {
    std::unique_ptr<ElementwiseKernel> kernel;
    absl::Status status;
  };

  // The kernel of the best level <= isa whose generator accepts the plan. A level that declines
  // is logged once and the next one tried; when all decline, the best level's reason.
  Entry Generate(const ElementwisePlan& plan, IsaLevel isa) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Entry entry;
    for (IsaLevel level : kGeneratorLevels) {
      if (level > isa) continue;
      std::unique_ptr<ElementwiseKernel> gen = NewElementwiseKernel(plan, level);
      absl::Status status = gen->status();
      if (status.ok()) status = gen->Create();
      if (status.ok()) {
        entry.kernel = std::move(gen);
        entry.status = absl::OkStatus();
        ++stats_.kernels;
        return entry;
      }
      if (entry.status.ok()) entry.status = status;
      if (level > IsaLevel::kAvx2) {
        LogOnce(fmt::format("{} elementwise kernel declined, trying the next ISA: {}",
                            IsaName(level), status.message()));
      }
    }
    return entry;
  }

  void LogOnce(const std::string& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (logged_.insert(message).second) {
      std::fprintf(stderr, "[shardjit] %s\n", message.c_str());
    }
  }

  std::mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> logged_ ABSL_GUARDED_BY(mu_);
  ElementwiseStats stats_ ABSL_GUARDED_BY(mu_);
};

// The cached kernel of a fusion op's body for the active ISA.
absl::StatusOr<const ElementwiseKernel*> KernelFor(const ir::Op& op) {
  ASSIGN_OR_RETURN(ElementwisePlan plan, PlanFusionBody(op.fusion().body()));
  return ElementwiseCache::Global().Get(plan, ActiveIsa());
}

}  // namespace

ElementwiseStats GetElementwiseStats() { return ElementwiseCache::Global().stats(); }

absl::StatusOr<std::vector<ir::Tensor>> FusionKernel(const ir::Op& op,
                                                     const std::vector<ir::Tensor>& operands,
                                                     ir::Allocator* allocator) {
  absl::StatusOr<const ElementwiseKernel*> kernel = KernelFor(op);
  if (!kernel.ok()) {
    ElementwiseCache::Global().RecordFallback(kernel.status());
    return absl::UnimplementedError(fmt::format("fusion: {}", kernel.status().message()));
  }
  ir::Tensor out = ir::Tensor::Empty(ir::FromProto(op.result_types(0)), allocator);
  std::vector<const void*> inputs;
  inputs.reserve(operands.size());
  for (const ir::Tensor& t : operands) inputs.push_back(t.data());
  if (!(*kernel)->Run(inputs, out.data(), out.num_elements())) {
    const absl::Status declined = absl::UnimplementedError(
        fmt::format("fusion: a sin or cos argument beyond {}", kSinCosMaxArgument));
    ElementwiseCache::Global().RecordFallback(declined);
    return declined;
  }
  ElementwiseCache::Global().RecordRun();
  return std::vector<ir::Tensor>{std::move(out)};
}

absl::Status ReduceBuffers(ReduceKind kind, ir::DType dtype, const void* a, const void* b,
                           void* out, int64_t n) {
  if (dtype != ir::DType::kF32 && dtype != ir::DType::kBF16) {
    return absl::InvalidArgumentError(
        fmt::format("ReduceBuffers: dtype {} is not f32 or bf16", ir::DTypeName(dtype)));
  }
  if (n <= 0) return absl::OkStatus();
  const EwOp op = kind == ReduceKind::kSum   ? EwOp::kAdd
                  : kind == ReduceKind::kMax ? EwOp::kMax
                                             : EwOp::kMin;
  absl::StatusOr<const ElementwiseKernel*> kernel =
      ElementwiseCache::Global().Get(BinaryPlan(op, dtype), ActiveIsa());
  if (!kernel.ok()) return ReduceBuffersInOrder(kind, dtype, a, b, out, n);
  (*kernel)->Run({a, b}, out, n);
  return absl::OkStatus();
}

}  // namespace shardjit::backends::x86
