// The primitive registry: one entry per primitive with its name (the IR text opcode), kind, arity,
// attribute message, shape/dtype rule and differentiation rules. The builder, the tracer and the verifier all infer
// result types through InferResultTypes, so there is one shape rule per primitive. Code asks which
// primitive an op is with ir::PrimOf (ir/prim.h), not by comparing opcode text.
#ifndef SHARDJIT_IR_PRIMITIVE_H_
#define SHARDJIT_IR_PRIMITIVE_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ad_rule.h"
#include "ir/ir.pb.h"
#include "ir/prim.h"
#include "ir/types.h"

namespace shardjit::ir {

enum class PrimitiveKind {
  kElementwise,   // same-shape maps: add, exp, compare, select, convert_element_type, ...
  kStructural,    // local compute and data movement: dot_general, reshape, slice, iota, ...
  kCollective,    // communicates across devices of a mesh axis
  kControlFlow,   // holds a region: fori_loop, shard_map, pallas_call
  kKernel,        // only inside a pallas_call kernel: ref_load, ref_store, program_id, ...
};

// What a shape rule may know besides the operand types.
struct ShapeContext {
  // The module's mesh (may be empty).
  const Mesh* mesh = nullptr;
  // True inside a shard_map body or in a per-device module: collectives are allowed.
  bool in_spmd = false;
  // Types of values visible at the op (needed for region results); may be null where no op
  // has a region.
  std::function<absl::StatusOr<ShapedType>(int64_t id)> value_type;
  // Inside a pallas_call kernel or index map: the grid's rank (kernel ops are allowed); -1
  // elsewhere.
  int kernel_grid_rank = -1;
  // The axes vmap names while its function is traced (jax.vmap's axis_name): collectives over
  // only these are allowed outside mapped regions too.
  std::vector<std::string> named_axes;
};

using ShapeRule = std::function<absl::StatusOr<std::vector<ShapedType>>(
    const ShapeContext& ctx, const std::vector<ShapedType>& operands, const Op& op)>;

struct Primitive {
  std::string name;
  PrimitiveKind kind = PrimitiveKind::kStructural;
  int min_operands = 0;
  int max_operands = 0;  // -1: unbounded
  Op::AttrsCase attrs_case = Op::ATTRS_NOT_SET;
  ShapeRule shape_rule;
  // PrimFromName(name), set by RegisterPrimitive (ir/prim.h).
  Prim prim = Prim::kUnknown;
  // Differentiation rules (ir/ad_rule.h), applied by ir/autodiff.h.
  AdRules ad;
};

// Registers a primitive; called from static initialisers in ir/prims/*.cc.
bool RegisterPrimitive(Primitive primitive);
// nullptr when unknown.
const Primitive* FindPrimitive(std::string_view name);
// By enum: O(1). nullptr for kUnknown.
const Primitive* FindPrimitive(Prim prim);
// The registered kind of `prim`: false for kUnknown.
bool IsElementwise(Prim prim);
bool IsCollective(Prim prim);
// Every registered primitive, sorted by name.
std::vector<const Primitive*> AllPrimitives();

// Checks arity and attribute kind, then applies the primitive's shape rule. Errors name the op
// and the operand types.
absl::StatusOr<std::vector<ShapedType>> InferResultTypes(const ShapeContext& ctx,
                                                         const std::vector<ShapedType>& operands,
                                                         const Op& op);

// "bf16[2,2], f32[]": for error messages.
std::string TypesToString(const std::vector<ShapedType>& types);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_PRIMITIVE_H_
