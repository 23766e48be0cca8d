// The fusion bodies the elementwise kernels are checked on, natively (elementwise_test.cc) and in
// the AVX-512 emulator (emulation/dump_elementwise.cc): every op on every dtype it takes, with
// vector and broadcast scalar operands, and multi-op bodies.
#ifndef SHARDJIT_BACKENDS_X86_ELEMENTWISE_TEST_CASES_H_
#define SHARDJIT_BACKENDS_X86_ELEMENTWISE_TEST_CASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "backends/x86/elementwise_test_util.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86 {

struct FusionCase {
  std::string name;
  std::string params;     // of FusionOp
  std::string fusion;     // one line defining z
  bool generated = true;  // whether the generators emit it (else it falls back)
  int64_t max_ulp = 0;    // of f32 results; bf16 results of approximations may differ by 1
  NanRule nans = NanRule::kExact;
  // Float inputs of larger finite magnitude make the generated loop decline the call (sin, cos).
  float max_argument = INFINITY;
};

// z = `op` applied to operands of `dtypes`, as a one-op fusion; operands marked in `scalar` are
// passed as scalars and broadcast inside the body, as fuse-elementwise does.
FusionCase OneOp(const std::string& name, const std::string& op,
                 const std::vector<ir::DType>& dtypes, ir::DType result,
                 std::vector<bool> scalar = {});

// Every op and dtype, one op per body; rem and s32 div are declined.
std::vector<FusionCase> OpCases();
// Multi-op bodies; one has more operands than the generators take.
std::vector<FusionCase> BodyCases();

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_ELEMENTWISE_TEST_CASES_H_
