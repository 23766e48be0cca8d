// Writes generated elementwise kernels, AVX-512 and AVX2, with operands and the reference results,
// for run_kernels.py to execute in an AVX-512 emulator: the fusion bodies of
// elementwise_test_cases.h over the test lengths, ReduceBuffers' plans (also in place) and sweeps
// of the transcendentals over the f32 bit patterns. Every array ends where its guest data region
// ends, before an unmapped page, and the output follows 64 canary bytes, so any access past
// either end of an array fails the case.
//   bazel run //backends/x86/emulation:dump_elementwise -- /tmp/elementwise_cases
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/reference/kernel.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/elementwise_kernel.h"
#include "backends/x86/elementwise_plan.h"
#include "backends/x86/elementwise_test_cases.h"
#include "backends/x86/elementwise_test_util.h"
#include "backends/x86/emulation/case_writer.h"
#include "fmt/format.h"
#include "ir/dtype.h"
#include "ir/fmt_absl.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using emulation::Bytes;
using emulation::kGuestArgs;
using emulation::kGuestData;
using emulation::kGuestDataBytes;
using ir::DType;
using ir::Tensor;

constexpr int kCanaryBytes = 64;
constexpr int kOutputRegion = 7;  // inputs use the regions before it

// One call of `kernel` on `operands`, expecting `want` (within max_ulp; any NaN for a NaN in the
// lanes marked in open_nan); `alias`: the operand whose memory the output reuses, or -1.
emulation::Case KernelCase(const ElementwiseKernel& kernel, const std::string& description,
                           const std::vector<Tensor>& operands, const Tensor& want, int max_ulp,
                           const std::vector<bool>& open_nan, int alias = -1) {
  emulation::Case c;
  c.description =
      fmt::format("{} {} n={}", IsaName(kernel.isa()), description, want.num_elements());
  c.code = Bytes(kernel.code(), kernel.code_size());
  std::vector<uint64_t> pointers;
  for (size_t i = 0; i < operands.size(); ++i) {
    const uint64_t address = kGuestData[i] + kGuestDataBytes - operands[i].byte_size();
    c.writes.push_back({address, Bytes(operands[i].data(), operands[i].byte_size())});
    pointers.push_back(address);
  }
  uint64_t output = kGuestData[kOutputRegion] + kGuestDataBytes - want.byte_size();
  if (alias >= 0) {
    output = pointers[alias];
  } else {
    std::vector<uint8_t> before(kCanaryBytes + want.byte_size(), 0x5a);
    std::fill(before.begin(), before.begin() + kCanaryBytes, 0xa5);
    c.writes.push_back({output - kCanaryBytes, before});
    c.checks.push_back({output - kCanaryBytes, std::vector<uint8_t>(kCanaryBytes, 0xa5)});
  }
  emulation::Case::Check check;
  check.address = output;
  check.want = Bytes(want.data(), want.byte_size());
  // run_kernels.py compares pred bytes as u8.
  check.dtype = want.dtype() == DType::kPred ? "u8" : std::string(ir::DTypeName(want.dtype()));
  check.max_ulp = max_ulp;
  for (bool open : open_nan) check.open_nan.push_back(open ? 1 : 0);
  c.checks.push_back(check);
  // The arguments and the out-of-range flag (which must stay 0), then the input pointers.
  constexpr uint64_t kFlag = 56;
  std::vector<uint8_t> args(64 + 8 * pointers.size());
  const ElementwiseArgs call{reinterpret_cast<const void* const*>(kGuestArgs + 64),
                             reinterpret_cast<void*>(output), want.num_elements(),
                             reinterpret_cast<int32_t*>(kGuestArgs + kFlag)};
  static_assert(sizeof(call) <= kFlag);
  std::memcpy(args.data(), &call, sizeof(call));
  std::memcpy(args.data() + 64, pointers.data(), 8 * pointers.size());
  c.writes.push_back({kGuestArgs, args});
  c.checks.push_back({kGuestArgs + kFlag, std::vector<uint8_t>(4, 0)});
  return c;
}

std::unique_ptr<ElementwiseKernel> Generate(const ElementwisePlan& plan, IsaLevel isa) {
  std::unique_ptr<ElementwiseKernel> kernel = NewElementwiseKernel(plan, isa);
  absl::Status status = kernel->status();
  if (status.ok()) status = kernel->Create();
  if (!status.ok()) {
    std::fprintf(stderr, "generation failed: %s: %s\n", plan.Key().c_str(),
                 std::string(status.message()).c_str());
    return nullptr;
  }
  return kernel;
}

bool DumpFusions(IsaLevel isa, emulation::CaseWriter& writer) {
  const reference::Kernel* oracle = reference::FindKernel("fusion");
  std::vector<FusionCase> cases = OpCases();
  for (FusionCase& c : BodyCases()) cases.push_back(std::move(c));
  for (const FusionCase& c : cases) {
    if (!c.generated) continue;
    std::unique_ptr<ElementwiseKernel> kernel;
    for (int64_t n : kLengths) {
      ir::Op op = FusionOp(c.params, c.fusion, n);
      absl::StatusOr<ElementwisePlan> plan = PlanFusionBody(op.fusion().body());
      if (!plan.ok()) return false;
      if (kernel == nullptr && (kernel = Generate(*plan, isa)) == nullptr) return false;
      const std::vector<Tensor> operands = RandomOperands(op, static_cast<uint32_t>(n));
      const Tensor want = (*(*oracle)(op, operands, nullptr))[0];
      const int max_ulp = c.max_ulp > 0 && want.dtype() == DType::kBF16 ? 1 : c.max_ulp;
      if (!writer.Add(KernelCase(*kernel, c.name, operands, want, max_ulp,
                                 OpenNanLanes(c.nans, operands, n)))) {
        return false;
      }
    }
  }
  return true;
}

bool DumpReductions(IsaLevel isa, emulation::CaseWriter& writer) {
  const std::pair<EwOp, const char*> kOps[] = {
      {EwOp::kAdd, "add"}, {EwOp::kMax, "max"}, {EwOp::kMin, "min"}};
  for (const auto& [ew, opcode] : kOps) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      std::unique_ptr<ElementwiseKernel> kernel = Generate(BinaryPlan(ew, dtype), isa);
      if (kernel == nullptr) return false;
      for (int64_t n : kLengths) {
        const std::vector<Tensor> operands = {RandomTensor({dtype, {n}}, 7),
                                              RandomTensor({dtype, {n}}, 8)};
        ir::Op op;
        op.set_opcode(opcode);
        *op.add_result_types() = ir::ToProto(operands[0].type());
        const Tensor want = (*(*reference::FindKernel(opcode))(op, operands, nullptr))[0];
        const std::vector<bool> open_nan = OpenNanLanes(
            ew == EwOp::kAdd ? NanRule::kOpenWhereTwoNans : NanRule::kExact, operands, n);
        const std::string name = fmt::format("reduce_{}_{}", opcode, ir::DTypeName(dtype));
        if (!writer.Add(KernelCase(*kernel, name, operands, want, 0, open_nan)) ||
            !writer.Add(KernelCase(*kernel, name + "_in_place", operands, want, 0, open_nan,
                                   /*alias=*/1))) {
          return false;
        }
      }
    }
  }
  return true;
}

bool DumpTranscendentals(IsaLevel isa, emulation::CaseWriter& writer) {
  struct Function {
    EwOp op;
    const char* name;
    float (*f)(float);
    int max_ulp;
    float max_argument = INFINITY;  // larger finite inputs are left out of the sweep
  };
  const Function kFunctions[] = {
      {EwOp::kExp, "exp", [](float x) { return std::exp(x); }, kExpMaxUlp},
      {EwOp::kLog, "log", [](float x) { return std::log(x); }, kLogMaxUlp},
      {EwOp::kTanh, "tanh", [](float x) { return std::tanh(x); }, kTanhMaxUlp},
      {EwOp::kLogistic, "logistic", [](float x) { return 1.0f / (1.0f + std::exp(-x)); },
       kLogisticMaxUlp},
      {EwOp::kErf, "erf", [](float x) { return std::erf(x); }, kErfMaxUlp},
      {EwOp::kSin, "sin", [](float x) { return std::sin(x); }, kSinMaxUlp, kSinCosMaxArgument},
      {EwOp::kCos, "cos", [](float x) { return std::cos(x); }, kCosMaxUlp, kSinCosMaxArgument},
      {EwOp::kFloor, "floor", [](float x) { return std::floor(x); }, 0},
      {EwOp::kCeil, "ceil", [](float x) { return std::ceil(x); }, 0},
      {EwOp::kRoundAway, "round_away", [](float x) { return std::round(x); }, 0},
      {EwOp::kRoundEven, "round_even", [](float x) { return std::nearbyint(x); }, 0},
      {EwOp::kSign, "sign",
       [](float x) { return std::isnan(x) || x == 0 ? x : std::copysign(1.0f, x); }, 0}};
  // f32 bit patterns spread over the whole range, leaving room for the canary.
  constexpr int64_t kCount = kGuestDataBytes / 4 - 1024;
  constexpr uint64_t kStride = (uint64_t{1} << 32) / kCount + 1;
  for (const Function& f : kFunctions) {
    ElementwisePlan plan;
    plan.inputs = {{DType::kF32, false}};
    plan.steps = {{f.op, 0, -1, -1, DType::kF32}};
    plan.result = 1;
    plan.result_dtype = DType::kF32;
    std::unique_ptr<ElementwiseKernel> kernel = Generate(plan, isa);
    if (kernel == nullptr) return false;
    Tensor x = Tensor::Empty({DType::kF32, {kCount}}), want = Tensor::Empty(x.type());
    for (int64_t i = 0; i < kCount; ++i) {
      const uint32_t bits = static_cast<uint32_t>(i * kStride);
      std::memcpy(x.data_as<float>() + i, &bits, 4);
      float& v = x.data_as<float>()[i];
      if (std::isfinite(v) && std::fabs(v) > f.max_argument) v = std::fmod(v, f.max_argument);
      want.data_as<float>()[i] = f.f(x.data_as<float>()[i]);
    }
    if (!writer.Add(
            KernelCase(*kernel, fmt::format("{}_sweep", f.name), {x}, want, f.max_ulp, {}))) {
      return false;
    }
  }
  return true;
}

bool DumpAll(emulation::CaseWriter& writer) {
  for (IsaLevel isa : {IsaLevel::kAvx512, IsaLevel::kAvx2}) {
    if (!DumpFusions(isa, writer) || !DumpReductions(isa, writer) ||
        !DumpTranscendentals(isa, writer)) {
      std::fprintf(stderr, "dumping the %s cases failed\n", std::string(IsaName(isa)).c_str());
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace shardjit::backends::x86

int main(int argc, char** argv) {
  return shardjit::backends::x86::emulation::DumpMain(argc, argv, "dump_elementwise",
                                                      shardjit::backends::x86::DumpAll);
}
