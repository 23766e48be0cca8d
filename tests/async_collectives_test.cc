// Asynchronous collectives (`*_start` / `*_done`) against their blocking twins: the same results,
// bit for bit, on every mesh shape of the collective tests, single and tuple axes, with
// axis_index_groups, several starts in flight at once and awaited out of order; pbroadcast
// against the host oracle; a future carried through fori_loop (a ring all-gather by hand)
// against the all_gather oracle; and the runtime keeping posted operands alive.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frontend/shardjit.h"
#include "gtest/gtest.h"
#include "tests/collectives_oracle.h"

namespace shardjit::collectives_test {
namespace {

class AsyncCollectivesTest : public MeshTest {
 protected:
  std::vector<AxisList> AxisSpecs() const { return collectives_test::AxisSpecs(model_); }
};

// Every async collective, started together and awaited in reverse order with local work in
// between, gives exactly what its blocking twin gives.
TEST_P(AsyncCollectivesTest, EveryStartDoneMatchesItsBlockingTwinBitwise) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kS32}) {
    for (const AxisList& axes : AxisSpecs()) {
      const int64_t n = model_.AxisSize(axes);
      std::vector<std::pair<int64_t, int64_t>> ring;
      for (int64_t i = 0; i < n; ++i) ring.push_back({i, (i + 1) % n});
      for (const Groups& groups : GroupSets(n)) {
        const int64_t g = groups.empty() ? n : static_cast<int64_t>(groups[0].size());
        SCOPED_TRACE(Describe(axes, groups) + " " + std::string(ir::DTypeName(dtype)));
        // Odd trailing size; the leading one splits into the group.
        const PerDevice in = MakeInputs(model_, {2 * g, 3}, dtype);
        auto blocking = [&](Tracer x) {
          return std::vector<Tracer>{lax::psum(x, axes, groups),
                                     lax::all_gather(x, axes, 0, true, groups),
                                     lax::all_gather(x, axes, 1, false, groups),
                                     lax::psum_scatter(x, axes, 0, true, groups),
                                     lax::all_to_all(x, axes, 0, 1, true, groups),
                                     lax::ppermute(x, axes, ring),
                                     lax::pbroadcast(x, axes, n - 1)};
        };
        auto async = [&](Tracer x) {
          std::vector<Tracer> f = {lax::psum_start(x, axes, groups),
                                   lax::all_gather_start(x, axes, 0, true, groups),
                                   lax::all_gather_start(x, axes, 1, false, groups),
                                   lax::psum_scatter_start(x, axes, 0, true, groups),
                                   lax::all_to_all_start(x, axes, 0, 1, true, groups),
                                   lax::ppermute_start(x, axes, ring),
                                   lax::pbroadcast_start(x, axes, n - 1)};
          Tracer local = x * x;  // work while the collectives are in flight
          std::vector<Tracer> out(7);
          out[6] = lax::pbroadcast_done(f[6]);
          out[5] = lax::ppermute_done(f[5]);
          out[4] = lax::all_to_all_done(f[4]);
          out[3] = lax::psum_scatter_done(f[3]);
          out[2] = lax::all_gather_done(f[2]);
          out[1] = lax::all_gather_done(f[1]);
          out[0] = lax::psum_done(f[0]);
          out.push_back(local);
          return out;
        };
        absl::StatusOr<DeviceResults> want = RunPerDevice(*mesh_, dtype, in, blocking, 7);
        ASSERT_TRUE(want.ok()) << want.status();
        absl::StatusOr<DeviceResults> got = RunPerDevice(*mesh_, dtype, in, async, 8);
        ASSERT_TRUE(got.ok()) << got.status();
        for (int k = 0; k < 7; ++k) {
          EXPECT_EQ(got->dtypes[k], want->dtypes[k]) << "result " << k;
          EXPECT_TRUE(Matches(got->values[k], want->values[k])) << "result " << k;
        }
      }
    }
  }
}

// pbroadcast against the oracle: every member gets the source member's operand.
TEST_P(AsyncCollectivesTest, PbroadcastGivesTheSourcesOperand) {
  for (const AxisList& axes : AxisSpecs()) {
    const int64_t n = model_.AxisSize(axes);
    for (int64_t source : {int64_t{0}, n - 1, n / 2}) {
      SCOPED_TRACE(Describe(axes) + " source " + std::to_string(source));
      const PerDevice in = MakeInputs(model_, {3, 5}, DType::kF32);
      absl::StatusOr<DeviceResults> out = RunPerDevice(
          *mesh_, DType::kF32, in,
          [&](Tracer x) {
            return std::vector<Tracer>{
                lax::pbroadcast(x, axes, source),
                lax::pbroadcast_done(lax::pbroadcast_start(x, axes, source))};
          },
          2);
      ASSERT_TRUE(out.ok()) << out.status();
      PerDevice want(model_.size());
      for (int64_t p = 0; p < model_.size(); ++p) {
        MeshModel::Group group = model_.GroupOf(p, axes, {});
        want[p] = in[group.members[source]];
      }
      EXPECT_TRUE(Matches(out->values[0], want));
      EXPECT_TRUE(Matches(out->values[1], want));
    }
  }
}

// A ring all-gather written with a future carried through fori_loop: each iteration awaits the
// block started in the previous one and starts passing it on (double buffering).
TEST_P(AsyncCollectivesTest, FutureCarriedThroughFori) {
  for (const AxisList& axes : AxisSpecs()) {
    const int64_t n = model_.AxisSize(axes);
    SCOPED_TRACE(Describe(axes));
    std::vector<std::pair<int64_t, int64_t>> right;
    for (int64_t i = 0; i < n; ++i) right.push_back({i, (i + 1) % n});
    const PerDevice in = MakeInputs(model_, {3, 5}, DType::kF32);
    absl::StatusOr<DeviceResults> out = RunPerDevice(
        *mesh_, DType::kF32, in,
        [&](Tracer x) {
          Tracer me = lax::axis_index(axes);
          Tracer gathered =
              lax::dynamic_update_slice(lax::full({3 * n, 5}, 0, DType::kF32), x, {me * 3, 0});
          Tracer in_flight = lax::ppermute_start(x, axes, right);
          std::vector<Tracer> carry = lax::fori_loop(
              1, n,
              [&](Tracer i, std::vector<Tracer> c) {
                Tracer block = lax::ppermute_done(c[1]);
                Tracer next = lax::ppermute_start(block, axes, right);
                // After i hops the block came from (me - i) mod n.
                Tracer source = (me - i + n) % n;
                return std::vector<Tracer>{
                    lax::dynamic_update_slice(c[0], block, {source * 3, 0}), next};
              },
              {gathered, in_flight});
          lax::ppermute_done(carry[1]);  // the last transfer is awaited, its value unused
          return std::vector<Tracer>{carry[0]};
        },
        1);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(Matches(out->values[0], ExpectedAllGather(model_, in, axes, 0, true)));
  }
}

// All-reduces past 64 KiB are computed once per group, each member a share of the elements
// (runtime/fabric.h): the same values as the oracle, for an element count no group size divides,
// with and without groups, blocking and async.
TEST_P(AsyncCollectivesTest, LargeAllReducesMatchTheOracle) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (const AxisList& axes : AxisSpecs()) {
      for (const Groups& groups : GroupSets(model_.AxisSize(axes))) {
        SCOPED_TRACE(Describe(axes, groups) + " " + std::string(ir::DTypeName(dtype)));
        const PerDevice in = MakeInputs(model_, {257, 131}, dtype);  // 33667: 66 KiB of bf16
        absl::StatusOr<DeviceResults> out = RunPerDevice(
            *mesh_, dtype, in,
            [&](Tracer x) {
              return std::vector<Tracer>{lax::psum(x, axes, groups), lax::pmean(x, axes, groups),
                                         lax::pmax(x, axes, groups),
                                         lax::psum_done(lax::psum_start(x, axes, groups))};
            },
            4);
        ASSERT_TRUE(out.ok()) << out.status();
        const double rel = dtype == DType::kBF16 ? 1.0 / 128 : 1e-6;
        const std::vector<std::string> kinds = {"psum", "pmean", "pmax", "psum"};
        for (size_t k = 0; k < kinds.size(); ++k) {
          PerDevice want = RoundTo(ExpectedReduce(model_, in, kinds[k], axes, groups), dtype);
          EXPECT_TRUE(Matches(out->values[k], want, rel)) << kinds[k] << " " << k;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, AsyncCollectivesTest, ::testing::ValuesIn(TestMeshShapes()),
                         MeshShapeName);

// The lowered program shows the futures; its text parses back.
TEST(AsyncCollectivesText, JitLowersToStartAndDone) {
  absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(16), {{"x", 4}});
  ASSERT_TRUE(mesh.ok());
  auto f = jit(shard_map(
      [](Tracer x) {
        Tracer fut = lax::ppermute_start(x, "x", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
        return lax::ppermute_done(fut) + x;
      },
      *mesh, {P("x")}, {P("x")}, /*check_vma=*/false));
  auto lowered = f.lower({{DType::kF32, {8}}}, {NamedSharding(*mesh, P("x"))});
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  const std::string text = lowered->as_text();
  EXPECT_NE(text.find("b:future[f32[2]] = ppermute_start[axes=(x) perm=((0,1),(1,2),(2,3),(3,0))] a"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("c:f32[2] = ppermute_done b"), std::string::npos) << text;
}

}  // namespace
}  // namespace shardjit::collectives_test
