// Reference kernels of gmm and tgmm (megablox semantics, ir/prims/grouped_matmul.cc): per group,
// plain loops accumulating in f32 and rounding once to the result type.
#include <vector>

#include "absl/status/statusor.h"
#include "backends/grouped_rows.h"
#include "backends/reference/kernel.h"
#include "base/status_macros.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference {
namespace {

using ir::DType;
using ir::Tensor;
using Results = absl::StatusOr<std::vector<Tensor>>;

// The elements of an f32 or bf16 tensor as f32.
std::vector<float> AsFloats(const Tensor& t) {
  std::vector<float> out(t.num_elements());
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    out[i] = t.dtype() == DType::kF32 ? t.data_as<float>()[i]
                                      : ir::bf16::ToFloat(t.data_as<ir::bf16>()[i].bits);
  }
  return out;
}

void Store(Tensor& out, int64_t i, float v) {
  if (out.dtype() == DType::kF32) {
    out.data_as<float>()[i] = v;
  } else {
    out.data_as<ir::bf16>()[i] = ir::bf16(v);
  }
}

Results Gmm(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const int64_t m = in[0].dims()[0], k = in[0].dims()[1];
  const bool transposed = op.grouped_matmul().transpose_rhs();
  const int64_t n = in[1].dims()[transposed ? 1 : 2];
  ASSIGN_OR_RETURN(GroupedRows rows, ReadGroupedRows(op, in, m, in[1].dims()[0]));
  const std::vector<float> lhs = AsFloats(in[0]), rhs = AsFloats(in[1]);
  Tensor out = Tensor::Zeros(ResultType(op), allocator);
  for (int64_t g = 0; g < rows.local_groups(); ++g) {
    const float* b = rhs.data() + g * k * n;
    for (int64_t r = rows.starts[g]; r < rows.starts[g + 1]; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t l = 0; l < k; ++l) {
          acc += lhs[r * k + l] * (transposed ? b[j * k + l] : b[l * n + j]);
        }
        Store(out, r * n + j, acc);
      }
    }
  }
  return std::vector<Tensor>{out};
}

Results Tgmm(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const int64_t k = in[0].dims()[0], m = in[0].dims()[1], n = in[1].dims()[1];
  ASSIGN_OR_RETURN(GroupedRows rows,
                   ReadGroupedRows(op, in, m, op.grouped_matmul().num_actual_groups()));
  const std::vector<float> lhs = AsFloats(in[0]), rhs = AsFloats(in[1]);
  Tensor out = Tensor::Zeros(ResultType(op), allocator);
  for (int64_t g = 0; g < rows.local_groups(); ++g) {
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t r = rows.starts[g]; r < rows.starts[g + 1]; ++r) {
          acc += lhs[i * m + r] * rhs[r * n + j];
        }
        Store(out, (g * k + i) * n + j, acc);
      }
    }
  }
  return std::vector<Tensor>{out};
}

const bool registered = [] {
  RegisterKernel("gmm", Gmm);
  RegisterKernel("tgmm", Tgmm);
  return true;
}();

}  // namespace
}  // namespace shardjit::backends::reference
