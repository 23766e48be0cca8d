#include "backends/x86/gemm_pack.h"

#include <algorithm>
#include <cstring>

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

// One kF32 panel: out[s * width + n] for `steps` k values and `count` of `width` lines, the rest
// zero. Loop order follows the contiguous source dimension.
template <typename T>
void PackF32Panel(const Lines<T>& src, int64_t steps, int count, int width, float* out) {
  if (src.k_stride == 1) {
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
    for (int64_t s = 0; s < steps; ++s) {
      const uint16_t* lo = src.data + 2 * s * ks;
      const uint16_t* hi = lo + ks;
      uint32_t* o = out + s * width;
      if (s < full && ls == 1) {
        for (int n = 0; n < count; ++n) o[n] = lo[n] | static_cast<uint32_t>(hi[n]) << 16;
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

// Packs lines [line0, line0 + lines) over k [k0, k0 + kc) into panels of `width` lines.
template <typename T>
void PackLines(const T* data, int64_t line_stride, int64_t k_stride, int64_t line0, int64_t lines,
               int64_t k0, int64_t kc, PanelLayout layout, int width, void* dst) {
  const int64_t steps = KSteps(layout, kc);
  for (int64_t p = 0; p * width < lines; ++p) {
    const int count = static_cast<int>(std::min<int64_t>(width, lines - p * width));
    const Lines<T> src{data + (line0 + p * width) * line_stride + k0 * k_stride, line_stride,
                       k_stride};
    if (layout == PanelLayout::kF32) {
      PackF32Panel(src, steps, count, width, static_cast<float*>(dst) + p * steps * width);
    } else if constexpr (sizeof(T) == 2) {
      PackPairPanel(src, kc, count, width, static_cast<uint32_t*>(dst) + p * steps * width);
    }
  }
}

void Pack(const MatrixView& v, int64_t line_stride, int64_t k_stride, int64_t line0, int64_t lines,
          int64_t k0, int64_t kc, PanelLayout layout, int width, void* dst) {
  if (v.bf16) {
    PackLines(static_cast<const uint16_t*>(v.data), line_stride, k_stride, line0, lines, k0, kc,
              layout, width, dst);
  } else {
    PackLines(static_cast<const float*>(v.data), line_stride, k_stride, line0, lines, k0, kc,
              layout, width, dst);
  }
}

}  // namespace

void PackA(const MatrixView& a, int64_t row0, int64_t rows, int64_t k0, int64_t kc,
           PanelLayout layout, int mr, void* dst) {
  Pack(a, a.row_stride, a.col_stride, row0, rows, k0, kc, layout, mr, dst);
}

void PackB(const MatrixView& b, int64_t k0, int64_t kc, int64_t col0, int64_t cols,
           PanelLayout layout, int nr, void* dst) {
  Pack(b, b.col_stride, b.row_stride, col0, cols, k0, kc, layout, nr, dst);
}

}  // namespace shardjit::backends::x86
