// Translation of a fusion body into a straight-line program over 8-lane f32 vectors: the form the
// elementwise kernel generators emit. Values are numbered inputs first, then one per step; bf16
// values are kept widened to f32 and rounded (to nearest even) after every step that produces one,
// which is exactly what the reference kernels compute op by op.
#ifndef SHARDJIT_BACKENDS_X86_ELEMENTWISE_PLAN_H_
#define SHARDJIT_BACKENDS_X86_ELEMENTWISE_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/dtype.h"
#include "ir/ir.pb.h"

namespace shardjit::backends::x86 {

enum class EwOp { kAdd, kSub, kMul, kDiv, kMax, kMin, kNeg, kAbs, kSqrt, kRsqrt, kCopy };

struct ElementwisePlan {
  struct Input {
    ir::DType dtype = ir::DType::kF32;
    bool scalar = false;  // broadcast to every lane
  };
  struct Step {
    EwOp op = EwOp::kCopy;
    int a = -1;
    int b = -1;                        // -1 for unary steps
    ir::DType dtype = ir::DType::kF32;  // of the result: bf16 rounds
  };
  std::vector<Input> inputs;
  std::vector<Step> steps;
  int result = -1;  // value index
  ir::DType result_dtype = ir::DType::kF32;

  int num_values() const { return static_cast<int>(inputs.size() + steps.size()); }
  // Identifies the generated code: ops, dtypes and which inputs are scalars (not shapes).
  std::string Key() const;
};

// Plans `body` (a verified fusion body). Unimplemented, naming the op, when the body uses an op or
// dtype the vector kernels cannot emit (exp, log, tanh, logistic, compare, select, s32, pred).
absl::StatusOr<ElementwisePlan> PlanFusionBody(const ir::Region& body);

// The plan of out = a <op> b for psum-like reductions (`op` is kAdd, kMax or kMin).
ElementwisePlan BinaryPlan(EwOp op, ir::DType dtype);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_ELEMENTWISE_PLAN_H_
