// vmap of pallas_call, as Pallas batches it: the batch becomes a new leading parallel grid axis;
// each batched operand (batch dimension moved to the front) and every result gets a leading
// squeezed block dimension indexed by it, so the kernel's refs keep their shapes; the kernel's
// program_id / num_programs move one axis up.
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/autodiff.h"
#include "ir/batching_internal.h"
#include "ir/builder.h"
#include "ir/pallas.h"
#include "ir/prim.h"
#include "ir/regions.h"
#include "ir/types.h"

namespace shardjit::ir::batching_internal {
namespace {

absl::Status Refused(const Op& op, std::string_view why) {
  return absl::UnimplementedError(
      fmt::format("vmap of pallas_call{}: {}",
                  op.pallas_call().name().empty() ? "" : " " + op.pallas_call().name(), why));
}

// Moves every program_id / num_programs in `region` (nested regions included) one axis up.
void ShiftGridAxes(Region& region) {
  for (Op& op : *region.mutable_ops()) {
    if (PrimOf(op) == Prim::kProgramId || PrimOf(op) == Prim::kNumPrograms) {
      op.mutable_grid_axis()->set_axis(op.grid_axis().axis() + 1);
    }
    for (Region* r : MutableRegions(op)) ShiftGridAxes(*r);
  }
}

std::vector<ShapedType> ParamTypes(const Region& region) {
  std::vector<ShapedType> types;
  for (const Param& p : region.params()) types.push_back(FromProto(p.type()));
  return types;
}

// `spec` over the new grid: its index map gets the batch index first (and returns it first, for
// a leading squeezed block dimension, when `batched`).
absl::StatusOr<BlockSpec> BatchedSpec(FunctionBuilder& b, const BlockSpec& spec, int grid_rank,
                                      bool batched, int64_t size) {
  BlockSpec out = spec;
  if (batched) {
    out.clear_block_shape();
    out.add_block_shape(0);
    for (int64_t d : spec.block_shape()) out.add_block_shape(d);
  }
  RegionScope scope(b, /*spmd=*/false, grid_rank + 1);
  const int64_t batch = b.AddParam(ShapedType{DType::kS32, {}});
  std::vector<int64_t> params;
  for (const ShapedType& t : ParamTypes(spec.index_map())) params.push_back(b.AddParam(t));
  ASSIGN_OR_RETURN(BatchedValues blocks,
                   EmitBatched(b, spec.index_map(), params,
                               std::vector<int64_t>(params.size(), kNotBatched), size));
  std::vector<int64_t> results;
  if (batched) results.push_back(batch);
  results.insert(results.end(), blocks.values.begin(), blocks.values.end());
  *out.mutable_index_map() = scope.Close(results);
  return out;
}

}  // namespace

absl::StatusOr<BatchedValues> BatchPallasCall(FunctionBuilder& b, const Op& op,
                                              const std::vector<int64_t>& operands,
                                              const std::vector<int64_t>& dims, int64_t size,
                                              const std::vector<BatchedCapture>& captures,
                                              std::string_view axis_name) {
  const PallasCallAttrs& a = op.pallas_call();
  const int64_t leading = NumDynamicGridAxes(a) + a.num_scalar_prefetch();
  for (int64_t i = 0; i < leading; ++i) {
    if (dims[i] != kNotBatched) {
      return Refused(op, fmt::format("operand {} (a grid size or scalar prefetch) is batched", i));
    }
  }
  if (!axis_name.empty() || !captures.empty()) {
    return Refused(op, fmt::format("the kernel uses vmap's axis '{}'", axis_name));
  }
  for (const Param& p : a.kernel().params()) {
    if (p.type().semaphore() != NOT_SEMAPHORE) {
      return Refused(op, "kernels with semaphores talk to other devices' instances");
    }
  }
  std::vector<bool> batched(operands.size(), false);
  for (size_t i = leading; i < operands.size(); ++i) batched[i] = dims[i] != kNotBatched;
  // Aliased inputs are the results' initial values: batched like them.
  for (int out = 0; out < a.input_output_aliases_size(); ++out) {
    if (a.input_output_aliases(out) >= 0) batched[leading + a.input_output_aliases(out)] = true;
  }
  AdEmitter e(b);
  std::vector<int64_t> args = operands;
  for (size_t i = leading; i < operands.size(); ++i) {
    if (!batched[i]) continue;
    if (a.in_specs(static_cast<int>(i - leading)).whole()) {
      return Refused(op, fmt::format("in_specs[{}] is a whole-array ref of a batched operand",
                                     i - leading));
    }
    ASSIGN_OR_RETURN(args[i], MoveBatchDim(e, operands[i], dims[i], 0, size));
  }
  const int grid_rank = a.grid_size();
  Op call = op;
  PallasCallAttrs& c = *call.mutable_pallas_call();
  c.clear_grid();
  c.add_grid(size);
  for (int64_t g : a.grid()) c.add_grid(g);
  // The batch axis is parallel (its elements are independent); the others keep theirs (none
  // given: arbitrary, Pallas' default).
  c.clear_dimension_semantics();
  c.add_dimension_semantics(PARALLEL);
  for (int d = 0; d < grid_rank; ++d) {
    c.add_dimension_semantics(d < a.dimension_semantics_size() ? a.dimension_semantics(d)
                                                               : ARBITRARY);
  }
  for (int i = 0; i < a.in_specs_size(); ++i) {
    if (a.in_specs(i).whole()) continue;
    ASSIGN_OR_RETURN(*c.mutable_in_specs(i),
                     BatchedSpec(b, a.in_specs(i), grid_rank, batched[leading + i], size));
  }
  for (int i = 0; i < a.out_specs_size(); ++i) {
    if (a.out_specs(i).whole()) {
      return Refused(op, fmt::format("out_specs[{}] is a whole-array ref", i));
    }
    ASSIGN_OR_RETURN(*c.mutable_out_specs(i), BatchedSpec(b, a.out_specs(i), grid_rank, true, size));
    TensorType& shape = *c.mutable_out_shapes(i);
    shape.mutable_dims()->Add(0);
    for (int d = shape.dims_size() - 1; d > 0; --d) shape.set_dims(d, shape.dims(d - 1));
    shape.set_dims(0, size);
  }
  {
    // The kernel, re-emitted over the new grid (its refs keep their types).
    RegionScope scope(b, b.in_spmd(), grid_rank + 1);
    std::vector<int64_t> params;
    for (const ShapedType& t : ParamTypes(a.kernel())) params.push_back(b.AddParam(t));
    ASSIGN_OR_RETURN(BatchedValues none,
                     EmitBatched(b, a.kernel(), params,
                                 std::vector<int64_t>(params.size(), kNotBatched), size));
    *c.mutable_kernel() = scope.Close(none.values);
    ShiftGridAxes(*c.mutable_kernel());
  }
  call.clear_operands();
  call.clear_results();
  call.clear_result_types();
  ASSIGN_OR_RETURN(std::vector<int64_t> results, e.Emit(call, args));
  return BatchedValues{results, std::vector<int64_t>(results.size(), 0)};
}

}  // namespace shardjit::ir::batching_internal
