// Translation of a fusion body into a straight-line program over vectors of 32-bit lanes: the form
// the elementwise kernel generators emit. Values are numbered inputs first, then one per step. In a
// lane, f32 and s32 are themselves, bf16 is widened to f32 (and rounded to nearest even after every
// step that computes one, exactly as the reference kernels do op by op) and pred is 0 or 1.
#ifndef SHARDJIT_BACKENDS_X86_ELEMENTWISE_PLAN_H_
#define SHARDJIT_BACKENDS_X86_ELEMENTWISE_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/dtype.h"
#include "ir/ir.pb.h"

namespace shardjit::backends::x86 {

// Binary arithmetic (kAdd..kMin), exact unary ops (kNeg..kRsqrt, kFloor..kSign), polynomial
// approximations (kExp..kCos, elementwise_math.cc), compare (to pred), select (a ? b : c), convert
// (between two different dtypes) and copy (same dtype: a broadcast scalar, a no-op convert).
enum class EwOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kNeg,
  kAbs,
  kSqrt,
  kRsqrt,
  kFloor,
  kCeil,
  kRoundAway,  // round, rounding_method AWAY_FROM_ZERO
  kRoundEven,  // round, rounding_method TO_NEAREST_EVEN
  kSign,
  kExp,
  kLog,
  kTanh,
  kLogistic,
  kErf,
  kSin,  // |x| <= kSinCosMaxArgument (elementwise_kernel.h); larger finite x: out of range
  kCos,
  kCompare,
  kSelect,
  kConvert,
  kCopy,
};

// Where a fused loop run as rows (ElementwisePlan::rows) reads an input in row r.
enum class InputRows {
  kAdvance,    // the output's shape: row r's elements, r * row length elements in
  kOnePerRow,  // one element per row (a scalar input of each row's call): element r
  kRepeat,     // the same elements in every row: a scalar, or one row's worth
};

struct ElementwisePlan {
  struct Input {
    ir::DType dtype = ir::DType::kF32;
    bool scalar = false;  // broadcast to every lane
    InputRows rows = InputRows::kAdvance;
  };
  struct Step {
    EwOp op = EwOp::kCopy;
    int a = -1;
    int b = -1;  // -1 for unary steps
    int c = -1;  // select's false operand
    ir::DType dtype = ir::DType::kF32;  // of the result
    ir::ComparisonDirection direction = ir::DIRECTION_INVALID;  // kCompare
  };
  std::vector<Input> inputs;
  std::vector<Step> steps;
  int result = -1;  // value index
  ir::DType result_dtype = ir::DType::kF32;
  // The output as this many rows of contiguous elements, each computed by one call of the loop,
  // when inputs are broadcast along leading or trailing dimensions (ir/broadcast_rows.h); the
  // inputs' `rows` say where each row reads them. Not part of the generated code.
  int64_t rows = 1;

  int num_values() const { return static_cast<int>(inputs.size() + steps.size()); }
  ir::DType dtype(int value) const;
  // Identifies the generated code: ops, dtypes and which inputs are scalars (not shapes).
  std::string Key() const;
};

// Plans `body` (a verified fusion body). Unimplemented, naming the op, when the body uses an op or
// dtype the vector kernels cannot emit (rem, s32 div, several results), or broadcasts an input in
// a way rows cannot read (a broadcast of a computed value; of inputs needing different splits).
absl::StatusOr<ElementwisePlan> PlanFusionBody(const ir::Region& body);

// The plan of out = a <op> b for psum-like reductions (`op` is kAdd, kMax or kMin).
ElementwisePlan BinaryPlan(EwOp op, ir::DType dtype);

// Assigns one of `num_regs` vector registers to every value: scalar inputs for the whole loop,
// other values from their first use (vector inputs are loaded right before it) to their last. A
// step's result never shares a register with its operands. Unimplemented when more than
// `num_regs` values are live at once.
absl::StatusOr<std::vector<int>> AssignRegisters(const ElementwisePlan& plan, int num_regs);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_ELEMENTWISE_PLAN_H_
