#include "backends/x86/dot_general.h"

#include <immintrin.h>

#include <algorithm>
#include <optional>

#include "absl/status/status.h"
#include "backends/reference/kernel.h"
#include "backends/reference/strided_copy.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/gemm.h"
#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "fmt/format.h"
#include "ir/dtype.h"
#include "ir/primitive.h"
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

// The GEMM that computes lhs x rhs -> out: f32 or bf16 operands into an f32 or bf16 result,
// f64 into f64, s8 operands into s32 where the GEMM runs int8 products on generated code
// (GemmRunsInt8()); nullopt else.
std::optional<GemmType> GemmTypeFor(ir::DType lhs, ir::DType rhs, ir::DType out) {
  if (lhs != rhs) return std::nullopt;
  if (lhs == ir::DType::kF64 && out == ir::DType::kF64) return GemmType::kF64F64F64;
  const bool float_out = out == ir::DType::kF32 || out == ir::DType::kBF16;
  if (lhs == ir::DType::kF32 && float_out) return GemmType::kF32F32F32;
  if (lhs == ir::DType::kBF16 && float_out) return GemmType::kBf16Bf16F32;
  if (lhs == ir::DType::kS8 && out == ir::DType::kS32 && GemmRunsInt8()) {
    return GemmType::kS8S8S32;
  }
  return std::nullopt;
}

// Writes dot_general(lhs, rhs) into `out`, an `out_dtype` buffer whose element strides per
// result dim are `out_strides` (the innermost must be 1 unless its size is 1), or adds it there
// with `accumulate`. Unimplemented for what the GEMM cannot do (GemmTypeFor).
absl::Status DotInto(const ir::DotGeneralAttrs& a, const ir::Tensor& lhs, const ir::Tensor& rhs,
                     const ir::ShapedType& out_type, void* out, const Dims& out_strides,
                     bool accumulate, ir::Allocator* allocator) {
  const std::optional<GemmType> gemm_type =
      GemmTypeFor(lhs.dtype(), rhs.dtype(), out_type.dtype);
  if (!gemm_type.has_value()) {
    return absl::UnimplementedError(fmt::format(
        "x86 dot_general: no GEMM for {} x {} -> {}", ir::DTypeName(lhs.dtype()),
        ir::DTypeName(rhs.dtype()), ir::DTypeName(out_type.dtype)));
  }
  const Dims lb = ToDims(a.lhs_batch_dims()), lc = ToDims(a.lhs_contracting_dims());
  const Dims rb = ToDims(a.rhs_batch_dims()), rc = ToDims(a.rhs_contracting_dims());
  const Dims ls = ir::RowMajorStrides(lhs.dims()), rs = ir::RowMajorStrides(rhs.dims());
  const Dims lf = FreeAxes(lhs.type().rank(), lb, lc), rf = FreeAxes(rhs.type().rank(), rb, rc);
  const int64_t k = Product(Pick(lhs.dims(), lc));

  // The result is [batch..., lhs free..., rhs free...]: the innermost rhs free run must be
  // contiguous in it, as the GEMM's C needs.
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
  if (ni.size > 1 && ni.out != 1) {
    return absl::UnimplementedError("x86 dot_general: result columns are not contiguous");
  }
  // A bf16 result summed over several GEMMs is accumulated in f32 and rounded once.
  const bool stage_f32 = split_k && out_type.dtype == ir::DType::kBF16;
  if (stage_f32 && accumulate) {
    return absl::UnimplementedError("x86 dot_accumulate: bf16 acc over split contracting dims");
  }
  if (out_type.num_elements() == 0) return absl::OkStatus();
  const int64_t out_elem = ir::DTypeSize(out_type.dtype);
  if (k == 0) {
    if (accumulate) return absl::OkStatus();
    // Dense here: the result of DotGeneral.
    std::fill_n(static_cast<char*>(out), out_type.num_elements() * out_elem, 0);
    return absl::OkStatus();
  }
  ir::Tensor staged =
      stage_f32 ? ir::Tensor::Empty({ir::DType::kF32, out_type.dims}, allocator) : ir::Tensor();
  void* acc = stage_f32 ? staged.data() : out;
  const int64_t acc_elem = stage_f32 ? sizeof(float) : out_elem;
  const int64_t elem = ir::DTypeSize(lhs.dtype());

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
    g.type = *gemm_type;
    g.a = static_cast<const char*>(lhs.data()) + lo * elem;
    g.a_row_stride = mi.lhs;
    g.a_col_stride = ki.lhs;
    g.b = static_cast<const char*>(rhs.data()) + ro * elem;
    g.b_row_stride = ki.rhs;
    g.b_col_stride = ni.rhs;
    g.c = static_cast<char*>(acc) + oo * acc_elem;
    g.ldc = mi.size > 1 ? mi.out : ni.size;
    g.out_bf16 = !stage_f32 && out_type.dtype == ir::DType::kBF16;
    g.accumulate = accumulate || !first_k;
    g.parallel = base::CurrentParallelism();
    RETURN_IF_ERROR(Gemm(g));
    for (int64_t i = static_cast<int64_t>(loops.size()) - 1; i >= 0; --i) {
      if (++idx[i] < loops[i].size) break;
      idx[i] = 0;
    }
  }
  if (stage_f32) {
    const float* src = staged.data_as<float>();
    uint16_t* dst = static_cast<uint16_t*>(out);
    for (int64_t i = 0; i < out_type.num_elements(); ++i) dst[i] = ir::bf16::FromFloat(src[i]);
  }
  return absl::OkStatus();
}

// f16 <-> f32 over n elements, F16C eight at a time.
__attribute__((target("avx,f16c"))) void F16ToF32F16c(const uint16_t* src, float* dst,
                                                      int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = ir::f16::ToFloat(src[i]);
}

__attribute__((target("avx,f16c"))) void F32ToF16F16c(const float* src, uint16_t* dst,
                                                      int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = ir::f16(src[i]).bits;
}

// F16C at the AVX2 level and above (every AVX2 CPU has it), so the ISA cap governs it as it
// does the GEMM; plain C++ below.
void F16ToF32(const uint16_t* src, float* dst, int64_t n) {
  if (ActiveIsa() >= IsaLevel::kAvx2) return F16ToF32F16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = ir::f16::ToFloat(src[i]);
}

void F32ToF16(const float* src, uint16_t* dst, int64_t n) {
  if (ActiveIsa() >= IsaLevel::kAvx2) return F32ToF16F16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = ir::f16(src[i]).bits;
}

// An f16 tensor widened to f32 (exact).
ir::Tensor WidenF16(const ir::Tensor& t, ir::Allocator* allocator) {
  ir::Tensor wide = ir::Tensor::Empty({ir::DType::kF32, t.dims()}, allocator);
  F16ToF32(static_cast<const uint16_t*>(t.data()), wide.data_as<float>(), t.num_elements());
  return wide;
}

// f16 x f16 -> f16 or f32: the operands widened into the f32 GEMM, an f16 result rounded once
// from its f32 sum (as XLA:CPU computes f16 dots).
absl::StatusOr<ir::Tensor> F16Dot(const ir::DotGeneralAttrs& a, const ir::Tensor& lhs,
                                  const ir::Tensor& rhs, const ir::ShapedType& out_type,
                                  ir::Allocator* allocator) {
  const ir::ShapedType f32_type{ir::DType::kF32, out_type.dims};
  ir::Tensor sum = ir::Tensor::Empty(f32_type, allocator);
  RETURN_IF_ERROR(DotInto(a, WidenF16(lhs, allocator), WidenF16(rhs, allocator), f32_type,
                          sum.data(), ir::RowMajorStrides(f32_type.dims), /*accumulate=*/false,
                          allocator));
  if (out_type.dtype == ir::DType::kF32) return sum;
  ir::Tensor out = ir::Tensor::Empty(out_type, allocator);
  F32ToF16(sum.data_as<float>(), static_cast<uint16_t*>(out.data()), out.num_elements());
  return out;
}

// s8 x s8 -> s8 or s16: the int8 GEMM's s32 sums narrowed with wrapping, which keeps the low
// bits that the integer dot's wrapping accumulation gives.
template <typename Narrow>
absl::StatusOr<ir::Tensor> NarrowInt8Dot(const ir::DotGeneralAttrs& a, const ir::Tensor& lhs,
                                         const ir::Tensor& rhs, const ir::ShapedType& out_type,
                                         ir::Allocator* allocator) {
  const ir::ShapedType s32_type{ir::DType::kS32, out_type.dims};
  ir::Tensor sum = ir::Tensor::Empty(s32_type, allocator);
  RETURN_IF_ERROR(DotInto(a, lhs, rhs, s32_type, sum.data(), ir::RowMajorStrides(s32_type.dims),
                          /*accumulate=*/false, allocator));
  ir::Tensor out = ir::Tensor::Empty(out_type, allocator);
  const auto* src = sum.data_as<int32_t>();
  auto* dst = static_cast<Narrow*>(out.data());
  for (int64_t i = 0; i < out.num_elements(); ++i) dst[i] = static_cast<Narrow>(src[i]);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ir::Tensor>> DotGeneral(const ir::Op& op,
                                                   const std::vector<ir::Tensor>& operands,
                                                   ir::Allocator* allocator) {
  RETURN_IF_ERROR(reference::CheckOperandTypes(op, operands));
  const ir::ShapedType out_type = ir::FromProto(op.result_types(0));
  if (operands[0].dtype() == ir::DType::kF16 &&
      (out_type.dtype == ir::DType::kF16 || out_type.dtype == ir::DType::kF32)) {
    ASSIGN_OR_RETURN(ir::Tensor out, F16Dot(op.dot_general(), operands[0], operands[1],
                                            out_type, allocator));
    return std::vector<ir::Tensor>{std::move(out)};
  }
  if (operands[0].dtype() == ir::DType::kS8 && operands[1].dtype() == ir::DType::kS8 &&
      (out_type.dtype == ir::DType::kS8 || out_type.dtype == ir::DType::kS16)) {
    ASSIGN_OR_RETURN(ir::Tensor out,
                     out_type.dtype == ir::DType::kS8
                         ? NarrowInt8Dot<int8_t>(op.dot_general(), operands[0], operands[1],
                                                 out_type, allocator)
                         : NarrowInt8Dot<int16_t>(op.dot_general(), operands[0], operands[1],
                                                  out_type, allocator));
    return std::vector<ir::Tensor>{std::move(out)};
  }
  ir::Tensor out = ir::Tensor::Empty(out_type, allocator);
  RETURN_IF_ERROR(DotInto(op.dot_general(), operands[0], operands[1], out_type, out.data(),
                          ir::RowMajorStrides(out_type.dims), /*accumulate=*/false, allocator));
  return std::vector<ir::Tensor>{std::move(out)};
}

absl::StatusOr<std::vector<ir::Tensor>> DotAccumulate(const ir::Op& op,
                                                      const std::vector<ir::Tensor>& operands,
                                                      ir::Allocator* allocator) {
  RETURN_IF_ERROR(reference::CheckOperandTypes(op, operands));
  const ir::Tensor& acc = operands[0];
  // The product's type: acc's dtype, the dot's dims.
  ir::Op dot = op;
  dot.set_opcode("dot_general");
  ASSIGN_OR_RETURN(std::vector<ir::ShapedType> product,
                   ir::InferResultTypes({}, {operands[1].type(), operands[2].type()}, dot));
  ASSIGN_OR_RETURN(Dims starts,
                   reference::ClampedStarts(op.opcode(), operands, 3, acc.dims(), product[0].dims));
  const Dims strides = ir::RowMajorStrides(acc.dims());
  int64_t offset = 0;
  for (size_t d = 0; d < strides.size(); ++d) offset += starts[d] * strides[d];
  // In place into a ring's running result donated at its last use.
  ir::Tensor out = reference::WritableOrCopy(acc, allocator);
  char* base = static_cast<char*>(out.data()) + offset * ir::DTypeSize(acc.dtype());
  // On Unimplemented the reference kernel runs (acc is unchanged).
  RETURN_IF_ERROR(DotInto(op.dot_general(), operands[1], operands[2], product[0], base, strides,
                          /*accumulate=*/true, allocator));
  return std::vector<ir::Tensor>{std::move(out)};
}

}  // namespace shardjit::backends::x86
