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

// The int8 product: exact int32 sums, wrapping modulo 2^32.
absl::Status GemmReferenceS8(const GemmArgs& g) {
  const auto* a = static_cast<const int8_t*>(g.a);
  const auto* b = static_cast<const int8_t*>(g.b);
  std::vector<uint32_t> row(g.shape.n);
  for (int64_t i = 0; i < g.shape.m; ++i) {
    if (i % 16 == 0) {
      RETURN_IF_ERROR(g.parallel.stop.Check());
    }
    uint32_t* c = static_cast<uint32_t*>(g.c) + i * g.ldc;
    for (int64_t j = 0; j < g.shape.n; ++j) row[j] = g.accumulate ? c[j] : 0;
    for (int64_t l = 0; l < g.shape.k; ++l) {
      const int32_t x = a[i * g.a_row_stride + l * g.a_col_stride];
      const int8_t* b_row = b + l * g.b_row_stride;
      for (int64_t j = 0; j < g.shape.n; ++j) {
        row[j] += static_cast<uint32_t>(x * b_row[j * g.b_col_stride]);
      }
    }
    std::copy(row.begin(), row.end(), c);
  }
  return absl::OkStatus();
}

// The f64 product: f64 sums in k order.
absl::Status GemmReferenceF64(const GemmArgs& g) {
  const auto* a = static_cast<const double*>(g.a);
  const auto* b = static_cast<const double*>(g.b);
  std::vector<double> row(g.shape.n);
  for (int64_t i = 0; i < g.shape.m; ++i) {
    if (i % 16 == 0) {
      RETURN_IF_ERROR(g.parallel.stop.Check());
    }
    double* c = static_cast<double*>(g.c) + i * g.ldc;
    for (int64_t j = 0; j < g.shape.n; ++j) row[j] = g.accumulate ? c[j] : 0.0;
    for (int64_t l = 0; l < g.shape.k; ++l) {
      const double x = a[i * g.a_row_stride + l * g.a_col_stride];
      const double* b_row = b + l * g.b_row_stride;
      for (int64_t j = 0; j < g.shape.n; ++j) row[j] += x * b_row[j * g.b_col_stride];
    }
    std::copy(row.begin(), row.end(), c);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GemmReference(const GemmArgs& g) {
  if (g.type == GemmType::kS8S8S32) return GemmReferenceS8(g);
  if (g.type == GemmType::kF64F64F64) return GemmReferenceF64(g);
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
