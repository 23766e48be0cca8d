#include "backends/x86/dot_general.h"

#include <algorithm>
#include <optional>

#include "absl/status/status.h"
#include "backends/thread_pool.h"
#include "backends/x86/gemm.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using Dims = std::vector<int64_t>;

struct MergedIndex {
  int64_t size = 1;
  int64_t stride = 0;
};

// Merges `axes` of an array (in the order given) into one index with a uniform stride, if their
// strides allow it (each stride is the next one's times the next size; size-1 axes never move).
std::optional<MergedIndex> Merge(const Dims& axes, const Dims& dims, const Dims& strides) {
  Dims moving;
  for (int64_t a : axes) {
    if (dims[a] != 1) moving.push_back(a);
  }
  MergedIndex m;
  m.stride = moving.empty() ? 1 : strides[moving.back()];
  for (size_t i = 0; i < moving.size(); ++i) {
    if (i + 1 < moving.size() &&
        strides[moving[i]] != strides[moving[i + 1]] * dims[moving[i + 1]]) {
      return std::nullopt;
    }
    m.size *= dims[moving[i]];
  }
  return m;
}

Dims FreeAxes(int64_t rank, const Dims& batch, const Dims& contracting) {
  Dims free;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contracting.begin(), contracting.end(), d) == contracting.end()) {
      free.push_back(d);
    }
  }
  return free;
}

Dims ToDims(const google::protobuf::RepeatedField<int64_t>& f) { return {f.begin(), f.end()}; }

}  // namespace

absl::StatusOr<std::vector<ir::Tensor>> DotGeneral(const ir::Op& op,
                                                   const std::vector<ir::Tensor>& operands,
                                                   ir::Allocator* allocator) {
  const ir::Tensor& lhs = operands[0];
  const ir::Tensor& rhs = operands[1];
  const ir::ShapedType out_type = ir::FromProto(op.result_types(0));
  const bool bf16_in = lhs.dtype() == ir::DType::kBF16;
  if ((lhs.dtype() != ir::DType::kF32 && !bf16_in) ||
      (out_type.dtype != ir::DType::kF32 && out_type.dtype != ir::DType::kBF16)) {
    return absl::UnimplementedError("x86 dot_general: bf16/f32 only");
  }
  const ir::DotGeneralAttrs& a = op.dot_general();
  Dims lb = ToDims(a.lhs_batch_dims()), lc = ToDims(a.lhs_contracting_dims());
  Dims rb = ToDims(a.rhs_batch_dims()), rc = ToDims(a.rhs_contracting_dims());
  Dims ls = ir::RowMajorStrides(lhs.dims()), rs = ir::RowMajorStrides(rhs.dims());
  std::optional<MergedIndex> m = Merge(FreeAxes(lhs.type().rank(), lb, lc), lhs.dims(), ls);
  std::optional<MergedIndex> n = Merge(FreeAxes(rhs.type().rank(), rb, rc), rhs.dims(), rs);
  std::optional<MergedIndex> lk = Merge(lc, lhs.dims(), ls);
  std::optional<MergedIndex> rk = Merge(rc, rhs.dims(), rs);
  if (!m || !n || !lk || !rk || m->size == 0 || n->size == 0 || lk->size == 0) {
    return absl::UnimplementedError("x86 dot_general: operand layout needs the general path");
  }
  ir::Tensor out = ir::Tensor::Empty(out_type, allocator);
  int64_t batches = 1;
  for (int64_t d : lb) batches *= lhs.dims()[d];
  const int64_t elem = ir::DTypeSize(lhs.dtype());
  const int64_t out_elem = ir::DTypeSize(out_type.dtype);
  for (int64_t b = 0; b < batches; ++b) {
    // Offsets of batch b (batch dims in the given order, row-major over the batch index).
    int64_t lo = 0, ro = 0, rest = b;
    for (int64_t i = static_cast<int64_t>(lb.size()) - 1; i >= 0; --i) {
      int64_t idx = rest % lhs.dims()[lb[i]];
      rest /= lhs.dims()[lb[i]];
      lo += idx * ls[lb[i]];
      ro += idx * rs[rb[i]];
    }
    GemmArgs g;
    g.shape = {m->size, n->size, lk->size};
    g.type = bf16_in ? GemmType::kBf16Bf16F32 : GemmType::kF32F32F32;
    g.a = static_cast<const char*>(lhs.data()) + lo * elem;
    g.a_row_stride = m->stride;
    g.a_col_stride = lk->stride;
    g.b = static_cast<const char*>(rhs.data()) + ro * elem;
    g.b_row_stride = rk->stride;
    g.b_col_stride = n->stride;
    g.c = static_cast<char*>(out.data()) + b * m->size * n->size * out_elem;
    g.ldc = n->size;
    g.out_bf16 = out_type.dtype == ir::DType::kBF16;
    g.parallel = backends::CurrentParallelism();
    if (absl::Status s = Gemm(g); !s.ok()) return s;
  }
  return std::vector<ir::Tensor>{std::move(out)};
}

}  // namespace shardjit::backends::x86
