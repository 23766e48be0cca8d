// The generator of fused elementwise loops, written once over the vector register type:
//   Xbyak::Ymm  AVX2: 8 lanes, 16 registers, compare results in vector registers;
//   Xbyak::Zmm  AVX-512: 16 lanes, 32 registers, compare results in opmask registers.
// The loop skeleton, register allocation and every op are shared; the few instructions that differ
// sit behind the primitives at the end of the class. The tail (n % lanes elements) runs the same
// body with masked memory access: AVX-512 masks loads and stores with k1; AVX2 uses vmaskmovps /
// vpmaskmovd for 32-bit elements and, having no narrower masked move, copies 16- and 8-bit elements
// (bf16, pred) through a stack buffer with rep movsb.
// Member definitions: the loop in elementwise_kernel.cc, ops in elementwise_ops.cc, the
// transcendentals in elementwise_math.cc; each instantiates both register types.
#ifndef SHARDJIT_BACKENDS_X86_ELEMENTWISE_EMITTER_H_
#define SHARDJIT_BACKENDS_X86_ELEMENTWISE_EMITTER_H_

#include <cstdint>
#include <map>
#include <type_traits>
#include <vector>

#include "backends/x86/elementwise_kernel.h"

namespace shardjit::backends::x86 {

template <typename Vmm>
class ElementwiseEmitter final : public ElementwiseKernel {
 public:
  static constexpr bool kAvx512 = std::is_same_v<Vmm, Xbyak::Zmm>;
  static constexpr int kLanes = kAvx512 ? 16 : 8;
  static constexpr int kVectorBytes = 4 * kLanes;
  static constexpr int kNumRegs = kAvx512 ? 32 : 16;
  using Mask = std::conditional_t<kAvx512, Xbyak::Opmask, Xbyak::Ymm>;

  explicit ElementwiseEmitter(ElementwisePlan plan);

 private:
  // Scratch registers a step needs besides its operands and result.
  struct Scratch {
    int vectors = 0;
    int masks = 0;
  };
  static Scratch ScratchFor(const ElementwisePlan& plan, const ElementwisePlan::Step& step);

  // elementwise_kernel.cc: the loop.
  void GenerateBody() override;
  void EmitSetup();
  // The body over one vector at element index reg_idx; `tail`: the masked last vector.
  void EmitBody(bool tail);
  void EmitTailSetup();
  void EmitTailOutput();
  void EmitLoad(int input, bool tail);
  void EmitStore(const Vmm& src, bool tail);
  // rep movsb of the tail's elements of `element_bytes` each; clobbers rsi, rdi, rcx.
  void EmitCopyTail(const Xbyak::Address& dst, const Xbyak::Address& src, int element_bytes);
  void EmitConstantPool();

  // elementwise_ops.cc: one step into `dst` (never one of its operands).
  void EmitStep(const ElementwisePlan::Step& step, const Vmm& dst);
  void EmitCompare(const ElementwisePlan::Step& step, const Vmm& dst);
  void EmitConvert(const ElementwisePlan::Step& step, const Vmm& dst);
  // Rounds the f32 lanes of `v` to bf16 (nearest even, NaNs quieted), keeping them widened.
  void EmitRoundToBf16(const Vmm& v);

  // elementwise_math.cc: dst = f(src). EmitExp allows dst == src; the others need them apart.
  void EmitExp(const Vmm& dst, const Vmm& src);
  void EmitLog(const Vmm& dst, const Vmm& src);
  void EmitTanh(const Vmm& dst, const Vmm& src);
  void EmitLogistic(const Vmm& dst, const Vmm& src);
  void EmitErf(const Vmm& dst, const Vmm& src);
  // sin or cos; a finite |src| above kSinCosMaxArgument sets the call's out-of-range flag.
  void EmitSinCos(const Vmm& dst, const Vmm& src, bool cos);

  // Primitives that differ between the ISAs.
  // dst = m ? if_true : if_false, lane by lane.
  void Blend(const Vmm& dst, const Vmm& if_false, const Xbyak::Operand& if_true, const Mask& m);
  // dst = m ? 1 : 0 (a pred).
  void MaskToPred(const Vmm& dst, const Mask& m);
  // m = pred != 0.
  void PredToMask(const Mask& m, const Vmm& pred);
  // The rounding-mode immediate of vroundps / vrndscaleps.
  enum RoundingMode : uint8_t {
    kRoundNearestEven = 0,
    kRoundDown = 1,
    kRoundUp = 2,
    kRoundTowardZero = 3,
  };
  // dst = src rounded to an integer by `mode` (default: nearest, ties to even), as f32.
  void RoundToIntegral(const Vmm& dst, const Vmm& src, RoundingMode mode = kRoundNearestEven);

  // A vector of `bits` in every lane, or of `lanes` (kLanes words), in the constant pool.
  Xbyak::Address Constant(uint32_t bits);
  Xbyak::Address ConstantF(float value);
  Xbyak::Address ConstantVector(const std::vector<uint32_t>& lanes);

  Vmm Value(int value) const { return Vmm(reg_[value]); }
  // Scratch vector i; scratch mask i (an opmask on AVX-512, a vector register on AVX2).
  Vmm Temp(int i) const;
  Mask TempMask(int i) const;
  // The element's address in input `input` (non-scalar) or the output, at reg_idx.
  Xbyak::Address InputAt(int input) const;
  Xbyak::Address OutputAt() const;

  std::vector<int> reg_;      // value -> vector register
  std::vector<int> pointer_;  // input -> index into kPointerRegs, -1 for scalars
  int temps_ = 0;             // scratch vectors
  int temp_masks_ = 0;
  std::vector<std::vector<uint32_t>> constants_;
  std::map<std::vector<uint32_t>, int> constant_index_;
  Xbyak::Label pool_;

  // Stack frame (bytes from rsp): n, the out-of-range flag's address, the AVX2 tail mask, the AVX2
  // bounce buffers (one per pointer register, then the output's).
  static constexpr int kCountSlot = 0;
  static constexpr int kFlagSlot = 8;
  static constexpr int kMaskSlot = 32;
  static constexpr int kBounceSlot = 64;
  static constexpr int kBounceBytes = 16;
  static constexpr int kFrameBytes = kBounceSlot + (kMaxVectorInputs + 1) * kBounceBytes;
  const Xbyak::Opmask kTailMask = Xbyak::Opmask(1);

  // Registers, named once. rep movsb (AVX2 tails) implicitly uses rsi, rdi and rcx.
  const Xbyak::Reg64 reg_args = abi_param1;  // rdi
  const Xbyak::Reg64 reg_tmp = rsi;
  const Xbyak::Reg64 reg_out = rdx;
  const Xbyak::Reg64 reg_count = rcx;  // blocks left, then the tail's elements
  const Xbyak::Reg64 reg_idx = rax;
  const Xbyak::Reg64 kPointerRegs[kMaxVectorInputs] = {r8,  r9,  r10, r11, rbx,
                                                       rbp, r12, r13, r14, r15};
};

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_ELEMENTWISE_EMITTER_H_
