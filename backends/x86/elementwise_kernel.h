// AVX2 generator of fused elementwise loops: one pass over memory computing an ElementwisePlan on
// 8-lane ymm vectors (f32 in registers; bf16 loaded by zero-extension into the high half and stored
// rounded to nearest even). The kernel runs whole blocks of 8 elements; Run() hands the last
// partial block to the same code on zero-padded copies, so main loop and tail share one body.
#ifndef SHARDJIT_BACKENDS_X86_ELEMENTWISE_KERNEL_H_
#define SHARDJIT_BACKENDS_X86_ELEMENTWISE_KERNEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "backends/x86/elementwise_plan.h"
#include "backends/x86/jit_generator.h"

namespace shardjit::backends::x86 {

// Arguments of one call; field offsets are read by generated code (offsetof).
struct ElementwiseArgs {
  const void* const* inputs;  // one per plan input; a scalar input points at its one element
  void* output;
  int64_t blocks;  // full blocks of kLanes elements
};

class ElementwiseKernelAvx2 : public JitGenerator {
 public:
  static constexpr int kLanes = 8;
  // Non-scalar inputs get a pointer register each.
  static constexpr int kMaxVectorInputs = 10;

  explicit ElementwiseKernelAvx2(ElementwisePlan plan);

  // Ok when the plan fits the register file; check before Create().
  const absl::Status& status() const { return status_; }
  const ElementwisePlan& plan() const { return plan_; }

  // out[i] = f(inputs...[i]) for i < n. `inputs` has one pointer per plan input.
  void Run(const std::vector<const void*>& inputs, void* out, int64_t n) const;

 private:
  void GenerateBody() override;
  // One block of kLanes elements at element index reg_idx.
  void EmitBody();
  void EmitStep(const ElementwisePlan::Step& step, const Xbyak::Ymm& dst);
  void EmitLoad(int input, const Xbyak::Ymm& dst);
  void EmitStore(const Xbyak::Ymm& src);
  // Rounds the f32 lanes of `v` to bf16 (nearest even, NaNs quieted), keeping them widened.
  void EmitRoundToBf16(const Xbyak::Ymm& v);
  // Assigns a ymm register to every value; fails when more than kValueRegs are live at once.
  absl::Status Allocate();

  static constexpr int kValueRegs = 14;  // ymm0..13; ymm14/15 are scratch
  const Xbyak::Ymm tmp0_ = Xbyak::Ymm(14);
  const Xbyak::Ymm tmp1_ = Xbyak::Ymm(15);

  ElementwisePlan plan_;
  absl::Status status_;
  std::vector<int> reg_;        // value -> ymm index
  std::vector<int> last_use_;   // value -> step index of its last use (steps.size() for result)
  std::vector<int> pointer_;    // input -> index into kPointerRegs, -1 for scalars
  Xbyak::Label constants_;

  // Registers, named once.
  const Xbyak::Reg64 reg_args = abi_param1;
  const Xbyak::Reg64 reg_input_array = rsi;
  const Xbyak::Reg64 reg_out = rdx;
  const Xbyak::Reg64 reg_blocks = rcx;
  const Xbyak::Reg64 reg_idx = rax;
  const Xbyak::Reg64 kPointerRegs[kMaxVectorInputs] = {r8,  r9,  r10, r11, rbx,
                                                       rbp, r12, r13, r14, r15};
};

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_ELEMENTWISE_KERNEL_H_
