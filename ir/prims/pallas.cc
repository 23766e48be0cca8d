// Shape rules of pallas_call and of the ops its kernels use: ref_load, ref_store, program_id and
// num_programs. The verifier checks the ops inside the index maps and the kernel; these rules
// check the interfaces: operand and block types, index maps' arity and results, kernel refs.
#include "base/status_macros.h"
#include "ir/pallas.h"
#include "ir/prims/rule_util.h"

namespace shardjit::ir::prims {
namespace {

const ShapedType kIndex{DType::kS32, {}};

// The type of value `id` of closed region `r` (a param or an op result at its top level).
std::optional<ShapedType> TypeInClosedRegion(const Region& r, int64_t id) {
  for (const Param& p : r.params()) {
    if (p.id() == id) return FromProto(p.type());
  }
  for (const Op& op : r.ops()) {
    for (int i = 0; i < op.results_size() && i < op.result_types_size(); ++i) {
      if (op.results(i) == id) return FromProto(op.result_types(i));
    }
  }
  return std::nullopt;
}

// Checks one BlockSpec against its array and returns the kernel's ref type for it.
absl::StatusOr<ShapedType> CheckSpec(const Op& op, const Types& operands,
                                     const BlockSpec& spec, const ShapedType& array,
                                     const std::string& name, const Types& index_map_params) {
  if (spec.whole()) {
    if (spec.block_shape_size() != 0 || spec.index_map().params_size() != 0 ||
        spec.index_map().ops_size() != 0 || spec.index_map().results_size() != 0) {
      return RuleError(op, operands, "{} is a whole-array spec but has a block shape or an "
                       "index map", name);
    }
    return array.AsRef();
  }
  if (spec.block_shape_size() != array.rank()) {
    return RuleError(op, operands, "{} has a block shape of rank {} ({}) for an array of rank {} "
                     "({})", name, spec.block_shape_size(),
                     fmt::format("{}", fmt::join(spec.block_shape(), ",")), array.rank(),
                     array.ToString());
  }
  std::vector<int64_t> block = BlockRefDims(spec);
  for (int64_t b : spec.block_shape()) {
    if (b < 0) {
      return RuleError(op, operands, "{} has a negative block dimension ({})", name,
                       fmt::format("{}", fmt::join(spec.block_shape(), ",")));
    }
  }
  RETURN_IF_ERROR(
      CheckRegionParams(op, operands, spec.index_map(), name + " index_map", index_map_params));
  if (spec.index_map().results_size() != array.rank()) {
    return RuleError(op, operands, "{} index_map returns {} values; expected one block index per "
                     "array dimension ({})", name, spec.index_map().results_size(), array.rank());
  }
  for (int k = 0; k < spec.index_map().results_size(); ++k) {
    // Index maps are closed: their results are their params' or their ops' values.
    std::optional<ShapedType> t = TypeInClosedRegion(spec.index_map(), spec.index_map().results(k));
    if (!t) {
      return RuleError(op, operands, "{} index_map result {} is not a value of the index map", name,
                       k);
    }
    if (*t != kIndex) {
      return RuleError(op, operands, "{} index_map result {} is {}; block indices are s32[]", name,
                       k, t->ToString());
    }
  }
  return ShapedType{array.dtype, std::move(block), false, true};
}

absl::StatusOr<Types> PallasCall(const ShapeContext& ctx, const Types& all, const Op& op) {
  const PallasCallAttrs& a = op.pallas_call();
  const std::string kernel = a.name().empty() ? "kernel" : a.name();
  if (ctx.kernel_grid_rank >= 0) {
    return RuleError(op, all, "pallas_call cannot be nested in a kernel");
  }
  // Axes sized at run time (-1) take their sizes from the leading s32[] operands.
  const int64_t dynamic = NumDynamicGridAxes(a);
  for (int64_t g : a.grid()) {
    if (g < -1 || !FitsS32(g)) {
      return RuleError(op, all, "grid ({}) of {} has a size outside [0, 2^31) (or -1: sized at "
                       "run time)", fmt::join(a.grid(), ","), kernel);
    }
  }
  if (dynamic > static_cast<int64_t>(all.size())) {
    return RuleError(op, all, "grid ({}) has {} axes sized at run time but {} operands",
                     fmt::join(a.grid(), ","), dynamic, all.size());
  }
  for (int64_t i = 0; i < dynamic; ++i) {
    if (all[i] != kIndex) {
      return RuleError(op, all, "operand {} sizes a grid axis at run time: expected s32[], got {}",
                       i, all[i].ToString());
    }
  }
  const Types operands(all.begin() + dynamic, all.end());
  const int64_t nsp = a.num_scalar_prefetch();
  if (nsp < 0 || nsp > static_cast<int64_t>(operands.size())) {
    return RuleError(op, all, "num_scalar_prefetch={} but {} operands", nsp,
                     operands.size());
  }
  Types prefetch_refs;
  for (int64_t i = 0; i < nsp; ++i) {
    if (operands[i].dtype != DType::kS32) {
      return RuleError(op, all, "scalar-prefetch operand {} is {}; expected s32", i,
                       operands[i].ToString());
    }
    prefetch_refs.push_back(operands[i].AsRef());
  }
  const int64_t num_inputs = static_cast<int64_t>(operands.size()) - nsp;
  if (a.in_specs_size() != num_inputs) {
    return RuleError(op, all, "{} in_specs for {} inputs (after {} scalar-prefetch operands)",
                     a.in_specs_size(), num_inputs, nsp);
  }
  if (a.out_specs_size() != a.out_shapes_size()) {
    return RuleError(op, all, "{} out_specs for {} out_shapes", a.out_specs_size(),
                     a.out_shapes_size());
  }
  if (a.dimension_semantics_size() != 0 && a.dimension_semantics_size() != a.grid_size()) {
    return RuleError(op, all, "{} dimension_semantics for a grid of rank {}",
                     a.dimension_semantics_size(), a.grid_size());
  }
  Types index_map_params(a.grid_size(), kIndex);
  index_map_params.insert(index_map_params.end(), prefetch_refs.begin(), prefetch_refs.end());
  Types kernel_params = prefetch_refs;
  for (int i = 0; i < a.in_specs_size(); ++i) {
    ASSIGN_OR_RETURN(ShapedType ref,
                     CheckSpec(op, all, a.in_specs(i), operands[nsp + i],
                               fmt::format("in_specs[{}]", i), index_map_params));
    kernel_params.push_back(ref);
  }
  Types results;
  for (int i = 0; i < a.out_shapes_size(); ++i) {
    ShapedType out = FromProto(a.out_shapes(i));
    if (out.future || out.ref) {
      return RuleError(op, all, "out_shapes[{}] is {}; expected an array type", i,
                       out.ToString());
    }
    RETURN_IF_ERROR(CheckDTypeAttr(op, operands, fmt::format("out_shapes[{}]", i),
                                   a.out_shapes(i).dtype()));
    ASSIGN_OR_RETURN(ShapedType ref, CheckSpec(op, all, a.out_specs(i), out,
                                               fmt::format("out_specs[{}]", i), index_map_params));
    kernel_params.push_back(ref);
    results.push_back(out);
  }
  if (a.input_output_aliases_size() != 0) {
    if (a.input_output_aliases_size() != a.out_shapes_size()) {
      return RuleError(op, all, "{} input_output_aliases for {} outputs (one per output, -1 "
                       "for none)", a.input_output_aliases_size(), a.out_shapes_size());
    }
    std::vector<bool> used(operands.size(), false);
    for (int i = 0; i < a.input_output_aliases_size(); ++i) {
      const int64_t in = a.input_output_aliases(i);
      if (in == -1) continue;
      if (in < 0 || in >= static_cast<int64_t>(operands.size())) {
        return RuleError(op, all, "input_output_aliases[{}]={} is not an operand index", i,
                         in);
      }
      if (used[in]) {
        return RuleError(op, all, "operand {} is aliased to two outputs", in);
      }
      used[in] = true;
      if (operands[in] != results[i]) {
        return RuleError(op, all, "output {} ({}) is aliased to operand {} of type {}", i,
                         results[i].ToString(), in, operands[in].ToString());
      }
    }
  }
  const Region& body = a.kernel();
  if (body.params_size() < static_cast<int>(kernel_params.size())) {
    return RuleError(op, all, "kernel {} takes {} params; expected at least {} ({}), then "
                     "scratch refs", kernel, body.params_size(), kernel_params.size(),
                     TypesToString(kernel_params));
  }
  for (int i = 0; i < body.params_size(); ++i) {
    const ShapedType param = FromProto(body.params(i).type());
    if (i < static_cast<int>(kernel_params.size()) && param != kernel_params[i]) {
      return RuleError(op, all, "kernel {} param {} is {}, expected {}", kernel, i,
                       param.ToString(), kernel_params[i].ToString());
    }
    if (!param.ref) {
      return RuleError(op, all, "kernel {} scratch param {} is {}; scratch buffers are refs",
                       kernel, i, param.ToString());
    }
  }
  if (body.results_size() != 0) {
    return RuleError(op, all, "kernel {} returns {} values; kernels write their outputs "
                     "through refs and return nothing", kernel, body.results_size());
  }
  return results;
}

// The window of a ref_load / ref_store: `ref` is operand 0, the starts the operands from
// `first_start` on. Returns the loaded / stored value's type.
absl::StatusOr<ShapedType> Window(const Types& operands, const Op& op, size_t first_start) {
  const ShapedType& ref = operands[0];
  if (!ref.ref) {
    return RuleError(op, operands, "operand 0 is {}; expected a ref", ref.ToString());
  }
  const RefWindowAttrs& w = op.ref_window();
  if (w.sizes_size() != ref.rank()) {
    return RuleError(op, operands, "sizes has {} entries for a ref of rank {}", w.sizes_size(),
                     ref.rank());
  }
  if (operands.size() != first_start + ref.rank()) {
    return RuleError(op, operands, "takes one start per ref dimension ({}), got {}", ref.rank(),
                     operands.size() - first_start);
  }
  for (size_t i = first_start; i < operands.size(); ++i) {
    if (operands[i] != kIndex) {
      return RuleError(op, operands, "start {} is {}; expected s32[]", i - first_start,
                       operands[i].ToString());
    }
  }
  for (int d = 0; d < ref.rank(); ++d) {
    if (w.sizes(d) < 0 || w.sizes(d) > ref.dims[d]) {
      return RuleError(op, operands, "sizes[{}]={} does not fit the ref's dimension {}", d,
                       w.sizes(d), ref.dims[d]);
    }
  }
  RETURN_IF_ERROR(CheckDimList(op, operands, "squeezed", {w.squeezed().begin(), w.squeezed().end()},
                               ref.rank()));
  std::vector<bool> squeezed(ref.rank(), false);
  for (int64_t d : w.squeezed()) {
    if (w.sizes(d) != 1) {
      return RuleError(op, operands, "squeezed dimension {} has size {}; expected 1", d,
                       w.sizes(d));
    }
    squeezed[d] = true;
  }
  ShapedType value{ref.dtype, {}};
  for (int d = 0; d < ref.rank(); ++d) {
    if (!squeezed[d]) value.dims.push_back(w.sizes(d));
  }
  return value;
}

absl::StatusOr<Types> RefLoad(const ShapeContext&, const Types& operands, const Op& op) {
  if (operands.empty()) return RuleError(op, operands, "expects a ref");
  ASSIGN_OR_RETURN(ShapedType value, Window(operands, op, 1));
  return Types{value};
}

absl::StatusOr<Types> RefStore(const ShapeContext&, const Types& operands, const Op& op) {
  if (operands.size() < 2) return RuleError(op, operands, "expects a ref and a value");
  ASSIGN_OR_RETURN(ShapedType window, Window(operands, op, 2));
  if (operands[1] != window) {
    return RuleError(op, operands, "stores {} into a window of {}", operands[1].ToString(),
                     window.ToString());
  }
  return Types{};
}

absl::StatusOr<Types> GridQuery(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const int64_t axis = op.grid_axis().axis();
  if (axis < 0 || axis >= ctx.kernel_grid_rank) {
    return RuleError(op, operands, "axis={} is not an axis of the grid (rank {})", axis,
                     ctx.kernel_grid_rank);
  }
  return Types{kIndex};
}

const bool registered = [] {
  RegisterPrimitive(
      {"pallas_call", PrimitiveKind::kControlFlow, 0, -1, Op::kPallasCall, PallasCall});
  RegisterPrimitive({"ref_load", PrimitiveKind::kKernel, 1, -1, Op::kRefWindow, RefLoad});
  RegisterPrimitive({"ref_store", PrimitiveKind::kKernel, 2, -1, Op::kRefWindow, RefStore});
  RegisterPrimitive({"program_id", PrimitiveKind::kKernel, 0, 0, Op::kGridAxis, GridQuery});
  RegisterPrimitive({"num_programs", PrimitiveKind::kKernel, 0, 0, Op::kGridAxis, GridQuery});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
