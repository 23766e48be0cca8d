// exp, log, tanh, logistic, erf, sin and cos for the elementwise generator: Cephes-style range
// reduction and polynomials (Cephes expf, logf, tanhf, sinf, cosf coefficients) evaluated with FMA,
// with the special values of std::exp/log/tanh: NaN propagated, exp(+-inf) = inf/0 with overflow
// to inf and gradual underflow to 0, log(0) = -inf, log(x < 0) = -nan (0xffc00000), log(+inf) =
// inf, tanh(+-inf) = +-1, tanh(-0) = -0; logistic is the reference formula 1 / (1 + exp(-x)); erf
// is XLA's CPU rational approximation, x P(x^2) / Q(x^2) on [-4, 4], with erf(+-0) = +-0 and +-1
// where erf rounds to +-1 (|x| > 3.925, infinities included); sin and cos reduce by pi/2 in three
// parts (kPiOver2), give NaN for NaN and +-inf, sin(x) = x below 2^-12 (so sin(-0) = -0), and flag
// finite arguments beyond kSinCosMaxArgument, where that reduction loses accuracy.
// Largest error over every f32 input (exhaustive sweep against glibc 2.36 on the host, the bounds
// of elementwise_kernel.h): exp 1 ulp, log 1 ulp, tanh 2 ulp, erf 7 ulp (near |x| = 3.9, an
// absolute error of 4e-7), sin and cos 1 ulp (|x| <= kSinCosMaxArgument); logistic 4 ulp against
// the reference formula, where 1 + exp(-x) rounds a 1-ulp difference of exp(-x) up to the next
// float.
#include <cmath>

#include "backends/x86/elementwise_emitter.h"

namespace shardjit::backends::x86 {
namespace {

enum Predicate : uint8_t {
  kEq = 0x00,
  kLt = 0x11,
  kNotLessUnord = 0x15,       // x >= y or NaN
  kNotGreaterEqUnord = 0x19,  // x < y or NaN
  kGt = 0x1e,
};

// exp: x = n ln2 + r with |r| <= ln2/2; exp(r) = 1 + r + r^2 P(r).
constexpr float kExpHi = 88.8f;    // exp overflows above log(FLT_MAX) = 88.7228
constexpr float kExpLo = -104.0f;  // exp rounds to 0 below log(2^-150) = -103.97
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;  // ln 2 = kLn2Hi + kLn2Lo; n * kLn2Hi is exact
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kExpPoly[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                              4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
// log: x = 2^e m with m in [sqrt(1/2), sqrt(2)); log(m) = f - f^2/2 + f^3 P(f), f = m - 1.
constexpr uint32_t kSqrtHalfBits = 0x3f3504f3;
constexpr float kMinNormal = 1.17549435e-38f;
constexpr float kLogPoly[] = {7.0376836292e-2f,  -1.1514610310e-1f, 1.1676998740e-1f,
                              -1.2420140846e-1f, 1.4249322787e-1f,  -1.6668057665e-1f,
                              2.0000714765e-1f,  -2.4999993993e-1f, 3.3333331174e-1f};
// tanh: x + x^3 P(x^2) for |x| < 0.625, else sign(x) (1 - 2 / (exp(2|x|) + 1)).
constexpr float kTanhSmall = 0.625f;
constexpr float kTanhPoly[] = {-5.70498872745e-3f, 2.06390887954e-2f, -5.37397155531e-2f,
                               1.33314422036e-1f, -3.33332819422e-1f};

// erf: x P(x^2) / Q(x^2), highest degree first (XLA's coefficients), on x clamped to [-4, 4].
constexpr float kErfP[] = {-2.72614225801306e-10f, 2.77068142495902e-08f, -2.10102402082508e-06f,
                           -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                           -1.60960333262415e-02f};
constexpr float kErfQ[] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                           -7.37332916720468e-03f, -1.42647390514189e-02f};
constexpr float kErfOne = 3.925f;  // erf rounds to 1 above erfc^-1(2^-25)

// sin, cos: x = n pi/2 + r with |r| <= pi/4 (pi/2 in three parts, each product by n exact with
// FMA: Cody-Waite), then sin(r) = r + r^3 S(r^2) or cos(r) = 1 - r^2/2 + r^4 C(r^2) (Cephes
// sinf/cosf coefficients) by the quadrant n mod 4.
constexpr float kTwoOverPi = 0.636619772367581343f;
constexpr float kPiOver2[] = {1.57079601287841796875f, 3.1391647326017846353352069854736328125e-07f,
                              5.3903029534742383634407789541498331746e-15f};
constexpr float kSinPoly[] = {-1.9515295891e-4f, 8.3321608736e-3f, -1.6666654611e-1f};
constexpr float kCosPoly[] = {2.443315711809948e-5f, -1.388731625493765e-3f,
                              4.166664568298827e-2f, -0.5f, 1.0f};
constexpr float kSinIsX = 0x1p-12f;  // sin(x) rounds to x below

}  // namespace

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitExp(const Vmm& dst, const Vmm& src) {
  const Vmm n = Temp(0), p = Temp(1), t = Temp(2);
  // Clamp; vminps/vmaxps return their second operand for NaN, which keeps NaN.
  vmovups(n, ConstantF(kExpHi));
  vminps(dst, n, src);
  vmovups(n, ConstantF(kExpLo));
  vmaxps(dst, n, dst);
  vmulps(n, dst, ConstantF(kLog2e));
  RoundToIntegral(n, n);
  vfnmadd231ps(dst, n, ConstantF(kLn2Hi));  // r
  vfnmadd231ps(dst, n, ConstantF(kLn2Lo));
  vmovups(p, ConstantF(kExpPoly[0]));
  for (int i = 1; i < 6; ++i) vfmadd213ps(p, dst, ConstantF(kExpPoly[i]));
  vmulps(t, dst, dst);
  vfmadd213ps(p, t, dst);
  vaddps(p, p, ConstantF(1.0f));
  // Times 2^n as 2^(n >> 1) * 2^(n - (n >> 1)): both factors are normal for n in [-150, 128],
  // so results that overflow or are subnormal round once, in the last multiply.
  vcvtps2dq(n, n);
  vpsrad(t, n, 1);
  vpsubd(n, n, t);
  vpaddd(t, t, Constant(127));
  vpslld(t, t, 23);
  vpaddd(n, n, Constant(127));
  vpslld(n, n, 23);
  vmulps(p, p, t);
  vmulps(dst, p, n);
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitLog(const Vmm& dst, const Vmm& src) {
  const Vmm x = Temp(0), e = Temp(1), t = Temp(2), p = Temp(3);
  const Mask m = TempMask(0);
  // Subnormals are scaled by 2^23 into the normal range first.
  vcmpps(m, src, ConstantF(kMinNormal), kLt);
  vmulps(x, src, ConstantF(8388608.0f));
  Blend(x, src, x, m);
  vxorps(e, e, e);
  Blend(e, e, ConstantF(-23.0f), m);
  vpsubd(t, x, Constant(kSqrtHalfBits));
  vpsrad(t, t, 23);  // the exponent
  vpslld(p, t, 23);
  vpsubd(x, x, p);  // m
  vcvtdq2ps(t, t);
  vaddps(e, e, t);
  vsubps(x, x, ConstantF(1.0f));  // f
  vmulps(t, x, x);
  vmovups(p, ConstantF(kLogPoly[0]));
  for (int i = 1; i < 9; ++i) vfmadd213ps(p, x, ConstantF(kLogPoly[i]));
  vmulps(p, p, x);
  vmulps(p, p, t);
  vfmadd231ps(p, e, ConstantF(kLn2Lo));
  vfmadd231ps(p, t, ConstantF(-0.5f));
  vaddps(dst, x, p);
  vfmadd231ps(dst, e, ConstantF(kLn2Hi));
  // +inf and NaN give x + x; 0 gives -inf; negatives give the default NaN.
  vaddps(x, src, src);
  vcmpps(m, src, ConstantF(INFINITY), kNotLessUnord);
  Blend(dst, dst, x, m);
  vcmpps(m, src, ConstantF(0.0f), kEq);
  Blend(dst, dst, Constant(0xff800000u), m);
  vcmpps(m, src, ConstantF(0.0f), kLt);
  Blend(dst, dst, Constant(0xffc00000u), m);
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitTanh(const Vmm& dst, const Vmm& src) {
  const Vmm t0 = Temp(0), p = Temp(1), z = Temp(2), abs = Temp(3);
  const Mask small = TempMask(0);
  vandps(abs, src, Constant(0x7fffffffu));
  vaddps(dst, abs, abs);
  EmitExp(dst, dst);  // uses Temp(0..2)
  vaddps(dst, dst, ConstantF(1.0f));
  vmovups(t0, ConstantF(2.0f));
  vdivps(t0, t0, dst);
  vmovups(dst, ConstantF(1.0f));
  vsubps(dst, dst, t0);
  vandps(t0, src, Constant(0x80000000u));
  vorps(dst, dst, t0);
  vmulps(z, src, src);
  vmovups(p, ConstantF(kTanhPoly[0]));
  for (int i = 1; i < 5; ++i) vfmadd213ps(p, z, ConstantF(kTanhPoly[i]));
  vmulps(p, p, z);
  vfmadd213ps(p, src, src);
  vcmpps(small, abs, ConstantF(kTanhSmall), kNotGreaterEqUnord);  // NaN takes this branch
  Blend(dst, dst, p, small);
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitLogistic(const Vmm& dst, const Vmm& src) {
  vxorps(dst, src, Constant(0x80000000u));
  EmitExp(dst, dst);
  vaddps(dst, dst, ConstantF(1.0f));
  vmovups(Temp(0), ConstantF(1.0f));
  vdivps(dst, Temp(0), dst);
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitErf(const Vmm& dst, const Vmm& src) {
  const Vmm x = Temp(0), z = Temp(1), p = Temp(2), q = Temp(3);
  const Mask one = TempMask(0);
  // Clamp; vminps/vmaxps return their second operand for NaN, which keeps NaN.
  vmovups(x, ConstantF(4.0f));
  vminps(x, x, src);
  vmovups(z, ConstantF(-4.0f));
  vmaxps(x, z, x);
  vmulps(z, x, x);
  vmovups(p, ConstantF(kErfP[0]));
  for (int i = 1; i < 7; ++i) vfmadd213ps(p, z, ConstantF(kErfP[i]));
  vmovups(q, ConstantF(kErfQ[0]));
  for (int i = 1; i < 5; ++i) vfmadd213ps(q, z, ConstantF(kErfQ[i]));
  // x (P / Q) rather than (x P) / Q: x P underflows for the smallest normal x.
  vdivps(p, p, q);
  vmulps(dst, x, p);
  vandps(q, src, Constant(0x7fffffffu));
  vcmpps(one, q, ConstantF(kErfOne), kGt);
  vandps(q, src, Constant(0x80000000u));
  vorps(q, q, ConstantF(1.0f));
  Blend(dst, dst, q, one);
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitSinCos(const Vmm& dst, const Vmm& src, bool cos) {
  const Vmm n = Temp(0), r = Temp(1), z = Temp(2), t = Temp(3);
  const Mask m = TempMask(0);
  vmulps(n, src, ConstantF(kTwoOverPi));
  RoundToIntegral(n, n);
  vmovaps(r, src);
  for (float part : kPiOver2) vfnmadd231ps(r, n, ConstantF(part));
  vcvtps2dq(n, n);  // the quadrant (NaN and inf: 0x80000000, whose polynomials give NaN)
  if (cos) vpaddd(n, n, Constant(1));  // cos(x) = sin(x + pi/2)
  vmulps(z, r, r);
  vmovups(t, ConstantF(kSinPoly[0]));
  for (int i = 1; i < 3; ++i) vfmadd213ps(t, z, ConstantF(kSinPoly[i]));
  vmulps(t, t, z);
  vfmadd213ps(t, r, r);  // sin(r)
  vmovups(dst, ConstantF(kCosPoly[0]));
  for (int i = 1; i < 5; ++i) vfmadd213ps(dst, z, ConstantF(kCosPoly[i]));  // cos(r)
  // Odd quadrants take cos(r); quadrants 2 and 3 negate.
  if constexpr (kAvx512) {
    vptestmd(m, n, Constant(1));
  } else {
    vpslld(m, n, 31);
  }
  Blend(dst, t, dst, m);
  vpslld(t, n, 30);
  vandps(t, t, Constant(0x80000000u));
  vxorps(dst, dst, t);
  vandps(t, src, Constant(0x7fffffffu));
  if (!cos) {  // keeps -0 and subnormals
    vcmpps(m, t, ConstantF(kSinIsX), kLt);
    Blend(dst, dst, src, m);
  }
  // A finite |x| beyond the reduction's range: the caller computes this call another way.
  vcmpps(m, t, ConstantF(INFINITY), kEq);
  vxorps(z, z, z);
  Blend(t, t, z, m);
  vcmpps(m, t, ConstantF(kSinCosMaxArgument), kGt);
  Xbyak::Label in_range;
  if constexpr (kAvx512) {
    kortestw(m, m);
  } else {
    vtestps(m, m);
  }
  jz(in_range);
  mov(reg_tmp, ptr[rsp + kFlagSlot]);
  mov(dword[reg_tmp], 1);
  L(in_range);
}

#define SHARDJIT_INSTANTIATE_MATH(Vmm)                                     \
  template void ElementwiseEmitter<Vmm>::EmitSinCos(const Vmm&, const Vmm&, bool); \
  template void ElementwiseEmitter<Vmm>::EmitErf(const Vmm&, const Vmm&);  \
  template void ElementwiseEmitter<Vmm>::EmitExp(const Vmm&, const Vmm&);  \
  template void ElementwiseEmitter<Vmm>::EmitLog(const Vmm&, const Vmm&);  \
  template void ElementwiseEmitter<Vmm>::EmitTanh(const Vmm&, const Vmm&); \
  template void ElementwiseEmitter<Vmm>::EmitLogistic(const Vmm&, const Vmm&);
SHARDJIT_INSTANTIATE_MATH(Xbyak::Ymm)
SHARDJIT_INSTANTIATE_MATH(Xbyak::Zmm)
#undef SHARDJIT_INSTANTIATE_MATH

}  // namespace shardjit::backends::x86
