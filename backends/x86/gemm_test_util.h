// GEMM test problems: operands with values exact in their dtype, an f64 oracle with a per-element
// error scale, and a check of every element of C (and that padding stays untouched). Shared by
// gemm_test and gemm_stream_test.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_TEST_UTIL_H_
#define SHARDJIT_BACKENDS_X86_GEMM_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/x86/gemm.h"
#include "base/thread_pool.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86::gemm_test {

// Helpers for the multi-threaded cases (up to 5 threads per call).
inline base::ThreadPool& TestPool() {
  static base::ThreadPool* pool = new base::ThreadPool(4);
  return *pool;
}

// One GEMM problem with its operands stored as doubles (exact in the input dtype) and laid out
// per the strides in `args`.
struct Case {
  GemmShape shape;
  bool bf16_in = false, out_bf16 = false, accumulate = false;
  bool trans_a = false, trans_b = false;
  int64_t pad = 0;  // extra elements per row of A, B and C (non-dense strides)
  int threads = 1;

  std::string Name() const {
    return fmt::format("m={} n={} k={} {}->{} acc={} ta={} tb={} pad={} threads={}", shape.m,
                       shape.n, shape.k, bf16_in ? "bf16" : "f32", out_bf16 ? "bf16" : "f32",
                       accumulate, trans_a, trans_b, pad, threads);
  }
};

// Storage of one operand in either dtype.
struct Buffer {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  void* data(bool is_bf16) {
    return is_bf16 ? static_cast<void*>(bf16.data()) : static_cast<void*>(f32.data());
  }
};

// Values exact in bf16: small multiples of 1/8, mixed signs.
inline double RandomValue(std::mt19937& rng, bool bf16) {
  std::uniform_int_distribution<int> d(-24, 24);
  double v = d(rng) / 8.0;
  if (!bf16) v += std::uniform_real_distribution<double>(-0.06, 0.06)(rng);
  return v;
}

struct Problem {
  Case c;
  GemmArgs args;
  Buffer a, b, c_init;
  std::vector<double> a_val, b_val, c_val;  // logical [m,k], [k,n], [m,n]
  std::vector<double> want, scale;          // oracle and error scale per element of C

  explicit Problem(const Case& cs, uint32_t seed) : c(cs) {
    const int64_t m = c.shape.m, n = c.shape.n, k = c.shape.k;
    std::mt19937 rng(seed);
    args.shape = c.shape;
    args.type = c.bf16_in ? GemmType::kBf16Bf16F32 : GemmType::kF32F32F32;
    args.out_bf16 = c.out_bf16;
    args.accumulate = c.accumulate;
    args.parallel = {&TestPool(), c.threads};
    // A: [m,k] row-major or stored transposed as [k,m]; rows padded by `pad`.
    args.a_row_stride = c.trans_a ? 1 : k + c.pad;
    args.a_col_stride = c.trans_a ? m + c.pad : 1;
    args.b_row_stride = c.trans_b ? 1 : n + c.pad;
    args.b_col_stride = c.trans_b ? k + c.pad : 1;
    args.ldc = n + c.pad;
    Fill(&a, &a_val, m, k, args.a_row_stride, args.a_col_stride, c.bf16_in, rng);
    Fill(&b, &b_val, k, n, args.b_row_stride, args.b_col_stride, c.bf16_in, rng);
    Fill(&c_init, &c_val, m, n, args.ldc, 1, c.out_bf16, rng);
    args.a = a.data(c.bf16_in);
    args.b = b.data(c.bf16_in);
    Recompute();
  }

  // The oracle from a_val, b_val and c_val.
  void Recompute() {
    const int64_t m = c.shape.m, n = c.shape.n, k = c.shape.k;
    want.assign(m * n, 0.0);
    scale.assign(m * n, 0.0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = c.accumulate ? c_val[i * n + j] : 0.0;
        double abs_sum = std::abs(sum);
        for (int64_t l = 0; l < k; ++l) {
          double p = a_val[i * k + l] * b_val[l * n + j];
          sum += p;
          abs_sum += std::abs(p);
        }
        want[i * n + j] = sum;
        scale[i * n + j] = abs_sum;
      }
    }
  }

  static void Fill(Buffer* buf, std::vector<double>* val, int64_t rows, int64_t cols, int64_t rs,
                   int64_t cs, bool bf16, std::mt19937& rng) {
    // Room past the last element for the padding checks.
    const int64_t span = (rows == 0 || cols == 0 ? 1 : (rows - 1) * rs + (cols - 1) * cs + 1) + 64;
    buf->f32.assign(span, std::nanf(""));
    buf->bf16.assign(span, 0x7fc0);  // NaN: padding must never be read
    val->assign(rows * cols, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        double v = RandomValue(rng, bf16);
        if (bf16) {
          buf->bf16[r * rs + c * cs] = ir::bf16::FromFloat(static_cast<float>(v));
          v = ir::bf16::ToFloat(buf->bf16[r * rs + c * cs]);
        } else {
          buf->f32[r * rs + c * cs] = static_cast<float>(v);
          v = static_cast<float>(v);
        }
        (*val)[r * cols + c] = v;
      }
    }
  }

  // Runs `run` on a fresh copy of C and checks every element (padding must stay untouched).
  template <typename Run>
  void Check(const std::string& label, Run run) {
    Buffer c_buf = c_init;
    GemmArgs g = args;
    g.c = c_buf.data(c.out_bf16);
    absl::Status s = run(g);
    ASSERT_TRUE(s.ok()) << label << " " << c.Name() << ": " << s;
    const int64_t m = c.shape.m, n = c.shape.n, k = c.shape.k;
    const double rel = 1e-5 * std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));
    int failures = 0;
    for (int64_t i = 0; i < m && failures < 5; ++i) {
      for (int64_t j = 0; j < n + c.pad && failures < 5; ++j) {
        const int64_t at = i * args.ldc + j;
        const double got = c.out_bf16 ? ir::bf16::ToFloat(c_buf.bf16[at]) : c_buf.f32[at];
        if (j >= n) {
          const double init = c.out_bf16 ? ir::bf16::ToFloat(c_init.bf16[at]) : c_init.f32[at];
          if (!(std::isnan(got) && std::isnan(init)) && got != init) {
            ++failures;
            ADD_FAILURE() << label << " " << c.Name() << ": padding written at " << i << "," << j;
          }
          continue;
        }
        const double w = want[i * n + j];
        const double tol = rel * scale[i * n + j] + (c.out_bf16 ? std::abs(w) / 256 : 0) + 1e-30;
        if (!(std::abs(got - w) <= tol)) {
          ++failures;
          ADD_FAILURE() << label << " " << c.Name() << ": C[" << i << "," << j << "] = " << got
                        << ", want " << w << " (tol " << tol << ")";
        }
      }
    }
  }
};

}  // namespace shardjit::backends::x86::gemm_test

#endif  // SHARDJIT_BACKENDS_X86_GEMM_TEST_UTIL_H_
