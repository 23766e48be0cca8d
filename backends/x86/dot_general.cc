#include "backends/x86/dot_general.h"

#include <algorithm>

#include "absl/status/status.h"
#include "backends/reference/kernel.h"
#include "backends/thread_pool.h"
#include "backends/x86/gemm.h"
#include "ir/dtype.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using Dims = std::vector<int64_t>;

// One index of the product: its size and, per operand and the result, its element stride.
struct Index {
  int64_t size = 1;
  int64_t lhs = 0, rhs = 0, out = 0;
};

// Groups the axes of one role (free dims of an operand, or contracting dims of both) into runs
// that each behave as one strided index. `strides[s]` holds the strides of side s (lhs, rhs or
// both); consecutive axes merge when every side is contiguous across them. Size-1 axes are
// dropped. The runs come outer first; the innermost becomes a GEMM dimension, the others loops.
std::vector<Index> Runs(const Dims& sizes, const std::vector<Dims>& strides,
                        const std::vector<int64_t Index::*>& fields) {
  std::vector<Index> runs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    bool merges = !runs.empty();
    for (size_t s = 0; s < fields.size() && merges; ++s) {
      merges = runs.back().*fields[s] == strides[s][i] * sizes[i];
    }
    if (!merges) runs.push_back(Index{});
    Index& run = runs.back();
    run.size *= sizes[i];
    for (size_t s = 0; s < fields.size(); ++s) run.*fields[s] = strides[s][i];
  }
  return runs;
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

Dims Pick(const Dims& values, const Dims& axes) {
  Dims out;
  for (int64_t a : axes) out.push_back(values[a]);
  return out;
}

int64_t Product(const Dims& d) {
  int64_t p = 1;
  for (int64_t x : d) p *= x;
  return p;
}

// The innermost run as a GEMM dimension (an empty role is a dimension of size 1), the others
// appended to `loops`.
Index SplitInnermost(std::vector<Index> runs, std::vector<Index>* loops) {
  if (runs.empty()) return Index{1, 0, 0, 0};
  Index inner = runs.back();
  runs.pop_back();
  loops->insert(loops->end(), runs.begin(), runs.end());
  return inner;
}

}  // namespace

absl::StatusOr<std::vector<ir::Tensor>> DotGeneral(const ir::Op& op,
                                                   const std::vector<ir::Tensor>& operands,
                                                   ir::Allocator* allocator) {
  if (absl::Status s = reference::CheckOperandTypes(op, operands); !s.ok()) return s;
  const ir::Tensor& lhs = operands[0];
  const ir::Tensor& rhs = operands[1];
  const ir::ShapedType out_type = ir::FromProto(op.result_types(0));
  const bool bf16_in = lhs.dtype() == ir::DType::kBF16;
  if ((lhs.dtype() != ir::DType::kF32 && !bf16_in) || rhs.dtype() != lhs.dtype() ||
      (out_type.dtype != ir::DType::kF32 && out_type.dtype != ir::DType::kBF16)) {
    return absl::UnimplementedError("x86 dot_general: bf16/f32 only");
  }
  const ir::DotGeneralAttrs& a = op.dot_general();
  const Dims lb = ToDims(a.lhs_batch_dims()), lc = ToDims(a.lhs_contracting_dims());
  const Dims rb = ToDims(a.rhs_batch_dims()), rc = ToDims(a.rhs_contracting_dims());
  const Dims ls = ir::RowMajorStrides(lhs.dims()), rs = ir::RowMajorStrides(rhs.dims());
  const Dims lf = FreeAxes(lhs.type().rank(), lb, lc), rf = FreeAxes(rhs.type().rank(), rb, rc);
  const int64_t m = Product(Pick(lhs.dims(), lf)), n = Product(Pick(rhs.dims(), rf));
  const int64_t k = Product(Pick(lhs.dims(), lc));

  // The result is [batch..., lhs free..., rhs free...], row-major: the innermost rhs free run is
  // contiguous in it, as the GEMM's C needs.
  const Dims out_strides = ir::RowMajorStrides(out_type.dims);
  const int64_t nb = static_cast<int64_t>(lb.size());
  const int64_t nlf = static_cast<int64_t>(lf.size());
  Dims lf_out(out_strides.begin() + nb, out_strides.begin() + nb + nlf);
  Dims rf_out(out_strides.begin() + nb + nlf, out_strides.end());
  Dims batch_out(out_strides.begin(), out_strides.begin() + nb);

  // Loops outside the GEMM: batch dims, then outer runs of free and contracting dims.
  std::vector<Index> loops = Runs(Pick(lhs.dims(), lb), {Pick(ls, lb), Pick(rs, rb), batch_out},
                                  {&Index::lhs, &Index::rhs, &Index::out});
  const Index mi = SplitInnermost(
      Runs(Pick(lhs.dims(), lf), {Pick(ls, lf), lf_out}, {&Index::lhs, &Index::out}), &loops);
  const Index ni = SplitInnermost(
      Runs(Pick(rhs.dims(), rf), {Pick(rs, rf), rf_out}, {&Index::rhs, &Index::out}), &loops);
  const size_t contracting_loops_begin = loops.size();
  const Index ki = SplitInnermost(
      Runs(Pick(lhs.dims(), lc), {Pick(ls, lc), Pick(rs, rc)}, {&Index::lhs, &Index::rhs}),
      &loops);
  const bool split_k = loops.size() > contracting_loops_begin;

  ir::Tensor out = ir::Tensor::Empty(out_type, allocator);
  if (out.num_elements() == 0) return std::vector<ir::Tensor>{std::move(out)};
  if (k == 0) {
    std::fill_n(static_cast<char*>(out.data()), out.num_elements() * ir::DTypeSize(out_type.dtype),
                0);
    return std::vector<ir::Tensor>{std::move(out)};
  }
  // A bf16 result summed over several GEMMs is accumulated in f32 and rounded once.
  const bool stage_f32 = split_k && out_type.dtype == ir::DType::kBF16;
  ir::Tensor acc = stage_f32 ? ir::Tensor::Empty({ir::DType::kF32, out_type.dims}, allocator) : out;
  const int64_t elem = ir::DTypeSize(lhs.dtype());
  const int64_t acc_elem = ir::DTypeSize(acc.dtype());

  int64_t iterations = 1;
  for (const Index& l : loops) iterations *= l.size;
  Dims idx(loops.size(), 0);
  for (int64_t it = 0; it < iterations; ++it) {
    int64_t lo = 0, ro = 0, oo = 0;
    bool first_k = true;
    for (size_t i = 0; i < loops.size(); ++i) {
      lo += idx[i] * loops[i].lhs;
      ro += idx[i] * loops[i].rhs;
      oo += idx[i] * loops[i].out;
      if (i >= contracting_loops_begin && idx[i] != 0) first_k = false;
    }
    GemmArgs g;
    g.shape = {mi.size, ni.size, ki.size};
    g.type = bf16_in ? GemmType::kBf16Bf16F32 : GemmType::kF32F32F32;
    g.a = static_cast<const char*>(lhs.data()) + lo * elem;
    g.a_row_stride = mi.lhs;
    g.a_col_stride = ki.lhs;
    g.b = static_cast<const char*>(rhs.data()) + ro * elem;
    g.b_row_stride = ki.rhs;
    g.b_col_stride = ni.rhs;
    g.c = static_cast<char*>(acc.data()) + oo * acc_elem;
    g.ldc = mi.size > 1 ? mi.out : ni.size;
    g.out_bf16 = acc.dtype() == ir::DType::kBF16;
    g.accumulate = !first_k;
    g.parallel = backends::CurrentParallelism();
    if (absl::Status s = Gemm(g); !s.ok()) return s;
    for (int64_t i = static_cast<int64_t>(loops.size()) - 1; i >= 0; --i) {
      if (++idx[i] < loops[i].size) break;
      idx[i] = 0;
    }
  }
  if (stage_f32) {
    const float* src = acc.data_as<float>();
    uint16_t* dst = out.data_as<uint16_t>();
    for (int64_t i = 0; i < out.num_elements(); ++i) dst[i] = ir::bf16::FromFloat(src[i]);
  }
  return std::vector<ir::Tensor>{std::move(out)};
}

}  // namespace shardjit::backends::x86
