#include "backends/x86/copy_kernels.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "backends/reference/kernel.h"
#include "backends/reference/strided_copy.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using Dims = std::vector<int64_t>;
using Results = absl::StatusOr<std::vector<ir::Tensor>>;
using reference::ForEachOuterIndex;
using reference::StridedLoops;

// Runs shorter than this are copied with two fixed-size moves each, not a memcpy call.
constexpr int64_t kSmallRunBytes = 128;
// A broadcast row shorter than this is doubled inside the output until it fills this many bytes
// (L1-resident), which are then copied as one block.
constexpr int64_t kReplicateBytes = 8 << 10;
// concatenate writes this many bytes of output rows at a time, each operand's part in turn.
constexpr int64_t kConcatChunkBytes = 64 << 10;

Dims ToDims(const google::protobuf::RepeatedField<int64_t>& f) { return {f.begin(), f.end()}; }

// Copies `count` runs of `bytes` bytes, bytes in [kLo, 2 * kLo], run i from src + i * src_step to
// dst + i * dst_step, as two possibly overlapping kLo-byte moves.
template <int64_t kLo>
void CopySmallRuns(char* dst, int64_t dst_step, const char* src, int64_t src_step, int64_t bytes,
                   int64_t count) {
  const int64_t tail = bytes - kLo;
  for (int64_t i = 0; i < count; ++i, dst += dst_step, src += src_step) {
    std::memcpy(dst, src, kLo);
    std::memcpy(dst + tail, src + tail, kLo);
  }
}

// Copies `count` runs of `bytes` bytes, run i from src + i * src_step to dst + i * dst_step.
void CopyRuns(char* dst, int64_t dst_step, const char* src, int64_t src_step, int64_t bytes,
              int64_t count) {
  if (dst_step == bytes && src_step == bytes) {
    std::memcpy(dst, src, bytes * count);
    return;
  }
  if (bytes >= kSmallRunBytes) {
    for (int64_t i = 0; i < count; ++i) std::memcpy(dst + i * dst_step, src + i * src_step, bytes);
    return;
  }
  switch (std::bit_floor(static_cast<uint64_t>(bytes))) {
    case 1:
      return CopySmallRuns<1>(dst, dst_step, src, src_step, bytes, count);
    case 2:
      return CopySmallRuns<2>(dst, dst_step, src, src_step, bytes, count);
    case 4:
      return CopySmallRuns<4>(dst, dst_step, src, src_step, bytes, count);
    case 8:
      return CopySmallRuns<8>(dst, dst_step, src, src_step, bytes, count);
    case 16:
      return CopySmallRuns<16>(dst, dst_step, src, src_step, bytes, count);
    case 32:
      return CopySmallRuns<32>(dst, dst_step, src, src_step, bytes, count);
    default:
      return CopySmallRuns<64>(dst, dst_step, src, src_step, bytes, count);
  }
}

// Fills `count` runs of n elements of type U, run i at dst + i * dst_step (bytes) with the element
// at src + i * src_step.
template <typename U>
void FillRuns(char* dst, int64_t dst_step, const char* src, int64_t src_step, int64_t n,
              int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    U value;
    std::memcpy(&value, src + i * src_step, sizeof(U));
    std::fill_n(reinterpret_cast<U*>(dst + i * dst_step), n, value);
  }
}

// Writes `count` copies of the `bytes`-byte run at src back to back at dst.
void ReplicateRun(char* dst, const char* src, int64_t bytes, int64_t count) {
  if (bytes >= kReplicateBytes) {
    for (int64_t i = 0; i < count; ++i) std::memcpy(dst + i * bytes, src, bytes);
    return;
  }
  const int64_t total = bytes * count;
  std::memcpy(dst, src, bytes);
  int64_t filled = bytes;
  while (filled < total && filled < kReplicateBytes) {
    const int64_t n = std::min(filled, total - filled);
    std::memcpy(dst + filled, dst, n);
    filled += n;
  }
  const int64_t block = filled;  // a whole number of runs
  while (filled < total) {
    const int64_t n = std::min(block, total - filled);
    std::memcpy(dst + filled, dst, n);
    filled += n;
  }
}

// Copies the index space `loops` (collapsed) of `elem`-byte elements from src to dst. The last loop
// is a run; the one before it (if any) a count of runs handled in one call.
void CopyLoops(char* dst, const char* src, const StridedLoops& loops, int64_t elem) {
  if (loops.empty) return;
  const int64_t rank = loops.rank();
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  const int64_t last = rank - 1;
  const int64_t n = loops.dims[last];
  const int64_t ds = loops.dst_strides[last], ss = loops.src_strides[last];
  const bool has_rows = rank >= 2;
  const int64_t outer = has_rows ? last - 1 : 0;
  const int64_t rows = has_rows ? loops.dims[last - 1] : 1;
  const int64_t dst_step = has_rows ? loops.dst_strides[last - 1] * elem : 0;
  const int64_t src_step = has_rows ? loops.src_strides[last - 1] * elem : 0;
  if (ds == 1 && ss == 1) {
    const int64_t bytes = n * elem;
    if (has_rows && src_step == 0 && dst_step == bytes) {  // a broadcast row, repeated
      ForEachOuterIndex(loops, outer, [&](int64_t d, int64_t s) {
        ReplicateRun(dst + d * elem, src + s * elem, bytes, rows);
      });
      return;
    }
    ForEachOuterIndex(loops, outer, [&](int64_t d, int64_t s) {
      CopyRuns(dst + d * elem, dst_step, src + s * elem, src_step, bytes, rows);
    });
    return;
  }
  if (ds == 1 && ss == 0) {  // broadcast scalars
    ForEachOuterIndex(loops, outer, [&](int64_t d, int64_t s) {
      char* to = dst + d * elem;
      const char* from = src + s * elem;
      if (elem == 1) {
        FillRuns<uint8_t>(to, dst_step, from, src_step, n, rows);
      } else if (elem == 2) {
        FillRuns<uint16_t>(to, dst_step, from, src_step, n, rows);
      } else if (elem == 4) {
        FillRuns<uint32_t>(to, dst_step, from, src_step, n, rows);
      } else {
        FillRuns<uint64_t>(to, dst_step, from, src_step, n, rows);
      }
    });
    return;
  }
  // Strided runs (e.g. a slice with steps): element by element.
  reference::CopyStrided(dst, loops.dst_strides, src, loops.src_strides, loops.dims, elem);
}

// The bytes per element of `t`; Unimplemented for sizes the copies do not handle.
absl::StatusOr<int64_t> ElementBytes(const ir::Op& op, const ir::Tensor& t) {
  const int64_t elem = ir::DTypeSize(t.dtype());
  if (elem != 1 && elem != 2 && elem != 4 && elem != 8) {
    return absl::UnimplementedError(fmt::format("{}: no x86 copy for {}-byte elements ({})",
                                                op.opcode(), elem, t.type().ToString()));
  }
  return elem;
}

// Whether a window of `sizes` with `steps` is one run of consecutive elements of a row-major
// array of `dims`: one element along the dims before some dim, whole along the dims after it.
bool IsOneRun(const Dims& dims, const Dims& sizes, const Dims& steps) {
  int64_t d = static_cast<int64_t>(dims.size()) - 1;
  while (d >= 0 && sizes[d] == dims[d]) {
    if (sizes[d] > 1 && steps[d] != 1) return false;
    --d;
  }
  if (d >= 0 && sizes[d] > 1 && steps[d] != 1) return false;
  for (int64_t i = 0; i < d; ++i) {
    if (sizes[i] != 1) return false;
  }
  return true;
}

// The window of `x` starting at `starts` with element steps `steps`, as the result of `op`. A
// window that is one run of `x`'s elements (a block of leading rows) is a subrange of `x`'s
// storage, not a copy.
Results Window(const ir::Op& op, const ir::Tensor& x, const Dims& starts, const Dims& steps,
               ir::Allocator* allocator) {
  ASSIGN_OR_RETURN(int64_t elem, ElementBytes(op, x));
  const ir::ShapedType type = reference::ResultType(op);
  const Dims x_strides = ir::RowMajorStrides(x.dims());
  Dims src_strides(x_strides.size());
  int64_t offset = 0;
  for (size_t i = 0; i < x_strides.size(); ++i) {
    src_strides[i] = x_strides[i] * steps[i];
    offset += starts[i] * x_strides[i];
  }
  if (type.num_elements() > 0 && IsOneRun(x.dims(), type.dims, steps)) {
    return std::vector<ir::Tensor>{x.Subrange(offset, type)};
  }
  ir::Tensor out = ir::Tensor::Empty(type, allocator);
  if (out.num_elements() == 0) return std::vector<ir::Tensor>{std::move(out)};
  CopyLoops(out.data_as<char>(), x.data_as<char>() + offset * elem,
            reference::CollapseLoops(out.dims(), ir::RowMajorStrides(out.dims()), src_strides),
            elem);
  return std::vector<ir::Tensor>{std::move(out)};
}

}  // namespace

Results SliceKernel(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                    ir::Allocator* allocator) {
  RETURN_IF_ERROR(reference::CheckOperandTypes(op, operands));
  const ir::Tensor& x = operands[0];
  Dims steps = ToDims(op.slice().strides());
  if (steps.empty()) steps.assign(x.dims().size(), 1);
  return Window(op, x, ToDims(op.slice().start_indices()), steps, allocator);
}

Results DynamicSliceKernel(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                           ir::Allocator* allocator) {
  RETURN_IF_ERROR(reference::CheckOperandTypes(op, operands));
  const ir::Tensor& x = operands[0];
  const Dims sizes = ToDims(op.dynamic_slice().slice_sizes());
  ASSIGN_OR_RETURN(Dims starts,
                   reference::ClampedStarts(op.opcode(), operands, 1, x.dims(), sizes));
  return Window(op, x, starts, Dims(sizes.size(), 1), allocator);
}

Results DynamicUpdateSliceKernel(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                                 ir::Allocator* allocator) {
  RETURN_IF_ERROR(reference::CheckOperandTypes(op, operands));
  const ir::Tensor& x = operands[0];
  const ir::Tensor& update = operands[1];
  ASSIGN_OR_RETURN(int64_t elem, ElementBytes(op, x));
  ASSIGN_OR_RETURN(Dims starts,
                   reference::ClampedStarts(op.opcode(), operands, 2, x.dims(), update.dims()));
  if (update.num_elements() == 0) return std::vector<ir::Tensor>{x};
  if (update.dims() == x.dims()) return std::vector<ir::Tensor>{update};
  ir::Tensor out = reference::WritableOrCopy(x, allocator);
  const Dims strides = ir::RowMajorStrides(x.dims());
  int64_t offset = 0;
  for (size_t i = 0; i < strides.size(); ++i) offset += starts[i] * strides[i];
  CopyLoops(out.data_as<char>() + offset * elem, update.data_as<char>(),
            reference::CollapseLoops(update.dims(), strides, ir::RowMajorStrides(update.dims())),
            elem);
  return std::vector<ir::Tensor>{std::move(out)};
}

Results ConcatenateKernel(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                          ir::Allocator* allocator) {
  RETURN_IF_ERROR(reference::CheckOperandTypes(op, operands));
  ir::Tensor out = ir::Tensor::Empty(reference::ResultType(op), allocator);
  ASSIGN_OR_RETURN(int64_t elem, ElementBytes(op, out));
  if (out.num_elements() == 0) return std::vector<ir::Tensor>{std::move(out)};
  // Row-major, the output is `outer` rows, each the concatenation of one block per operand.
  const int64_t dim = op.concatenate().dimension();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= out.dims()[i];
  for (size_t i = dim + 1; i < out.dims().size(); ++i) inner *= out.dims()[i];
  const int64_t row_bytes = out.dims()[dim] * inner * elem;
  const int64_t chunk = std::max<int64_t>(1, kConcatChunkBytes / row_bytes);
  char* dst = out.data_as<char>();
  for (int64_t r0 = 0; r0 < outer; r0 += chunk) {
    const int64_t rows = std::min(chunk, outer - r0);
    int64_t offset = 0;
    for (const ir::Tensor& x : operands) {
      const int64_t block = x.dims()[dim] * inner * elem;
      if (block == 0) continue;
      CopyRuns(dst + r0 * row_bytes + offset, row_bytes, x.data_as<char>() + r0 * block, block,
               block, rows);
      offset += block;
    }
  }
  return std::vector<ir::Tensor>{std::move(out)};
}

Results BroadcastInDimKernel(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                             ir::Allocator* allocator) {
  RETURN_IF_ERROR(reference::CheckOperandTypes(op, operands));
  const ir::Tensor& x = operands[0];
  ASSIGN_OR_RETURN(int64_t elem, ElementBytes(op, x));
  ir::Tensor out = ir::Tensor::Empty(reference::ResultType(op), allocator);
  if (out.num_elements() == 0) return std::vector<ir::Tensor>{std::move(out)};
  const Dims bdims = ToDims(op.broadcast_in_dim().broadcast_dimensions());
  const Dims x_strides = ir::RowMajorStrides(x.dims());
  Dims src_strides(out.dims().size(), 0);
  for (size_t i = 0; i < bdims.size(); ++i) {
    if (x.dims()[i] != 1) src_strides[bdims[i]] = x_strides[i];
  }
  CopyLoops(out.data_as<char>(), x.data_as<char>(),
            reference::CollapseLoops(out.dims(), ir::RowMajorStrides(out.dims()), src_strides),
            elem);
  return std::vector<ir::Tensor>{std::move(out)};
}

namespace {

// The table rows a row gather or scatter visits, prefetched about 16 KiB ahead of their use
// (their first 4 KiB; the hardware streams the rest): the rows lie anywhere in the table, and
// each copy would otherwise wait for its row to come from memory. Rows under 1 KiB are left to
// the copies, which keep enough of them in flight.
class RowPrefetch {
 public:
  // `limit`: the table's last row.
  RowPrefetch(const char* table, int64_t row_bytes, int64_t limit, const ir::Tensor& indices)
      : table_(table),
        row_bytes_(row_bytes),
        limit_(limit),
        indices_(indices),
        distance_(row_bytes < 1024 ? 0 : std::clamp<int64_t>((16 << 10) / row_bytes, 1, 16)) {}

  // Prefetches the row used `distance_` positions after position g (and, at g = 0, those
  // before it).
  template <bool kWrite>
  void Ahead(int64_t g) const {
    if (distance_ == 0) return;
    const int64_t end = std::min(g + distance_ + 1, indices_.num_elements());
    for (int64_t p = g == 0 ? 0 : g + distance_; p < end; ++p) {
      const int64_t i = std::clamp<int64_t>(reference::IndexValue(indices_, p), 0, limit_);
      const char* row = table_ + i * row_bytes_;
      for (int64_t b = 0; b < std::min<int64_t>(row_bytes_, 4096); b += 64) {
        __builtin_prefetch(row + b, kWrite ? 1 : 0, 3);
      }
    }
  }

 private:
  const char* table_;
  int64_t row_bytes_, limit_;
  const ir::Tensor& indices_;
  int64_t distance_;  // 0: rows too short to prefetch
};

// Whether `indices` ([..., 1]) pick whole rows of x by its leading dim: one index per batch
// position, mapped to dim 0, no batching dims.
bool IndexArrayOfRows(const ir::Tensor& x, const ir::Tensor& indices) {
  return !x.dims().empty() && !indices.dims().empty() && indices.dims().back() == 1 &&
         x.dims()[0] > 0;
}

void AddRow(float* __restrict dst, const float* __restrict src, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] += src[j];
}

}  // namespace

absl::StatusOr<std::vector<ir::Tensor>> GatherRowsKernel(const ir::Op& op,
                                                         const std::vector<ir::Tensor>& operands,
                                                         ir::Allocator* allocator) {
  const ir::GatherAttrs& a = op.gather();
  const ir::Tensor& x = operands[0];
  const ir::Tensor& indices = operands[1];
  const int64_t rank = static_cast<int64_t>(x.dims().size());
  const int64_t batch = static_cast<int64_t>(indices.dims().size()) - 1;
  bool rows = IndexArrayOfRows(x, indices) && a.start_index_map_size() == 1 &&
              a.start_index_map(0) == 0 && a.collapsed_slice_dims_size() == 1 &&
              a.collapsed_slice_dims(0) == 0 &&
              a.operand_batching_dims_size() == 0 && a.slice_sizes_size() == rank &&
              a.slice_sizes(0) == 1 && a.offset_dims_size() == rank - 1;
  for (int64_t d = 1; d < rank && rows; ++d) {
    rows = a.slice_sizes(static_cast<int>(d)) == x.dims()[d] &&
           a.offset_dims(static_cast<int>(d - 1)) == batch + d - 1;
  }
  if (!rows) return absl::UnimplementedError("gather: not a gather of whole rows");
  ir::Tensor out = ir::Tensor::Empty(ir::FromProto(op.result_types(0)), allocator);
  const int64_t count = indices.num_elements(), limit = x.dims()[0] - 1;
  const int64_t row_bytes = x.byte_size() / x.dims()[0];
  const bool fill = a.mode() == ir::FILL_OR_DROP;
  const ir::Tensor fill_row =
      fill ? reference::GatherFill(a, x.dtype()) : ir::Tensor();
  if (row_bytes == 0) return std::vector<ir::Tensor>{std::move(out)};  // empty rows: no data
  const char* src = static_cast<const char*>(x.data());
  char* dst = static_cast<char*>(out.data());
  const RowPrefetch prefetch{src, row_bytes, limit, indices};
  for (int64_t g = 0; g < count; ++g, dst += row_bytes) {
    prefetch.Ahead</*kWrite=*/false>(g);
    const int64_t i = reference::IndexValue(indices, g);
    if (fill && (i < 0 || i > limit)) {
      reference::FillElements(dst, row_bytes / ir::DTypeSize(x.dtype()), fill_row.data(),
                              ir::DTypeSize(x.dtype()));
      continue;
    }
    std::memcpy(dst, src + std::clamp<int64_t>(i, 0, limit) * row_bytes, row_bytes);
  }
  return std::vector<ir::Tensor>{std::move(out)};
}

absl::StatusOr<std::vector<ir::Tensor>> ScatterAddRowsKernel(
    const ir::Op& op, const std::vector<ir::Tensor>& operands, ir::Allocator* allocator) {
  const ir::ScatterAttrs& a = op.scatter();
  const ir::Tensor& x = operands[0];
  const ir::Tensor& indices = operands[1];
  const ir::Tensor& updates = operands[2];
  const int64_t rank = static_cast<int64_t>(x.dims().size());
  const int64_t batch = static_cast<int64_t>(indices.dims().size()) - 1;
  bool rows = x.dtype() == ir::DType::kF32 && updates.dtype() == ir::DType::kF32 &&
              IndexArrayOfRows(x, indices) && a.scatter_dims_to_operand_dims_size() == 1 &&
              a.scatter_dims_to_operand_dims(0) == 0 && a.inserted_window_dims_size() == 1 &&
              a.inserted_window_dims(0) == 0 && a.operand_batching_dims_size() == 0 &&
              a.scatter_indices_batching_dims_size() == 0 &&
              a.update_window_dims_size() == rank - 1 &&
              static_cast<int64_t>(updates.dims().size()) == batch + rank - 1;
  for (int64_t d = 0; d < batch && rows; ++d) rows = updates.dims()[d] == indices.dims()[d];
  for (int64_t d = 1; d < rank && rows; ++d) {
    rows = a.update_window_dims(static_cast<int>(d - 1)) == batch + d - 1 &&
           updates.dims()[batch + d - 1] == x.dims()[d];
  }
  if (!rows) return absl::UnimplementedError("scatter_add: not a scatter_add of whole f32 rows");
  ir::Tensor out = reference::WritableOrCopy(x, allocator);
  const int64_t count = indices.num_elements(), limit = x.dims()[0] - 1;
  const int64_t row = x.num_elements() / x.dims()[0];
  if (row == 0) return std::vector<ir::Tensor>{std::move(out)};
  float* table = out.data_as<float>();
  const float* update = updates.data_as<float>();
  const RowPrefetch prefetch{reinterpret_cast<const char*>(table), row * 4, limit, indices};
  const bool clamp = a.mode() == ir::CLIP;
  for (int64_t g = 0; g < count; ++g, update += row) {
    prefetch.Ahead</*kWrite=*/true>(g);
    int64_t i = reference::IndexValue(indices, g);
    if (clamp) {
      i = std::clamp<int64_t>(i, 0, limit);
    } else if (i < 0 || i > limit) {
      continue;  // a window that does not fit is dropped, as XLA does
    }
    AddRow(table + i * row, update, row);
  }
  return std::vector<ir::Tensor>{std::move(out)};
}

}  // namespace shardjit::backends::x86
