// Shape rules of the elementwise primitives (JAX lax semantics: operands of one type, no implicit
// broadcasting or promotion; the frontend inserts broadcasts for scalars).
#include "base/status_macros.h"
#include "ir/prims/ad_rules.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

const bool registered = [] {
  for (const char* name : {"add", "sub", "mul", "div", "rem", "max", "min"}) {
    RegisterElementwise(name, 2, ElementwiseDTypes::kNumeric);
  }
  RegisterElementwise("neg", 1, ElementwiseDTypes::kNumeric);
  RegisterElementwise("abs", 1, ElementwiseDTypes::kNumeric);
  for (const char* name : {"exp", "log", "tanh", "sqrt", "rsqrt", "logistic"}) {
    RegisterElementwise(name, 1, ElementwiseDTypes::kFloating);
  }
  RegisterPrimitive({
      .name = "compare",
      .kind = PrimitiveKind::kElementwise,
      .min_operands = 2,
      .max_operands = 2,
      .attrs_case = Op::kCompare,
      .shape_rule = [](const ShapeContext&, const Types& operands,
                       const Op& op) -> absl::StatusOr<Types> {
        RETURN_IF_ERROR(CheckSameTypes(op, operands, 0));
        const ComparisonDirection direction = op.compare().direction();
        if (direction == DIRECTION_INVALID) {
          return RuleError(op, operands, "direction is not set");
        }
        if (!ComparisonDirection_IsValid(direction)) {
          return RuleError(op, operands, "direction={} is not a known direction (EQ, NE, LT, LE, "
                           "GT or GE)", static_cast<int>(direction));
        }
        return Types{{DType::kPred, operands[0].dims}};
      },
      .ad = ElementwiseAd("compare"),
  });
  RegisterPrimitive({
      .name = "select",
      .kind = PrimitiveKind::kElementwise,
      .min_operands = 3,
      .max_operands = 3,
      .attrs_case = Op::ATTRS_NOT_SET,
      .shape_rule = [](const ShapeContext&, const Types& operands,
                       const Op& op) -> absl::StatusOr<Types> {
        if (operands[0].dtype != DType::kPred) {
          return RuleError(op, operands, "predicate must be pred, got {}",
                           DTypeName(operands[0].dtype));
        }
        RETURN_IF_ERROR(CheckSameTypes(op, operands, 1));
        if (operands[0].rank() != 0 && operands[0].dims != operands[1].dims) {
          return RuleError(op, operands, "predicate shape must be [] or match the branches");
        }
        return Types{operands[1]};
      },
      .ad = ElementwiseAd("select"),
  });
  // clamp(min, x, max): min and max are scalars or of x's shape, all of x's dtype.
  RegisterPrimitive({
      .name = "clamp",
      .kind = PrimitiveKind::kElementwise,
      .min_operands = 3,
      .max_operands = 3,
      .attrs_case = Op::ATTRS_NOT_SET,
      .shape_rule = [](const ShapeContext&, const Types& operands,
                       const Op& op) -> absl::StatusOr<Types> {
        const ShapedType& x = operands[1];
        for (int i : {0, 2}) {
          const ShapedType& bound = operands[i];
          if (bound.dtype != x.dtype || (bound.rank() != 0 && bound.dims != x.dims)) {
            return RuleError(op, operands, "{} must be a scalar or of the operand's shape, with "
                             "its dtype", i == 0 ? "min" : "max");
          }
        }
        return Types{x};
      },
      .ad = ElementwiseAd("clamp"),
  });
  // convert_element_type and bitcast_convert_type (the same bits read as another dtype of the
  // same width): the operand's shape in new_dtype.
  for (bool bitcast : {false, true}) {
    RegisterPrimitive({
        .name = bitcast ? "bitcast_convert_type" : "convert_element_type",
        .kind = PrimitiveKind::kElementwise,
        .min_operands = 1,
        .max_operands = 1,
        .attrs_case = Op::kConvertElementType,
        .shape_rule = [bitcast](const ShapeContext&, const Types& operands,
                                const Op& op) -> absl::StatusOr<Types> {
          const DTypeProto to = op.convert_element_type().new_dtype();
          RETURN_IF_ERROR(CheckDTypeAttr(op, operands, "new_dtype", to));
          const DType from = operands[0].dtype;
          if (bitcast && (DTypeSize(FromProto(to)) != DTypeSize(from) || from == DType::kPred ||
                          FromProto(to) == DType::kPred)) {
            return RuleError(op, operands, "new_dtype={} is not a non-pred dtype of the "
                             "operand's width", DTypeName(FromProto(to)));
          }
          return Types{{FromProto(to), operands[0].dims}};
        },
        .ad = ElementwiseAd(bitcast ? "bitcast_convert_type" : "convert_element_type"),
    });
  }
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
