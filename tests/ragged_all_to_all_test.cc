// ragged_all_to_all: JAX's docstring example verbatim, random valid arguments (sizes including
// zeros, gaps between slices, slices received out of sender order) against the host oracle over
// every test mesh, axis spec and axis_index_groups set, in f32, bf16 and s32 and ranks 1 to 3;
// and every error: bad operand types at trace time, out-of-range, overlapping and disagreeing
// slices at run time.
#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/collectives_oracle.h"

namespace shardjit::collectives_test {
namespace {

using ::testing::HasSubstr;

HostArray Vector(std::vector<double> v) {
  const auto n = static_cast<int64_t>(v.size());
  return {{n}, std::move(v)};
}

// Runs ragged_all_to_all over `axes` with per-device arguments `a` (operand and output of
// `dtype`, offsets and sizes s32).
absl::StatusOr<DeviceResults> RunRagged(const Mesh& mesh, DType dtype, const RaggedArgs& a,
                                        const AxisList& axes, const Groups& groups = {}) {
  return RunPerDevice(
      mesh,
      {{dtype, a.operand},
       {dtype, a.output},
       {DType::kS32, a.input_offsets},
       {DType::kS32, a.send_sizes},
       {DType::kS32, a.output_offsets},
       {DType::kS32, a.recv_sizes}},
      [&](const std::vector<Tracer>& x) {
        return std::vector<Tracer>{
            lax::ragged_all_to_all(x[0], x[1], x[2], x[3], x[4], x[5], axes, groups)};
      },
      1);
}

// The docstring's example, on an axis of size 2.
TEST(RaggedAllToAllTest, JaxDocstringExample) {
  absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(64), {{"x", 2}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  RaggedArgs a;
  a.operand = {Vector({1, 2, 2}), Vector({3, 4, 0})};
  a.output = {Vector({0, 0, 0, 0}), Vector({0, 0, 0, 0})};
  a.input_offsets = {Vector({0, 1}), Vector({0, 1})};
  a.send_sizes = {Vector({1, 2}), Vector({1, 1})};
  a.output_offsets = {Vector({0, 0}), Vector({1, 2})};
  a.recv_sizes = {Vector({1, 1}), Vector({2, 1})};
  for (DType dtype : {DType::kS32, DType::kF32, DType::kBF16}) {
    absl::StatusOr<DeviceResults> out = RunRagged(*mesh, dtype, a, {"x"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->dtypes[0], dtype);
    EXPECT_EQ(out->values[0][0].values, (std::vector<double>{1, 3, 0, 0}));
    EXPECT_EQ(out->values[0][1].values, (std::vector<double>{2, 2, 4, 0}));
  }
}

// An empty slice (send_size 0) is valid wherever its offsets point, past either end included,
// as in JAX: the docstring's example with device 1's second slice emptied and pointed off the
// operand and the output, and its first slice's offsets moved to -3 on device 0 after emptying.
TEST(RaggedAllToAllTest, EmptySlicesMayPointAnywhere) {
  absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(64), {{"x", 2}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  RaggedArgs a;
  a.operand = {Vector({1, 2, 2}), Vector({3, 4, 0})};
  a.output = {Vector({0, 0, 0, 0}), Vector({5, 6, 7, 8})};
  a.input_offsets = {Vector({0, 1}), Vector({0, 7})};
  a.send_sizes = {Vector({1, 2}), Vector({1, 0})};
  a.output_offsets = {Vector({0, 0}), Vector({1, 99})};
  a.recv_sizes = {Vector({1, 1}), Vector({2, 0})};
  absl::StatusOr<DeviceResults> out = RunRagged(*mesh, DType::kF32, a, {"x"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->values[0][0].values, (std::vector<double>{1, 3, 0, 0}));
  EXPECT_EQ(out->values[0][1].values, (std::vector<double>{2, 2, 7, 8}));

  a.send_sizes[0] = Vector({0, 2});
  a.input_offsets[0] = Vector({-3, 1});
  a.output_offsets[0] = Vector({-3, 0});
  a.recv_sizes[0] = Vector({0, 1});
  out = RunRagged(*mesh, DType::kF32, a, {"x"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->values[0][0].values, (std::vector<double>{0, 3, 0, 0}));
  EXPECT_EQ(out->values[0][1].values, (std::vector<double>{2, 2, 7, 8}));
}

// Valid random arguments: `per_member` slices to each member of every group, of 0 to 3 rows of
// `row_dims`, packed with random gaps in the operand and received in a random order with random
// gaps in the output.
RaggedArgs RandomArgs(const MeshModel& model, const AxisList& axes, const Groups& groups,
                      int64_t per_member, const std::vector<int64_t>& row_dims, DType dtype,
                      unsigned seed) {
  std::mt19937 rng(seed);
  const int64_t positions = model.size();
  const int64_t n = model.GroupOf(0, axes, groups).members.size();
  const int64_t k_total = n * per_member;
  const int64_t rows = 4 * k_total;  // room for every slice (<= 3 rows) and its gap (<= 1)
  std::vector<int64_t> dims = row_dims;
  dims.insert(dims.begin(), rows);
  RaggedArgs a;
  std::vector<std::vector<double>> sizes(positions), in_off(positions), out_off(positions),
      recv(positions);
  for (int64_t p = 0; p < positions; ++p) {
    a.operand.push_back(Generate(dims, [&](const std::vector<int64_t>& i) {
      return 1000.0 * p + static_cast<double>(Ravel(i, dims) % 997) + 1;
    }));
    a.output.push_back(Generate(dims, [&](const std::vector<int64_t>& i) {
      return -(1000.0 * p + static_cast<double>(Ravel(i, dims) % 997) + 1);
    }));
    int64_t cursor = 0;
    for (int64_t i = 0; i < k_total; ++i) {
      const auto size = static_cast<int64_t>(rng() % 4);
      cursor += rng() % 2;
      sizes[p].push_back(static_cast<double>(size));
      in_off[p].push_back(static_cast<double>(cursor));
      cursor += size;
    }
    out_off[p].assign(k_total, 0);
    recv[p].assign(k_total, 0);
  }
  // Each receiver places what it gets in a shuffled order.
  for (int64_t r = 0; r < positions; ++r) {
    MeshModel::Group g = model.GroupOf(r, axes, groups);
    std::vector<std::pair<int64_t, int64_t>> incoming;  // (group index of sender, k)
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t k = 0; k < per_member; ++k) incoming.push_back({j, k});
    }
    std::shuffle(incoming.begin(), incoming.end(), rng);
    int64_t cursor = 0;
    for (const auto& [j, k] : incoming) {
      const int64_t sender = g.members[j];
      const int64_t i = g.my_index * per_member + k;
      cursor += rng() % 2;
      out_off[sender][i] = static_cast<double>(cursor);
      recv[r][j * per_member + k] = sizes[sender][i];
      cursor += static_cast<int64_t>(sizes[sender][i]);
    }
  }
  for (int64_t p = 0; p < positions; ++p) {
    a.input_offsets.push_back(Vector(in_off[p]));
    a.send_sizes.push_back(Vector(sizes[p]));
    a.output_offsets.push_back(Vector(out_off[p]));
    a.recv_sizes.push_back(Vector(recv[p]));
  }
  a.operand = RoundTo(a.operand, dtype);
  a.output = RoundTo(a.output, dtype);
  return a;
}

class RaggedAllToAllMeshTest : public MeshTest {};

TEST_P(RaggedAllToAllMeshTest, MatchesTheOracleOnEveryAxisAndGroupSet) {
  unsigned seed = 1;
  for (const AxisList& axes : AxisSpecs(model_)) {
    for (const Groups& groups : GroupSets(model_.AxisSize(axes))) {
      SCOPED_TRACE(Describe(axes, groups));
      const RaggedArgs a = RandomArgs(model_, axes, groups, 2, {3}, DType::kF32, seed++);
      absl::StatusOr<DeviceResults> out = RunRagged(*mesh_, DType::kF32, a, axes, groups);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_TRUE(Matches(out->values[0], ExpectedRaggedAllToAll(model_, a, axes, groups)));
    }
  }
}

TEST_P(RaggedAllToAllMeshTest, DtypesAndRanks) {
  const AxisList axes = AxisSpecs(model_).back();
  struct Case {
    DType dtype;
    std::vector<int64_t> row_dims;
    int64_t per_member;
  };
  unsigned seed = 100;
  for (const Case& c : {Case{DType::kBF16, {5}, 1}, Case{DType::kS32, {}, 3},
                        Case{DType::kF32, {2, 3}, 2}}) {
    SCOPED_TRACE(std::string(DTypeName(c.dtype)) + " rank " +
                 std::to_string(c.row_dims.size() + 1));
    const RaggedArgs a = RandomArgs(model_, axes, {}, c.per_member, c.row_dims, c.dtype, seed++);
    absl::StatusOr<DeviceResults> out = RunRagged(*mesh_, c.dtype, a, axes);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(Matches(out->values[0], ExpectedRaggedAllToAll(model_, a, axes)));
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, RaggedAllToAllMeshTest, ::testing::ValuesIn(TestMeshShapes()),
                         MeshShapeName);

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

class RaggedAllToAllErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(64), {{"x", 2}});
    ASSERT_TRUE(mesh.ok()) << mesh.status();
    mesh_.emplace(*mesh);
    // The docstring's valid example; each test breaks one thing.
    a_.operand = {Vector({1, 2, 2}), Vector({3, 4, 0})};
    a_.output = {Vector({0, 0, 0, 0}), Vector({0, 0, 0, 0})};
    a_.input_offsets = {Vector({0, 1}), Vector({0, 1})};
    a_.send_sizes = {Vector({1, 2}), Vector({1, 1})};
    a_.output_offsets = {Vector({0, 0}), Vector({1, 2})};
    a_.recv_sizes = {Vector({1, 1}), Vector({2, 1})};
  }
  absl::Status Run() { return RunRagged(*mesh_, DType::kF32, a_, {"x"}).status(); }
  std::optional<Mesh> mesh_;
  RaggedArgs a_;
};

TEST_F(RaggedAllToAllErrorsTest, InputRowsOutOfRange) {
  a_.input_offsets[0] = Vector({0, 2});  // rows [2, 4) of a 3-row operand
  absl::Status s = Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("ragged_all_to_all: slice 1 sent by axis index 0 to axis "
                                     "index 1: rows [2, 4) (input_offsets[1], send_sizes[1]) are "
                                     "out of range for the operand's 3 rows"));
}

TEST_F(RaggedAllToAllErrorsTest, NegativeOffset) {
  a_.input_offsets[1] = Vector({-1, 1});
  absl::Status s = Run();
  EXPECT_THAT(s.message(), HasSubstr("rows [-1, 0) (input_offsets[0], send_sizes[0]) are out of "
                                     "range for the operand's 3 rows"));
}

TEST_F(RaggedAllToAllErrorsTest, OutputRowsOutOfRange) {
  a_.output_offsets[1] = Vector({1, 4});  // rows [4, 5) of a 4-row output
  absl::Status s = Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("slice 1 sent by axis index 1 to axis index 1: rows [4, 5) "
                                     "(output_offsets[1], send_sizes[1]) are out of range for "
                                     "the output's 4 rows"));
}

TEST_F(RaggedAllToAllErrorsTest, OverlappingOutputRows) {
  a_.output_offsets[1] = Vector({0, 2});  // device 0 gets rows [0, 1) from both senders
  absl::Status s = Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("to axis index 0: output rows [0, 1) overlap rows [0, 1) of "
                                     "slice 0 from axis index"));
}

TEST_F(RaggedAllToAllErrorsTest, RecvSizesDisagreeWithSendSizes) {
  a_.recv_sizes[1] = Vector({2, 2});
  absl::Status s = Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("slice 1 sent by axis index 1 to axis index 1: the "
                                     "receiver's recv_sizes[1] is 2 but the sender's "
                                     "send_sizes[1] is 1"));
}

TEST_F(RaggedAllToAllErrorsTest, NegativeSendSize) {
  a_.send_sizes[0] = Vector({-1, 2});
  a_.recv_sizes[0] = Vector({-1, 1});
  absl::Status s = Run();
  EXPECT_THAT(s.message(), HasSubstr("send_sizes[0] is negative (-1)"));
}

// Trace-time errors: the shape rule.
absl::Status TraceError(const std::vector<ShapedType>& types) {
  absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(64), {{"x", 2}});
  if (!mesh.ok()) return mesh.status();
  std::vector<PartitionSpec> specs(types.size(), P());
  std::vector<NamedSharding> shardings(types.size(), NamedSharding(*mesh, P()));
  auto f = jit(shard_map(
      [](const std::vector<Tracer>& x) {
        return lax::ragged_all_to_all(x[0], x[1], x[2], x[3], x[4], x[5], "x");
      },
      *mesh, specs, {P()}));
  return f.lower(types, shardings).status();
}

TEST(RaggedAllToAllTraceErrorsTest, ShapeRule) {
  const ShapedType rows{DType::kF32, {4, 3}};
  const ShapedType k2{DType::kS32, {2}};
  struct Case {
    std::vector<ShapedType> types;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{rows, rows, {DType::kF32, {2}}, k2, k2, k2}, "input_offsets must be integer (s32), got f32"},
      {{rows, rows, k2, k2, {DType::kS32, {2, 1}}, k2},
       "output_offsets must be rank 1 with positive dimension size, but got shape s32[2,1]"},
      {{rows, rows, k2, k2, k2, {DType::kS32, {0}}},
       "recv_sizes must be rank 1 with positive dimension size, but got shape s32[0]"},
      {{rows, rows, k2, {DType::kS32, {4}}, k2, k2},
       "send_sizes has length 4 but input_offsets has length 2"},
      {{rows, rows, {DType::kS32, {3}}, {DType::kS32, {3}}, {DType::kS32, {3}},
        {DType::kS32, {3}}},
       "the offset and size vectors' length 3 is not a multiple of the group size 2"},
      {{rows, {DType::kF32, {4, 2}}, k2, k2, k2, k2},
       "output must have the operand's dtype and dimensions past the first"},
      {{rows, {DType::kBF16, {4, 3}}, k2, k2, k2, k2},
       "output must have the operand's dtype and dimensions past the first"},
      {{{DType::kF32, {}}, {DType::kF32, {}}, k2, k2, k2, k2}, "operand must have rank >= 1"},
  };
  for (const Case& c : cases) {
    absl::Status s = TraceError(c.types);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("ragged_all_to_all: " + c.message)) << s;
  }
}

}  // namespace
}  // namespace shardjit::collectives_test
