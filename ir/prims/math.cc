// Shape rules of the math and bit primitives of jax.lax: transcendental and rounding functions
// of floats, sign, integer_pow, pow, atan2, nextafter, is_finite, and the bitwise operations,
// shifts and population_count of integers (and/or/xor/not also of pred).
#include "base/status_macros.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

absl::Status CheckRound(const Op& op, const Types& operands) {
  const RoundingMethod method = op.round().rounding_method();
  if (!RoundingMethod_IsValid(method)) {
    return RuleError(op, operands,
                     "rounding_method={} is not a known method (AWAY_FROM_ZERO or "
                     "TO_NEAREST_EVEN)",
                     static_cast<int>(method));
  }
  return absl::OkStatus();
}

// As jax.lax.integer_pow: integers cannot be raised to negative powers.
absl::Status CheckIntegerPow(const Op& op, const Types& operands) {
  const int64_t y = op.integer_pow().y();
  if (!FitsS32(y)) return RuleError(op, operands, "y={} does not fit in s32", y);
  if (y < 0 && !IsFloating(operands[0].dtype)) {
    return RuleError(op, operands, "integers cannot be raised to negative powers (y={})", y);
  }
  return absl::OkStatus();
}

const bool registered = [] {
  for (const char* name : {"sin", "cos", "tan", "erf", "erf_inv", "log1p", "expm1", "floor",
                           "ceil"}) {
    RegisterElementwise(name, 1, ElementwiseDTypes::kFloating);
  }
  RegisterElementwise("round", 1, ElementwiseDTypes::kFloating, false, Op::kRound, CheckRound);
  RegisterElementwise("sign", 1, ElementwiseDTypes::kNumeric);
  RegisterElementwise("is_finite", 1, ElementwiseDTypes::kFloating, /*pred_result=*/true);
  RegisterElementwise("integer_pow", 1, ElementwiseDTypes::kNumeric, false, Op::kIntegerPow,
                      CheckIntegerPow);
  for (const char* name : {"pow", "atan2", "nextafter"}) {
    RegisterElementwise(name, 2, ElementwiseDTypes::kFloating);
  }
  for (const char* name : {"and", "or", "xor"}) {
    RegisterElementwise(name, 2, ElementwiseDTypes::kIntegerOrPred);
  }
  RegisterElementwise("not", 1, ElementwiseDTypes::kIntegerOrPred);
  for (const char* name : {"shift_left", "shift_right_logical", "shift_right_arithmetic"}) {
    RegisterElementwise(name, 2, ElementwiseDTypes::kInteger);
  }
  RegisterElementwise("population_count", 1, ElementwiseDTypes::kInteger);
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
