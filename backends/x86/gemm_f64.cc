#include "backends/x86/gemm_f64.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backends/x86/gemm_driver.h"
#include "base/status_macros.h"
#include "fmt/format.h"

namespace shardjit::backends::x86 {
namespace {

// Lines [l0, l0 + lines) of a source (element (line, k) at src[line * line_stride + k *
// k_stride]: rows of A, columns of B) over k [k0, k0 + kc) as panels of `width` lines: panel p
// holds, for each k, its `width` values (zero past the last line).
void PackPanels(const double* src, int64_t line_stride, int64_t k_stride, int64_t l0,
                int64_t lines, int64_t k0, int64_t kc, int width, double* out) {
  for (int64_t p = 0; p < lines; p += width) {
    const int count = static_cast<int>(std::min<int64_t>(width, lines - p));
    for (int64_t l = 0; l < kc; ++l) {
      double* dst = out + l * width;
      const double* from = src + (l0 + p) * line_stride + (k0 + l) * k_stride;
      if (line_stride == 1) {
        std::copy(from, from + count, dst);
      } else {
        for (int i = 0; i < count; ++i) dst[i] = from[i * line_stride];
      }
      std::fill(dst + count, dst + width, 0.0);
    }
    out += kc * width;
  }
}

// AVX2: a 6x8 tile in twelve ymm accumulators. A block (144 x 256, 288 KiB) stays in L2 while B
// panels (256 x 8, 16 KiB) stream through L1.
struct Avx2Kernel {
  static constexpr int kMr = 6, kNr = 8;
  static constexpr int64_t kKc = 256, kMc = 144, kNc = 2048;

  // One row of the tile: (lo, hi) += x * (b0, b1).
  __attribute__((target("avx2,fma"), always_inline)) static inline void Row(
      const double& x, __m256d b0, __m256d b1, __m256d& lo, __m256d& hi) {
    const __m256d v = _mm256_broadcast_sd(&x);
    lo = _mm256_fmadd_pd(v, b0, lo);
    hi = _mm256_fmadd_pd(v, b1, hi);
  }

  // C (kMr x kNr at `c`, rows `ldc` apart) = (add ? C : 0) + A panel x B panel over kc steps.
  // The accumulators are named one by one: held in an array, GCC stores them back to the stack
  // every step.
  __attribute__((target("avx2,fma"))) static void Micro(int64_t kc, const double* a,
                                                        const double* b, double* c, int64_t ldc,
                                                        bool add) {
    __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256d c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t l = 0; l < kc; ++l, a += kMr, b += kNr) {
      const __m256d b0 = _mm256_load_pd(b), b1 = _mm256_load_pd(b + 4);
      Row(a[0], b0, b1, c00, c01);
      Row(a[1], b0, b1, c10, c11);
      Row(a[2], b0, b1, c20, c21);
      Row(a[3], b0, b1, c30, c31);
      Row(a[4], b0, b1, c40, c41);
      Row(a[5], b0, b1, c50, c51);
    }
    const __m256d rows[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                                  {c30, c31}, {c40, c41}, {c50, c51}};
    for (int i = 0; i < kMr; ++i, c += ldc) {
      for (int v = 0; v < 2; ++v) {
        const __m256d sum =
            add ? _mm256_add_pd(_mm256_loadu_pd(c + 4 * v), rows[i][v]) : rows[i][v];
        _mm256_storeu_pd(c + 4 * v, sum);
      }
    }
  }
};

// AVX-512: an 8x24 tile in 24 zmm accumulators (three B vectors and a broadcast beside them).
// A panels (8 x 128, 8 KiB) and B panels (128 x 24, 24 KiB) fit L1 together; the A block
// (192 x 128, 192 KiB) stays in L2.
struct Avx512Kernel {
  static constexpr int kMr = 8, kNr = 24;
  static constexpr int64_t kKc = 128, kMc = 192, kNc = 2040;

  __attribute__((target("avx512f"), always_inline)) static inline void Row(
      const double& x, __m512d b0, __m512d b1, __m512d b2, __m512d& c0, __m512d& c1,
      __m512d& c2) {
    const __m512d v = _mm512_set1_pd(x);
    c0 = _mm512_fmadd_pd(v, b0, c0);
    c1 = _mm512_fmadd_pd(v, b1, c1);
    c2 = _mm512_fmadd_pd(v, b2, c2);
  }

  __attribute__((target("avx512f"))) static void Micro(int64_t kc, const double* a,
                                                       const double* b, double* c, int64_t ldc,
                                                       bool add) {
    __m512d c00 = _mm512_setzero_pd(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
    __m512d c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
    __m512d c40 = c00, c41 = c00, c42 = c00, c50 = c00, c51 = c00, c52 = c00;
    __m512d c60 = c00, c61 = c00, c62 = c00, c70 = c00, c71 = c00, c72 = c00;
    for (int64_t l = 0; l < kc; ++l, a += kMr, b += kNr) {
      const __m512d b0 = _mm512_load_pd(b), b1 = _mm512_load_pd(b + 8),
                    b2 = _mm512_load_pd(b + 16);
      Row(a[0], b0, b1, b2, c00, c01, c02);
      Row(a[1], b0, b1, b2, c10, c11, c12);
      Row(a[2], b0, b1, b2, c20, c21, c22);
      Row(a[3], b0, b1, b2, c30, c31, c32);
      Row(a[4], b0, b1, b2, c40, c41, c42);
      Row(a[5], b0, b1, b2, c50, c51, c52);
      Row(a[6], b0, b1, b2, c60, c61, c62);
      Row(a[7], b0, b1, b2, c70, c71, c72);
    }
    const __m512d rows[kMr][3] = {{c00, c01, c02}, {c10, c11, c12}, {c20, c21, c22},
                                  {c30, c31, c32}, {c40, c41, c42}, {c50, c51, c52},
                                  {c60, c61, c62}, {c70, c71, c72}};
    for (int i = 0; i < kMr; ++i, c += ldc) {
      for (int v = 0; v < 3; ++v) {
        const __m512d sum =
            add ? _mm512_add_pd(_mm512_loadu_pd(c + 8 * v), rows[i][v]) : rows[i][v];
        _mm512_storeu_pd(c + 8 * v, sum);
      }
    }
  }
};

// The blocked loops around Kernel's micro-kernel.
template <typename Kernel>
absl::Status Run(const GemmArgs& g, GemmScratch* scratch) {
  constexpr int kMr = Kernel::kMr, kNr = Kernel::kNr;
  constexpr int64_t kKc = Kernel::kKc, kMc = Kernel::kMc, kNc = Kernel::kNc;
  const int64_t m = g.shape.m, n = g.shape.n, k = g.shape.k;
  const int64_t mc_max = std::min(kMc, (m + kMr - 1) / kMr * kMr);
  const int64_t nc_max = std::min(kNc, (n + kNr - 1) / kNr * kNr);
  const int64_t kc_max = std::min(kKc, k);
  auto* a_block = static_cast<double*>(scratch->a.Get(mc_max * kc_max * sizeof(double)));
  auto* b_block = static_cast<double*>(scratch->b.Get(nc_max * kc_max * sizeof(double)));
  if (a_block == nullptr || b_block == nullptr) {
    return absl::ResourceExhaustedError(
        fmt::format("gemm: cannot allocate f64 packing buffers (m={}, n={}, k={})", m, n, k));
  }
  auto* c = static_cast<double*>(g.c);
  alignas(64) double tile[kMr * kNr];
  for (int64_t jc = 0; jc < n; jc += kNc) {
    const int64_t nc = std::min(kNc, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKc) {
      const int64_t kc = std::min(kKc, k - pc);
      const bool add = pc > 0 || g.accumulate;
      PackPanels(static_cast<const double*>(g.b), g.b_col_stride, g.b_row_stride, jc, nc, pc, kc,
                 kNr, b_block);
      for (int64_t ic = 0; ic < m; ic += kMc) {
        RETURN_IF_ERROR(g.parallel.stop.Check());
        const int64_t mc = std::min(kMc, m - ic);
        PackPanels(static_cast<const double*>(g.a), g.a_row_stride, g.a_col_stride, ic, mc, pc,
                   kc, kMr, a_block);
        for (int64_t jr = 0; jr < nc; jr += kNr) {
          const int cols = static_cast<int>(std::min<int64_t>(kNr, nc - jr));
          const double* b_panel = b_block + jr * kc;
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            const int rows = static_cast<int>(std::min<int64_t>(kMr, mc - ir));
            const double* a_panel = a_block + ir * kc;
            double* out = c + (ic + ir) * g.ldc + jc + jr;
            if (rows == kMr && cols == kNr) {
              Kernel::Micro(kc, a_panel, b_panel, out, g.ldc, add);
              continue;
            }
            // An edge tile: computed whole into `tile`, its part inside C added or stored.
            Kernel::Micro(kc, a_panel, b_panel, tile, kNr, false);
            for (int i = 0; i < rows; ++i) {
              for (int j = 0; j < cols; ++j) {
                out[i * g.ldc + j] = add ? out[i * g.ldc + j] + tile[i * kNr + j]
                                         : tile[i * kNr + j];
              }
            }
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

F64Tile F64TileAt(IsaLevel isa) {
  if (isa >= IsaLevel::kAvx512) return {Avx512Kernel::kMr, Avx512Kernel::kNr};
  return {Avx2Kernel::kMr, Avx2Kernel::kNr};
}

absl::Status GemmF64(const GemmArgs& g, IsaLevel isa, GemmScratch* scratch) {
  if (isa >= IsaLevel::kAvx512) return Run<Avx512Kernel>(g, scratch);
  return Run<Avx2Kernel>(g, scratch);
}

}  // namespace shardjit::backends::x86
