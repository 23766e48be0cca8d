// The elementwise generator's ops: arithmetic, compare, select, convert and bf16 rounding, each
// matching its reference kernel bit for bit, and the primitives that differ between AVX2 and
// AVX-512.
#include <algorithm>

#include "backends/x86/elementwise_emitter.h"

namespace shardjit::backends::x86 {
namespace {

using ir::DType;

// vcmpps predicates: ordered and quiet unless named otherwise.
enum Predicate : uint8_t {
  kEq = 0x00,
  kUnord = 0x03,
  kEqUnord = 0x08,  // equal or NaN
  kNeUnord = 0x04,  // true for NaN, like C++ !=
  kLt = 0x11,
  kLe = 0x12,
  kGe = 0x1D,
  kGt = 0x1E,
};

bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kBF16; }

// Select and copies move bits as the reference does; every other bf16 result is rounded.
bool RoundsToBf16(const ElementwisePlan::Step& step) {
  return step.dtype == DType::kBF16 && step.op != EwOp::kSelect && step.op != EwOp::kCopy;
}

}  // namespace

template <typename Vmm>
typename ElementwiseEmitter<Vmm>::Scratch ElementwiseEmitter<Vmm>::ScratchFor(
    const ElementwisePlan& plan, const ElementwisePlan::Step& step) {
  Scratch s;
  switch (step.op) {
    case EwOp::kMax:
    case EwOp::kMin:
      s.masks = IsFloat(plan.dtype(step.a)) ? 1 : 0;
      break;
    case EwOp::kRsqrt:
      s.vectors = 1;
      break;
    case EwOp::kSign:
      s.masks = 1;
      break;
    case EwOp::kRoundAway:
      s = {1, 1};
      break;
    case EwOp::kExp:
    case EwOp::kLogistic:
      s.vectors = 3;
      break;
    case EwOp::kLog:
    case EwOp::kTanh:
    case EwOp::kErf:
    case EwOp::kSin:
    case EwOp::kCos:
      s = {4, 1};
      break;
    case EwOp::kCompare:
    case EwOp::kSelect:
    case EwOp::kConvert:
      s.masks = 1;
      break;
    default:
      break;
  }
  if (RoundsToBf16(step)) s = {std::max(s.vectors, 1), std::max(s.masks, 1)};
  return s;
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitStep(const ElementwisePlan::Step& step, const Vmm& dst) {
  const Vmm a = Value(step.a);
  const Vmm b = step.b >= 0 ? Value(step.b) : a;
  const bool integer = !IsFloat(plan_.dtype(step.a));
  switch (step.op) {
    case EwOp::kAdd:
      integer ? vpaddd(dst, a, b) : vaddps(dst, a, b);
      break;
    case EwOp::kSub:
      integer ? vpsubd(dst, a, b) : vsubps(dst, a, b);
      break;
    case EwOp::kMul:
      integer ? vpmulld(dst, a, b) : vmulps(dst, a, b);
      break;
    case EwOp::kDiv:
      vdivps(dst, a, b);
      break;
    case EwOp::kMax:
    case EwOp::kMin:
      if (integer) {
        step.op == EwOp::kMax ? vpmaxsd(dst, a, b) : vpminsd(dst, a, b);
        break;
      }
      // vmaxps/vminps return b when either is NaN; the reference returns a NaN a first.
      step.op == EwOp::kMax ? vmaxps(dst, a, b) : vminps(dst, a, b);
      vcmpps(TempMask(0), a, a, kUnord);
      Blend(dst, dst, a, TempMask(0));
      break;
    case EwOp::kNeg:
      if (integer) {
        vxorps(dst, dst, dst);
        vpsubd(dst, dst, a);
      } else {
        vxorps(dst, a, Constant(0x80000000u));
      }
      break;
    case EwOp::kAbs:
      integer ? vpabsd(dst, a) : vandps(dst, a, Constant(0x7fffffffu));
      break;
    case EwOp::kSqrt:
      vsqrtps(dst, a);
      break;
    case EwOp::kRsqrt:
      vsqrtps(Temp(0), a);
      vmovups(dst, ConstantF(1.0f));
      vdivps(dst, dst, Temp(0));
      break;
    case EwOp::kFloor:
      RoundToIntegral(dst, a, kRoundDown);
      break;
    case EwOp::kCeil:
      RoundToIntegral(dst, a, kRoundUp);
      break;
    case EwOp::kRoundEven:
      RoundToIntegral(dst, a, kRoundNearestEven);
      break;
    case EwOp::kRoundAway:
      // t = trunc(x), then t + sign(x) where |x - t| >= 0.5 (x - t is exact; NaN and inf keep t).
      RoundToIntegral(dst, a, kRoundTowardZero);
      vsubps(Temp(0), a, dst);
      vandps(Temp(0), Temp(0), Constant(0x7fffffffu));
      vcmpps(TempMask(0), Temp(0), ConstantF(0.5f), kGe);
      vandps(Temp(0), a, Constant(0x80000000u));
      vorps(Temp(0), Temp(0), ConstantF(1.0f));
      vaddps(Temp(0), Temp(0), dst);
      Blend(dst, dst, Temp(0), TempMask(0));
      break;
    case EwOp::kSign:
      // +-1 by x's sign bit; +-0 and NaN are their own sign.
      vandps(dst, a, Constant(0x80000000u));
      vorps(dst, dst, ConstantF(1.0f));
      vcmpps(TempMask(0), a, ConstantF(0.0f), kEqUnord);
      Blend(dst, dst, a, TempMask(0));
      break;
    case EwOp::kExp:
      EmitExp(dst, a);
      break;
    case EwOp::kLog:
      EmitLog(dst, a);
      break;
    case EwOp::kTanh:
      EmitTanh(dst, a);
      break;
    case EwOp::kLogistic:
      EmitLogistic(dst, a);
      break;
    case EwOp::kErf:
      EmitErf(dst, a);
      break;
    case EwOp::kSin:
    case EwOp::kCos:
      EmitSinCos(dst, a, step.op == EwOp::kCos);
      break;
    case EwOp::kCompare:
      EmitCompare(step, dst);
      break;
    case EwOp::kSelect:
      PredToMask(TempMask(0), a);
      Blend(dst, Value(step.c), b, TempMask(0));
      break;
    case EwOp::kConvert:
      EmitConvert(step, dst);
      break;
    case EwOp::kCopy:
      vmovaps(dst, a);
      break;
  }
  if (RoundsToBf16(step)) EmitRoundToBf16(dst);
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitCompare(const ElementwisePlan::Step& step, const Vmm& dst) {
  const Vmm a = Value(step.a), b = Value(step.b);
  const Mask m = TempMask(0);
  if (IsFloat(plan_.dtype(step.a))) {
    static constexpr Predicate kPredicates[] = {kEq, kEq, kNeUnord, kLt, kLe, kGt, kGe};
    vcmpps(m, a, b, kPredicates[step.direction]);
    MaskToPred(dst, m);
    return;
  }
  // s32 and pred: equal or signed greater, then negated for NE, LE and GE.
  switch (step.direction) {
    case ir::EQ:
    case ir::NE:
      vpcmpeqd(m, a, b);
      break;
    case ir::GT:
    case ir::LE:
      vpcmpgtd(m, a, b);
      break;
    default:  // LT, GE
      vpcmpgtd(m, b, a);
      break;
  }
  MaskToPred(dst, m);
  if (step.direction == ir::NE || step.direction == ir::LE || step.direction == ir::GE) {
    vxorps(dst, dst, Constant(1));
  }
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitConvert(const ElementwisePlan::Step& step, const Vmm& dst) {
  const Vmm a = Value(step.a);
  const DType from = plan_.dtype(step.a), to = step.dtype;
  const Mask m = TempMask(0);
  if (to == DType::kPred) {  // x != 0; NaN is true
    if (IsFloat(from)) {
      vcmpps(m, a, ConstantF(0.0f), kNeUnord);
      MaskToPred(dst, m);
    } else {
      vpcmpeqd(m, a, Constant(0));
      MaskToPred(dst, m);
      vxorps(dst, dst, Constant(1));
    }
  } else if (!IsFloat(from)) {  // s32 or pred (0/1) to s32, f32 or bf16 (rounded after)
    to == DType::kS32 ? vmovaps(dst, a) : vcvtdq2ps(dst, a);
  } else if (to != DType::kS32) {  // f32 <-> bf16: widening is exact, narrowing rounds after
    vmovaps(dst, a);
  } else {
    // Truncation toward zero; vcvttps2dq gives INT_MIN for NaN and out of range, the reference
    // saturates to INT_MAX above and gives 0 for NaN.
    vcvttps2dq(dst, a);
    vcmpps(m, a, ConstantF(2147483648.0f), kGe);
    Blend(dst, dst, Constant(0x7fffffffu), m);
    vcmpps(m, a, a, kUnord);
    Blend(dst, dst, Constant(0), m);
  }
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitRoundToBf16(const Vmm& v) {
  const Vmm t = Temp(0);
  const Mask nan = TempMask(0);
  vpsrld(t, v, 16);
  vandps(t, t, Constant(1));  // the parity bit
  vpaddd(t, t, Constant(0x7fff));
  vpaddd(t, t, v);  // rounded, for non-NaN lanes
  vcmpps(nan, v, v, kUnord);
  vorps(v, v, Constant(0x00400000));  // quieted NaN, as bf16(float) does
  Blend(v, t, v, nan);
  vandps(v, v, Constant(0xffff0000u));
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::Blend(const Vmm& dst, const Vmm& if_false,
                                    const Xbyak::Operand& if_true, const Mask& m) {
  if constexpr (kAvx512) {
    vblendmps(dst | m, if_false, if_true);
  } else {
    vblendvps(dst, if_false, if_true, m);
  }
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::MaskToPred(const Vmm& dst, const Mask& m) {
  if constexpr (kAvx512) {
    vmovdqu32(dst | m | T_z, Constant(1));
  } else {
    vpsrld(dst, m, 31);
  }
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::PredToMask(const Mask& m, const Vmm& pred) {
  if constexpr (kAvx512) {
    vptestmd(m, pred, pred);
  } else {
    vpslld(m, pred, 31);
  }
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::RoundToIntegral(const Vmm& dst, const Vmm& src, RoundingMode mode) {
  if constexpr (kAvx512) {
    vrndscaleps(dst, src, mode);
  } else {
    vroundps(dst, src, mode);
  }
}

#define SHARDJIT_INSTANTIATE_OPS(Vmm)                                                         \
  template ElementwiseEmitter<Vmm>::Scratch ElementwiseEmitter<Vmm>::ScratchFor(              \
      const ElementwisePlan&, const ElementwisePlan::Step&);                                  \
  template void ElementwiseEmitter<Vmm>::EmitStep(const ElementwisePlan::Step&, const Vmm&);  \
  template void ElementwiseEmitter<Vmm>::RoundToIntegral(const Vmm&, const Vmm&, RoundingMode); \
  template void ElementwiseEmitter<Vmm>::Blend(const Vmm&, const Vmm&, const Xbyak::Operand&, \
                                               const Mask&);
SHARDJIT_INSTANTIATE_OPS(Xbyak::Ymm)
SHARDJIT_INSTANTIATE_OPS(Xbyak::Zmm)
#undef SHARDJIT_INSTANTIATE_OPS

}  // namespace shardjit::backends::x86
