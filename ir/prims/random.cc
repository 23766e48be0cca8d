// Shape rule of threefry2x32 (jax.random's counter-based hash): two key words and two counter
// words, s32 bit patterns of JAX's uint32 values, all of one shape; two hashed words out.
#include "base/status_macros.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

absl::StatusOr<Types> Threefry2x32(const ShapeContext&, const Types& operands, const Op& op) {
  if (operands[0].dtype != DType::kS32) {
    return RuleError(op, operands, "operands must be s32 (the bits of uint32 words)");
  }
  RETURN_IF_ERROR(CheckSameTypes(op, operands, 0));
  return Types{operands[0], operands[0]};
}

const bool registered = [] {
  RegisterPrimitive(
      {"threefry2x32", PrimitiveKind::kStructural, 4, 4, Op::ATTRS_NOT_SET, Threefry2x32});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
