#include "ir/batching.h"

#include <unordered_map>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/primitive.h"
#include "ir/regions.h"

namespace shardjit::ir {

absl::StatusOr<int64_t> MoveBatchDim(AdEmitter& e, int64_t x, int64_t batch_dim, int64_t to,
                                     int64_t size) {
  const ShapedType type = e.TypeOf(x);
  if (batch_dim == kNotBatched) {
    std::vector<int64_t> shape = type.dims, dims;
    shape.insert(shape.begin() + to, size);
    for (int64_t d = 0; d < type.rank(); ++d) dims.push_back(d < to ? d : d + 1);
    return e.BroadcastInDim(x, shape, dims);
  }
  if (batch_dim == to) return x;
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < type.rank(); ++d) {
    if (d != batch_dim) perm.push_back(d);
  }
  perm.insert(perm.begin() + to, batch_dim);
  return e.Transpose(x, perm);
}

absl::StatusOr<BatchedValues> EmitBatched(FunctionBuilder& b, const Region& region,
                                          const std::vector<int64_t>& args,
                                          const std::vector<int64_t>& batch_dims, int64_t size) {
  if (args.size() != static_cast<size_t>(region.params_size()) ||
      batch_dims.size() != args.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "vmap: the region takes {} values, got {} (and {} batch dims)", region.params_size(),
        args.size(), batch_dims.size()));
  }
  AdEmitter e(b);
  std::unordered_map<int64_t, int64_t> value, batch_dim;  // region id -> builder id, batch dim
  for (int i = 0; i < region.params_size(); ++i) {
    value[region.params(i).id()] = args[i];
    if (batch_dims[i] != kNotBatched) batch_dim[region.params(i).id()] = batch_dims[i];
  }
  auto mapped = [&](int64_t id) {
    auto it = value.find(id);
    return it == value.end() ? id : it->second;
  };
  auto dim_of = [&](int64_t id) {
    auto it = batch_dim.find(id);
    return it == batch_dim.end() ? kNotBatched : it->second;
  };
  for (const Op& op : region.ops()) {
    std::vector<int64_t> operands, dims;
    bool any_batched = false;
    for (int64_t id : op.operands()) {
      operands.push_back(mapped(id));
      dims.push_back(dim_of(id));
      any_batched = any_batched || dims.back() != kNotBatched;
    }
    Op copy = OpAttrs(op);
    bool reads_batched = false;
    ForEachRegionRead(copy, [&](int64_t& id) {
      reads_batched = reads_batched || dim_of(id) != kNotBatched;
      id = mapped(id);
    });
    const Primitive* prim = FindPrimitive(op.opcode());
    if (reads_batched || (any_batched && (prim == nullptr || !prim->ad.batch))) {
      return absl::UnimplementedError(
          fmt::format("Batching rule for '{}' not implemented", op.opcode()));
    }
    if (!any_batched) {
      ASSIGN_OR_RETURN(std::vector<int64_t> results, b.AddOp(std::move(copy), operands));
      for (int i = 0; i < op.results_size(); ++i) value[op.results(i)] = results[i];
      continue;
    }
    ASSIGN_OR_RETURN(BatchedValues out, prim->ad.batch(e, BatchArgs{op, operands, dims, size}));
    if (out.values.size() != static_cast<size_t>(op.results_size())) {
      return absl::InternalError(fmt::format("{}: its batching rule gave {} results for {}",
                                             op.opcode(), out.values.size(), op.results_size()));
    }
    for (int i = 0; i < op.results_size(); ++i) {
      value[op.results(i)] = out.values[i];
      if (out.batch_dims[i] != kNotBatched) batch_dim[op.results(i)] = out.batch_dims[i];
    }
  }
  BatchedValues result;
  for (int64_t id : region.results()) {
    result.values.push_back(mapped(id));
    result.batch_dims.push_back(dim_of(id));
  }
  return result;
}

}  // namespace shardjit::ir
