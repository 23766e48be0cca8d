#include "backends/backend.h"

#include <cmath>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace shardjit::backends {
namespace {

template <typename T>
T Step(ReduceKind kind, T a, T b) {
  if (kind == ReduceKind::kSum) return a + b;
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return kind == ReduceKind::kMax ? (a > b ? a : b) : (a < b ? a : b);
}

}  // namespace

absl::Status ReduceBuffersInOrder(ReduceKind kind, ir::DType dtype, const void* a, const void* b,
                                  void* out, int64_t n) {
  if (dtype == ir::DType::kF32) {
    const float* x = static_cast<const float*>(a);
    const float* y = static_cast<const float*>(b);
    float* z = static_cast<float*>(out);
    for (int64_t i = 0; i < n; ++i) z[i] = Step(kind, x[i], y[i]);
    return absl::OkStatus();
  }
  if (dtype == ir::DType::kBF16) {
    const ir::bf16* x = static_cast<const ir::bf16*>(a);
    const ir::bf16* y = static_cast<const ir::bf16*>(b);
    ir::bf16* z = static_cast<ir::bf16*>(out);
    for (int64_t i = 0; i < n; ++i) {
      z[i] = ir::bf16(Step(kind, static_cast<float>(x[i]), static_cast<float>(y[i])));
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      fmt::format("ReduceBuffers: dtype {} is not f32 or bf16", ir::DTypeName(dtype)));
}

absl::Status Backend::ReduceBuffers(ReduceKind kind, ir::DType dtype, const void* a,
                                    const void* b, void* out, int64_t n) const {
  return ReduceBuffersInOrder(kind, dtype, a, b, out, n);
}

const passes::MachineModel& Backend::machine_model() const {
  static const passes::MachineModel* const defaults = new passes::MachineModel();
  return *defaults;
}

}  // namespace shardjit::backends
