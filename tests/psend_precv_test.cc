// psend / precv: a psend and a precv of one perm give ppermute's result (the host oracle) on every
// test mesh and axis spec, non-targets getting zeros; several sends between one pair arrive in
// order; a psend whose token is unused still sends. Errors: a precv of another type than was
// sent, a precv whose psend never comes (the collective timeout), a psend nobody receives, and
// the shape rule's.
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
using Perm = std::vector<std::pair<int64_t, int64_t>>;

class PsendPrecvMeshTest : public MeshTest {};

TEST_P(PsendPrecvMeshTest, SendThenReceiveIsPpermute) {
  const PerDevice in = MakeInputs(model_, {2, 3}, DType::kF32);
  for (const AxisList& axes : AxisSpecs(model_)) {
    SCOPED_TRACE(Describe(axes));
    const int64_t n = model_.AxisSize(axes);
    Perm ring, partial;
    for (int64_t i = 0; i < n; ++i) ring.push_back({i, (i + 1) % n});
    for (int64_t i = 0; i + 1 < n; i += 2) partial.push_back({i + 1, i});  // odd -> even only
    absl::StatusOr<DeviceResults> out = RunPerDevice(
        *mesh_, DType::kF32, in,
        [&](Tracer x) {
          Tracer a = lax::precv(lax::psend(x, axes, ring), x.type(), axes, ring);
          Tracer b = lax::precv(lax::psend(x * 2.0, axes, partial), x.type(), axes, partial);
          return std::vector<Tracer>{a, b};
        },
        2);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(Matches(out->values[0], ExpectedPpermute(model_, in, axes, ring)));
    PerDevice doubled = in;
    for (HostArray& a : doubled) {
      for (double& v : a.values) v *= 2;
    }
    EXPECT_TRUE(Matches(out->values[1], ExpectedPpermute(model_, doubled, axes, partial)));
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, PsendPrecvMeshTest, ::testing::ValuesIn(TestMeshShapes()),
                         MeshShapeName);

class PsendPrecvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Mesh> mesh = make_mesh(*runtime_, {{"x", 2}});
    ASSERT_TRUE(mesh.ok()) << mesh.status();
    mesh_.emplace(*mesh);
  }
  absl::StatusOr<DeviceResults> Run(const std::function<std::vector<Tracer>(Tracer)>& body,
                                    int results) {
    return RunPerDevice(*mesh_, DType::kF32, {{{2}, {1, 2}}, {{2}, {3, 4}}}, body, results);
  }
  // A short collective timeout, so that a precv nobody sends to fails fast.
  static inline Runtime* runtime_ =
      new Runtime({.num_devices = 2, .collective_timeout = absl::Milliseconds(300)});
  std::optional<Mesh> mesh_;
};

TEST_F(PsendPrecvTest, SendsBetweenOnePairArriveInOrder) {
  const Perm to_1 = {{0, 1}};
  absl::StatusOr<DeviceResults> out = Run(
      [&](Tracer x) {
        // Both sends first (the token of the first unused), then both receives.
        lax::psend(x, "x", to_1);
        Tracer t = lax::psend(x * 10.0, "x", to_1);
        Tracer first = lax::precv(lax::create_token(), x.type(), "x", to_1);
        Tracer second = lax::precv(t, x.type(), "x", to_1);
        return std::vector<Tracer>{first, second};
      },
      2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->values[0][1].values, (std::vector<double>{1, 2}));
  EXPECT_EQ(out->values[1][1].values, (std::vector<double>{10, 20}));
  // Device 0 is no target: zeros.
  EXPECT_EQ(out->values[0][0].values, (std::vector<double>{0, 0}));
}

TEST_F(PsendPrecvTest, TypeMismatchFailsTheRun) {
  const Perm to_1 = {{0, 1}};
  absl::StatusOr<DeviceResults> out = Run(
      [&](Tracer x) {
        Tracer t = lax::psend(x, "x", to_1);
        return std::vector<Tracer>{lax::precv(t, ShapedType{DType::kF32, {3}}, "x", to_1)};
      },
      1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  EXPECT_THAT(out.status().message(),
              HasSubstr("precv on device 1 expects f32[3] from device 0, which sent f32[2]"));
}

TEST_F(PsendPrecvTest, ReceiveWithoutSendTimesOut) {
  absl::StatusOr<DeviceResults> out = Run(
      [&](Tracer x) {
        return std::vector<Tracer>{lax::precv(lax::create_token(), x.type(), "x", {{1, 0}})};
      },
      1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_THAT(out.status().message(),
              HasSubstr("precv on device 0 waited"));
  EXPECT_THAT(out.status().message(), HasSubstr("for a psend from device 1 that never came"));
}

TEST_F(PsendPrecvTest, SendWithoutReceiveFailsTheRun) {
  absl::StatusOr<DeviceResults> out = Run(
      [&](Tracer x) {
        lax::psend(x, "x", {{0, 1}, {1, 0}});
        return std::vector<Tracer>{x};
      },
      1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  EXPECT_THAT(out.status().message(),
              HasSubstr("1 psend(s) from device 0 to device 1 (f32[2] first) were never "
                        "received: no matching precv ran"));
}

TEST_F(PsendPrecvTest, ShapeRuleErrors) {
  absl::StatusOr<DeviceResults> out = Run(
      [&](Tracer x) {
        return std::vector<Tracer>{lax::precv(x, x.type(), "x", {{0, 1}})};
      },
      1);
  EXPECT_THAT(out.status().message(),
              HasSubstr("precv: operand must be a token (pred[0], from psend or create_token)"));
  out = Run([&](Tracer x) { return std::vector<Tracer>{lax::psend(x, "x", {{0, 2}})}; }, 1);
  EXPECT_THAT(out.status().message(),
              HasSubstr("psend: perm pair (0,2) is out of range for axis size 2"));
  out = Run(
      [&](Tracer x) {
        return std::vector<Tracer>{
            lax::precv(lax::create_token(), x.type(), "x", {{0, 1}, {1, 1}})};
      },
      1);
  EXPECT_THAT(out.status().message(), HasSubstr("precv: perm has target 1 twice"));
}

}  // namespace
}  // namespace shardjit::collectives_test
