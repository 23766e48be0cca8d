// Batching of shard_map: the same shard_map over operands with the batch dimension in front
// (its in_spec gains a leading None: the batch is not split over the mesh) and its body batched
// inside; every result batched in front too (jax's shard_map batching rule).
#include "absl/status/status.h"
#include "base/status_macros.h"
#include "ir/batching_internal.h"
#include "ir/sharding.h"

namespace shardjit::ir::batching_internal {
namespace {

// `spec` for a value with one more, unsplit, leading dimension.
PartitionSpec WithLeadingNone(const PartitionSpec& spec) {
  PartitionSpec out;
  out.add_dims();
  for (const DimSpec& d : spec.dims()) *out.add_dims() = d;
  return out;
}

}  // namespace

absl::StatusOr<BatchedValues> BatchShardMap(FunctionBuilder& b, const Op& op,
                                            const std::vector<int64_t>& operands,
                                            const std::vector<int64_t>& dims, int64_t size,
                                            const std::vector<BatchedCapture>& captures,
                                            std::string_view axis_name) {
  const ShardMapAttrs& sm = op.shard_map();
  AdEmitter e(b);
  Op batched = OpAttrs(op);
  ShardMapAttrs& a = *batched.mutable_shard_map();
  a.clear_in_specs();
  a.clear_out_specs();
  std::vector<int64_t> values;
  std::vector<ShapedType> local_types;
  std::vector<int64_t> param_dims;
  for (size_t i = 0; i < operands.size(); ++i) {
    const PartitionSpec& spec = sm.in_specs(static_cast<int>(i));
    ShapedType local = FromProto(sm.body().params(static_cast<int>(i)).type());
    if (dims[i] == kNotBatched) {
      values.push_back(operands[i]);
      *a.add_in_specs() = spec;
      param_dims.push_back(kNotBatched);
    } else {
      ASSIGN_OR_RETURN(int64_t v, MoveBatchDim(e, operands[i], dims[i], 0, size));
      values.push_back(v);
      *a.add_in_specs() = WithLeadingNone(spec);
      local.dims.insert(local.dims.begin(), size);
      param_dims.push_back(0);
    }
    local_types.push_back(local);
  }
  RegionScope scope(b, /*spmd=*/true, -1, sm.check_vma());
  std::vector<int64_t> params;
  for (size_t i = 0; i < local_types.size(); ++i) {
    params.push_back(b.AddParam(local_types[i],
                                sm.check_vma() ? MentionedAxes(sm.in_specs(static_cast<int>(i)))
                                               : AxisList()));
  }
  ASSIGN_OR_RETURN(BatchedValues out,
                   EmitBatched(b, sm.body(), params, param_dims, size, captures, axis_name));
  std::vector<int64_t> results;
  AdEmitter inner(b);
  for (size_t r = 0; r < out.values.size(); ++r) {
    ASSIGN_OR_RETURN(int64_t v, MoveBatchDim(inner, out.values[r], out.batch_dims[r], 0, size));
    results.push_back(v);
    *a.add_out_specs() = WithLeadingNone(sm.out_specs(static_cast<int>(r)));
  }
  *a.mutable_body() = scope.Close(results);
  BatchedValues result;
  ASSIGN_OR_RETURN(result.values, b.AddOp(std::move(batched), values));
  result.batch_dims.assign(result.values.size(), 0);
  return result;
}

}  // namespace shardjit::ir::batching_internal
