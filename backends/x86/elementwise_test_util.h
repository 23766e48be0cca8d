// Helpers of the elementwise kernel tests: fusion ops from IR text, random operands with the
// awkward values mixed in, and bitwise / ulp comparisons.
#ifndef SHARDJIT_BACKENDS_X86_ELEMENTWISE_TEST_UTIL_H_
#define SHARDJIT_BACKENDS_X86_ELEMENTWISE_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86 {

// Lengths around the 8- and 16-lane vectors, and long ones.
inline constexpr int64_t kLengths[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 1000, 4099};

// The fusion op of `z = fusion[...] ...` (`fusion_line`) over `params` ("a:f32[N] s:f32[]");
// `[N]` and `(N)` in both become the length n.
ir::Op FusionOp(const std::string& params, const std::string& fusion_line, int64_t n);

// Random values of any dtype: for floats normal values, small integers (so that compares see
// equal operands), random bit patterns (NaN payloads, subnormals, huge values) and special values;
// for s32 small, extreme and random values; for pred 0 and 1.
ir::Tensor RandomTensor(const ir::ShapedType& type, uint32_t seed);
// One random tensor per body param of the fusion `op`, in `allocator`'s memory.
std::vector<ir::Tensor> RandomOperands(const ir::Op& op, uint32_t seed,
                                       ir::Allocator* allocator = nullptr);

// Distance in units in the last place (0 for two NaNs, INT64_MAX for a NaN and a number).
int64_t UlpDistance(float a, float b);
int64_t UlpDistanceBf16(uint16_t a, uint16_t b);

// Which NaN a result may be. IEEE 754 leaves open which of two NaN operands an arithmetic op
// returns, and the reference kernels' pick follows the compiler's operand order.
enum class NanRule {
  kExact,             // NaN results bit for bit (unary ops, max/min, select, converts)
  kOpenWhereTwoNans,  // any NaN where two operands are NaN (add, sub, mul, div)
  kOpen,              // any NaN (bodies: NaNs also meet after neg, or from inf - inf)
};
// The lanes of an n-element result where `rule` accepts any NaN for a NaN.
std::vector<bool> OpenNanLanes(NanRule rule, const std::vector<ir::Tensor>& operands, int64_t n);

// Fails the test unless `got` equals `want` bit for bit, or, with max_ulp > 0, f32 and bf16
// elements are within max_ulp ulps (NaN matching NaN), NaN matching NaN also in the lanes marked
// in `open_nan`; reports the first difference.
void ExpectClose(const ir::Tensor& got, const ir::Tensor& want, int64_t max_ulp,
                 const std::string& what, const std::vector<bool>& open_nan = {});

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_ELEMENTWISE_TEST_UTIL_H_
