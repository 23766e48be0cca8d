#include "backends/x86/compile.h"

#include "backends/reference/evaluator.h"
#include "backends/x86/copy_kernels.h"
#include "backends/x86/dot_general.h"
#include "backends/x86/elementwise.h"
#include "backends/x86/grouped_matmul.h"
#include "backends/x86/host_rates.h"
#include "backends/x86/pallas_call.h"
#include "backends/x86/reduce.h"
#include "backends/x86/transpose.h"

namespace shardjit::backends::x86 {

absl::StatusOr<std::unique_ptr<Executable>> Compile(const ir::Function& function) {
  reference::KernelOverrides overrides;
  overrides["dot_general"] = DotGeneral;
  // In place into a donated accumulator.
  overrides["dot_accumulate"] = DotAccumulate;
  overrides["gmm"] = GroupedMatmul;
  overrides["tgmm"] = GroupedMatmul;
  // Declined fusions (Unimplemented) run the reference fusion kernel.
  overrides["fusion"] = FusionKernel;
  // Transposes that keep the innermost dim (Unimplemented) run the reference kernel.
  overrides["transpose"] = TransposeKernel;
  overrides["slice"] = SliceKernel;
  overrides["dynamic_slice"] = DynamicSliceKernel;
  // In place when the evaluator donated the operand and nothing else shares its buffer.
  overrides["dynamic_update_slice"] = DynamicUpdateSliceKernel;
  overrides["concatenate"] = ConcatenateKernel;
  overrides["broadcast_in_dim"] = BroadcastInDimKernel;
  // Gathers other than of whole rows (Unimplemented) run the reference kernel.
  overrides["gather"] = GatherRowsKernel;
  // Scatter-adds other than of whole f32 rows (Unimplemented) run the reference kernel.
  overrides["scatter_add"] = ScatterAddRowsKernel;
  // f32 and bf16; other dtypes (Unimplemented) run the reference kernels.
  overrides["reduce_sum"] = ReduceSumKernel;
  overrides["reduce_max"] = ReduceMaxKernel;
  overrides["reduce_min"] = ReduceMinKernel;
  // Kernels it cannot compile (Unimplemented) are interpreted by the evaluator.
  overrides["pallas_call"] = MakePallasCallKernel(overrides);
  return reference::Compile(function, std::move(overrides), X86Backend());
}

namespace {

class X86BackendImpl final : public Backend {
 public:
  std::string_view name() const override { return "x86"; }
  absl::StatusOr<std::unique_ptr<Executable>> Compile(
      const ir::Function& function) const override {
    return x86::Compile(function);
  }
  absl::Status ReduceBuffers(ReduceKind kind, ir::DType dtype, const void* a, const void* b,
                             void* out, int64_t n) const override {
    return x86::ReduceBuffers(kind, dtype, a, b, out, n);
  }
  const passes::MachineModel& machine_model() const override { return HostMachineModel(); }
};

}  // namespace

const Backend& X86Backend() {
  static const X86BackendImpl* const backend = new X86BackendImpl();
  return *backend;
}

}  // namespace shardjit::backends::x86
