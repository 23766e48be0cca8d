// The group reductions (psum, pmean, pmax, pmin) of f32 and bf16, which run on the backend's
// buffer kernels (the reference backend's loop and the x86 backend's generated kernels), against
// a scalar oracle of the semantics, bit for bit: f32 accumulation in group order and one rounding
// at the end (bf16), over sizes that exercise the vector tails.
#include "runtime/collective_ops.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backends/reference/evaluator.h"
#include "backends/x86/compile.h"
#include "gtest/gtest.h"
#include "ir/types.h"

namespace shardjit::runtime {
namespace {

using ir::DType;
using ir::Tensor;

float Oracle(const std::string& kind, const std::vector<float>& values) {
  float acc = values[0];
  for (size_t i = 1; i < values.size(); ++i) {
    const float b = values[i];
    if (kind == "psum" || kind == "pmean") {
      acc = acc + b;
    } else if (std::isnan(acc) || std::isnan(b)) {
      acc = NAN;
    } else {
      acc = kind == "pmax" ? std::max(acc, b) : std::min(acc, b);
    }
  }
  if (kind == "pmean") {
    return static_cast<float>(static_cast<double>(acc) / static_cast<double>(values.size()));
  }
  return acc;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class ReduceTest
    : public ::testing::TestWithParam<std::tuple<const backends::Backend*, DType>> {
 protected:
  const backends::Backend& backend() const { return *std::get<0>(GetParam()); }
};

TEST_P(ReduceTest, MatchesScalarOracleBitForBit) {
  const DType dtype = std::get<1>(GetParam());
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 100.f);
  for (int64_t n : {1, 7, 8, 9, 31, 64, 67, 1000}) {
    for (int members : {1, 2, 3, 8}) {
      std::vector<Tensor> inputs;
      for (int m = 0; m < members; ++m) {
        std::vector<double> v(n);
        for (double& x : v) x = normal(rng);
        if (n > 3) {
          v[1] = m % 2 ? 0.0 : -0.0;  // signed zeros
          v[2] = 1e30 * (m % 2 ? 1 : -1);  // large cancellations
        }
        inputs.push_back(Tensor::FromDoubles({dtype, {n}}, v));
      }
      for (const char* kind : {"psum", "pmean", "pmax", "pmin"}) {
        ir::Op op;
        op.set_opcode(kind);
        *op.add_result_types() = ir::ToProto(ir::ShapedType{dtype, {n}});
        GroupOperands group;
        group.inputs = inputs;
        absl::StatusOr<Tensor> out = ComputeCollective(op, group, backend(), ir::HostAllocator());
        ASSERT_TRUE(out.ok()) << out.status();
        for (int64_t i = 0; i < n; ++i) {
          std::vector<float> column;
          for (const Tensor& t : inputs) column.push_back(static_cast<float>(t.GetDouble(i)));
          Tensor want = Tensor::FromDoubles({dtype, {}}, {Oracle(kind, column)});
          const double got = out->GetDouble(i), expected = want.GetDouble(0);
          ASSERT_EQ(Bits(static_cast<float>(got)), Bits(static_cast<float>(expected)))
              << kind << " n=" << n << " members=" << members << " i=" << i << ": " << got
              << " vs " << expected;
        }
      }
    }
  }
}

TEST_P(ReduceTest, NanPropagates) {
  const DType dtype = std::get<1>(GetParam());
  std::vector<Tensor> inputs = {Tensor::FromDoubles({dtype, {9}}, {1, NAN, 3, 4, 5, 6, 7, 8, NAN}),
                                Tensor::FromDoubles({dtype, {9}}, {NAN, 2, 3, 4, 5, 6, 7, 8, 9})};
  for (const char* kind : {"psum", "pmax", "pmin"}) {
    ir::Op op;
    op.set_opcode(kind);
    *op.add_result_types() = ir::ToProto(ir::ShapedType{dtype, {9}});
    GroupOperands group;
    group.inputs = inputs;
    absl::StatusOr<Tensor> out = ComputeCollective(op, group, backend(), ir::HostAllocator());
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t i : {0, 1, 8}) EXPECT_TRUE(std::isnan(out->GetDouble(i))) << kind << " " << i;
    EXPECT_FALSE(std::isnan(out->GetDouble(4))) << kind;
  }
}

// A range of the reduction where some inputs hold only their operand's elements from `firsts`
// on (a share another process sent, runtime/remote.h): bitwise the same elements as the
// reduction of whole operands, for every kind and for ranges starting where the share does and
// inside it.
TEST_P(ReduceTest, RangeOfSharesMatchesWholeOperands) {
  const DType dtype = std::get<1>(GetParam());
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 10.f);
  const int64_t n = 103, share_begin = 37;
  std::vector<Tensor> whole, shares;
  for (int m = 0; m < 3; ++m) {
    std::vector<double> v(n);
    for (double& x : v) x = normal(rng);
    whole.push_back(Tensor::FromDoubles({dtype, {n}}, v));
    // Members 0 and 2 send only [share_begin, n); member 1 is local (whole).
    if (m == 1) {
      shares.push_back(whole.back());
    } else {
      shares.push_back(Tensor::FromDoubles(
          {dtype, {n - share_begin}}, std::vector<double>(v.begin() + share_begin, v.end())));
    }
  }
  const std::vector<int64_t> firsts = {share_begin, 0, share_begin};
  for (ir::Prim kind : {ir::Prim::kPsum, ir::Prim::kPmean, ir::Prim::kPmax, ir::Prim::kPmin}) {
    Tensor want = Tensor::Empty({dtype, {n}});
    ASSERT_TRUE(ReduceRange(whole, kind, backend(), want, 0, n).ok());
    for (int64_t begin : {share_begin, share_begin + 9}) {
      Tensor got = Tensor::Zeros({dtype, {n}});
      ASSERT_TRUE(ReduceRange(shares, kind, backend(), got, begin, n, firsts).ok());
      for (int64_t i = begin; i < n; ++i) {
        ASSERT_EQ(Bits(static_cast<float>(got.GetDouble(i))),
                  Bits(static_cast<float>(want.GetDouble(i))))
            << ir::PrimName(kind) << " begin=" << begin << " i=" << i;
      }
      EXPECT_EQ(got.GetDouble(begin - 1), 0.0) << ir::PrimName(kind) << ": wrote before the range";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    BackendsAndDtypes, ReduceTest,
    ::testing::Combine(::testing::Values(&backends::reference::ReferenceBackend(),
                                         &backends::x86::X86Backend()),
                       ::testing::Values(DType::kF32, DType::kBF16)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param)->name()) + "_" +
             std::string(ir::DTypeName(std::get<1>(info.param)));
    });

// An all_gather given its result ahead (GroupOperands::output), with member 1's operand already
// in its place there where its block is a run of the result (as the transport receives it): the
// result is that tensor, with every block right. Along a dim with a non-1 dim before it (no
// block is a run; the fabric prepares no result then) every operand is copied in.
TEST(AllGather, IntoAPreparedResultSkipsBlocksAlreadyInPlace) {
  struct Case {
    std::vector<int64_t> dims;  // of an operand
    int64_t axis;
    bool tiled;
    std::vector<int64_t> out_dims;
  };
  for (const Case& c : {Case{{1, 3, 5}, 1, true, {1, 9, 5}}, Case{{2, 5}, 0, false, {3, 2, 5}},
                        Case{{2, 3}, 1, true, {2, 9}}}) {
    const ir::ShapedType type{DType::kF32, c.dims};
    const ir::ShapedType out_type{DType::kF32, c.out_dims};
    std::vector<Tensor> members;
    for (int m = 0; m < 3; ++m) {
      std::vector<double> v(type.num_elements());
      for (size_t i = 0; i < v.size(); ++i) v[i] = 100 * m + static_cast<double>(i);
      members.push_back(Tensor::FromDoubles(type, v));
    }
    ir::Op op;
    op.set_opcode("all_gather");
    op.mutable_all_gather()->set_axis(c.axis);
    op.mutable_all_gather()->set_tiled(c.tiled);
    *op.add_result_types() = ir::ToProto(out_type);
    GroupOperands plain;
    plain.inputs = members;
    absl::StatusOr<Tensor> want = ComputeCollective(op, plain, backends::reference::ReferenceBackend(),
                                                      ir::HostAllocator());
    ASSERT_TRUE(want.ok()) << want.status();

    GroupOperands prepared = plain;
    prepared.output = Tensor::Empty(out_type);
    Tensor in_place = prepared.output.Subrange(type.num_elements(), type);
    std::memcpy(in_place.data(), members[1].data(), members[1].byte_size());
    const bool runs = c.axis == 0 || c.dims[0] == 1;
    if (runs) prepared.inputs[1] = in_place;
    absl::StatusOr<Tensor> got = ComputeCollective(op, prepared, backends::reference::ReferenceBackend(),
                                                     ir::HostAllocator());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(got->SharesStorageWith(prepared.output));
    EXPECT_EQ(got->ToDoubles(), want->ToDoubles()) << out_type.ToString();
  }
}

}  // namespace
}  // namespace shardjit::runtime
