// The loop of the elementwise generator: setup, the main loop over whole vectors, the masked tail,
// loads, stores and the constant pool.
#include "backends/x86/elementwise_kernel.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "backends/x86/elementwise_emitter.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"

namespace shardjit::backends::x86 {
namespace {

std::string KernelName(const ElementwisePlan& plan, IsaLevel isa) {
  return fmt::format("elementwise_{}_{}in_{}ops", IsaName(isa), plan.inputs.size(),
                     plan.steps.size());
}

int ElementBytes(ir::DType dtype) { return static_cast<int>(ir::DTypeSize(dtype)); }

}  // namespace

ElementwiseKernel::ElementwiseKernel(ElementwisePlan plan, IsaLevel isa)
    : JitGenerator(KernelName(plan, isa)), plan_(std::move(plan)), isa_(isa) {}

bool ElementwiseKernel::Run(const std::vector<const void*>& inputs, void* out, int64_t n) const {
  using Fn = void (*)(const ElementwiseArgs*);
  int32_t out_of_range = 0;
  const ElementwiseArgs args{inputs.data(), out, n, &out_of_range};
  reinterpret_cast<Fn>(const_cast<void*>(code()))(&args);
  return out_of_range == 0;
}

std::unique_ptr<ElementwiseKernel> NewElementwiseKernel(ElementwisePlan plan, IsaLevel isa) {
  if (isa >= IsaLevel::kAvx512) {
    return std::make_unique<ElementwiseEmitter<Xbyak::Zmm>>(std::move(plan));
  }
  return std::make_unique<ElementwiseEmitter<Xbyak::Ymm>>(std::move(plan));
}

template <typename Vmm>
ElementwiseEmitter<Vmm>::ElementwiseEmitter(ElementwisePlan plan)
    : ElementwiseKernel(std::move(plan), kAvx512 ? IsaLevel::kAvx512 : IsaLevel::kAvx2) {
  temps_ = 2;  // loads and stores
  for (const ElementwisePlan::Step& step : plan_.steps) {
    const Scratch s = ScratchFor(plan_, step);
    temps_ = std::max(temps_, s.vectors);
    temp_masks_ = std::max(temp_masks_, s.masks);
  }
  pointer_.assign(plan_.inputs.size(), -1);
  int pointers = 0;
  for (size_t i = 0; i < plan_.inputs.size(); ++i) {
    if (plan_.inputs[i].scalar) continue;
    if (pointers == kMaxVectorInputs) {
      status_ = absl::UnimplementedError(
          fmt::format("elementwise kernel: more than {} non-scalar operands", kMaxVectorInputs));
      return;
    }
    pointer_[i] = pointers++;
  }
  const int value_regs = kNumRegs - temps_ - (kAvx512 ? 0 : temp_masks_);
  absl::StatusOr<std::vector<int>> regs = AssignRegisters(plan_, value_regs);
  if (!regs.ok()) {
    status_ = regs.status();
    return;
  }
  reg_ = *std::move(regs);
}

template <typename Vmm>
Vmm ElementwiseEmitter<Vmm>::Temp(int i) const {
  return Vmm(kNumRegs - 1 - i);
}

template <typename Vmm>
typename ElementwiseEmitter<Vmm>::Mask ElementwiseEmitter<Vmm>::TempMask(int i) const {
  if constexpr (kAvx512) {
    return Mask(2 + i);  // k1 is the tail mask
  } else {
    return Mask(kNumRegs - 1 - temps_ - i);
  }
}

template <typename Vmm>
Xbyak::Address ElementwiseEmitter<Vmm>::InputAt(int input) const {
  const int bytes = ElementBytes(plan_.inputs[input].dtype);
  return ptr[kPointerRegs[pointer_[input]] + reg_idx * bytes];
}

template <typename Vmm>
Xbyak::Address ElementwiseEmitter<Vmm>::OutputAt() const {
  return ptr[reg_out + reg_idx * ElementBytes(plan_.result_dtype)];
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::GenerateBody() {
  sub(rsp, kFrameBytes);
  EmitSetup();
  Xbyak::Label loop, tail, done;
  xor_(reg_idx, reg_idx);
  mov(reg_count, ptr[rsp + kCountSlot]);
  shr(reg_count, kAvx512 ? 4 : 3);
  jz(tail, T_NEAR);
  L(loop);
  EmitBody(/*tail=*/false);
  add(reg_idx, kLanes);
  dec(reg_count);
  jnz(loop, T_NEAR);
  L(tail);
  mov(reg_count, ptr[rsp + kCountSlot]);
  and_(reg_count, kLanes - 1);
  jz(done, T_NEAR);
  EmitTailSetup();
  EmitBody(/*tail=*/true);
  EmitTailOutput();
  L(done);
  add(rsp, kFrameBytes);
  EmitConstantPool();
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitSetup() {
  mov(reg_tmp, ptr[reg_args + offsetof(ElementwiseArgs, inputs)]);
  mov(reg_out, ptr[reg_args + offsetof(ElementwiseArgs, output)]);
  mov(reg_idx, ptr[reg_args + offsetof(ElementwiseArgs, out_of_range)]);
  mov(ptr[rsp + kFlagSlot], reg_idx);
  mov(reg_idx, ptr[reg_args + offsetof(ElementwiseArgs, n)]);
  mov(ptr[rsp + kCountSlot], reg_idx);
  const Xbyak::Reg32 value = reg_idx.cvt32();
  for (int i = 0; i < static_cast<int>(plan_.inputs.size()); ++i) {
    if (pointer_[i] >= 0) {
      mov(kPointerRegs[pointer_[i]], ptr[reg_tmp + i * 8]);
      continue;
    }
    mov(reg_idx, ptr[reg_tmp + i * 8]);
    switch (ElementBytes(plan_.inputs[i].dtype)) {
      case 4:
        mov(value, dword[reg_idx]);
        break;
      case 2:
        movzx(value, word[reg_idx]);
        shl(value, 16);
        break;
      default:
        movzx(value, byte[reg_idx]);
        break;
    }
    const Xbyak::Xmm x(reg_[i]);
    vmovd(x, value);
    vpbroadcastd(Value(i), x);
  }
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitBody(bool tail) {
  const int num_inputs = static_cast<int>(plan_.inputs.size());
  std::vector<bool> loaded(num_inputs, false);
  auto ensure_loaded = [&](int v) {
    if (v < 0 || v >= num_inputs || plan_.inputs[v].scalar || loaded[v]) return;
    EmitLoad(v, tail);
    loaded[v] = true;
  };
  for (int s = 0; s < static_cast<int>(plan_.steps.size()); ++s) {
    const ElementwisePlan::Step& step = plan_.steps[s];
    for (int v : {step.a, step.b, step.c}) ensure_loaded(v);
    EmitStep(step, Value(num_inputs + s));
  }
  ensure_loaded(plan_.result);
  EmitStore(Value(plan_.result), tail);
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitTailSetup() {
  if constexpr (kAvx512) {
    const Xbyak::Reg32 bits = reg_tmp.cvt32();
    mov(bits, 1);
    shl(bits, cl);  // cl: the tail's elements
    dec(bits);
    kmovw(kTailMask, bits);
  } else {
    std::vector<uint32_t> iota(kLanes);
    for (int i = 0; i < kLanes; ++i) iota[i] = i;
    const Xbyak::Xmm x(Temp(0).getIdx());
    vmovd(x, reg_count.cvt32());
    vpbroadcastd(Temp(0), x);
    vpcmpgtd(Temp(0), Temp(0), ConstantVector(iota));
    vmovups(ptr[rsp + kMaskSlot], Temp(0));
    // The lanes past the tail read zeros (as the masked loads give), never stale stack bytes.
    vpxor(x, x, x);
    for (int i = 0; i < static_cast<int>(plan_.inputs.size()); ++i) {
      const int bytes = ElementBytes(plan_.inputs[i].dtype);
      if (pointer_[i] < 0 || bytes == 4) continue;
      vmovdqu(ptr[rsp + kBounceSlot + pointer_[i] * kBounceBytes], x);
      EmitCopyTail(ptr[rsp + kBounceSlot + pointer_[i] * kBounceBytes], InputAt(i), bytes);
    }
  }
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitTailOutput() {
  const int bytes = ElementBytes(plan_.result_dtype);
  if (kAvx512 || bytes == 4) return;
  EmitCopyTail(OutputAt(), ptr[rsp + kBounceSlot + kMaxVectorInputs * kBounceBytes], bytes);
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitCopyTail(const Xbyak::Address& dst, const Xbyak::Address& src,
                                           int element_bytes) {
  lea(rdi, dst);
  lea(rsi, src);
  mov(rcx, ptr[rsp + kCountSlot]);
  and_(rcx, kLanes - 1);
  if (element_bytes == 2) add(rcx, rcx);
  rep();
  movsb();
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitLoad(int input, bool tail) {
  const Vmm dst = Value(input);
  const ir::DType dtype = plan_.inputs[input].dtype;
  const int bytes = ElementBytes(dtype);
  if (bytes == 4) {
    if (!tail) {
      vmovups(dst, InputAt(input));
    } else if constexpr (kAvx512) {
      vmovups(dst | kTailMask | T_z, InputAt(input));
    } else {
      vmovups(Temp(0), ptr[rsp + kMaskSlot]);
      if (dtype == ir::DType::kF32) {
        vmaskmovps(dst, Temp(0), InputAt(input));
      } else {
        vpmaskmovd(dst, Temp(0), InputAt(input));
      }
    }
    return;
  }
  const Xbyak::Ymm half(dst.getIdx());
  const Xbyak::Xmm quarter(dst.getIdx());
  if (!tail) {
    if (bytes == 2) {
      vpmovzxwd(dst, InputAt(input));
    } else {
      vpmovzxbd(dst, InputAt(input));
    }
  } else if constexpr (kAvx512) {
    if (bytes == 2) {
      vmovdqu16(half | kTailMask | T_z, InputAt(input));
      vpmovzxwd(dst, half);
    } else {
      vmovdqu8(quarter | kTailMask | T_z, InputAt(input));
      vpmovzxbd(dst, quarter);
    }
  } else {
    const Xbyak::Address bounce = ptr[rsp + kBounceSlot + pointer_[input] * kBounceBytes];
    if (bytes == 2) {
      vpmovzxwd(dst, bounce);
    } else {
      vpmovzxbd(dst, bounce);
    }
  }
  if (bytes == 2) vpslld(dst, dst, 16);
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitStore(const Vmm& src, bool tail) {
  const ir::DType dtype = plan_.result_dtype;
  const int bytes = ElementBytes(dtype);
  if (bytes == 4) {
    if (!tail) {
      vmovups(OutputAt(), src);
    } else if constexpr (kAvx512) {
      vmovups(OutputAt() | kTailMask, src);
    } else {
      vmovups(Temp(0), ptr[rsp + kMaskSlot]);
      if (dtype == ir::DType::kF32) {
        vmaskmovps(OutputAt(), Temp(0), src);
      } else {
        vpmaskmovd(OutputAt(), Temp(0), src);
      }
    }
    return;
  }
  const Xbyak::Xmm t0(Temp(0).getIdx()), t1(Temp(1).getIdx());
  if constexpr (kAvx512) {
    // Down-convert the 32-bit lanes (bf16 in their high halves, pred 0/1) and store.
    const Xbyak::Address dst = tail ? OutputAt() | kTailMask : OutputAt();
    if (bytes == 2) {
      vpsrld(Temp(0), src, 16);
      vpmovdw(Xbyak::Ymm(t0.getIdx()), Temp(0));
      vmovdqu16(dst, Xbyak::Ymm(t0.getIdx()));
    } else {
      vpmovdb(t0, src);
      vmovdqu8(dst, t0);
    }
  } else {
    const Xbyak::Address dst =
        tail ? ptr[rsp + kBounceSlot + kMaxVectorInputs * kBounceBytes] : OutputAt();
    if (bytes == 2) {
      vpsrld(Temp(0), src, 16);
      vextracti128(t1, Temp(0), 1);
      vpackusdw(t0, t0, t1);
      vmovdqu(dst, t0);
    } else {
      vextracti128(t1, src, 1);
      vpackusdw(t0, Xbyak::Xmm(src.getIdx()), t1);
      vpackuswb(t0, t0, t0);
      vmovq(dst, t0);
    }
  }
}

template <typename Vmm>
Xbyak::Address ElementwiseEmitter<Vmm>::ConstantVector(const std::vector<uint32_t>& lanes) {
  auto [it, inserted] = constant_index_.emplace(lanes, static_cast<int>(constants_.size()));
  if (inserted) constants_.push_back(lanes);
  return ptr[rip + pool_ + it->second * kVectorBytes];
}

template <typename Vmm>
Xbyak::Address ElementwiseEmitter<Vmm>::Constant(uint32_t bits) {
  return ConstantVector(std::vector<uint32_t>(kLanes, bits));
}

template <typename Vmm>
Xbyak::Address ElementwiseEmitter<Vmm>::ConstantF(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return Constant(bits);
}

template <typename Vmm>
void ElementwiseEmitter<Vmm>::EmitConstantPool() {
  Xbyak::Label end;
  jmp(end, T_NEAR);
  align(64);
  L(pool_);
  for (const std::vector<uint32_t>& lanes : constants_) {
    for (uint32_t word : lanes) dd(word);
  }
  L(end);
}

template class ElementwiseEmitter<Xbyak::Ymm>;
template class ElementwiseEmitter<Xbyak::Zmm>;

}  // namespace shardjit::backends::x86
