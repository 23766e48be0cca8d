#include "backends/x86/elementwise_plan.h"

#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/broadcast_rows.h"
#include "ir/fmt_absl.h"
#include "ir/prim.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using ir::DType;

std::optional<EwOp> OpOf(ir::Prim prim) {
  switch (prim) {
    case ir::Prim::kAdd:
      return EwOp::kAdd;
    case ir::Prim::kSub:
      return EwOp::kSub;
    case ir::Prim::kMul:
      return EwOp::kMul;
    case ir::Prim::kDiv:
      return EwOp::kDiv;
    case ir::Prim::kMax:
      return EwOp::kMax;
    case ir::Prim::kMin:
      return EwOp::kMin;
    case ir::Prim::kNeg:
      return EwOp::kNeg;
    case ir::Prim::kAbs:
      return EwOp::kAbs;
    case ir::Prim::kSqrt:
      return EwOp::kSqrt;
    case ir::Prim::kRsqrt:
      return EwOp::kRsqrt;
    case ir::Prim::kFloor:
      return EwOp::kFloor;
    case ir::Prim::kCeil:
      return EwOp::kCeil;
    case ir::Prim::kRound:
      return EwOp::kRoundAway;  // kRoundEven by the op's rounding_method
    case ir::Prim::kSign:
      return EwOp::kSign;
    case ir::Prim::kExp:
      return EwOp::kExp;
    case ir::Prim::kLog:
      return EwOp::kLog;
    case ir::Prim::kTanh:
      return EwOp::kTanh;
    case ir::Prim::kLogistic:
      return EwOp::kLogistic;
    case ir::Prim::kErf:
      return EwOp::kErf;
    case ir::Prim::kSin:
      return EwOp::kSin;
    case ir::Prim::kCos:
      return EwOp::kCos;
    case ir::Prim::kCompare:
      return EwOp::kCompare;
    case ir::Prim::kSelect:
      return EwOp::kSelect;
    case ir::Prim::kConvertElementType:
      return EwOp::kConvert;
    case ir::Prim::kBroadcastInDim:
      return EwOp::kCopy;
    default:
      return std::nullopt;
  }
}

bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kBF16; }

// The dtypes the generators load, compute and store.
bool Emitted(DType d) { return IsFloat(d) || d == DType::kS32 || d == DType::kPred; }

// Whether the generators emit `op` on operands of `dtype` (select: of its value operands).
bool Supports(EwOp op, DType dtype) {
  if (!Emitted(dtype)) return false;
  switch (op) {
    case EwOp::kAdd:
    case EwOp::kSub:
    case EwOp::kMul:
    case EwOp::kMax:
    case EwOp::kMin:
    case EwOp::kNeg:
    case EwOp::kAbs:
      return IsFloat(dtype) || dtype == DType::kS32;
    case EwOp::kDiv:  // s32 division has no vector instruction
    case EwOp::kSqrt:
    case EwOp::kRsqrt:
    case EwOp::kFloor:
    case EwOp::kCeil:
    case EwOp::kRoundAway:
    case EwOp::kRoundEven:
    case EwOp::kSign:  // s32 sign is left to the reference kernel
    case EwOp::kExp:
    case EwOp::kLog:
    case EwOp::kTanh:
    case EwOp::kLogistic:
    case EwOp::kErf:
    case EwOp::kSin:
    case EwOp::kCos:
      return IsFloat(dtype);
    case EwOp::kCompare:
    case EwOp::kSelect:
    case EwOp::kConvert:
    case EwOp::kCopy:
      return dtype != DType::kInvalid;
  }
  return false;
}

absl::Status Declined(const std::string& what) {
  return absl::UnimplementedError(fmt::format("elementwise kernel: {}", what));
}

}  // namespace

ir::DType ElementwisePlan::dtype(int value) const {
  const int num_inputs = static_cast<int>(inputs.size());
  return value < num_inputs ? inputs[value].dtype : steps[value - num_inputs].dtype;
}

std::string ElementwisePlan::Key() const {
  std::string key;
  for (const Input& in : inputs) {
    key += fmt::format("{}{} ", ir::DTypeName(in.dtype), in.scalar ? "[]" : "[n]");
  }
  key += "|";
  for (const Step& s : steps) {
    key += fmt::format("{}:{},{},{}:{}:{} ", static_cast<int>(s.op), s.a, s.b, s.c,
                       ir::DTypeName(s.dtype), static_cast<int>(s.direction));
  }
  return key + fmt::format("| {}:{}", result, ir::DTypeName(result_dtype));
}

namespace {

// How broadcast_in_dim `op` reads its operand, input `input` of `plan`: sets that input's scalar
// and rows fields (`planned`: already set by another broadcast, which must agree) and merges the
// split into rows it needs into *split (-1 while any will do).
absl::Status PlanBroadcastInput(const ir::Op& op, const ir::Region& body, int input, bool planned,
                                ElementwisePlan& plan, int* split) {
  std::optional<ir::BroadcastRows> rows = ir::BroadcastRowsOf(op, body.params(input).type());
  if (!rows) return Declined("a broadcast that is not read by rows");
  ElementwisePlan::Input& in = plan.inputs[input];
  const bool scalar = rows->layout == ir::BroadcastLayout::kScalar ||
                      rows->layout == ir::BroadcastLayout::kPerRow;
  const InputRows walk = rows->layout == ir::BroadcastLayout::kWhole    ? InputRows::kAdvance
                         : rows->layout == ir::BroadcastLayout::kPerRow ? InputRows::kOnePerRow
                                                                        : InputRows::kRepeat;
  if (planned && (in.scalar != scalar || in.rows != walk)) {
    return Declined("an input broadcast in two ways");
  }
  if (rows->split >= 0) {
    if (*split >= 0 && *split != rows->split) return Declined("broadcasts of different rows");
    *split = rows->split;
  }
  in.scalar = scalar;
  in.rows = walk;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ElementwisePlan> PlanFusionBody(const ir::Region& body) {
  ElementwisePlan plan;
  std::unordered_map<int64_t, int> value_of;
  for (const ir::Param& p : body.params()) {
    ir::ShapedType t = ir::FromProto(p.type());
    value_of[p.id()] = static_cast<int>(plan.inputs.size());
    plan.inputs.push_back({t.dtype, t.rank() == 0,
                           t.rank() == 0 ? InputRows::kRepeat : InputRows::kAdvance});
  }
  if (body.results_size() != 1) return Declined("the body must return one value");
  int split = -1;
  std::vector<bool> planned(plan.inputs.size(), false);  // read through a broadcast
  const google::protobuf::RepeatedField<int64_t>* out_dims = nullptr;
  for (const ir::Op& op : body.ops()) {
    std::optional<EwOp> ew = OpOf(ir::PrimOf(op));
    if (!ew) return Declined(fmt::format("{} is not supported", op.opcode()));
    if (op.results_size() != 1) return Declined(fmt::format("{} has several results", op.opcode()));
    const int arity = *ew == EwOp::kSelect ? 3 : op.operands_size();
    if (op.operands_size() != arity || arity < 1 || arity > 3) {
      return Declined(fmt::format("{} has {} operands", op.opcode(), op.operands_size()));
    }
    ElementwisePlan::Step step;
    step.op = *ew;
    step.dtype = ir::FromProto(op.result_types(0)).dtype;
    if (step.op == EwOp::kCompare) step.direction = op.compare().direction();
    if (step.op == EwOp::kRoundAway && op.round().rounding_method() == ir::TO_NEAREST_EVEN) {
      step.op = EwOp::kRoundEven;
    }
    int* slots[] = {&step.a, &step.b, &step.c};
    for (int i = 0; i < arity; ++i) {
      auto it = value_of.find(op.operands(i));
      if (it == value_of.end()) {
        return Declined(fmt::format("{} reads an unknown value", op.opcode()));
      }
      *slots[i] = it->second;
    }
    // A broadcast of an input of more than one element reads it by rows.
    if (ir::PrimOf(op) == ir::Prim::kBroadcastInDim && step.a < body.params_size() &&
        body.params(step.a).type().dims_size() > 0) {
      RETURN_IF_ERROR(PlanBroadcastInput(op, body, step.a, planned[step.a], plan, &split));
      planned[step.a] = true;
    } else if (ir::PrimOf(op) == ir::Prim::kBroadcastInDim &&
               !op.broadcast_in_dim().broadcast_dimensions().empty()) {
      return Declined("a broadcast of a computed value");
    }
    const DType operand = plan.dtype(step.op == EwOp::kSelect ? step.b : step.a);
    if (step.op == EwOp::kConvert && operand == step.dtype) step.op = EwOp::kCopy;
    if (!Emitted(step.dtype)) {
      return Declined(fmt::format("{} to {} is not supported", op.opcode(),
                                  ir::DTypeName(step.dtype)));
    }
    if (!Supports(step.op, operand)) {
      return Declined(
          fmt::format("{} on {} is not supported", op.opcode(), ir::DTypeName(operand)));
    }
    value_of[op.results(0)] = plan.num_values();
    plan.steps.push_back(step);
    if (op.results(0) == body.results(0)) out_dims = &op.result_types(0).dims();
  }
  if (!value_of.count(body.results(0))) return Declined("the body must return one value");
  // An input read through a broadcast is read by no other op.
  for (const ir::Op& op : body.ops()) {
    if (ir::PrimOf(op) == ir::Prim::kBroadcastInDim) continue;
    for (int64_t id : op.operands()) {
      const int v = value_of[id];
      if (v < static_cast<int>(planned.size()) && planned[v]) {
        return Declined(fmt::format("{} reads a broadcast input directly", op.opcode()));
      }
    }
  }
  if (split >= 0 && out_dims != nullptr) {
    plan.rows = ir::RowsOf({out_dims->data(), static_cast<size_t>(out_dims->size())}, split);
  }
  plan.result = value_of[body.results(0)];
  plan.result_dtype = plan.dtype(plan.result);
  if (plan.result < static_cast<int>(plan.inputs.size()) && plan.inputs[plan.result].scalar) {
    return Declined("the body returns a scalar operand");
  }
  return plan;
}

ElementwisePlan BinaryPlan(EwOp op, ir::DType dtype) {
  ElementwisePlan plan;
  plan.inputs = {{dtype, false}, {dtype, false}};
  plan.steps = {{op, 0, 1, -1, dtype}};
  plan.result = 2;
  plan.result_dtype = dtype;
  return plan;
}

absl::StatusOr<std::vector<int>> AssignRegisters(const ElementwisePlan& plan, int num_regs) {
  const int n = plan.num_values();
  const int num_inputs = static_cast<int>(plan.inputs.size());
  const int num_steps = static_cast<int>(plan.steps.size());
  std::vector<int> last_use(n, -1);
  for (int s = 0; s < num_steps; ++s) {
    for (int v : {plan.steps[s].a, plan.steps[s].b, plan.steps[s].c}) {
      if (v >= 0) last_use[v] = s;
    }
  }
  last_use[plan.result] = num_steps;
  std::vector<int> reg(n, -1);
  std::vector<bool> busy(num_regs, false);
  auto take = [&](int value) {
    for (int r = 0; r < num_regs; ++r) {
      if (!busy[r]) {
        busy[r] = true;
        reg[value] = r;
        return true;
      }
    }
    return false;
  };
  const absl::Status too_many = Declined(fmt::format("more than {} live values", num_regs));
  for (int i = 0; i < num_inputs; ++i) {
    if (plan.inputs[i].scalar && !take(i)) return too_many;
  }
  for (int s = 0; s < num_steps; ++s) {
    const ElementwisePlan::Step& step = plan.steps[s];
    for (int v : {step.a, step.b, step.c}) {
      if (v >= 0 && reg[v] < 0 && !take(v)) return too_many;
    }
    const int value = num_inputs + s;
    if (!take(value)) return too_many;
    if (last_use[value] < 0) busy[reg[value]] = false;  // dead step
    for (int v : {step.a, step.b, step.c}) {
      if (v >= 0 && last_use[v] == s && !(v < num_inputs && plan.inputs[v].scalar)) {
        busy[reg[v]] = false;
      }
    }
  }
  if (reg[plan.result] < 0 && !take(plan.result)) return too_many;
  return reg;
}

}  // namespace shardjit::backends::x86
