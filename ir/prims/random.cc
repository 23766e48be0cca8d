// Shape rule of threefry2x32 (jax.random's counter-based hash): two key words and two counter
// words, u32 as in JAX (whose threefry2x32 primitive requires uint32), all of one shape; two
// hashed words out.
#include "base/status_macros.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

absl::StatusOr<Types> Threefry2x32(const ShapeContext&, const Types& operands, const Op& op) {
  if (operands[0].dtype != DType::kU32) {
    return RuleError(op, operands, "operands must be u32, got {}",
                     DTypeName(operands[0].dtype));
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
