// Batching of custom_jvp_call, custom_vjp_call and checkpoint: the same op over batched
// regions, so that a later differentiation still uses the user's rules (jax's
// custom_jvp_call / custom_vjp_call batching rules).
#include <algorithm>
#include <functional>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "ir/batching_internal.h"

namespace shardjit::ir::batching_internal {
namespace {

using Finish =
    std::function<absl::StatusOr<std::vector<int64_t>>(AdEmitter&, const BatchedValues&)>;

// `region` batched into a new region taking params of `types` batched along `dims`; `finish`
// turns its batched results into the new region's results.
absl::StatusOr<Region> BatchedRegion(FunctionBuilder& b, const Region& region,
                                     const std::vector<ShapedType>& types,
                                     const std::vector<int64_t>& dims, int64_t size,
                                     const std::vector<BatchedCapture>& captures,
                                     std::string_view axis_name, const Finish& finish,
                                     const std::vector<AxisList>& vmas,
                                     std::vector<AxisList>* result_vmas = nullptr) {
  RegionScope scope(b, /*spmd=*/false);
  std::vector<int64_t> params;
  for (size_t i = 0; i < types.size(); ++i) {
    params.push_back(b.AddParam(types[i], i < vmas.size() ? vmas[i] : AxisList()));
  }
  ASSIGN_OR_RETURN(BatchedValues out,
                   EmitBatched(b, region, params, dims, size, captures, axis_name));
  AdEmitter e(b);
  ASSIGN_OR_RETURN(std::vector<int64_t> results, finish(e, out));
  if (result_vmas != nullptr) {
    for (int64_t r : results) result_vmas->push_back(b.VmaOf(r));
  }
  return scope.Close(results);
}

// Every result batched along dimension 0; `types` (when set) receives their types.
Finish AllAlongZero(int64_t size, std::vector<ShapedType>* types = nullptr) {
  return [size, types](AdEmitter& e,
                       const BatchedValues& out) -> absl::StatusOr<std::vector<int64_t>> {
    std::vector<int64_t> results;
    for (size_t i = 0; i < out.values.size(); ++i) {
      ASSIGN_OR_RETURN(int64_t r, MoveBatchDim(e, out.values[i], out.batch_dims[i], 0, size));
      if (types != nullptr) types->push_back(e.TypeOf(r));
      results.push_back(r);
    }
    return results;
  };
}

// The op's operands with the batched ones moved to dimension 0: values, types and dims.
struct Operands {
  std::vector<int64_t> values;
  std::vector<ShapedType> types;
  std::vector<int64_t> dims;
  std::vector<AxisList> vmas;  // the mesh axes each varies over (in a typed shard_map body)
};
absl::StatusOr<Operands> AlongZero(FunctionBuilder& b, const std::vector<int64_t>& operands,
                                   const std::vector<int64_t>& dims, int64_t size) {
  AdEmitter e(b);
  Operands out;
  for (size_t i = 0; i < operands.size(); ++i) {
    int64_t v = operands[i];
    if (dims[i] != kNotBatched) {
      ASSIGN_OR_RETURN(v, MoveBatchDim(e, v, dims[i], 0, size));
    }
    out.values.push_back(v);
    out.types.push_back(b.TypeOf(v));
    out.dims.push_back(dims[i] == kNotBatched ? kNotBatched : 0);
    out.vmas.push_back(b.VmaOf(v));
  }
  return out;
}

// v with its first n entries moved to the end.
template <typename T>
std::vector<T> Rotated(std::vector<T> v, size_t n) {
  std::rotate(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), v.end());
  return v;
}

template <typename T>
std::vector<T> Concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

absl::StatusOr<BatchedValues> Run(FunctionBuilder& b, Op op, const std::vector<int64_t>& operands) {
  BatchedValues out;
  ASSIGN_OR_RETURN(out.values, b.AddOp(std::move(op), operands));
  out.batch_dims.assign(out.values.size(), 0);
  return out;
}

}  // namespace

absl::StatusOr<BatchedValues> BatchCustomJvpCall(FunctionBuilder& b, const Op& op,
                                                 const std::vector<int64_t>& operands,
                                                 const std::vector<int64_t>& dims, int64_t size,
                                                 const std::vector<BatchedCapture>& captures,
                                                 std::string_view axis_name) {
  ASSIGN_OR_RETURN(Operands in, AlongZero(b, operands, dims, size));
  Op batched = OpAttrs(op);
  CustomJvpCallAttrs& a = *batched.mutable_custom_jvp_call();
  ASSIGN_OR_RETURN(*a.mutable_fun(), BatchedRegion(b, op.custom_jvp_call().fun(), in.types,
                                                   in.dims, size, captures, axis_name,
                                                   AllAlongZero(size), in.vmas));
  // The tangents are batched as their primals are.
  ASSIGN_OR_RETURN(*a.mutable_jvp(),
                   BatchedRegion(b, op.custom_jvp_call().jvp(), Concat(in.types, in.types),
                                 Concat(in.dims, in.dims), size, captures, axis_name,
                                 AllAlongZero(size), Concat(in.vmas, in.vmas)));
  return Run(b, std::move(batched), in.values);
}

absl::StatusOr<BatchedValues> BatchCustomVjpCall(FunctionBuilder& b, const Op& op,
                                                 const std::vector<int64_t>& operands,
                                                 const std::vector<int64_t>& dims, int64_t size,
                                                 const std::vector<BatchedCapture>& captures,
                                                 std::string_view axis_name) {
  ASSIGN_OR_RETURN(Operands in, AlongZero(b, operands, dims, size));
  Op batched = OpAttrs(op);
  CustomVjpCallAttrs& a = *batched.mutable_custom_vjp_call();
  const CustomVjpCallAttrs& old = op.custom_vjp_call();
  std::vector<ShapedType> fwd_types;  // results, then residuals
  std::vector<AxisList> fwd_vmas;
  ASSIGN_OR_RETURN(*a.mutable_fun(), BatchedRegion(b, old.fun(), in.types, in.dims, size,
                                                   captures, axis_name, AllAlongZero(size),
                                                   in.vmas));
  ASSIGN_OR_RETURN(*a.mutable_fwd(), BatchedRegion(b, old.fwd(), in.types, in.dims, size,
                                                   captures, axis_name,
                                                   AllAlongZero(size, &fwd_types), in.vmas,
                                                   &fwd_vmas));
  // bwd takes the residuals and the results' cotangents, all batched; an operand that is not
  // batched gets the sum of its cotangents over the batch (jax's _match_axes_and_sum).
  const size_t n = static_cast<size_t>(op.results_size());
  const std::vector<ShapedType> bwd_types = Rotated(fwd_types, n);
  const std::vector<AxisList> bwd_vmas = Rotated(fwd_vmas, n);
  const std::vector<int64_t> in_dims = in.dims;
  Finish match = [size, in_dims](AdEmitter& e,
                                 const BatchedValues& out) -> absl::StatusOr<std::vector<int64_t>> {
    std::vector<int64_t> cts;
    for (size_t i = 0; i < out.values.size(); ++i) {
      int64_t c = out.values[i];
      if (in_dims[i] != kNotBatched) {
        ASSIGN_OR_RETURN(c, MoveBatchDim(e, c, out.batch_dims[i], 0, size));
      } else if (out.batch_dims[i] != kNotBatched) {
        ASSIGN_OR_RETURN(c, e.ReduceSum(c, {out.batch_dims[i]}));
      }
      cts.push_back(c);
    }
    return cts;
  };
  ASSIGN_OR_RETURN(*a.mutable_bwd(),
                   BatchedRegion(b, old.bwd(), bwd_types,
                                 std::vector<int64_t>(bwd_types.size(), 0), size, captures,
                                 axis_name, match, bwd_vmas));
  return Run(b, std::move(batched), in.values);
}

absl::StatusOr<BatchedValues> BatchCheckpoint(FunctionBuilder& b, const Op& op,
                                              const std::vector<int64_t>& operands,
                                              const std::vector<int64_t>& dims, int64_t size,
                                              const std::vector<BatchedCapture>& captures,
                                              std::string_view axis_name) {
  ASSIGN_OR_RETURN(Operands in, AlongZero(b, operands, dims, size));
  Op batched = OpAttrs(op);
  ASSIGN_OR_RETURN(*batched.mutable_checkpoint()->mutable_body(),
                   BatchedRegion(b, op.checkpoint().body(), in.types, in.dims, size, captures,
                                 axis_name, AllAlongZero(size), in.vmas));
  return Run(b, std::move(batched), in.values);
}

}  // namespace shardjit::ir::batching_internal
