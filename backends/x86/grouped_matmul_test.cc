// gmm and tgmm: the x86 kernels (at every ISA level this host runs, on one and on two threads)
// and the reference kernels against an f64 computation, over random group sizes with empty
// groups, a group that fills every row, sizes summing short of m, group offsets, transposed rhs,
// odd sizes that fill no tile, and every dtype pair. Rows outside the local groups hold NaN, so a
// kernel reading them shows. Errors: negative sizes, sums past m, out-of-range group offsets.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/reference/kernel.h"
#include "backends/x86/grouped_matmul.h"
#include "backends/x86/isa_test_util.h"
#include "base/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/primitive.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using ir::DType;
using ir::Tensor;
using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Case {
  std::string name;
  bool tgmm = false;
  int64_t m = 0, k = 0, n = 0;
  std::vector<int32_t> sizes;  // G entries
  int64_t offset = -1;         // -1: no group_offset operand
  int64_t local = 0;           // local groups (gmm: rhs.dims[0]; tgmm: num_actual_groups)
  bool transpose_rhs = false;
  DType in = DType::kF32, out = DType::kF32;
};

std::string Describe(const Case& c) {
  std::string s = c.name + (c.tgmm ? " tgmm" : " gmm") + " m=" + std::to_string(c.m) +
                  " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n) + " sizes=(";
  for (int32_t v : c.sizes) s += std::to_string(v) + ",";
  return s + ") offset=" + std::to_string(c.offset) + " local=" + std::to_string(c.local) +
         (c.transpose_rhs ? " transposed " : " ") + std::string(ir::DTypeName(c.in)) + "->" +
         std::string(ir::DTypeName(c.out));
}

// The rows of the local groups: [begin, end) of lhs (gmm) or of the grouped dimension (tgmm).
std::vector<int64_t> LocalStarts(const Case& c) {
  const int64_t offset = std::max<int64_t>(c.offset, 0);
  std::vector<int64_t> starts;
  int64_t row = 0;
  for (int64_t g = 0; g <= offset + c.local && g <= static_cast<int64_t>(c.sizes.size()); ++g) {
    if (g >= offset) starts.push_back(row);
    if (g < static_cast<int64_t>(c.sizes.size())) row += c.sizes[g];
  }
  return starts;
}

struct Inputs {
  std::vector<double> lhs, rhs;  // values as held in the input dtype
  std::vector<Tensor> operands;
  ir::Op op;
};

Tensor FromValues(DType dtype, std::vector<int64_t> dims, const std::vector<double>& v) {
  return Tensor::FromDoubles({dtype, std::move(dims)}, v);
}

Inputs MakeInputs(const Case& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  const std::vector<int64_t> starts = LocalStarts(c);
  const int64_t begin = starts.front(), end = starts.back();
  Inputs in;
  std::vector<int64_t> lhs_dims, rhs_dims;
  if (!c.tgmm) {
    lhs_dims = {c.m, c.k};
    rhs_dims = c.transpose_rhs ? std::vector<int64_t>{c.local, c.n, c.k}
                               : std::vector<int64_t>{c.local, c.k, c.n};
    for (int64_t r = 0; r < c.m; ++r) {
      for (int64_t l = 0; l < c.k; ++l) in.lhs.push_back(r >= begin && r < end ? dist(rng) : kNaN);
    }
    for (int64_t i = 0; i < c.local * c.k * c.n; ++i) in.rhs.push_back(dist(rng));
  } else {
    lhs_dims = {c.k, c.m};
    rhs_dims = {c.m, c.n};
    for (int64_t i = 0; i < c.k; ++i) {
      for (int64_t r = 0; r < c.m; ++r) in.lhs.push_back(r >= begin && r < end ? dist(rng) : kNaN);
    }
    for (int64_t r = 0; r < c.m; ++r) {
      for (int64_t j = 0; j < c.n; ++j) in.rhs.push_back(r >= begin && r < end ? dist(rng) : kNaN);
    }
  }
  in.operands.push_back(FromValues(c.in, lhs_dims, in.lhs));
  in.operands.push_back(FromValues(c.in, rhs_dims, in.rhs));
  // The values as the input dtype holds them.
  in.lhs = in.operands[0].ToDoubles();
  in.rhs = in.operands[1].ToDoubles();
  std::vector<double> sizes(c.sizes.begin(), c.sizes.end());
  in.operands.push_back(FromValues(DType::kS32, {static_cast<int64_t>(sizes.size())}, sizes));
  if (c.offset >= 0) {
    in.operands.push_back(FromValues(DType::kS32, {}, {static_cast<double>(c.offset)}));
  }
  in.op.set_opcode(c.tgmm ? "tgmm" : "gmm");
  auto* a = in.op.mutable_grouped_matmul();
  a->set_transpose_rhs(c.transpose_rhs);
  a->set_preferred_element_type(ir::ToProto(c.out));
  if (c.tgmm) a->set_num_actual_groups(c.local);
  std::vector<ir::ShapedType> types;
  for (const Tensor& t : in.operands) types.push_back(t.type());
  absl::StatusOr<std::vector<ir::ShapedType>> result = ir::InferResultTypes({}, types, in.op);
  EXPECT_TRUE(result.ok()) << result.status();
  if (result.ok()) *in.op.add_result_types() = ir::ToProto((*result)[0]);
  return in;
}

// The f64 product and, per element, the sum of |terms| (for the tolerance).
struct Expected {
  std::vector<double> value, magnitude;
};

Expected Oracle(const Case& c, const Inputs& in) {
  const std::vector<int64_t> starts = LocalStarts(c);
  Expected e;
  if (!c.tgmm) {
    e.value.assign(c.m * c.n, 0);
    e.magnitude.assign(c.m * c.n, 0);
    for (int64_t g = 0; g < c.local; ++g) {
      for (int64_t r = starts[g]; r < starts[g + 1]; ++r) {
        for (int64_t j = 0; j < c.n; ++j) {
          for (int64_t l = 0; l < c.k; ++l) {
            const double b = c.transpose_rhs ? in.rhs[(g * c.n + j) * c.k + l]
                                             : in.rhs[(g * c.k + l) * c.n + j];
            e.value[r * c.n + j] += in.lhs[r * c.k + l] * b;
            e.magnitude[r * c.n + j] += std::abs(in.lhs[r * c.k + l] * b);
          }
        }
      }
    }
  } else {
    e.value.assign(c.local * c.k * c.n, 0);
    e.magnitude.assign(c.local * c.k * c.n, 0);
    for (int64_t g = 0; g < c.local; ++g) {
      for (int64_t i = 0; i < c.k; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          for (int64_t r = starts[g]; r < starts[g + 1]; ++r) {
            const double t = in.lhs[i * c.m + r] * in.rhs[r * c.n + j];
            e.value[(g * c.k + i) * c.n + j] += t;
            e.magnitude[(g * c.k + i) * c.n + j] += std::abs(t);
          }
        }
      }
    }
  }
  return e;
}

void ExpectMatches(const Tensor& got, const Expected& want, DType out, const std::string& who) {
  const std::vector<double> values = got.ToDoubles();
  ASSERT_EQ(values.size(), want.value.size()) << who;
  // f32 accumulation error, plus the output's rounding.
  const double out_eps = out == DType::kBF16 ? 1.0 / 256 : 1.0 / (1 << 23);
  int bad = 0;
  for (size_t i = 0; i < values.size() && bad < 5; ++i) {
    const double tol = 1e-5 * want.magnitude[i] + out_eps * std::abs(want.value[i]) + 1e-30;
    if (!(std::abs(values[i] - want.value[i]) <= tol)) {
      ADD_FAILURE() << who << ": element " << i << " is " << values[i] << ", want "
                    << want.value[i] << " (tolerance " << tol << ")";
      ++bad;
    }
  }
}

std::vector<int32_t> RandomSizes(int64_t groups, int64_t total, std::mt19937& rng) {
  // Cut [0, total) at groups - 1 random points (repeats give empty groups).
  std::vector<int32_t> cuts = {0};
  for (int64_t g = 0; g + 1 < groups; ++g) cuts.push_back(static_cast<int32_t>(rng() % (total + 1)));
  cuts.push_back(static_cast<int32_t>(total));
  std::sort(cuts.begin(), cuts.end());
  std::vector<int32_t> sizes;
  for (size_t i = 1; i < cuts.size(); ++i) sizes.push_back(cuts[i] - cuts[i - 1]);
  return sizes;
}

std::vector<Case> Cases() {
  std::mt19937 rng(7);
  std::vector<Case> cases;
  for (bool tgmm : {false, true}) {
    cases.push_back({"one row", tgmm, 1, 1, 1, {1}, -1, 1});
    cases.push_back({"random", tgmm, 37, 19, 23, RandomSizes(5, 37, rng), -1, 5});
    cases.push_back({"empty groups", tgmm, 29, 17, 31, {0, 11, 0, 0, 18, 0}, -1, 6});
    cases.push_back({"one group fills all", tgmm, 45, 13, 21, {0, 45, 0}, -1, 3});
    cases.push_back({"all empty", tgmm, 9, 5, 7, {0, 0}, -1, 2});
    cases.push_back({"sizes short of m", tgmm, 50, 9, 11, {7, 0, 13}, -1, 3});
    cases.push_back({"group offset", tgmm, 61, 15, 19, {5, 9, 0, 17, 8, 3}, 2, 3});
    cases.push_back({"offset at the end", tgmm, 30, 8, 10, {10, 10, 10}, 2, 1});
    cases.push_back({"row and column blocks", tgmm, 260, 48, 520, RandomSizes(4, 250, rng), -1, 4});
    cases.push_back({"many small groups", tgmm, 200, 64, 144, RandomSizes(40, 200, rng), -1, 40});
    cases.push_back({"zero depth", tgmm, 9, 0, 5, {4, 0, 5}, -1, 3});
  }
  // Zero blocks of 1 MiB and more are written with streaming stores (zero_fill.h).
  cases.push_back({"large empty results", true, 40, 520, 512, {0, 40, 0}, -1, 3});
  cases.push_back({"large rows outside the groups", false, 600, 8, 1024, {300, 10, 290}, 1, 1});
  cases.push_back({"transposed", false, 33, 21, 17, {4, 0, 20, 9}, -1, 4, true});
  cases.push_back({"transposed offset", false, 40, 32, 48, {6, 10, 14, 10}, 1, 2, true});
  // Every dtype pair on two cases.
  std::vector<Case> typed;
  for (const Case& c : cases) {
    typed.push_back(c);
    if (c.name == "random" || c.name == "transposed" || c.name == "row and column blocks") {
      for (auto [in, out] : {std::pair{DType::kBF16, DType::kF32}, {DType::kBF16, DType::kBF16},
                             {DType::kF32, DType::kBF16}}) {
        Case t = c;
        t.in = in;
        t.out = out;
        typed.push_back(t);
      }
    }
  }
  return typed;
}

class GroupedMatmulTest : public IsaLevelTest {};

TEST_P(GroupedMatmulTest, MatchesF64OnOneAndTwoThreads) {
  base::ThreadPool pool(1);
  unsigned seed = 1;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(Describe(c));
    const Inputs in = MakeInputs(c, seed++);
    const Expected want = Oracle(c, in);
    for (int threads : {1, 2}) {
      base::ScopedParallelism parallel({&pool, threads});
      absl::StatusOr<std::vector<Tensor>> got =
          GroupedMatmul(in.op, in.operands, ir::HostAllocator());
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectMatches((*got)[0], want, c.out, "x86 on " + std::to_string(threads) + " threads");
    }
    if (GetParam() == IsaLevel::kReference) {
      const reference::Kernel* kernel = reference::FindKernel(in.op.opcode());
      ASSERT_NE(kernel, nullptr);
      absl::StatusOr<std::vector<Tensor>> got = (*kernel)(in.op, in.operands, ir::HostAllocator());
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectMatches((*got)[0], want, c.out, "reference");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, GroupedMatmulTest, ::testing::ValuesIn(kAllIsaLevels),
                         IsaLevelName);

// Both backends refuse bad group sizes and offsets with the same message.
TEST(GroupedMatmulErrorsTest, BadSizesAndOffsets) {
  struct Bad {
    Case c;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {{"negative", false, 10, 4, 4, {3, -1, 8}, -1, 3}, "gmm: group_sizes[1] is negative (-1)"},
      {{"past m", false, 10, 4, 4, {6, 5}, -1, 2},
       "gmm: group_sizes[0..1] sum to 11, past the 10 rows of lhs"},
      {{"past m later", true, 10, 4, 4, {6, 2, 5}, 0, 1},
       "tgmm: group_sizes[0..2] sum to 13, past the 10 rows of lhs"},
      {{"offset", false, 10, 4, 4, {3, 3, 4}, 2, 2},
       "gmm: group_offset 2 with 2 local groups is out of range for 3 groups in group_sizes"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.c.name);
    Case c = b.c;
    Inputs in;
    in.op.set_opcode(c.tgmm ? "tgmm" : "gmm");
    in.op.mutable_grouped_matmul()->set_preferred_element_type(ir::F32);
    if (c.tgmm) in.op.mutable_grouped_matmul()->set_num_actual_groups(c.local);
    in.operands.push_back(Tensor::Zeros({DType::kF32, c.tgmm ? std::vector<int64_t>{c.k, c.m}
                                                             : std::vector<int64_t>{c.m, c.k}}));
    in.operands.push_back(Tensor::Zeros(
        {DType::kF32, c.tgmm ? std::vector<int64_t>{c.m, c.n}
                             : std::vector<int64_t>{c.local, c.k, c.n}}));
    std::vector<double> sizes(c.sizes.begin(), c.sizes.end());
    in.operands.push_back(FromValues(DType::kS32, {static_cast<int64_t>(sizes.size())}, sizes));
    if (c.offset >= 0) {
      in.operands.push_back(FromValues(DType::kS32, {}, {static_cast<double>(c.offset)}));
    }
    std::vector<ir::ShapedType> types;
    for (const Tensor& t : in.operands) types.push_back(t.type());
    absl::StatusOr<std::vector<ir::ShapedType>> result = ir::InferResultTypes({}, types, in.op);
    ASSERT_TRUE(result.ok()) << result.status();
    *in.op.add_result_types() = ir::ToProto((*result)[0]);
    absl::StatusOr<std::vector<Tensor>> x86 = GroupedMatmul(in.op, in.operands, ir::HostAllocator());
    EXPECT_EQ(x86.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(x86.status().message(), HasSubstr(b.message));
    absl::StatusOr<std::vector<Tensor>> ref =
        (*reference::FindKernel(in.op.opcode()))(in.op, in.operands, ir::HostAllocator());
    EXPECT_EQ(ref.status(), x86.status());
  }
}

}  // namespace
}  // namespace shardjit::backends::x86
