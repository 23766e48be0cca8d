#include "backends/x86/gemm_reference.h"

#include <algorithm>
#include <vector>

#include "base/status_macros.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86 {
namespace {

inline float Load(const void* p, int64_t i, bool bf16) {
  return bf16 ? ir::bf16::ToFloat(static_cast<const uint16_t*>(p)[i])
              : static_cast<const float*>(p)[i];
}

// Row by row, C's own type summing in k order the products `mul` gives (int8: int32 sums
// wrapping modulo 2^32; f64: f64 sums).
template <typename In, typename Sum, typename Mul>
absl::Status GemmReferenceRows(const GemmArgs& g, Mul mul) {
  const auto* a = static_cast<const In*>(g.a);
  const auto* b = static_cast<const In*>(g.b);
  std::vector<Sum> row(g.shape.n);
  for (int64_t i = 0; i < g.shape.m; ++i) {
    if (i % 16 == 0) {
      RETURN_IF_ERROR(g.parallel.stop.Check());
    }
    Sum* c = static_cast<Sum*>(g.c) + i * g.ldc;
    for (int64_t j = 0; j < g.shape.n; ++j) row[j] = g.accumulate ? c[j] : Sum{0};
    for (int64_t l = 0; l < g.shape.k; ++l) {
      const In x = a[i * g.a_row_stride + l * g.a_col_stride];
      const In* b_row = b + l * g.b_row_stride;
      for (int64_t j = 0; j < g.shape.n; ++j) row[j] += mul(x, b_row[j * g.b_col_stride]);
    }
    std::copy(row.begin(), row.end(), c);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GemmReference(const GemmArgs& g) {
  if (g.type == GemmType::kS8S8S32) {
    return GemmReferenceRows<int8_t, uint32_t>(g, [](int8_t x, int8_t y) {
      return static_cast<uint32_t>(int32_t{x} * y);
    });
  }
  if (g.type == GemmType::kF64F64F64) {
    return GemmReferenceRows<double, double>(g, [](double x, double y) { return x * y; });
  }
  const bool bf16_in = g.type == GemmType::kBf16Bf16F32;
  std::vector<float> row(g.shape.n);
  for (int64_t i = 0; i < g.shape.m; ++i) {
    if (i % 16 == 0) {
      RETURN_IF_ERROR(g.parallel.stop.Check());
    }
    for (int64_t j = 0; j < g.shape.n; ++j) {
      row[j] = g.accumulate ? Load(g.c, i * g.ldc + j, g.out_bf16) : 0.0f;
    }
    for (int64_t l = 0; l < g.shape.k; ++l) {
      const float a = Load(g.a, i * g.a_row_stride + l * g.a_col_stride, bf16_in);
      const int64_t b0 = l * g.b_row_stride;
      for (int64_t j = 0; j < g.shape.n; ++j) {
        row[j] += a * Load(g.b, b0 + j * g.b_col_stride, bf16_in);
      }
    }
    for (int64_t j = 0; j < g.shape.n; ++j) {
      if (g.out_bf16) {
        static_cast<uint16_t*>(g.c)[i * g.ldc + j] = ir::bf16::FromFloat(row[j]);
      } else {
        static_cast<float*>(g.c)[i * g.ldc + j] = row[j];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace shardjit::backends::x86
