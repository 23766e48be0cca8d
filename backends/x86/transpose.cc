#include "backends/x86/transpose.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "backends/x86/avx2_transpose.h"
#include "backends/x86/cpu_features.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using Dims = std::vector<int64_t>;

// Tile edge in elements: a tile of each side stays in L1 (32x32 f32 = 4 KiB).
constexpr int64_t kTile = 32;

// One 8x8 block, transposed in registers: dst[r * dst_row + c] = src[r + c * src_col].
SHARDJIT_TARGET_AVX2 void Block8(uint32_t* dst, int64_t dst_row, const uint32_t* src,
                                 int64_t src_col) {
  __m256 v[8];
  for (int c = 0; c < 8; ++c) v[c] = _mm256_loadu_ps(reinterpret_cast<const float*>(src + c * src_col));
  Transpose8x8(v);
  for (int r = 0; r < 8; ++r) _mm256_storeu_ps(reinterpret_cast<float*>(dst + r * dst_row), v[r]);
}

SHARDJIT_TARGET_AVX2 void Block8(uint16_t* dst, int64_t dst_row, const uint16_t* src,
                                 int64_t src_col) {
  __m128i v[8];
  for (int c = 0; c < 8; ++c) {
    v[c] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c * src_col));
  }
  Transpose8x8Epi16(v);
  for (int r = 0; r < 8; ++r) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + r * dst_row), v[r]);
}

// One 4x4 block of 8-byte elements, transposed in registers.
SHARDJIT_TARGET_AVX2 void Block4(uint64_t* dst, int64_t dst_row, const uint64_t* src,
                                 int64_t src_col) {
  __m256d v[4];
  for (int c = 0; c < 4; ++c) {
    v[c] = _mm256_loadu_pd(reinterpret_cast<const double*>(src + c * src_col));
  }
  const __m256d t0 = _mm256_unpacklo_pd(v[0], v[1]), t1 = _mm256_unpackhi_pd(v[0], v[1]);
  const __m256d t2 = _mm256_unpacklo_pd(v[2], v[3]), t3 = _mm256_unpackhi_pd(v[2], v[3]);
  const __m256d rows[4] = {_mm256_permute2f128_pd(t0, t2, 0x20),
                           _mm256_permute2f128_pd(t1, t3, 0x20),
                           _mm256_permute2f128_pd(t0, t2, 0x31),
                           _mm256_permute2f128_pd(t1, t3, 0x31)};
  for (int r = 0; r < 4; ++r) {
    _mm256_storeu_pd(reinterpret_cast<double*>(dst + r * dst_row), rows[r]);
  }
}

// One block of edge kBlock<T> (8x8 of 2- and 4-byte elements, 4x4 of 8-byte ones).
template <typename T>
constexpr int64_t kBlock = sizeof(T) == 8 ? 4 : 8;
template <typename T>
void Block(T* dst, int64_t dst_row, const T* src, int64_t src_col) {
  if constexpr (sizeof(T) == 8) {
    Block4(dst, dst_row, src, src_col);
  } else {
    Block8(dst, dst_row, src, src_col);
  }
}

// One tile, rows [r0, r1) x columns [c0, c1) of dst[r * dst_row + c] = src[r + c * src_col]:
// blocks of 2-, 4- and 8-byte elements transposed in registers when `blocks`, the edges element
// by element.
template <typename T>
void TransposeTile(T* dst, int64_t dst_row, const T* src, int64_t src_col, int64_t r0, int64_t r1,
                   int64_t c0, int64_t c1, bool blocks) {
  int64_t r_done = r0, c_done = c0;  // the block-transposed part is [r0, r_done) x [c0, c_done)
  if constexpr (sizeof(T) > 1) {
    constexpr int64_t b = kBlock<T>;
    if (blocks) {
      r_done = r0 + (r1 - r0) / b * b;
      c_done = c0 + (c1 - c0) / b * b;
      for (int64_t r = r0; r < r_done; r += b) {
        for (int64_t c = c0; c < c_done; c += b) {
          Block(dst + r * dst_row + c, dst_row, src + r + c * src_col, src_col);
        }
      }
    }
  }
  for (int64_t r = r0; r < r1; ++r) {
    T* d = dst + r * dst_row;
    const T* s = src + r;
    // Rows below r_done have their first columns done already.
    for (int64_t c = r < r_done ? c_done : c0; c < c1; ++c) d[c] = s[c * src_col];
  }
}

// dst[r * dst_row + c] = src[r + c * src_col] for r < rows, c < cols, tile by tile (blocks in
// registers where the CPU has AVX2).
template <typename T>
void Transpose2d(T* dst, int64_t dst_row, const T* src, int64_t src_col, int64_t rows,
                 int64_t cols) {
  const bool blocks = sizeof(T) > 1 && ActiveIsa() >= IsaLevel::kAvx2;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      TransposeTile(dst, dst_row, src, src_col, r0, std::min(rows, r0 + kTile), c0,
                    std::min(cols, c0 + kTile), blocks);
    }
  }
}

template <typename T>
void Run(const Dims& dims, const Dims& dst_strides, const Dims& src_strides, int64_t row_dim,
         const void* src, void* dst) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  const int64_t rows = dims[row_dim], cols = dims[rank - 1];
  // The other dims index the batch of 2-D transposes.
  Dims batch, bds, bss;
  for (int64_t i = 0; i + 1 < rank; ++i) {
    if (i == row_dim) continue;
    batch.push_back(dims[i]);
    bds.push_back(dst_strides[i]);
    bss.push_back(src_strides[i]);
  }
  int64_t count = 1;
  for (int64_t b : batch) count *= b;
  Dims idx(batch.size(), 0);
  int64_t doff = 0, soff = 0;
  for (int64_t n = 0; n < count; ++n) {
    Transpose2d(static_cast<T*>(dst) + doff, dst_strides[row_dim],
                static_cast<const T*>(src) + soff, src_strides[rank - 1], rows, cols);
    for (int64_t k = static_cast<int64_t>(batch.size()) - 1; k >= 0; --k) {
      doff += bds[k];
      soff += bss[k];
      if (++idx[k] < batch[k]) break;
      doff -= bds[k] * batch[k];
      soff -= bss[k] * batch[k];
      idx[k] = 0;
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<ir::Tensor>> TransposeKernel(const ir::Op& op,
                                                        const std::vector<ir::Tensor>& operands,
                                                        ir::Allocator* allocator) {
  const ir::Tensor& x = operands[0];
  const auto& perm = op.transpose().permutation();
  const ir::ShapedType out_type = ir::FromProto(op.result_types(0));
  const int64_t elem = ir::DTypeSize(x.dtype());
  if (elem != 1 && elem != 2 && elem != 4 && elem != 8) {
    return absl::UnimplementedError("transpose: dtype");
  }
  // Output index space with the strides of both sides; size-1 dims dropped, adjacent dims that
  // are contiguous on both sides merged.
  const Dims x_strides = ir::RowMajorStrides(x.dims());
  const Dims out_strides = ir::RowMajorStrides(out_type.dims);
  Dims dims, ds, ss;
  for (int i = 0; i < perm.size(); ++i) {
    const int64_t d = out_type.dims[i];
    if (d == 0) return absl::UnimplementedError("transpose: empty");
    if (d == 1) continue;
    const int64_t s = x_strides[perm[i]];
    if (!dims.empty() && ds.back() == out_strides[i] * d && ss.back() == s * d) {
      dims.back() *= d;
      ds.back() = out_strides[i];
      ss.back() = s;
      continue;
    }
    dims.push_back(d);
    ds.push_back(out_strides[i]);
    ss.push_back(s);
  }
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (rank < 2 || ss.back() == 1) return absl::UnimplementedError("transpose: contiguous runs");
  int64_t row_dim = -1;
  for (int64_t i = 0; i + 1 < rank; ++i) {
    if (ss[i] == 1) row_dim = i;
  }
  if (row_dim < 0) return absl::UnimplementedError("transpose: no unit-stride input dim");
  ir::Tensor out = ir::Tensor::Empty(out_type, allocator);
  if (elem == 8) {
    Run<uint64_t>(dims, ds, ss, row_dim, x.data(), out.data());
  } else if (elem == 4) {
    Run<uint32_t>(dims, ds, ss, row_dim, x.data(), out.data());
  } else if (elem == 2) {
    Run<uint16_t>(dims, ds, ss, row_dim, x.data(), out.data());
  } else {
    Run<uint8_t>(dims, ds, ss, row_dim, x.data(), out.data());
  }
  return std::vector<ir::Tensor>{std::move(out)};
}

}  // namespace shardjit::backends::x86
