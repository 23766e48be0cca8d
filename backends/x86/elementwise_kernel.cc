#include "backends/x86/elementwise_kernel.h"

#include <cstddef>
#include <cstring>

#include "fmt/format.h"
#include "ir/fmt_absl.h"

namespace shardjit::backends::x86 {
namespace {

using Xbyak::Ymm;

// Offsets (bytes) of the 32-byte constant vectors after constants_.
constexpr int kOnes = 0;        // 0x00000001: the rounding parity bit
constexpr int kRoundBias = 32;  // 0x00007fff
constexpr int kQuietNan = 64;   // 0x00400000
constexpr int kHighHalf = 96;   // 0xffff0000
constexpr int kSignBit = 128;   // 0x80000000
constexpr int kAbsMask = 160;   // 0x7fffffff
constexpr int kOneF = 192;      // 1.0f
constexpr uint32_t kConstantWords[] = {0x00000001u, 0x00007fffu, 0x00400000u, 0xffff0000u,
                                       0x80000000u, 0x7fffffffu, 0x3f800000u};

size_t ElementSize(ir::DType d) { return d == ir::DType::kBF16 ? 2 : 4; }

std::string KernelName(const ElementwisePlan& plan) {
  return fmt::format("elementwise_avx2_{}in_{}ops", plan.inputs.size(), plan.steps.size());
}

}  // namespace

ElementwiseKernelAvx2::ElementwiseKernelAvx2(ElementwisePlan plan)
    : JitGenerator(KernelName(plan)), plan_(std::move(plan)) {
  status_ = Allocate();
}

absl::Status ElementwiseKernelAvx2::Allocate() {
  const int n = plan_.num_values();
  const int num_inputs = static_cast<int>(plan_.inputs.size());
  last_use_.assign(n, -1);
  for (int s = 0; s < static_cast<int>(plan_.steps.size()); ++s) {
    last_use_[plan_.steps[s].a] = s;
    if (plan_.steps[s].b >= 0) last_use_[plan_.steps[s].b] = s;
  }
  last_use_[plan_.result] = static_cast<int>(plan_.steps.size());
  pointer_.assign(num_inputs, -1);
  int pointers = 0;
  for (int i = 0; i < num_inputs; ++i) {
    if (plan_.inputs[i].scalar) continue;
    if (pointers == kMaxVectorInputs) {
      return absl::UnimplementedError(fmt::format(
          "elementwise kernel: more than {} non-scalar operands", kMaxVectorInputs));
    }
    pointer_[i] = pointers++;
  }
  // Scalars hold a register for the whole kernel; vector inputs are loaded right before their
  // first use; a register is free again after the value's last use.
  reg_.assign(n, -1);
  std::vector<bool> busy(kValueRegs, false);
  auto take = [&](int value) -> bool {
    for (int r = 0; r < kValueRegs; ++r) {
      if (!busy[r]) {
        busy[r] = true;
        reg_[value] = r;
        return true;
      }
    }
    return false;
  };
  auto too_many = absl::UnimplementedError(
      fmt::format("elementwise kernel: more than {} live values", kValueRegs));
  for (int i = 0; i < num_inputs; ++i) {
    if (plan_.inputs[i].scalar && !take(i)) return too_many;
  }
  for (int s = 0; s < static_cast<int>(plan_.steps.size()); ++s) {
    const auto& step = plan_.steps[s];
    for (int v : {step.a, step.b}) {
      if (v >= 0 && reg_[v] < 0 && !take(v)) return too_many;
    }
    for (int v : {step.a, step.b}) {
      if (v >= 0 && last_use_[v] == s && !(v < num_inputs && plan_.inputs[v].scalar)) {
        busy[reg_[v]] = false;
      }
    }
    const int value = num_inputs + s;
    if (!take(value)) return too_many;
    if (last_use_[value] < 0) busy[reg_[value]] = false;  // dead step
  }
  if (reg_[plan_.result] < 0 && !take(plan_.result)) return too_many;
  return absl::OkStatus();
}

void ElementwiseKernelAvx2::GenerateBody() {
  Xbyak::Label start;
  jmp(start, T_NEAR);
  align(32);
  L(constants_);
  for (uint32_t word : kConstantWords) {
    for (int lane = 0; lane < kLanes; ++lane) dd(word);
  }
  L(start);
  mov(reg_input_array, ptr[reg_args + offsetof(ElementwiseArgs, inputs)]);
  mov(reg_out, ptr[reg_args + offsetof(ElementwiseArgs, output)]);
  mov(reg_blocks, ptr[reg_args + offsetof(ElementwiseArgs, blocks)]);
  for (int i = 0; i < static_cast<int>(plan_.inputs.size()); ++i) {
    if (pointer_[i] >= 0) {
      mov(kPointerRegs[pointer_[i]], ptr[reg_input_array + i * 8]);
      continue;
    }
    const Ymm v(reg_[i]);
    mov(reg_idx, ptr[reg_input_array + i * 8]);
    if (plan_.inputs[i].dtype == ir::DType::kBF16) {
      movzx(eax, word[reg_idx]);
      shl(eax, 16);
      vmovd(Xbyak::Xmm(v.getIdx()), eax);
      vbroadcastss(v, Xbyak::Xmm(v.getIdx()));
    } else {
      vbroadcastss(v, dword[reg_idx]);
    }
  }
  Xbyak::Label loop, done;
  xor_(reg_idx, reg_idx);
  test(reg_blocks, reg_blocks);
  jz(done, T_NEAR);
  L(loop);
  EmitBody();
  add(reg_idx, kLanes);
  dec(reg_blocks);
  jnz(loop, T_NEAR);
  L(done);
}

void ElementwiseKernelAvx2::EmitBody() {
  const int num_inputs = static_cast<int>(plan_.inputs.size());
  std::vector<bool> loaded(num_inputs, false);
  auto ensure_loaded = [&](int v) {
    if (v < 0 || v >= num_inputs || plan_.inputs[v].scalar || loaded[v]) return;
    EmitLoad(v, Ymm(reg_[v]));
    loaded[v] = true;
  };
  for (int s = 0; s < static_cast<int>(plan_.steps.size()); ++s) {
    const auto& step = plan_.steps[s];
    ensure_loaded(step.a);
    ensure_loaded(step.b);
    EmitStep(step, Ymm(reg_[num_inputs + s]));
  }
  ensure_loaded(plan_.result);
  EmitStore(Ymm(reg_[plan_.result]));
}

void ElementwiseKernelAvx2::EmitLoad(int input, const Ymm& dst) {
  const Xbyak::Reg64& base = kPointerRegs[pointer_[input]];
  if (plan_.inputs[input].dtype == ir::DType::kBF16) {
    vpmovzxwd(dst, ptr[base + reg_idx * 2]);
    vpslld(dst, dst, 16);
  } else {
    vmovups(dst, ptr[base + reg_idx * 4]);
  }
}

void ElementwiseKernelAvx2::EmitStore(const Ymm& src) {
  if (plan_.result_dtype == ir::DType::kBF16) {
    // Lanes hold rounded bf16 values widened to f32: keep the high halves, pack to 16 bits.
    vpsrld(tmp0_, src, 16);
    vextracti128(Xbyak::Xmm(tmp1_.getIdx()), tmp0_, 1);
    vpackusdw(Xbyak::Xmm(tmp0_.getIdx()), Xbyak::Xmm(tmp0_.getIdx()),
              Xbyak::Xmm(tmp1_.getIdx()));
    vmovdqu(ptr[reg_out + reg_idx * 2], Xbyak::Xmm(tmp0_.getIdx()));
  } else {
    vmovups(ptr[reg_out + reg_idx * 4], src);
  }
}

void ElementwiseKernelAvx2::EmitRoundToBf16(const Ymm& v) {
  vpsrld(tmp0_, v, 16);
  vpand(tmp0_, tmp0_, ptr[rip + constants_ + kOnes]);
  vpaddd(tmp0_, tmp0_, ptr[rip + constants_ + kRoundBias]);
  vpaddd(tmp0_, tmp0_, v);                      // rounded, for non-NaN lanes
  vcmpunordps(tmp1_, v, v);                     // NaN lanes
  vpor(v, v, ptr[rip + constants_ + kQuietNan]);  // quieted NaN (as bf16(float) does)
  vblendvps(v, tmp0_, v, tmp1_);
  vpand(v, v, ptr[rip + constants_ + kHighHalf]);
}

void ElementwiseKernelAvx2::EmitStep(const ElementwisePlan::Step& step, const Ymm& dst) {
  const Ymm a(reg_[step.a]);
  const Ymm b(step.b >= 0 ? reg_[step.b] : 0);
  switch (step.op) {
    case EwOp::kAdd:
      vaddps(dst, a, b);
      break;
    case EwOp::kSub:
      vsubps(dst, a, b);
      break;
    case EwOp::kMul:
      vmulps(dst, a, b);
      break;
    case EwOp::kDiv:
      vdivps(dst, a, b);
      break;
    case EwOp::kMax:
    case EwOp::kMin:
      // vmaxps/vminps return b when either is NaN; the reference returns a NaN a first.
      if (step.op == EwOp::kMax) {
        vmaxps(tmp0_, a, b);
      } else {
        vminps(tmp0_, a, b);
      }
      vcmpunordps(tmp1_, a, a);
      vblendvps(dst, tmp0_, a, tmp1_);
      break;
    case EwOp::kNeg:
      vxorps(dst, a, ptr[rip + constants_ + kSignBit]);
      break;
    case EwOp::kAbs:
      vandps(dst, a, ptr[rip + constants_ + kAbsMask]);
      break;
    case EwOp::kSqrt:
      vsqrtps(dst, a);
      break;
    case EwOp::kRsqrt:
      vsqrtps(tmp0_, a);
      vmovups(tmp1_, ptr[rip + constants_ + kOneF]);
      vdivps(dst, tmp1_, tmp0_);
      break;
    case EwOp::kCopy:
      if (dst.getIdx() != a.getIdx()) vmovaps(dst, a);
      break;
  }
  if (step.dtype == ir::DType::kBF16) EmitRoundToBf16(dst);
}

void ElementwiseKernelAvx2::Run(const std::vector<const void*>& inputs, void* out,
                                int64_t n) const {
  using Fn = void (*)(const ElementwiseArgs*);
  const Fn fn = reinterpret_cast<Fn>(const_cast<void*>(code()));
  const int64_t blocks = n / kLanes;
  if (blocks > 0) {
    ElementwiseArgs args{inputs.data(), out, blocks};
    fn(&args);
  }
  const int64_t tail = n - blocks * kLanes;
  if (tail == 0) return;
  // The tail: the same code on one zero-padded block.
  alignas(32) unsigned char padded[kMaxVectorInputs + 1][kLanes * 4] = {};
  std::vector<const void*> tail_inputs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (pointer_[i] < 0) {
      tail_inputs[i] = inputs[i];
      continue;
    }
    const size_t size = ElementSize(plan_.inputs[i].dtype);
    std::memcpy(padded[pointer_[i]], static_cast<const unsigned char*>(inputs[i]) + blocks * kLanes * size,
                tail * size);
    tail_inputs[i] = padded[pointer_[i]];
  }
  ElementwiseArgs args{tail_inputs.data(), padded[kMaxVectorInputs], 1};
  fn(&args);
  const size_t out_size = ElementSize(plan_.result_dtype);
  std::memcpy(static_cast<unsigned char*>(out) + blocks * kLanes * out_size,
              padded[kMaxVectorInputs], tail * out_size);
}

}  // namespace shardjit::backends::x86
