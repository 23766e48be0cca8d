// The blocked transpose against the reference kernel, bit for bit, over ranks 2-4, every
// permutation, odd sizes around the tile edge, and 1-, 2-, 4- and 8-byte dtypes.
#include "backends/x86/transpose.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "backends/reference/kernel.h"
#include "backends/x86/isa_test_util.h"
#include "gtest/gtest.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using ir::DType;
using ir::Tensor;

ir::Op TransposeOp(const Tensor& x, const std::vector<int64_t>& perm) {
  ir::Op op;
  op.set_opcode("transpose");
  std::vector<int64_t> dims;
  for (int64_t p : perm) {
    op.mutable_transpose()->add_permutation(p);
    dims.push_back(x.dims()[p]);
  }
  *op.add_result_types() = ir::ToProto(ir::ShapedType{x.dtype(), dims});
  return op;
}

// Distinct bit patterns for 2-, 4- and 8-byte elements (a misplaced element cannot go
// unnoticed); 0/1 for pred.
Tensor Iota(DType dtype, const std::vector<int64_t>& dims) {
  Tensor t = Tensor::Empty({dtype, dims});
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(i) * 2654435761u;
    if (ir::DTypeSize(dtype) == 8) {
      t.data_as<uint64_t>()[i] = uint64_t{bits} << 32 | static_cast<uint32_t>(i);
    } else if (ir::DTypeSize(dtype) == 4) {
      t.data_as<uint32_t>()[i] = bits;
    } else if (ir::DTypeSize(dtype) == 2) {
      t.data_as<uint16_t>()[i] = static_cast<uint16_t>(i);
    } else {
      t.SetDouble(i, static_cast<double>(bits >> 31));
    }
  }
  return t;
}

void ExpectSame(const Tensor& x, const std::vector<int64_t>& perm) {
  ir::Op op = TransposeOp(x, perm);
  absl::StatusOr<std::vector<Tensor>> want =
      (*reference::FindKernel("transpose"))(op, {x}, ir::HostAllocator());
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::vector<Tensor>> got = TransposeKernel(op, {x}, ir::HostAllocator());
  if (absl::IsUnimplemented(got.status())) return;  // the reference kernel runs instead
  ASSERT_TRUE(got.ok()) << got.status();
  const Tensor& g = (*got)[0];
  const Tensor& w = (*want)[0];
  ASSERT_EQ(g.type(), w.type());
  ASSERT_EQ(std::memcmp(g.data(), w.data(), w.type().byte_size()), 0)
      << x.type().ToString() << " perm " << ::testing::PrintToString(perm);
}

class TransposeTest : public IsaLevelTest {};

TEST_P(TransposeTest, MatchesReferenceForEveryPermutation) {
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 1},    {1, 7},      {33, 65},     {64, 32},  {3, 5, 7},  {31, 1, 33},
      {2, 3, 4, 5}, {5, 33, 2, 31}, {40, 1, 3, 9}};
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kPred, DType::kF64, DType::kS64}) {
    for (const auto& dims : shapes) {
      Tensor x = Iota(dtype, dims);
      std::vector<int64_t> perm(dims.size());
      std::iota(perm.begin(), perm.end(), 0);
      do {
        ExpectSame(x, perm);
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, TransposeTest, ::testing::ValuesIn(kAllIsaLevels), IsaLevelName);

TEST(TransposeKernelTest, TakesTheTwoDimensionalCase) {
  Tensor x = Iota(DType::kF32, {37, 45});
  ir::Op op = TransposeOp(x, {1, 0});
  EXPECT_TRUE(TransposeKernel(op, {x}, ir::HostAllocator()).ok());
  for (DType dtype : {DType::kF64, DType::kU64, DType::kU8}) {  // every element size
    Tensor z = Iota(dtype, {37, 45});
    EXPECT_TRUE(TransposeKernel(TransposeOp(z, {1, 0}), {z}, ir::HostAllocator()).ok());
  }
  // Keeping the innermost dim leaves contiguous runs to the reference kernel.
  Tensor y = Iota(DType::kF32, {4, 5, 6});
  EXPECT_TRUE(absl::IsUnimplemented(
      TransposeKernel(TransposeOp(y, {1, 0, 2}), {y}, ir::HostAllocator()).status()));
}

}  // namespace
}  // namespace shardjit::backends::x86
