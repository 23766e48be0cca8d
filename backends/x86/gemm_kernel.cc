#include "backends/x86/gemm_kernel.h"

#include <algorithm>
#include <cstring>

#include "fmt/format.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86 {

std::string KernelKey::Name() const {
  const char* layout_name = layout == PanelLayout::kF32          ? "f32"
                            : layout == PanelLayout::kBf16Pairs ? "bf16_pairs"
                            : layout == PanelLayout::kS8Quads   ? "s8_quads"
                                                                : "amx_tiles";
  return fmt::format("gemm_{}_{}_{}x{}_r{}_t{}{}{}{}", IsaName(isa), layout_name, mr, nr, rows,
                     tail_vecs,
                     stream == RowSource::kF32    ? "_sf32"
                     : stream == RowSource::kBf16 ? "_sbf16"
                                                     : "",
                     stream != RowSource::kNone && stream_rows > 1
                         ? fmt::format("x{}", stream_rows)
                         : "",
                     b_in_place == RowSource::kF32    ? "_bf32"
                     : b_in_place == RowSource::kBf16 ? "_bbf16"
                                                      : "");
}

void SetTailMasks(int cols, MicroKernelArgs* args) {
  for (int v = 0; v < 8; ++v) {
    int valid = std::clamp(cols - v * 16, 0, 16);
    args->vec_mask[v] = valid == 16 ? 0xffffu : (1u << valid) - 1;
  }
  for (int j = 0; j < 64; ++j) args->lane_mask[j] = j < cols ? -1 : 0;
}

namespace {

// Sum over one k step of A row i and B column j.
float StepProduct(PanelLayout layout, const uint8_t* a, const uint8_t* b) {
  if (layout == PanelLayout::kF32) {
    float x, y;
    std::memcpy(&x, a, 4);
    std::memcpy(&y, b, 4);
    return x * y;
  }
  uint16_t x[2], y[2];
  std::memcpy(x, a, 4);
  std::memcpy(y, b, 4);
  return ir::bf16::ToFloat(x[0]) * ir::bf16::ToFloat(y[0]) +
         ir::bf16::ToFloat(x[1]) * ir::bf16::ToFloat(y[1]);
}

// Sum over one kS8Quads step of A row i (u8) and B column j (s8).
int32_t QuadProduct(const uint8_t* a, const uint8_t* b) {
  int32_t sum = 0;
  for (int q = 0; q < 4; ++q) sum += a[q] * static_cast<int8_t>(b[q]);
  return sum;
}

}  // namespace

void PortableMicroKernel(const MicroKernelArgs* args) {
  const KernelKey& key = *args->key;
  if (key.stream != RowSource::kNone) {
    const int src_bytes = RowElementBytes(key.stream);
    for (int64_t p = 0; p < args->stream_panels; ++p) {
      for (int64_t i = 0; i < args->stream_iters * key.stream_rows; ++i) {
        const char* src = static_cast<const char*>(args->stream_src) + p * key.nr * src_bytes +
                          i * args->stream_src_stride;
        char* dst = static_cast<char*>(args->stream_dst) + p * args->stream_dst_panel_stride +
                    i * key.nr * 4;
        for (int j = 0; j < key.nr; ++j) {
          if (key.stream == RowSource::kF32) {
            std::memcpy(dst + 4 * j, src + 4 * j, 4);
          } else if (key.layout == PanelLayout::kBf16Pairs) {
            uint16_t pair[2];
            std::memcpy(&pair[0], src + 2 * j, 2);
            std::memcpy(&pair[1], src + args->stream_src_stride / 2 + 2 * j, 2);
            std::memcpy(dst + 4 * j, pair, 4);
          } else {
            uint16_t x;
            std::memcpy(&x, src + 2 * j, 2);
            const float f = ir::bf16::ToFloat(x);
            std::memcpy(dst + 4 * j, &f, 4);
          }
        }
      }
    }
  }
  const int64_t panels = args->n_panels + (key.tail_vecs > 0 ? 1 : 0);
  const int64_t step_stride =
      key.b_in_place != RowSource::kNone ? args->b_step_stride : key.nr * 4;
  const auto* a = static_cast<const uint8_t*>(args->a);
  for (int64_t p = 0; p < panels; ++p) {
    const bool tail = p == args->n_panels;
    const auto* b = static_cast<const uint8_t*>(args->b) + p * args->b_panel_stride;
    auto* c = reinterpret_cast<uint8_t*>(args->c) + p * key.nr * 4;
    for (int i = 0; i < key.rows; ++i) {
      float* c_row = reinterpret_cast<float*>(c + i * args->ldc);
      for (int j = 0; j < key.nr; ++j) {
        if (tail && args->lane_mask[j] == 0) continue;
        if (key.layout == PanelLayout::kS8Quads) {  // int32, wrapping as vpdpbusd does
          int32_t* c_int = reinterpret_cast<int32_t*>(c_row) + j;
          uint32_t acc = args->accumulate ? static_cast<uint32_t>(*c_int) : 0;
          for (int64_t s = 0; s < args->k_steps; ++s) {
            acc += static_cast<uint32_t>(QuadProduct(a + PackedAOffset(key.layout, key.mr, s, i),
                                                     b + s * step_stride + j * 4));
          }
          if (args->col_offset != nullptr) {
            acc += static_cast<uint32_t>(args->col_offset[p * key.nr + j]);
          }
          *c_int = static_cast<int32_t>(acc);
          continue;
        }
        float acc = args->accumulate ? c_row[j] : 0.0f;
        for (int64_t s = 0; s < args->k_steps; ++s) {
          const uint8_t* b_step = b + s * step_stride + j * 4;
          float widened;  // a bf16 B element read in place
          if (key.b_in_place == RowSource::kBf16) {
            uint16_t h;
            std::memcpy(&h, b + s * step_stride + j * 2, 2);
            widened = ir::bf16::ToFloat(h);
            b_step = reinterpret_cast<const uint8_t*>(&widened);
          }
          acc += StepProduct(key.layout, a + PackedAOffset(key.layout, key.mr, s, i), b_step);
        }
        c_row[j] = acc;
      }
    }
  }
}

}  // namespace shardjit::backends::x86
