// Reference kernels of gather and the scatters. Both walk the batch positions of the indices (all
// their dimensions but the last, which holds one index per mapped operand dimension); each
// position moves one window: gather copies the operand window into the result, a scatter combines
// an update window into the operand (in place when it was donated, else into a copy). Windows
// are strided copies reduced once to their fewest loops, so an embedding row moves with one
// memcpy.
//
// Out of bounds (GatherScatterMode): CLIP and PROMISE_IN_BOUNDS clamp a gather's start indices
// so the window fits; FILL_OR_DROP gives fill_value for a gather window that does not fit. A
// scatter clamps with CLIP, and otherwise drops a window that does not fit, as XLA does.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/reference/dtype_dispatch.h"
#include "backends/reference/kernel.h"
#include "backends/reference/reduction.h"
#include "backends/reference/strided_copy.h"
#include "ir/dtype.h"
#include "ir/indexing.h"
#include "ir/primitive.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference {
namespace {

using ir::Tensor;
using Results = absl::StatusOr<std::vector<Tensor>>;
using Dims = std::vector<int64_t>;

Dims ToDims(const google::protobuf::RepeatedField<int64_t>& f) { return {f.begin(), f.end()}; }

bool Contains(const Dims& dims, int64_t d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

// The batch positions of `indices` and, for each, the operand start it names.
class IndexWalk {
 public:
  IndexWalk(const Tensor& indices, Dims index_map, Dims operand_batching, Dims indices_batching,
            int64_t operand_rank)
      : indices_(IndexValues(indices)),
        batch_dims_(indices.dims().begin(), indices.dims().end() - 1),
        index_map_(std::move(index_map)),
        operand_batching_(std::move(operand_batching)),
        indices_batching_(std::move(indices_batching)),
        operand_rank_(operand_rank) {}

  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : batch_dims_) n *= d;
    return n;
  }
  const Dims& batch_dims() const { return batch_dims_; }

  // Position g's multi-index over batch_dims() and the start it names in the operand.
  void At(int64_t g, Dims& position, Dims& start) const {
    position.assign(batch_dims_.size(), 0);
    for (int64_t d = static_cast<int64_t>(batch_dims_.size()) - 1, rest = g; d >= 0; --d) {
      position[d] = rest % batch_dims_[d];
      rest /= batch_dims_[d];
    }
    start.assign(operand_rank_, 0);
    const int64_t k = static_cast<int64_t>(index_map_.size());
    for (int64_t i = 0; i < k; ++i) start[index_map_[i]] = indices_[g * k + i];
    for (size_t i = 0; i < operand_batching_.size(); ++i) {
      start[operand_batching_[i]] = position[indices_batching_[i]];
    }
  }

  // Clamps the mapped starts so that a window of `sizes` fits `dims` (clamp), or says whether it
  // fits as it is; false in either case when no start fits.
  bool Fit(Dims& start, const Dims& sizes, const Dims& dims, bool clamp) const {
    for (int64_t d : index_map_) {
      const int64_t hi = dims[d] - sizes[d];
      if (hi < 0) return false;  // no start fits (a window into an empty dimension)
      if (clamp) {
        start[d] = std::clamp<int64_t>(start[d], 0, hi);
      } else if (start[d] < 0 || start[d] > hi) {
        return false;
      }
    }
    return true;
  }

 private:
  std::vector<int64_t> indices_;  // IndexValues of the indices
  Dims batch_dims_;
  Dims index_map_, operand_batching_, indices_batching_;
  int64_t operand_rank_;
};

// The element offset of index `idx` of the dimensions `dims_of_idx` (all of them when empty).
int64_t Offset(const Dims& idx, const Dims& strides, const Dims& dims_of_idx = {}) {
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) {
    off += idx[i] * strides[dims_of_idx.empty() ? i : dims_of_idx[i]];
  }
  return off;
}

Results Gather(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const ir::GatherAttrs& a = op.gather();
  const Tensor& x = in[0];
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  if (out.num_elements() == 0) return std::vector<Tensor>{out};
  const int64_t elem = ir::DTypeSize(x.dtype());
  const Dims sizes = ToDims(a.slice_sizes()), offset = ToDims(a.offset_dims());
  const Dims batching = ToDims(a.operand_batching_dims());
  const Dims window = ir::WindowDims(x.dims().size(), a.collapsed_slice_dims(), batching);
  const Dims x_strides = ir::RowMajorStrides(x.dims());
  const Dims out_strides = ir::RowMajorStrides(out.dims());
  Dims window_sizes, dst_strides, src_strides, out_batch;
  for (size_t j = 0; j < window.size(); ++j) {
    window_sizes.push_back(sizes[window[j]]);
    dst_strides.push_back(out_strides[offset[j]]);
    src_strides.push_back(x_strides[window[j]]);
  }
  for (int64_t d = 0; d < static_cast<int64_t>(out.dims().size()); ++d) {
    if (!Contains(offset, d)) out_batch.push_back(d);
  }
  const StridedLoops loops = CollapseLoops(window_sizes, dst_strides, src_strides);
  const IndexWalk walk(in[1], ToDims(a.start_index_map()), batching,
                       ToDims(a.start_indices_batching_dims()), x.dims().size());
  const bool fill = a.mode() == ir::FILL_OR_DROP;
  Tensor fill_value = GatherFill(a, x.dtype());
  char* dst = out.data_as<char>();
  const char* src = x.data_as<char>();
  Dims position, start;
  for (int64_t g = 0; g < walk.count(); ++g) {
    walk.At(g, position, start);
    char* window_out = dst + Offset(position, out_strides, out_batch) * elem;
    if (walk.Fit(start, sizes, x.dims(), !fill)) {
      CopyLoops(window_out, src + Offset(start, x_strides) * elem, loops, elem);
    } else {
      ForEachOuterIndex(loops, loops.rank(), [&](int64_t doff, int64_t) {
        std::memcpy(window_out + doff * elem, fill_value.data(), elem);
      });
    }
  }
  return std::vector<Tensor>{out};
}

template <ir::Prim kPrim>
Results Scatter(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const ir::ScatterAttrs& a = op.scatter();
  const Tensor& x = in[0];
  const Tensor& updates = in[2];
  Tensor out = WritableOrCopy(x, allocator);
  const Dims update_window = ToDims(a.update_window_dims());
  const Dims batching = ToDims(a.operand_batching_dims());
  const Dims window = ir::WindowDims(x.dims().size(), a.inserted_window_dims(), batching);
  const Dims out_strides = ir::RowMajorStrides(x.dims());
  const Dims update_strides = ir::RowMajorStrides(updates.dims());
  // The window's size along every operand dimension (1 where inserted or batching).
  Dims sizes(x.dims().size(), 1), window_sizes, dst_strides, src_strides, update_batch;
  for (size_t j = 0; j < window.size(); ++j) {
    sizes[window[j]] = updates.dims()[update_window[j]];
    window_sizes.push_back(sizes[window[j]]);
    dst_strides.push_back(out_strides[window[j]]);
    src_strides.push_back(update_strides[update_window[j]]);
  }
  for (int64_t u = 0; u < static_cast<int64_t>(updates.dims().size()); ++u) {
    if (!Contains(update_window, u)) update_batch.push_back(u);
  }
  const StridedLoops loops = CollapseLoops(window_sizes, dst_strides, src_strides);
  const IndexWalk walk(in[1], ToDims(a.scatter_dims_to_operand_dims()), batching,
                       ToDims(a.scatter_indices_batching_dims()), x.dims().size());
  const bool clamp = a.mode() == ir::CLIP;
  Dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    T* o = out.data_as<T>();
    const T* u = updates.data_as<T>();
    Dims position, start;
    for (int64_t g = 0; g < walk.count(); ++g) {
      walk.At(g, position, start);
      if (!walk.Fit(start, sizes, x.dims(), clamp)) continue;
      T* window_out = o + Offset(start, out_strides);
      const T* window_in = u + Offset(position, update_strides, update_batch);
      ForEachOuterIndex(loops, loops.rank(), [&](int64_t doff, int64_t soff) {
        T& target = window_out[doff];
        const T v = window_in[soff];
        if constexpr (kPrim == ir::Prim::kScatter) {
          target = v;
        } else if constexpr (kPrim == ir::Prim::kScatterAdd) {
          target = T(Combine<Reduction::kSum>(C(target), C(v)));
        } else if constexpr (kPrim == ir::Prim::kScatterMul) {
          target = T(Combine<Reduction::kProd>(C(target), C(v)));
        } else if constexpr (kPrim == ir::Prim::kScatterMax) {
          target = T(Combine<Reduction::kMax>(C(target), C(v)));
        } else {
          target = T(Combine<Reduction::kMin>(C(target), C(v)));
        }
      });
    }
  });
  return std::vector<Tensor>{out};
}

const bool registered = [] {
  RegisterKernel("gather", Gather);
  RegisterKernel("scatter", Scatter<ir::Prim::kScatter>);
  RegisterKernel("scatter_add", Scatter<ir::Prim::kScatterAdd>);
  RegisterKernel("scatter_mul", Scatter<ir::Prim::kScatterMul>);
  RegisterKernel("scatter_max", Scatter<ir::Prim::kScatterMax>);
  RegisterKernel("scatter_min", Scatter<ir::Prim::kScatterMin>);
  return true;
}();

}  // namespace
}  // namespace shardjit::backends::reference
