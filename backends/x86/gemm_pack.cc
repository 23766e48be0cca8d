#include "backends/x86/gemm_pack.h"

#include <algorithm>
#include <cstring>

#include "backends/x86/avx2_transpose.h"
#include "backends/x86/cpu_features.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86 {
namespace {

inline float ToF32(float x) { return x; }
inline float ToF32(uint16_t x) { return ir::bf16::ToFloat(x); }

// The lines to pack (rows of A or columns of B) of one source: element (line n, k value l) is
// data[n * line_stride + l * k_stride].
template <typename T>
struct Lines {
  const T* data;
  int64_t line_stride, k_stride;
};

// 8 f32 lanes from 8 consecutive source elements (bf16 widened).
SHARDJIT_TARGET_AVX2 inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
SHARDJIT_TARGET_AVX2 inline __m256 Load8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// Stores the first `count` (1 to 8) lanes of `v` at `p`.
SHARDJIT_TARGET_AVX2 inline void StoreFirst(float* p, __m256 v, int count) {
  if (count == 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  __m128 part = _mm256_castps256_ps128(v);
  if (count >= 4) {
    _mm_storeu_ps(p, part);
    part = _mm256_extractf128_ps(v, 1);
    p += 4;
    count -= 4;
  }
  if (count >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), part);
    part = _mm_movehl_ps(part, part);
    p += 2;
    count -= 2;
  }
  if (count == 1) _mm_store_ss(p, part);
}

// PackF32Panel for sources contiguous along k (row-major A, column-major B): 8x8 blocks are
// loaded along k and transposed in registers.
template <typename T>
SHARDJIT_TARGET_AVX2 void PackAlongKAvx2(const Lines<T>& src, int64_t steps, int count, int width,
                                  float* out) {
  for (int n0 = 0; n0 < count; n0 += 8) {
    const int lines = std::min(8, count - n0);
    const T* base = src.data + n0 * src.line_stride;
    int64_t s = 0;
    for (; s + 8 <= steps; s += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) {
        if (i >= lines) {
          r[i] = _mm256_setzero_ps();
          continue;
        }
        const T* line = base + i * src.line_stride + s;
        // Up to eight streams at once: help the prefetchers a few lines ahead.
        if ((s & (64 / sizeof(T) - 1)) == 0) _mm_prefetch(line + 256 / sizeof(T), _MM_HINT_T0);
        r[i] = Load8(line);
      }
      Transpose8x8(r);
      for (int i = 0; i < 8; ++i) StoreFirst(out + (s + i) * width + n0, r[i], lines);
    }
    for (; s < steps; ++s) {
      for (int i = 0; i < lines; ++i) out[s * width + n0 + i] = ToF32(base[i * src.line_stride + s]);
    }
  }
}

// Packs `lines` lines of a source contiguous along the lines (row-major B, column-major A) into
// kF32 panels of `width`, one k row at a time across all panels: the source is read in long
// contiguous runs rather than one short run per page. `panel_floats`: the distance between
// panels (steps * width for a whole block).
template <typename T>
SHARDJIT_TARGET_AVX2 void PackAcrossKAvx2(const Lines<T>& src, int64_t steps, int64_t lines,
                                          int width, int64_t panel_floats, float* out) {
  // Rows are a page or more apart, too far for the hardware prefetchers: fetch a few rows ahead.
  constexpr int64_t kAhead = 4, kLine = 64 / sizeof(T);
  for (int64_t s = 0; s < steps; ++s) {
    const T* row = src.data + s * src.k_stride;
    if (s + kAhead < steps) {
      const T* ahead = row + kAhead * src.k_stride;
      for (int64_t n = 0; n < lines; n += kLine) _mm_prefetch(ahead + n, _MM_HINT_T0);
    }
    for (int64_t p = 0; p * width < lines; ++p) {
      const int count = static_cast<int>(std::min<int64_t>(width, lines - p * width));
      float* o = out + p * panel_floats + s * width;
      const T* in = row + p * width;
      int n = 0;
      for (; n + 8 <= count; n += 8) _mm256_storeu_ps(o + n, Load8(in + n));
      for (; n < count; ++n) o[n] = ToF32(in[n]);
      for (; n < width; ++n) o[n] = 0.0f;
    }
  }
}

// One kF32 panel: out[s * width + n] for `steps` k values and `count` of `width` lines, the rest
// zero. Loop order follows the contiguous source dimension.
template <typename T>
void PackF32Panel(const Lines<T>& src, int64_t steps, int count, int width, float* out) {
  const bool avx2 = ActiveIsa() >= IsaLevel::kAvx2;
  if (avx2 && src.k_stride == 1) {
    PackAlongKAvx2(src, steps, count, width, out);
  } else if (src.k_stride == 1) {
    for (int n = 0; n < count; ++n) {
      const T* line = src.data + n * src.line_stride;
      for (int64_t s = 0; s < steps; ++s) out[s * width + n] = ToF32(line[s]);
    }
  } else if (src.line_stride == 1) {
    for (int64_t s = 0; s < steps; ++s) {
      const T* row = src.data + s * src.k_stride;
      float* o = out + s * width;
      for (int n = 0; n < count; ++n) o[n] = ToF32(row[n]);
    }
  } else {
    for (int64_t s = 0; s < steps; ++s) {
      for (int n = 0; n < count; ++n) {
        out[s * width + n] = ToF32(src.data[n * src.line_stride + s * src.k_stride]);
      }
    }
  }
  if (count < width) {
    for (int64_t s = 0; s < steps; ++s) {
      std::memset(out + s * width + count, 0, (width - count) * sizeof(float));
    }
  }
}

// out[n] = lo[n] | hi[n] << 16 for n < count: two rows of bf16 interleaved into k pairs.
SHARDJIT_TARGET_AVX2 void InterleaveRowsAvx2(const uint16_t* lo, const uint16_t* hi, int count,
                                             uint32_t* out) {
  int n = 0;
  for (; n + 8 <= count; n += 8) {
    const __m256i l =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + n)));
    const __m256i h =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(hi + n)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + n),
                        _mm256_or_si256(l, _mm256_slli_epi32(h, 16)));
  }
  for (; n < count; ++n) out[n] = lo[n] | static_cast<uint32_t>(hi[n]) << 16;
}

// InterleaveRowsAvx2 where `avx2` (the CPU has it), else the same in plain C++.
void InterleaveRows(const uint16_t* lo, const uint16_t* hi, int count, bool avx2, uint32_t* out) {
  if (avx2) {
    InterleaveRowsAvx2(lo, hi, count, out);
    return;
  }
  for (int n = 0; n < count; ++n) out[n] = lo[n] | static_cast<uint32_t>(hi[n]) << 16;
}

// One kBf16Pairs panel: out[s * width + n] holds bf16 values at k = 2s (low half) and 2s + 1
// (high half, zero past k) of line n; lines past `count` are zero.
void PackPairPanel(const Lines<uint16_t>& src, int64_t k, int count, int width, uint32_t* out) {
  const int64_t full = k / 2, steps = (k + 1) / 2;
  if (src.k_stride == 1) {
    for (int n = 0; n < count; ++n) {
      const uint16_t* line = src.data + n * src.line_stride;
      for (int64_t s = 0; s < full; ++s) {
        uint32_t pair;
        std::memcpy(&pair, line + 2 * s, 4);
        out[s * width + n] = pair;
      }
      if (full < steps) out[full * width + n] = line[2 * full];
    }
  } else {
    const int64_t ls = src.line_stride, ks = src.k_stride;
    const bool avx2 = ActiveIsa() >= IsaLevel::kAvx2;
    for (int64_t s = 0; s < steps; ++s) {
      const uint16_t* lo = src.data + 2 * s * ks;
      const uint16_t* hi = lo + ks;
      uint32_t* o = out + s * width;
      if (s < full && ls == 1) {
        InterleaveRows(lo, hi, count, avx2, o);
      } else if (s < full) {
        for (int n = 0; n < count; ++n) {
          o[n] = lo[n * ls] | static_cast<uint32_t>(hi[n * ls]) << 16;
        }
      } else {
        for (int n = 0; n < count; ++n) o[n] = lo[n * ls];
      }
    }
  }
  if (count < width) {
    for (int64_t s = 0; s < steps; ++s) {
      std::memset(out + s * width + count, 0, (width - count) * sizeof(uint32_t));
    }
  }
}

// Steps [step0, step0 + steps) of kBf16Pairs panels of `width` lines of a source contiguous
// along the lines (row-major B, column-major A) of `k` values: one step (two source rows, the
// second zero past k) at a time across all panels, as PackAcrossKAvx2 does for kF32.
// `panel_u32s`: the distance between panels.
void PackPairsAcrossK(const Lines<uint16_t>& src, int64_t k, int64_t step0, int64_t steps,
                      int64_t lines, int width, int64_t panel_u32s, uint32_t* out) {
  // Rows are a page or more apart, too far for the hardware prefetchers: fetch a few ahead.
  constexpr int64_t kAhead = 2, kLine = 32;
  const bool avx2 = ActiveIsa() >= IsaLevel::kAvx2;
  for (int64_t s = step0; s < step0 + steps; ++s) {
    const uint16_t* lo = src.data + 2 * s * src.k_stride;
    const uint16_t* hi = 2 * s + 1 < k ? lo + src.k_stride : nullptr;
    for (int64_t r = 2 * (s + kAhead); r < std::min(2 * (s + kAhead + 1), k); ++r) {
      const uint16_t* ahead = src.data + r * src.k_stride;
      for (int64_t n = 0; n < lines; n += kLine) _mm_prefetch(ahead + n, _MM_HINT_T0);
    }
    for (int64_t p = 0; p * width < lines; ++p) {
      const int count = static_cast<int>(std::min<int64_t>(width, lines - p * width));
      uint32_t* o = out + p * panel_u32s + s * width;
      const uint16_t* l = lo + p * width;
      if (hi != nullptr) {
        InterleaveRows(l, hi + p * width, count, avx2, o);
      } else {
        for (int n = 0; n < count; ++n) o[n] = l[n];
      }
      std::memset(o + count, 0, (width - count) * sizeof(uint32_t));
    }
  }
}

// One kAmxTiles A panel: for each block of 32 k values, `width` rows of 64 bytes (row n's values
// in k order, zero past k and for rows past `count`). Each source row is read once, in order.
void PackAmxAPanel(const Lines<uint16_t>& src, int64_t k, int count, int width, uint16_t* out) {
  const int64_t blocks = KSteps(PanelLayout::kAmxTiles, k) / 16;
  const int64_t block_elems = int64_t{width} * 32;
  const int64_t whole = k / 32;  // blocks with all 32 values
  for (int n = 0; n < count; ++n) {
    const uint16_t* line = src.data + n * src.line_stride;
    uint16_t* row = out + n * 32;
    for (int64_t blk = 0; blk < blocks; ++blk, row += block_elems) {
      const int64_t k0 = blk * 32, valid = std::min<int64_t>(32, k - k0);
      if (src.k_stride == 1 && blk < whole) {
        std::memcpy(row, line + k0, 64);  // one inlined 64-byte copy
        continue;
      }
      for (int64_t l = 0; l < valid; ++l) row[l] = line[(k0 + l) * src.k_stride];
      for (int64_t l = valid; l < 32; ++l) row[l] = 0;
    }
  }
  if (count < width) {
    for (int64_t blk = 0; blk < blocks; ++blk) {
      std::memset(out + blk * block_elems + count * 32, 0, (width - count) * 64);
    }
  }
}

// The four int8 of k values 4s .. 4s+3 of a line, zero past k, as one u32 (lowest k in the low
// byte); `flip` (0x80808080 for A, else 0) adds 128 to each value present.
inline uint32_t Quad(const int8_t* line, int64_t k_stride, int64_t s, int64_t k, uint32_t flip) {
  uint32_t quad = 0;
  for (int q = 0; q < 4 && 4 * s + q < k; ++q) {
    quad |= (static_cast<uint8_t>(line[(4 * s + q) * k_stride]) ^ (flip & 0xff)) << (8 * q);
  }
  return quad;
}

// out[n] (n < count) = the bytes of column n of rows r[0..3] (null rows read as zero), lowest
// row in the low byte, each XORed with the byte of `flip`; SSE2 sixteen columns at a time.
void InterleaveQuadRows(const int8_t* const r[4], int count, uint32_t flip, uint32_t* out) {
  const __m128i flip_bytes = _mm_set1_epi32(static_cast<int>(flip));
  int n = 0;
  for (; n + 16 <= count; n += 16) {
    __m128i v[4];
    for (int q = 0; q < 4; ++q) {
      // Rows past k stay zero, unflipped.
      v[q] = r[q] ? _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[q] + n)),
                                  flip_bytes)
                  : _mm_setzero_si128();
    }
    const __m128i lo01 = _mm_unpacklo_epi8(v[0], v[1]), hi01 = _mm_unpackhi_epi8(v[0], v[1]);
    const __m128i lo23 = _mm_unpacklo_epi8(v[2], v[3]), hi23 = _mm_unpackhi_epi8(v[2], v[3]);
    auto* o = reinterpret_cast<__m128i*>(out + n);
    _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(lo01, lo23));
    _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(lo01, lo23));
    _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(hi01, hi23));
    _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(hi01, hi23));
  }
  for (; n < count; ++n) {
    uint32_t quad = 0;
    for (int q = 0; q < 4; ++q) {
      if (r[q]) quad |= (static_cast<uint8_t>(r[q][n]) ^ (flip & 0xff)) << (8 * q);
    }
    out[n] = quad;
  }
}

// One kS8Quads panel: out[s * width + n] holds k values 4s .. 4s+3 of line n (zero past k and
// for lines past `count`), XORed with `flip`.
void PackQuadPanel(const Lines<int8_t>& src, int64_t k, int count, int width, uint32_t flip,
                   uint32_t* out) {
  const int64_t steps = KSteps(PanelLayout::kS8Quads, k), full = k / 4;
  if (src.k_stride == 1) {
    for (int n = 0; n < count; ++n) {
      const int8_t* line = src.data + n * src.line_stride;
      for (int64_t s = 0; s < full; ++s) {
        uint32_t quad;
        std::memcpy(&quad, line + 4 * s, 4);
        out[s * width + n] = quad ^ flip;
      }
      if (full < steps) out[full * width + n] = Quad(line, 1, full, k, flip);
    }
  } else if (src.line_stride == 1) {
    for (int64_t s = 0; s < steps; ++s) {
      const int8_t* rows[4];
      for (int q = 0; q < 4; ++q) {
        rows[q] = 4 * s + q < k ? src.data + (4 * s + q) * src.k_stride : nullptr;
      }
      InterleaveQuadRows(rows, count, flip, out + s * width);
    }
  } else {
    for (int64_t s = 0; s < steps; ++s) {
      for (int n = 0; n < count; ++n) {
        out[s * width + n] = Quad(src.data + n * src.line_stride, src.k_stride, s, k, flip);
      }
    }
  }
  if (count < width) {
    for (int64_t s = 0; s < steps; ++s) {
      std::memset(out + s * width + count, 0, (width - count) * sizeof(uint32_t));
    }
  }
}

// PackLines for int8 sources, into kS8Quads panels (A's values offset by 128).
void PackQuadLines(const int8_t* data, int64_t line_stride, int64_t k_stride, int64_t line0,
                   int64_t lines, int64_t k0, int64_t kc, int width, bool is_a, void* dst) {
  const int64_t steps = KSteps(PanelLayout::kS8Quads, kc);
  for (int64_t p = 0; p * width < lines; ++p) {
    const int count = static_cast<int>(std::min<int64_t>(width, lines - p * width));
    PackQuadPanel(
        Lines<int8_t>{data + (line0 + p * width) * line_stride + k0 * k_stride, line_stride,
                      k_stride},
        kc, count, width, is_a ? 0x80808080u : 0u, static_cast<uint32_t*>(dst) + p * steps * width);
  }
}

// Packs lines [line0, line0 + lines) over k [k0, k0 + kc) into panels of `width` lines.
// `is_a`: the lines are rows of A (AMX tiles lay A and B out differently).
template <typename T>
void PackLines(const T* data, int64_t line_stride, int64_t k_stride, int64_t line0, int64_t lines,
               int64_t k0, int64_t kc, PanelLayout layout, int width, bool is_a, void* dst) {
  const int64_t steps = KSteps(layout, kc);
  if (layout == PanelLayout::kF32 && line_stride == 1 && k_stride != 1 &&
      ActiveIsa() >= IsaLevel::kAvx2) {
    PackAcrossKAvx2(Lines<T>{data + line0 + k0 * k_stride, 1, k_stride}, steps, lines, width,
                    steps * width, static_cast<float*>(dst));
    return;
  }
  if constexpr (sizeof(T) == 2) {
    if (layout == PanelLayout::kBf16Pairs && line_stride == 1 && k_stride != 1) {
      PackPairsAcrossK(Lines<uint16_t>{data + line0 + k0 * k_stride, 1, k_stride}, kc, 0, steps,
                       lines, width, steps * width, static_cast<uint32_t*>(dst));
      return;
    }
  }
  for (int64_t p = 0; p * width < lines; ++p) {
    const int count = static_cast<int>(std::min<int64_t>(width, lines - p * width));
    const Lines<T> src{data + (line0 + p * width) * line_stride + k0 * k_stride, line_stride,
                       k_stride};
    if (layout == PanelLayout::kF32) {
      PackF32Panel(src, steps, count, width, static_cast<float*>(dst) + p * steps * width);
    } else if constexpr (sizeof(T) == 2) {
      uint32_t* panel = static_cast<uint32_t*>(dst) + p * steps * width;
      if (layout == PanelLayout::kAmxTiles && is_a) {
        PackAmxAPanel(src, kc, count, width, reinterpret_cast<uint16_t*>(panel));
        continue;
      }
      PackPairPanel(src, kc, count, width, panel);
      // AMX B tiles: the steps past k up to a whole block are zero.
      const int64_t written = KSteps(PanelLayout::kBf16Pairs, kc);
      std::memset(panel + written * width, 0, (steps - written) * width * sizeof(uint32_t));
    }
  }
}

template <typename T>
void PackRowsAcrossK(const T* data, int64_t k_stride, int64_t col0, int64_t cols, int64_t k0,
                     int64_t rows, int nr, int64_t panel_floats, float* dst) {
  const Lines<T> src{data + col0 + k0 * k_stride, 1, k_stride};
  if (ActiveIsa() >= IsaLevel::kAvx2) {
    PackAcrossKAvx2(src, rows, cols, nr, panel_floats, dst);
    return;
  }
  for (int64_t p = 0; p * nr < cols; ++p) {
    const int count = static_cast<int>(std::min<int64_t>(nr, cols - p * nr));
    PackF32Panel(Lines<T>{src.data + p * nr, 1, k_stride}, rows, count, nr,
                 dst + p * panel_floats);
  }
}

void Pack(const MatrixView& v, int64_t line_stride, int64_t k_stride, int64_t line0, int64_t lines,
          int64_t k0, int64_t kc, PanelLayout layout, int width, bool is_a, void* dst) {
  if (v.type == GemmType::kS8S8S32) {
    PackQuadLines(static_cast<const int8_t*>(v.data), line_stride, k_stride, line0, lines, k0, kc,
                  width, is_a, dst);
  } else if (v.type == GemmType::kBf16Bf16F32) {
    PackLines(static_cast<const uint16_t*>(v.data), line_stride, k_stride, line0, lines, k0, kc,
              layout, width, is_a, dst);
  } else {
    PackLines(static_cast<const float*>(v.data), line_stride, k_stride, line0, lines, k0, kc,
              layout, width, is_a, dst);
  }
}

}  // namespace

void PackBSteps(const MatrixView& b, PanelLayout layout, int64_t k0, int64_t block_k,
                int64_t step0, int64_t steps, int64_t col0, int64_t cols, int nr, void* dst) {
  const int64_t panel_elems = KSteps(layout, block_k) * nr;
  if (layout == PanelLayout::kBf16Pairs) {
    PackPairsAcrossK(
        Lines<uint16_t>{static_cast<const uint16_t*>(b.data) + col0 + k0 * b.row_stride, 1,
                        b.row_stride},
        block_k, step0, steps, cols, nr, panel_elems, static_cast<uint32_t*>(dst));
    return;
  }
  float* out = static_cast<float*>(dst) + step0 * nr;
  if (b.type == GemmType::kBf16Bf16F32) {
    PackRowsAcrossK(static_cast<const uint16_t*>(b.data), b.row_stride, col0, cols, k0 + step0,
                    steps, nr, panel_elems, out);
  } else {
    PackRowsAcrossK(static_cast<const float*>(b.data), b.row_stride, col0, cols, k0 + step0,
                    steps, nr, panel_elems, out);
  }
}

void Int8ColumnOffsets(const MatrixView& b, int64_t k, int64_t col0, int64_t cols, int64_t width,
                       int32_t* out) {
  // Unsigned: sums wrap. Restrict: int8 pointers may alias anything, which would keep the loops
  // scalar.
  uint32_t* __restrict sums = reinterpret_cast<uint32_t*>(out);
  std::fill_n(sums, width, 0u);
  const auto* data = static_cast<const int8_t*>(b.data) + col0 * b.col_stride;
  for (int64_t l = 0; l < k; ++l) {
    const int8_t* __restrict row = data + l * b.row_stride;
    if (b.col_stride == 1) {
      for (int64_t j = 0; j < cols; ++j) sums[j] += static_cast<uint32_t>(row[j]);
    } else {
      for (int64_t j = 0; j < cols; ++j) sums[j] += static_cast<uint32_t>(row[j * b.col_stride]);
    }
  }
  for (int64_t j = 0; j < cols; ++j) sums[j] *= static_cast<uint32_t>(-128);
}

void PackA(const MatrixView& a, int64_t row0, int64_t rows, int64_t k0, int64_t kc,
           PanelLayout layout, int mr, void* dst) {
  Pack(a, a.row_stride, a.col_stride, row0, rows, k0, kc, layout, mr, /*is_a=*/true, dst);
}

void PackB(const MatrixView& b, int64_t k0, int64_t kc, int64_t col0, int64_t cols,
           PanelLayout layout, int nr, void* dst) {
  Pack(b, b.col_stride, b.row_stride, col0, cols, k0, kc, layout, nr, /*is_a=*/false, dst);
}

}  // namespace shardjit::backends::x86
