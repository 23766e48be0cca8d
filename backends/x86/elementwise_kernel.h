// Generated fused elementwise loops: one pass over memory computing an ElementwisePlan, on AVX2
// (ymm, 8 lanes) or AVX-512 (zmm, 16 lanes). The last partial vector is computed inside the kernel
// with masked loads and stores (see elementwise_emitter.h), so no element outside [0, n) of any
// array is read or written.
#ifndef SHARDJIT_BACKENDS_X86_ELEMENTWISE_KERNEL_H_
#define SHARDJIT_BACKENDS_X86_ELEMENTWISE_KERNEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/elementwise_plan.h"
#include "backends/x86/jit_generator.h"

namespace shardjit::backends::x86 {

// Largest error in f32 ulps of the approximated ops, against glibc's std::exp, std::log,
// std::tanh, std::erf and the reference formula 1 / (1 + exp(-x)) (see elementwise_math.cc). Every
// other op is bit identical to its reference kernel.
inline constexpr int kExpMaxUlp = 1;
inline constexpr int kLogMaxUlp = 1;
inline constexpr int kTanhMaxUlp = 2;
inline constexpr int kLogisticMaxUlp = 4;
inline constexpr int kErfMaxUlp = 7;
// sin and cos: against glibc's sinf/cosf for |x| <= kSinCosMaxArgument (the range where the
// three-part Cody-Waite reduction keeps them within these bounds); a kernel meeting a larger
// finite argument reports it (Run returns false) and its caller computes the op another way.
inline constexpr int kSinMaxUlp = 1;
inline constexpr int kCosMaxUlp = 1;
inline constexpr float kSinCosMaxArgument = 71476.0625f;

// Arguments of one call; field offsets are read by generated code (offsetof).
struct ElementwiseArgs {
  const void* const* inputs;  // one per plan input; a scalar input points at its one element
  void* output;
  int64_t n;  // elements
  int32_t* out_of_range;  // set to 1 when a sin/cos argument is out of range
};

// A generated loop for one plan and one ISA. Construct with NewElementwiseKernel, check status(),
// then Create().
class ElementwiseKernel : public JitGenerator {
 public:
  // Non-scalar inputs get a pointer register each.
  static constexpr int kMaxVectorInputs = 10;

  // Ok when the plan fits the register file; check before Create().
  const absl::Status& status() const { return status_; }
  const ElementwisePlan& plan() const { return plan_; }
  IsaLevel isa() const { return isa_; }

  // out[i] = f(inputs...[i]) for i < n. `inputs` has one pointer per plan input. False when a
  // sin or cos met a finite argument above kSinCosMaxArgument (`out` is then unspecified).
  bool Run(const std::vector<const void*>& inputs, void* out, int64_t n) const;

 protected:
  ElementwiseKernel(ElementwisePlan plan, IsaLevel isa);

  ElementwisePlan plan_;
  IsaLevel isa_;
  absl::Status status_;
};

// The generator of `plan` for `isa`: kAvx2, or kAvx512 and above (which share one generator).
std::unique_ptr<ElementwiseKernel> NewElementwiseKernel(ElementwisePlan plan, IsaLevel isa);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_ELEMENTWISE_KERNEL_H_
