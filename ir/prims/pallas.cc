// Shape rules of pallas_call and of the ops its kernels use: ref_load, ref_store, program_id,
// num_programs, and the semaphore and copy ops through which kernels on different devices talk
// (semaphore_signal/wait/read, dma_start/wait). The verifier checks the ops inside the index
// maps and the kernel; these rules check the interfaces: operand and block types, index maps'
// arity and results, kernel refs.
#include "base/status_macros.h"
#include "ir/pallas.h"
#include "ir/prims/rule_util.h"
#include "ir/types.h"

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
    if (param.semaphore != Semaphore::kNone && param.dtype != DType::kS32) {
      return RuleError(op, all, "kernel {} param {} is a semaphore array of dtype {}", kernel, i,
                       DTypeName(param.dtype));
    }
  }
  if (body.results_size() != 0) {
    return RuleError(op, all, "kernel {} returns {} values; kernels write their outputs "
                     "through refs and return nothing", kernel, body.results_size());
  }
  return results;
}

// The window of `sizes` (dropping `squeezed` dimensions) on the ref operand `r`, whose starts
// are the operands from `first_start` on (one per ref dimension). Returns the window's value
// type. `what` names the ref in errors ("operand 0", "src").
absl::StatusOr<ShapedType> Window(const Types& operands, const Op& op, size_t r,
                                  size_t first_start,
                                  const google::protobuf::RepeatedField<int64_t>& sizes,
                                  const google::protobuf::RepeatedField<int64_t>& squeezed_dims,
                                  std::string_view what) {
  const ShapedType& ref = operands[r];
  if (!ref.ref || ref.semaphore != Semaphore::kNone) {
    return RuleError(op, operands, "{} is {}; expected a ref of an array", what, ref.ToString());
  }
  if (sizes.size() != ref.rank()) {
    return RuleError(op, operands, "the window of {} has {} sizes for a ref of rank {}", what,
                     sizes.size(), ref.rank());
  }
  if (operands.size() < first_start + ref.rank()) {
    return RuleError(op, operands, "takes one start per dimension of {} ({}), got {}", what,
                     ref.rank(), operands.size() - std::min(operands.size(), first_start));
  }
  for (size_t i = first_start; i < first_start + ref.rank(); ++i) {
    if (operands[i] != kIndex) {
      return RuleError(op, operands, "start {} of {} is {}; expected s32[]", i - first_start,
                       what, operands[i].ToString());
    }
  }
  for (int d = 0; d < ref.rank(); ++d) {
    if (sizes[d] < 0 || sizes[d] > ref.dims[d]) {
      return RuleError(op, operands, "sizes[{}]={} of {} does not fit the ref's dimension {}", d,
                       sizes[d], what, ref.dims[d]);
    }
  }
  RETURN_IF_ERROR(CheckDimList(op, operands, "squeezed",
                               {squeezed_dims.begin(), squeezed_dims.end()}, ref.rank()));
  std::vector<bool> squeezed(ref.rank(), false);
  for (int64_t d : squeezed_dims) {
    if (sizes[d] != 1) {
      return RuleError(op, operands, "squeezed dimension {} of {} has size {}; expected 1", d,
                       what, sizes[d]);
    }
    squeezed[d] = true;
  }
  ShapedType value{ref.dtype, {}};
  for (int d = 0; d < ref.rank(); ++d) {
    if (!squeezed[d]) value.dims.push_back(sizes[d]);
  }
  return value;
}

// ref_load / ref_store: the ref is operand 0, its starts the operands from `first_start` on.
absl::StatusOr<ShapedType> Window(const Types& operands, const Op& op, size_t first_start) {
  if (operands.size() != first_start + std::max<int64_t>(operands[0].rank(), 0)) {
    return RuleError(op, operands, "takes one start per ref dimension ({}), got {}",
                     operands[0].rank(), operands.size() - first_start);
  }
  return Window(operands, op, 0, first_start, op.ref_window().sizes(),
                op.ref_window().squeezed(), "operand 0");
}

// A semaphore operand at `k` (a ref of `kind` semaphores) and its indices, one s32[] per
// dimension: returns the operand after them.
absl::StatusOr<size_t> SemaphoreAt(const Types& operands, const Op& op, size_t k,
                                   Semaphore kind, std::string_view what) {
  if (k >= operands.size()) return RuleError(op, operands, "expects {}", what);
  const ShapedType& sem = operands[k];
  if (!sem.ref || sem.semaphore != kind) {
    return RuleError(op, operands, "{} (operand {}) is {}; expected a ref of {} semaphores", what,
                     k, sem.ToString(), kind == Semaphore::kDma ? "DMA" : "regular");
  }
  if (operands.size() < k + 1 + sem.rank()) {
    return RuleError(op, operands, "{} takes one index per dimension ({})", what, sem.rank());
  }
  for (size_t i = k + 1; i < k + 1 + sem.rank(); ++i) {
    if (operands[i] != kIndex) {
      return RuleError(op, operands, "index {} of {} is {}; expected s32[]", i - k - 1, what,
                       operands[i].ToString());
    }
  }
  return k + 1 + sem.rank();
}

// The device operands from `k` on (the rest): one s32[] per named mesh axis, one logical id, or
// none (this device).
absl::Status DeviceOperands(const ShapeContext& ctx, const Types& operands, const Op& op,
                            size_t k, const google::protobuf::RepeatedPtrField<std::string>& axes,
                            bool logical) {
  if (logical && !axes.empty()) {
    return RuleError(op, operands, "names a device both by mesh axes ({}) and by a logical id",
                     fmt::join(axes, ","));
  }
  const size_t want = logical ? 1 : axes.size();
  if (operands.size() - k != want) {
    return RuleError(op, operands, "takes {} device operand(s) ({}), got {}", want,
                     logical ? "a logical id" : fmt::format("one per axis of ({})",
                                                            fmt::join(axes, ",")),
                     operands.size() - k);
  }
  for (size_t i = k; i < operands.size(); ++i) {
    if (operands[i] != kIndex) {
      return RuleError(op, operands, "device operand {} is {}; expected s32[]", i - k,
                       operands[i].ToString());
    }
  }
  std::vector<std::string> seen;
  for (const std::string& a : axes) {
    if (std::find(seen.begin(), seen.end(), a) != seen.end()) {
      return RuleError(op, operands, "device_axes names axis \"{}\" twice", a);
    }
    seen.push_back(a);
    if (ctx.mesh == nullptr || ctx.mesh->axes_size() == 0) continue;
    bool found = false;
    for (const MeshAxis& m : ctx.mesh->axes()) found |= m.name() == a;
    if (!found) {
      return RuleError(op, operands, "device_axes names axis \"{}\", not an axis of mesh {}", a,
                       MeshToString(*ctx.mesh));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> SemaphoreSignal(const ShapeContext& ctx, const Types& operands,
                                      const Op& op) {
  ASSIGN_OR_RETURN(size_t k, SemaphoreAt(operands, op, 0, Semaphore::kRegular, "the semaphore"));
  if (k >= operands.size() || operands[k] != kIndex) {
    return RuleError(op, operands, "the increment (operand {}) must be s32[]", k);
  }
  const SemaphoreSignalAttrs& a = op.semaphore_signal();
  RETURN_IF_ERROR(DeviceOperands(ctx, operands, op, k + 1, a.device_axes(), a.logical_device()));
  return Types{};
}

absl::StatusOr<Types> SemaphoreWait(const ShapeContext&, const Types& operands, const Op& op) {
  ASSIGN_OR_RETURN(size_t k, SemaphoreAt(operands, op, 0, Semaphore::kRegular, "the semaphore"));
  if (operands.size() != k + 1 || operands[k] != kIndex) {
    return RuleError(op, operands, "takes the semaphore, its indices and one s32[] count");
  }
  return Types{};
}

absl::StatusOr<Types> SemaphoreRead(const ShapeContext&, const Types& operands, const Op& op) {
  if (operands.empty()) return RuleError(op, operands, "expects a semaphore");
  const Semaphore kind = operands[0].semaphore == Semaphore::kDma ? Semaphore::kDma
                                                                 : Semaphore::kRegular;
  ASSIGN_OR_RETURN(size_t k, SemaphoreAt(operands, op, 0, kind, "the semaphore"));
  if (operands.size() != k) {
    return RuleError(op, operands, "takes the semaphore and one index per dimension");
  }
  return Types{kIndex};
}

absl::StatusOr<Types> DmaStart(const ShapeContext& ctx, const Types& operands, const Op& op) {
  const DmaAttrs& a = op.dma();
  if (operands.size() < 2) return RuleError(op, operands, "expects src and dst refs");
  ASSIGN_OR_RETURN(ShapedType src,
                   Window(operands, op, 0, 1, a.src_sizes(), a.src_squeezed(), "src"));
  const size_t dst = 1 + operands[0].rank();
  if (dst >= operands.size()) return RuleError(op, operands, "expects a dst ref");
  ASSIGN_OR_RETURN(ShapedType window, Window(operands, op, dst, dst + 1, a.dst_sizes(),
                                             a.dst_squeezed(), "dst"));
  if (src != window) {
    return RuleError(op, operands, "copies a {} window of src into a {} window of dst",
                     src.ToString(), window.ToString());
  }
  ASSIGN_OR_RETURN(size_t k, SemaphoreAt(operands, op, dst + 1 + operands[dst].rank(),
                                         Semaphore::kDma, "dst_sem"));
  if (a.has_src_sem()) {
    ASSIGN_OR_RETURN(k, SemaphoreAt(operands, op, k, Semaphore::kDma, "src_sem"));
  } else if (!a.device_axes().empty() || a.logical_device()) {
    return RuleError(op, operands, "a copy to another device needs a src_sem (has_src_sem)");
  }
  RETURN_IF_ERROR(DeviceOperands(ctx, operands, op, k, a.device_axes(), a.logical_device()));
  return Types{};
}

absl::StatusOr<Types> DmaWait(const ShapeContext&, const Types& operands, const Op& op) {
  ASSIGN_OR_RETURN(size_t k, SemaphoreAt(operands, op, 0, Semaphore::kDma, "the semaphore"));
  if (operands.size() != k) {
    return RuleError(op, operands, "takes the semaphore and one index per dimension");
  }
  if (op.dma_wait().bytes() < 0) {
    return RuleError(op, operands, "bytes={} is negative", op.dma_wait().bytes());
  }
  return Types{};
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
  RegisterPrimitive({"semaphore_signal", PrimitiveKind::kKernel, 2, -1, Op::kSemaphoreSignal,
                     SemaphoreSignal});
  RegisterPrimitive(
      {"semaphore_wait", PrimitiveKind::kKernel, 2, -1, Op::ATTRS_NOT_SET, SemaphoreWait});
  RegisterPrimitive(
      {"semaphore_read", PrimitiveKind::kKernel, 1, -1, Op::ATTRS_NOT_SET, SemaphoreRead});
  RegisterPrimitive({"dma_start", PrimitiveKind::kKernel, 3, -1, Op::kDma, DmaStart});
  RegisterPrimitive({"dma_wait", PrimitiveKind::kKernel, 1, -1, Op::kDmaWait, DmaWait});
  return true;
}();

}  // namespace
}  // namespace shardjit::ir::prims
