#include "backends/x86/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "backends/reduce_kind.h"
#include "backends/reference/kernel.h"
#include "backends/reference/strided_copy.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/reduce_kernel.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using Dims = std::vector<int64_t>;
using Results = absl::StatusOr<std::vector<ir::Tensor>>;
using reference::ForEachOuterIndex;
using reference::StridedLoops;

constexpr int64_t kLanes = 8;
// A kColumns call covers at most this many columns, so that its accumulators stay in L1 while the
// rows stream through.
constexpr int64_t kColumnBlock = 2048;

template <typename T>
constexpr ir::DType kDType = std::is_same_v<T, float> ? ir::DType::kF32 : ir::DType::kBF16;

// acc[r] <op>= row r of `rows` rows of n elements (row r at src + r * stride).
template <ReduceKind kKind, typename T>
void ReduceRows(ReduceLoopFn loop, const T* src, int64_t stride, int64_t rows, int64_t n,
                float* acc) {
  const int64_t vectors = n / kLanes;
  if (vectors > 0) {
    ReduceArgs args{src, stride * static_cast<int64_t>(sizeof(T)), rows, vectors, acc};
    loop(&args);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = src + r * stride;
    for (int64_t i = vectors * kLanes; i < n; ++i) {
      acc[r] = CombineInOrder<kKind>(acc[r], static_cast<float>(row[i]));
    }
  }
}

// acc[j] <op>= row[j] for j < n, for each of `rows` rows in order (row r at src + r * stride).
template <ReduceKind kKind, typename T>
void ReduceColumns(ReduceLoopFn loop, const T* src, int64_t stride, int64_t rows, int64_t n,
                   float* acc) {
  const int64_t vector_cols = n / kLanes * kLanes;
  for (int64_t c0 = 0; c0 < vector_cols; c0 += kColumnBlock) {
    const int64_t cols = std::min(kColumnBlock, vector_cols - c0);
    ReduceArgs args{src + c0, stride * static_cast<int64_t>(sizeof(T)), rows, cols / kLanes,
                    acc + c0};
    loop(&args);
  }
  if (vector_cols == n) return;
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = src + r * stride;
    for (int64_t j = vector_cols; j < n; ++j) {
      acc[j] = CombineInOrder<kKind>(acc[j], static_cast<float>(row[j]));
    }
  }
}

// The first element, in row-major order over `reduced` (its src strides), from x that is NaN (when
// `nan`) or zero: the reference's max/min when the result is NaN or zero.
template <typename T>
float FirstInOrder(const T* x, const StridedLoops& reduced, bool nan) {
  const int64_t rank = reduced.rank();
  Dims idx(rank, 0);
  int64_t offset = 0;
  while (true) {
    const float v = static_cast<float>(x[offset]);
    if (nan ? std::isnan(v) : v == 0.0f) return v;
    int64_t k = rank - 1;
    for (; k >= 0; --k) {
      offset += reduced.src_strides[k];
      if (++idx[k] < reduced.dims[k]) break;
      offset -= reduced.src_strides[k] * reduced.dims[k];
      idx[k] = 0;
    }
    if (k < 0) return v;  // unreachable for a NaN or zero result: some element matches
  }
}

// Replaces every NaN result (and, with `zeros`, every zero result) of a max/min by the reference's:
// the first NaN or zero in order.
template <typename T>
void RescanNansAndZeros(const T* x, const StridedLoops& loops, bool zeros, float* acc) {
  StridedLoops kept, reduced;
  for (int64_t k = 0; k < loops.rank(); ++k) {
    StridedLoops& side = loops.dst_strides[k] != 0 ? kept : reduced;
    side.dims.push_back(loops.dims[k]);
    side.dst_strides.push_back(loops.dst_strides[k]);
    side.src_strides.push_back(loops.src_strides[k]);
  }
  ForEachOuterIndex(kept, kept.rank(), [&](int64_t o, int64_t base) {
    const bool nan = std::isnan(acc[o]);
    if (nan || (zeros && acc[o] == 0.0f)) acc[o] = FirstInOrder(x + base, reduced, nan);
  });
}

// acc <op>= x over the collapsed index space `loops` (dst: output offsets, 0 on reduced dims).
template <ReduceKind kKind, typename T>
absl::Status ReduceInto(const T* x, const StridedLoops& loops, float* acc) {
  const int64_t rank = loops.rank();
  if (rank == 0) {
    acc[0] = CombineInOrder<kKind>(acc[0], static_cast<float>(x[0]));
    return absl::OkStatus();
  }
  // Kept and reduced loops alternate; the one before the last (if any) is the rows of a call.
  const int64_t last = rank - 1;
  const bool rows_layout = loops.dst_strides[last] == 0;
  const int64_t n = loops.dims[last];
  const bool has_rows = rank >= 2;
  const int64_t rows = has_rows ? loops.dims[last - 1] : 1;
  const int64_t stride = has_rows ? loops.src_strides[last - 1] : 0;
  const ReduceLoopKey key{kKind, kDType<T>,
                          rows_layout ? ReduceLayout::kRows : ReduceLayout::kColumns};
  ASSIGN_OR_RETURN(ReduceLoopFn loop, GetReduceLoop(key, ActiveIsa()));
  ForEachOuterIndex(loops, has_rows ? last - 1 : 0, [&](int64_t o, int64_t i) {
    if (rows_layout) {
      ReduceRows<kKind>(loop, x + i, stride, rows, n, acc + o);
    } else {
      ReduceColumns<kKind>(loop, x + i, stride, rows, n, acc + o);
    }
  });
  // Rows reorder elements across lanes; columns keep the order but blend in the last NaN.
  if constexpr (kKind != ReduceKind::kSum) RescanNansAndZeros(x, loops, rows_layout, acc);
  return absl::OkStatus();
}

template <ReduceKind kKind>
Results Reduce(const ir::Op& op, const std::vector<ir::Tensor>& operands,
               ir::Allocator* allocator) {
  RETURN_IF_ERROR(reference::CheckOperandTypes(op, operands));
  const ir::Tensor& x = operands[0];
  if (x.dtype() != ir::DType::kF32 && x.dtype() != ir::DType::kBF16) {
    return absl::UnimplementedError(
        fmt::format("{}: no x86 kernel for {} input", op.opcode(), x.type().ToString()));
  }
  ir::Tensor out = ir::Tensor::Empty(reference::ResultType(op), allocator);
  const int64_t n_out = out.num_elements();
  if (n_out == 0) return std::vector<ir::Tensor>{std::move(out)};
  // f32 accumulators: the output itself, or a temporary rounded to bf16 once at the end.
  ir::Tensor acc = out.dtype() == ir::DType::kF32
                       ? out
                       : ir::Tensor::Empty({ir::DType::kF32, out.dims()}, allocator);
  std::fill_n(acc.data_as<float>(), n_out, ReduceIdentity<kKind, float>());
  const StridedLoops loops = reference::CollapseLoops(
      x.dims(), ReducedOutputStrides(x.dims(), op.reduce().axes()), ir::RowMajorStrides(x.dims()));
  if (!loops.empty) {
    RETURN_IF_ERROR(x.dtype() == ir::DType::kF32
                        ? ReduceInto<kKind>(x.data_as<float>(), loops, acc.data_as<float>())
                        : ReduceInto<kKind>(x.data_as<ir::bf16>(), loops, acc.data_as<float>()));
  }
  if (out.dtype() == ir::DType::kBF16) {
    const float* a = acc.data_as<float>();
    ir::bf16* o = out.data_as<ir::bf16>();
    for (int64_t i = 0; i < n_out; ++i) o[i] = ir::bf16(a[i]);
  }
  return std::vector<ir::Tensor>{std::move(out)};
}

}  // namespace

Results ReduceSumKernel(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                        ir::Allocator* allocator) {
  return Reduce<ReduceKind::kSum>(op, operands, allocator);
}

Results ReduceMaxKernel(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                        ir::Allocator* allocator) {
  return Reduce<ReduceKind::kMax>(op, operands, allocator);
}

Results ReduceMinKernel(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                        ir::Allocator* allocator) {
  return Reduce<ReduceKind::kMin>(op, operands, allocator);
}

}  // namespace shardjit::backends::x86
