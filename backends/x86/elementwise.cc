#include "backends/x86/elementwise.h"

#include <cmath>
#include <cstdio>
#include <cstring>
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

// Rows shorter than this run as one loop over inputs expanded to the output's shape: a call per
// row of a few vectors would cost more than the copies.
constexpr int64_t kMinRowElements = 64;

// `input`, read per row as `in` says, expanded to `rows` rows of `row_elements`.
ir::Tensor ExpandInput(const ir::Tensor& input, const ElementwisePlan::Input& in, int64_t rows,
                       int64_t row_elements, ir::Allocator* allocator) {
  ir::ShapedType type{in.dtype, {rows * row_elements}};
  ir::Tensor out = ir::Tensor::Empty(type, allocator);
  const int64_t bytes = ir::DTypeSize(in.dtype);
  const auto* src = static_cast<const char*>(input.data());
  auto* dst = static_cast<char*>(out.data());
  for (int64_t r = 0; r < rows; ++r) {
    char* row = dst + r * row_elements * bytes;
    if (in.rows == InputRows::kOnePerRow) {
      for (int64_t j = 0; j < row_elements; ++j) {
        std::memcpy(row + j * bytes, src + r * bytes, bytes);
      }
    } else {
      std::memcpy(row, src, row_elements * bytes);
    }
  }
  return out;
}

// Runs `kernel` (of `plan`) over the output `out` in plan.rows rows; false as Run is.
bool RunRows(const ElementwiseKernel& kernel, const ElementwisePlan& plan,
             const std::vector<ir::Tensor>& operands, void* out, int64_t n) {
  const int64_t rows = plan.rows, row_elements = n / rows;
  std::vector<const void*> inputs(operands.size());
  const int64_t out_bytes = ir::DTypeSize(plan.result_dtype);
  for (int64_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < operands.size(); ++i) {
      const auto* base = static_cast<const char*>(operands[i].data());
      const int64_t bytes = ir::DTypeSize(plan.inputs[i].dtype);
      switch (plan.inputs[i].rows) {
        case InputRows::kAdvance:
          inputs[i] = base + r * row_elements * bytes;
          break;
        case InputRows::kOnePerRow:
          inputs[i] = base + r * bytes;
          break;
        case InputRows::kRepeat:
          inputs[i] = base;
          break;
      }
    }
    if (!kernel.Run(inputs, static_cast<char*>(out) + r * row_elements * out_bytes,
                    row_elements)) {
      return false;
    }
  }
  return true;
}

}  // namespace

ElementwiseStats GetElementwiseStats() { return ElementwiseCache::Global().stats(); }

absl::StatusOr<std::vector<ir::Tensor>> FusionKernel(const ir::Op& op,
                                                     const std::vector<ir::Tensor>& operands,
                                                     ir::Allocator* allocator) {
  absl::StatusOr<ElementwisePlan> plan = PlanFusionBody(op.fusion().body());
  const ir::ShapedType out_type = ir::FromProto(op.result_types(0));
  const int64_t n = out_type.num_elements();
  // Short rows: the broadcast inputs expanded, the loop run once over them.
  std::vector<ir::Tensor> inputs = operands;
  if (plan.ok() && plan->rows > 1 && n / plan->rows < kMinRowElements) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      ElementwisePlan::Input& in = plan->inputs[i];
      if (in.rows == InputRows::kAdvance || (in.scalar && in.rows == InputRows::kRepeat)) continue;
      inputs[i] = ExpandInput(operands[i], in, plan->rows, n / plan->rows, allocator);
      in = {in.dtype, false, InputRows::kAdvance};
    }
    plan->rows = 1;
  }
  absl::StatusOr<const ElementwiseKernel*> kernel =
      plan.ok() ? ElementwiseCache::Global().Get(*plan, ActiveIsa()) : plan.status();
  if (!kernel.ok()) {
    ElementwiseCache::Global().RecordFallback(kernel.status());
    return absl::UnimplementedError(fmt::format("fusion: {}", kernel.status().message()));
  }
  ir::Tensor out = ir::Tensor::Empty(out_type, allocator);
  if (!RunRows(**kernel, *plan, inputs, out.data(), n)) {
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
