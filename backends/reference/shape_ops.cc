// Reference kernels of the data-movement primitives: broadcast_in_dim, reshape, transpose, slice,
// dynamic_slice, dynamic_update_slice, concatenate, pad, rev, and with_sharding_constraint,
// optimization_barrier, pvary and name (the identity).
// The others are strided copies; runs that are contiguous on both sides are copied with memcpy.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/reference/kernel.h"
#include "backends/reference/strided_copy.h"
#include "base/status_macros.h"
#include "ir/dtype.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference {
namespace {

using ir::Tensor;
using Results = absl::StatusOr<std::vector<Tensor>>;
using Dims = std::vector<int64_t>;

Dims ToDims(const google::protobuf::RepeatedField<int64_t>& f) { return {f.begin(), f.end()}; }

int64_t Offset(const Dims& index, const Dims& strides) {
  int64_t off = 0;
  for (size_t i = 0; i < index.size(); ++i) off += index[i] * strides[i];
  return off;
}

Results BroadcastInDim(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& x = in[0];
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  Dims bdims = ToDims(op.broadcast_in_dim().broadcast_dimensions());
  Dims x_strides = ir::RowMajorStrides(x.dims());
  Dims src_strides(out.dims().size(), 0);
  for (size_t i = 0; i < bdims.size(); ++i) {
    if (x.dims()[i] != 1) src_strides[bdims[i]] = x_strides[i];
  }
  CopyStrided(out.data(), ir::RowMajorStrides(out.dims()), x.data(), src_strides, out.dims(),
              ir::DTypeSize(x.dtype()));
  return std::vector<Tensor>{out};
}

Results Reshape(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator*) {
  return std::vector<Tensor>{in[0].Reshaped(ResultType(op).dims)};
}

Results Transpose(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& x = in[0];
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  Dims perm = ToDims(op.transpose().permutation());
  Dims x_strides = ir::RowMajorStrides(x.dims());
  Dims src_strides;
  for (int64_t p : perm) src_strides.push_back(x_strides[p]);
  CopyStrided(out.data(), ir::RowMajorStrides(out.dims()), x.data(), src_strides, out.dims(),
              ir::DTypeSize(x.dtype()));
  return std::vector<Tensor>{out};
}

// Copies the window of `x` starting at `starts` with element steps `steps` into a new tensor.
Tensor Window(const ir::Op& op, const Tensor& x, const Dims& starts, const Dims& steps,
              ir::Allocator* allocator) {
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  if (out.num_elements() == 0) return out;
  int64_t elem = ir::DTypeSize(x.dtype());
  Dims x_strides = ir::RowMajorStrides(x.dims());
  Dims src_strides;
  for (size_t i = 0; i < x_strides.size(); ++i) src_strides.push_back(x_strides[i] * steps[i]);
  const char* src = x.data_as<char>() + Offset(starts, x_strides) * elem;
  CopyStrided(out.data(), ir::RowMajorStrides(out.dims()), src, src_strides, out.dims(), elem);
  return out;
}

Results Slice(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const auto& a = op.slice();
  Dims steps = ToDims(a.strides());
  if (steps.empty()) steps.assign(in[0].dims().size(), 1);
  return std::vector<Tensor>{Window(op, in[0], ToDims(a.start_indices()), steps, allocator)};
}

Results DynamicSlice(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& x = in[0];
  Dims sizes = ToDims(op.dynamic_slice().slice_sizes());
  ASSIGN_OR_RETURN(Dims starts, ClampedStarts(op.opcode(), in, 1, x.dims(), sizes));
  return std::vector<Tensor>{Window(op, x, starts, Dims(sizes.size(), 1), allocator)};
}

Results DynamicUpdateSlice(const ir::Op& op, const std::vector<Tensor>& in,
                           ir::Allocator* allocator) {
  const Tensor& x = in[0];
  const Tensor& update = in[1];
  ASSIGN_OR_RETURN(Dims starts, ClampedStarts(op.opcode(), in, 2, x.dims(), update.dims()));
  Tensor out = x.Copy(allocator);
  if (update.num_elements() == 0) return std::vector<Tensor>{out};
  int64_t elem = ir::DTypeSize(x.dtype());
  Dims strides = ir::RowMajorStrides(x.dims());
  char* dst = out.data_as<char>() + Offset(starts, strides) * elem;
  CopyStrided(dst, strides, update.data(), ir::RowMajorStrides(update.dims()), update.dims(), elem);
  return std::vector<Tensor>{out};
}

Results Concatenate(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  int64_t dim = op.concatenate().dimension();
  int64_t elem = ir::DTypeSize(out.dtype());
  Dims out_strides = ir::RowMajorStrides(out.dims());
  int64_t offset = 0;
  for (const Tensor& x : in) {
    if (x.num_elements() > 0) {
      CopyStrided(out.data_as<char>() + offset * out_strides[dim] * elem, out_strides, x.data(),
                  ir::RowMajorStrides(x.dims()), x.dims(), elem);
    }
    offset += x.dims()[dim];
  }
  return std::vector<Tensor>{out};
}

// pad: the padding value everywhere, then the operand's elements that stay (those that negative
// low or high padding does not remove) copied at steps of interior + 1.
Results Pad(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& x = in[0];
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  const int64_t elem = ir::DTypeSize(x.dtype());
  FillElements(out.data(), out.num_elements(), in[1].data(), elem);
  const Dims out_strides = ir::RowMajorStrides(out.dims());
  Dims counts, dst_strides;
  int64_t src_offset = 0, dst_offset = 0;
  const Dims x_strides = ir::RowMajorStrides(x.dims());
  for (size_t d = 0; d < x.dims().size(); ++d) {
    const ir::PaddingConfigDim& c = op.pad().padding_config(d);
    const int64_t step = c.interior() + 1;
    // Operand indices j in [first, last) land at low + j * step, inside [0, out_dim).
    const int64_t first = c.low() >= 0 ? 0 : (-c.low() + step - 1) / step;
    const int64_t room = out.dims()[d] - c.low();
    const int64_t last = room <= 0 ? 0 : std::min(x.dims()[d], (room + step - 1) / step);
    if (last <= first) return std::vector<Tensor>{out};
    counts.push_back(last - first);
    dst_strides.push_back(out_strides[d] * step);
    src_offset += first * x_strides[d];
    dst_offset += (c.low() + first * step) * out_strides[d];
  }
  if (out.num_elements() == 0) return std::vector<Tensor>{out};
  CopyStrided(out.data_as<char>() + dst_offset * elem, dst_strides,
              x.data_as<char>() + src_offset * elem, x_strides, counts, elem);
  return std::vector<Tensor>{out};
}

// rev: a copy that reads the reversed dimensions backwards (negative source strides).
Results Rev(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& x = in[0];
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  if (out.num_elements() == 0) return std::vector<Tensor>{out};
  const int64_t elem = ir::DTypeSize(x.dtype());
  Dims src_strides = ir::RowMajorStrides(x.dims());
  int64_t start = 0;
  for (int64_t d : op.rev().dimensions()) {
    start += (x.dims()[d] - 1) * src_strides[d];
    src_strides[d] = -src_strides[d];
  }
  CopyStrided(out.data(), ir::RowMajorStrides(out.dims()), x.data_as<char>() + start * elem,
              src_strides, out.dims(), elem);
  return std::vector<Tensor>{out};
}

// with_sharding_constraint only matters to the SPMD partitioner, optimization_barrier to
// common-subexpression elimination, pvary to the typing of shard_map bodies, name to checkpoint
// policies: the identity.
Results Identity(const ir::Op&, const std::vector<Tensor>& in, ir::Allocator*) {
  return in;
}

const bool registered = [] {
  RegisterKernel("broadcast_in_dim", BroadcastInDim);
  RegisterKernel("reshape", Reshape);
  RegisterKernel("transpose", Transpose);
  RegisterKernel("slice", Slice);
  RegisterKernel("dynamic_slice", DynamicSlice);
  RegisterKernel("dynamic_update_slice", DynamicUpdateSlice);
  RegisterKernel("concatenate", Concatenate);
  RegisterKernel("pad", Pad);
  RegisterKernel("rev", Rev);
  RegisterKernel("with_sharding_constraint", Identity);
  RegisterKernel("optimization_barrier", Identity);
  RegisterKernel("pvary", Identity);
  RegisterKernel("name", Identity);
  return true;
}();

}  // namespace
}  // namespace shardjit::backends::reference
