#include "backends/x86/elementwise_plan.h"

#include <optional>
#include <unordered_map>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

bool Vectorisable(ir::DType d) { return d == ir::DType::kF32 || d == ir::DType::kBF16; }

std::optional<EwOp> OpOf(const std::string& opcode) {
  static const auto* kOps = new std::unordered_map<std::string, EwOp>{
      {"add", EwOp::kAdd},   {"sub", EwOp::kSub},   {"mul", EwOp::kMul},
      {"div", EwOp::kDiv},   {"max", EwOp::kMax},   {"min", EwOp::kMin},
      {"neg", EwOp::kNeg},   {"abs", EwOp::kAbs},   {"sqrt", EwOp::kSqrt},
      {"rsqrt", EwOp::kRsqrt}, {"convert_element_type", EwOp::kCopy},
      {"broadcast_in_dim", EwOp::kCopy}};
  auto it = kOps->find(opcode);
  if (it == kOps->end()) return std::nullopt;
  return it->second;
}

absl::Status Declined(const std::string& what) {
  return absl::UnimplementedError(fmt::format("elementwise kernel: {}", what));
}

}  // namespace

std::string ElementwisePlan::Key() const {
  std::string key;
  for (const Input& in : inputs) {
    key += fmt::format("{}{} ", ir::DTypeName(in.dtype), in.scalar ? "[]" : "[n]");
  }
  key += "|";
  for (const Step& s : steps) {
    key += fmt::format("{}:{},{}:{} ", static_cast<int>(s.op), s.a, s.b, ir::DTypeName(s.dtype));
  }
  return key + fmt::format("| {}:{}", result, ir::DTypeName(result_dtype));
}

absl::StatusOr<ElementwisePlan> PlanFusionBody(const ir::Region& body) {
  ElementwisePlan plan;
  std::unordered_map<int64_t, int> value_of;
  for (const ir::Param& p : body.params()) {
    ir::ShapedType t = ir::FromProto(p.type());
    if (!Vectorisable(t.dtype)) {
      return Declined(fmt::format("operand dtype {} is not f32 or bf16", ir::DTypeName(t.dtype)));
    }
    value_of[p.id()] = static_cast<int>(plan.inputs.size());
    plan.inputs.push_back({t.dtype, t.rank() == 0});
  }
  for (const ir::Op& op : body.ops()) {
    std::optional<EwOp> ew = OpOf(op.opcode());
    if (!ew) return Declined(fmt::format("{} is not supported", op.opcode()));
    if (op.results_size() != 1) return Declined(fmt::format("{} has several results", op.opcode()));
    ir::DType dtype = ir::FromProto(op.result_types(0)).dtype;
    if (!Vectorisable(dtype)) {
      return Declined(fmt::format("{} produces {}", op.opcode(), ir::DTypeName(dtype)));
    }
    ElementwisePlan::Step step{*ew, -1, -1, dtype};
    for (int i = 0; i < op.operands_size(); ++i) {
      auto it = value_of.find(op.operands(i));
      if (it == value_of.end()) return Declined(fmt::format("{} reads an unknown value", op.opcode()));
      (i == 0 ? step.a : step.b) = it->second;
    }
    if (step.a < 0 || op.operands_size() > 2) {
      return Declined(fmt::format("{} has {} operands", op.opcode(), op.operands_size()));
    }
    value_of[op.results(0)] = plan.num_values();
    plan.steps.push_back(step);
  }
  if (body.results_size() != 1 || !value_of.count(body.results(0))) {
    return Declined("the body must return one value");
  }
  plan.result = value_of[body.results(0)];
  plan.result_dtype = plan.result < static_cast<int>(plan.inputs.size())
                          ? plan.inputs[plan.result].dtype
                          : plan.steps[plan.result - plan.inputs.size()].dtype;
  if (plan.result < static_cast<int>(plan.inputs.size()) && plan.inputs[plan.result].scalar) {
    return Declined("the body returns a scalar operand");
  }
  return plan;
}

ElementwisePlan BinaryPlan(EwOp op, ir::DType dtype) {
  ElementwisePlan plan;
  plan.inputs = {{dtype, false}, {dtype, false}};
  plan.steps = {{op, 0, 1, dtype}};
  plan.result = 2;
  plan.result_dtype = dtype;
  return plan;
}

}  // namespace shardjit::backends::x86
