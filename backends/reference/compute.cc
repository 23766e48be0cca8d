// Reference kernels of constant, iota, reduce_sum/max/min/prod/and/or and dot_general. Floating
// reductions and dots accumulate in f32 and round to the result dtype once; s32 ones wrap.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backends/reduce_kind.h"
#include "backends/reference/dtype_dispatch.h"
#include "backends/reference/elementwise_loops.h"
#include "backends/reference/kernel.h"
#include "backends/reference/reduction.h"
#include "backends/reference/strided_copy.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/dtype.h"
#include "ir/primitive.h"
#include "ir/tensor.h"

// Vectorised clones of the micro-kernel for the CPU found at run time. Sanitizer runtimes are not
// ready when ifunc resolvers run, so sanitized builds use the baseline version only.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SHARDJIT_TARGET_CLONES
#else
#define SHARDJIT_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

namespace shardjit::backends::reference {
namespace {

using ir::bf16;
using ir::DType;
using ir::Tensor;
using Results = absl::StatusOr<std::vector<Tensor>>;
using Dims = std::vector<int64_t>;

Dims ToDims(const google::protobuf::RepeatedField<int64_t>& f) { return {f.begin(), f.end()}; }

template <typename T>
float ToF32(T x) {
  return static_cast<float>(x);
}

// Walks the index space `dims` row by row: calls row(a, b, n, sa, sb) for each run of n elements
// at element offsets a + i*sa and b + i*sb. Dims are merged where both sides are contiguous.
template <typename F>
void ForEachRow(const Dims& dims, const Dims& strides_a, const Dims& strides_b, F&& row) {
  const StridedLoops loops = CollapseLoops(dims, strides_a, strides_b);
  if (loops.empty) return;
  if (loops.rank() == 0) {
    row(0, 0, 1, 1, 1);
    return;
  }
  const int64_t last = loops.rank() - 1;
  ForEachOuterIndex(loops, last, [&](int64_t a, int64_t b) {
    row(a, b, loops.dims[last], loops.dst_strides[last], loops.src_strides[last]);
  });
}

Results Constant(const ir::Op& op, const std::vector<Tensor>&, ir::Allocator* allocator) {
  const auto& a = op.constant();
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  int64_t n = out.num_elements();
  if (n == 0) return std::vector<Tensor>{out};
  if (a.value_size() == 1) {
    out.SetDouble(0, a.value(0));
    FillElements(out.data(), n, out.data(), ir::DTypeSize(out.dtype()));
  } else {
    for (int64_t i = 0; i < n; ++i) out.SetDouble(i, a.value(i));
  }
  return std::vector<Tensor>{out};
}

// The rows along `dimension` are written once (value v in every element of run v, `inner` long),
// then copied to every outer index.
Results Iota(const ir::Op& op, const std::vector<Tensor>&, ir::Allocator* allocator) {
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  const int64_t dim = op.iota().dimension();
  const int64_t inner = ir::RowMajorStrides(out.dims())[dim];
  const int64_t size = out.dims()[dim];
  const int64_t n = out.num_elements();
  if (n == 0) return std::vector<Tensor>{out};
  const int64_t elem = ir::DTypeSize(out.dtype());
  Dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data_as<T>();
    for (int64_t v = 0; v < size; ++v) {
      T value;
      if constexpr (std::is_same_v<T, ir::bf16>) {
        value = T(static_cast<float>(v));
      } else if constexpr (std::is_same_v<T, ir::f16>) {
        value = T(static_cast<double>(v));
      } else {
        value = static_cast<T>(v);
      }
      FillElements(o + v * inner, inner, &value, elem);
    }
  });
  const int64_t block = size * inner;
  char* bytes = out.data_as<char>();
  for (int64_t at = block; at < n; at += block) {
    std::memcpy(bytes + at * elem, bytes, block * elem);
  }
  return std::vector<Tensor>{out};
}

// A reduction over `axes` in row-major order of the operand.
template <Reduction kR>
Results Reduce(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& x = in[0];
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  const Dims out_strides = ReducedOutputStrides(x.dims(), ToDims(op.reduce().axes()));
  Dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    // Not std::vector: C may be bool.
    const int64_t size = out.num_elements();
    std::unique_ptr<C[]> acc(new C[size]);
    std::fill(acc.get(), acc.get() + size, Identity<kR, C>());
    const T* src = x.data_as<T>();
    ForEachRow(x.dims(), ir::RowMajorStrides(x.dims()), out_strides,
               [&](int64_t xi, int64_t oi, int64_t n, int64_t xs, int64_t os) {
                 if (os == 0) {
                   C a = acc[oi];
                   for (int64_t i = 0; i < n; ++i) {
                     a = Combine<kR>(a, C(src[xi + i * xs]));
                   }
                   acc[oi] = a;
                 } else {
                   for (int64_t i = 0; i < n; ++i) {
                     acc[oi + i * os] = Combine<kR>(acc[oi + i * os], C(src[xi + i * xs]));
                   }
                 }
               });
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < size; ++i) o[i] = T(acc[i]);
  });
  return std::vector<Tensor>{out};
}

// Element offsets of every index of the sub-space spanned by `axes` (row-major over them).
Dims OffsetTable(const Dims& dims, const Dims& axes) {
  Dims strides = ir::RowMajorStrides(dims);
  Dims table{0};
  for (int64_t a : axes) {
    Dims next;
    next.reserve(table.size() * dims[a]);
    for (int64_t base : table) {
      for (int64_t i = 0; i < dims[a]; ++i) next.push_back(base + i * strides[a]);
    }
    table = std::move(next);
  }
  return table;
}

// The dims of a rank-`rank` operand that are neither batch nor contracting, in order.
Dims FreeDims(int64_t rank, const Dims& batch, const Dims& contracting) {
  Dims free;
  for (int64_t i = 0; i < rank; ++i) {
    if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
        std::find(contracting.begin(), contracting.end(), i) == contracting.end()) {
      free.push_back(i);
    }
  }
  return free;
}

// dot_general as B independent [M,K] x [K,N] products over offset tables of both operands.
struct DotPlan {
  Dims lhs_batch, lhs_rows, lhs_k;  // offsets into lhs
  Dims rhs_batch, rhs_k, rhs_cols;  // offsets into rhs
  int64_t b() const { return static_cast<int64_t>(lhs_batch.size()); }
  int64_t m() const { return static_cast<int64_t>(lhs_rows.size()); }
  int64_t k() const { return static_cast<int64_t>(lhs_k.size()); }
  int64_t n() const { return static_cast<int64_t>(rhs_cols.size()); }
};

DotPlan MakeDotPlan(const ir::DotGeneralAttrs& a, const Dims& lhs, const Dims& rhs) {
  Dims lb = ToDims(a.lhs_batch_dims()), lc = ToDims(a.lhs_contracting_dims());
  Dims rb = ToDims(a.rhs_batch_dims()), rc = ToDims(a.rhs_contracting_dims());
  int64_t lrank = static_cast<int64_t>(lhs.size()), rrank = static_cast<int64_t>(rhs.size());
  return DotPlan{OffsetTable(lhs, lb), OffsetTable(lhs, FreeDims(lrank, lb, lc)),
                 OffsetTable(lhs, lc), OffsetTable(rhs, rb),
                 OffsetTable(rhs, rc), OffsetTable(rhs, FreeDims(rrank, rb, rc))};
}

// Register tile of the f32 micro-kernel and cache blocking of K and M.
constexpr int64_t kMR = 6;
constexpr int64_t kNR = 16;
constexpr int64_t kKC = 256;
constexpr int64_t kMC = 16 * kMR;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// c[kMR x kNR] (row stride ldc) += a[kc x kMR]^T * b[kc x kNR], both packed k-major.
SHARDJIT_TARGET_CLONES void MicroKernel(
    int64_t kc, const float* __restrict a, const float* __restrict b, float* __restrict c,
    int64_t ldc) {
  float acc[kMR][kNR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + k * kNR;
    // Fully unrolled so that acc lives in vector registers.
#pragma GCC unroll 6
    for (int64_t r = 0; r < kMR; ++r) {
      float ar = a[k * kMR + r];
#pragma GCC unroll 16
      for (int64_t j = 0; j < kNR; ++j) acc[r][j] += ar * bk[j];
    }
  }
  for (int64_t r = 0; r < kMR; ++r) {
    for (int64_t j = 0; j < kNR; ++j) c[r * ldc + j] += acc[r][j];
  }
}

// Packs lhs batch `b` as f32 panels [mp/kMR][K][kMR], zero-padded to mp rows.
template <typename T>
void PackLhs(const T* x, const DotPlan& p, int64_t b, int64_t mp, float* dst) {
  int64_t k_size = p.k();
  for (int64_t m = 0; m < mp; ++m) {
    float* panel = dst + (m / kMR) * k_size * kMR + m % kMR;
    if (m >= p.m()) {
      for (int64_t k = 0; k < k_size; ++k) panel[k * kMR] = 0.0f;
      continue;
    }
    const T* row = x + p.lhs_batch[b] + p.lhs_rows[m];
    for (int64_t k = 0; k < k_size; ++k) panel[k * kMR] = ToF32(row[p.lhs_k[k]]);
  }
}

// Packs rhs batch `b` as f32 panels [np/kNR][K][kNR], zero-padded to np columns.
template <typename T>
void PackRhs(const T* y, const DotPlan& p, int64_t b, int64_t np, float* dst) {
  int64_t k_size = p.k(), n_size = p.n();
  for (int64_t k = 0; k < k_size; ++k) {
    const T* row = y + p.rhs_batch[b] + p.rhs_k[k];
    for (int64_t n = 0; n < np; ++n) {
      float v = n < n_size ? ToF32(row[p.rhs_cols[n]]) : 0.0f;
      dst[(n / kNR) * k_size * kNR + k * kNR + n % kNR] = v;
    }
  }
}

// c[mp x np] += packed lhs x packed rhs, blocked so a K-slice of kMC lhs rows stays in L2 and
// one rhs panel slice in L1.
void BlockedMatmul(const float* a, const float* b, int64_t mp, int64_t np, int64_t k_size,
                   float* c) {
  for (int64_t kb = 0; kb < k_size; kb += kKC) {
    int64_t kc = std::min(kKC, k_size - kb);
    for (int64_t ib = 0; ib < mp; ib += kMC) {
      int64_t ie = std::min(ib + kMC, mp);
      for (int64_t jb = 0; jb < np; jb += kNR) {
        const float* bp = b + jb * k_size + kb * kNR;
        for (int64_t i = ib; i < ie; i += kMR) {
          MicroKernel(kc, a + i * k_size + kb * kMR, bp, c + i * np + jb, np);
        }
      }
    }
  }
}

template <typename In, typename Out>
void FloatDot(const Tensor& lhs, const Tensor& rhs, const DotPlan& p, Tensor& out) {
  int64_t m = p.m(), n = p.n(), k = p.k();
  int64_t mp = RoundUp(m, kMR), np = RoundUp(n, kNR);
  std::vector<float> a(mp * k), b(k * np), c(mp * np);
  Out* o = out.data_as<Out>();
  for (int64_t batch = 0; batch < p.b(); ++batch) {
    PackLhs(lhs.data_as<In>(), p, batch, mp, a.data());
    PackRhs(rhs.data_as<In>(), p, batch, np, b.data());
    std::fill(c.begin(), c.end(), 0.0f);
    BlockedMatmul(a.data(), b.data(), mp, np, k, c.data());
    for (int64_t i = 0; i < m; ++i) {
      Out* row = o + (batch * m + i) * n;
      for (int64_t j = 0; j < n; ++j) row[j] = Out(c[i * np + j]);
    }
  }
}

// The element-by-element dot of the results the blocked f32 one does not give: integers multiply
// and accumulate in Out with wrapping (XLA converts the operands to the result type first), f64
// in f64.
template <typename In, typename Out>
void ExactDot(const Tensor& lhs, const Tensor& rhs, const DotPlan& p, Tensor& out) {
  using Acc = typename std::conditional_t<kIsInt<Out>, WrapTypeOf<Out>,
                                          std::type_identity<double>>::type;
  const In* x = lhs.data_as<In>();
  const In* y = rhs.data_as<In>();
  Out* o = out.data_as<Out>();
  for (int64_t b = 0; b < p.b(); ++b) {
    for (int64_t i = 0; i < p.m(); ++i) {
      const In* row = x + p.lhs_batch[b] + p.lhs_rows[i];
      for (int64_t j = 0; j < p.n(); ++j) {
        const In* col = y + p.rhs_batch[b] + p.rhs_cols[j];
        Acc acc = 0;
        for (int64_t k = 0; k < p.k(); ++k) {
          if constexpr (kIsInt<Out>) {
            // Each operand wraps to Out before the product, as XLA's convert does.
            acc += static_cast<Acc>(static_cast<Out>(row[p.lhs_k[k]])) *
                   static_cast<Acc>(static_cast<Out>(col[p.rhs_k[k]]));
          } else {
            acc += static_cast<Acc>(elementwise::Load(row[p.lhs_k[k]])) *
                   static_cast<Acc>(elementwise::Load(col[p.rhs_k[k]]));
          }
        }
        *o++ = static_cast<Out>(acc);
      }
    }
  }
}

// Whether T is f32 or a 16-bit float: the types the blocked f32 dot takes and gives.
template <typename T>
constexpr bool kF32Family = kIsFloat<T> && !std::is_same_v<T, double>;

Results DotGeneral(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& lhs = in[0];
  const Tensor& rhs = in[1];
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  if (out.num_elements() == 0) return std::vector<Tensor>{out};
  DotPlan plan = MakeDotPlan(op.dot_general(), lhs.dims(), rhs.dims());
  absl::Status status = absl::OkStatus();
  Dispatch(lhs.dtype(), [&](auto in_tag) {
    Dispatch(out.dtype(), [&](auto out_tag) {
      using In = decltype(in_tag);
      using Out = decltype(out_tag);
      if constexpr ((kF32Family<In> || kIsInt<In>) && kF32Family<Out>) {
        FloatDot<In, Out>(lhs, rhs, plan, out);
      } else if constexpr ((!std::is_same_v<In, bool> && std::is_same_v<Out, double>) ||
                           (kIsInt<In> && kIsInt<Out>)) {
        ExactDot<In, Out>(lhs, rhs, plan, out);
      } else {
        status = absl::InvalidArgumentError(
            fmt::format("dot_general: no reference kernel for {} x {} -> {}",
                        ir::DTypeName(lhs.dtype()), ir::DTypeName(rhs.dtype()),
                        ir::DTypeName(out.dtype())));
      }
    });
  });
  RETURN_IF_ERROR(status);
  return std::vector<Tensor>{out};
}

// dot_accumulate: the product in f32 for f32 and the 16-bit floats, in acc's dtype otherwise,
// added into acc's box with one rounding.
Results DotAccumulate(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& acc = in[0];
  const bool f32_product = IsFloating(acc.dtype()) && acc.dtype() != DType::kF64;
  ir::Op dot = op;
  dot.set_opcode("dot_general");
  dot.mutable_dot_general()->set_preferred_element_type(
      f32_product ? ir::F32 : static_cast<ir::DTypeProto>(acc.dtype()));
  ASSIGN_OR_RETURN(std::vector<ir::ShapedType> product_type,
                   ir::InferResultTypes({}, {in[1].type(), in[2].type()}, dot));
  dot.clear_result_types();
  *dot.add_result_types() = ir::ToProto(product_type[0]);
  ASSIGN_OR_RETURN(std::vector<Tensor> product, DotGeneral(dot, {in[1], in[2]}, allocator));
  const Tensor& p = product[0];
  ASSIGN_OR_RETURN(Dims starts, ClampedStarts(op.opcode(), in, 3, acc.dims(), p.dims()));
  Tensor out = acc.Copy(allocator);
  const Dims strides = ir::RowMajorStrides(acc.dims());
  int64_t base = 0;
  for (size_t d = 0; d < strides.size(); ++d) base += starts[d] * strides[d];
  Dispatch(acc.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using P = std::conditional_t<kF32Family<T>, float, T>;
    if constexpr (!std::is_same_v<T, bool>) {
      ForEachRow(p.dims(), strides, ir::RowMajorStrides(p.dims()),
                 [&](int64_t o, int64_t q, int64_t n, int64_t so, int64_t sq) {
                   T* dst = out.data_as<T>() + base + o;
                   const P* src = p.data_as<P>() + q;
                   for (int64_t i = 0; i < n; ++i) {
                     if constexpr (kIsInt<T>) {
                       dst[i * so] = elementwise::WrapAdd(dst[i * so], src[i * sq]);
                     } else {
                       dst[i * so] = T(static_cast<P>(dst[i * so]) + src[i * sq]);
                     }
                   }
                 });
    }
  });
  return std::vector<Tensor>{out};
}

const bool registered = [] {
  RegisterKernel("constant", Constant);
  RegisterKernel("iota", Iota);
  RegisterKernel("reduce_sum", Reduce<Reduction::kSum>);
  RegisterKernel("reduce_max", Reduce<Reduction::kMax>);
  RegisterKernel("reduce_min", Reduce<Reduction::kMin>);
  RegisterKernel("reduce_prod", Reduce<Reduction::kProd>);
  RegisterKernel("reduce_and", Reduce<Reduction::kAnd>);
  RegisterKernel("reduce_or", Reduce<Reduction::kOr>);
  RegisterKernel("dot_general", DotGeneral);
  RegisterKernel("dot_accumulate", DotAccumulate);
  return true;
}();

}  // namespace
}  // namespace shardjit::backends::reference
