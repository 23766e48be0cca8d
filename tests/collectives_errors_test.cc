// Error paths of the collectives: trace-time errors (unknown axes, use outside shard_map, bad
// attributes, bad axis_index_groups) must name the op and say what is wrong; run-time
// disagreements between devices (different ops, operand shapes, a missing or extra collective,
// different groups) must fail the run with an error rather than hang.
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "backends/reference/evaluator.h"
#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "tests/collectives_oracle.h"

namespace shardjit::collectives_test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------
// Trace-time errors
// ---------------------------------------------------------------------------------------------

// On a {x:2, y:4} mesh, each device's operand is f32[4,6].
class CollectiveTraceErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(16), {{"x", 2}, {"y", 4}});
    ASSERT_TRUE(mesh.ok()) << mesh.status();
    mesh_.emplace(*mesh);
  }

  // The status of running `body` inside shard_map (one result per device).
  absl::Status InShardMap(const std::function<Tracer(Tracer)>& body) {
    MeshModel model({{"x", 2}, {"y", 4}});
    absl::StatusOr<DeviceResults> out = RunPerDevice(
        *mesh_, DType::kF32, MakeInputs(model, {4, 6}, DType::kF32),
        [&](Tracer x) { return std::vector<Tracer>{body(x)}; }, 1);
    return out.status();
  }

  // The status of jit of a plain (global-view) function, not under shard_map.
  absl::Status OutsideShardMap(const std::function<Tracer(Tracer)>& body) {
    std::vector<double> values(8 * 24, 1.0);
    absl::StatusOr<Array> a =
        device_put(HostTensor(DType::kF32, {8, 24}, values), NamedSharding(*mesh_, P("x", "y")));
    if (!a.ok()) return a.status();
    auto f = jit([&](Tracer x) { return body(x); });
    return f(*a).status();
  }

  std::optional<Mesh> mesh_;
};

struct NamedBody {
  std::string op;
  std::function<Tracer(Tracer)> body;
};

// Every collective, over the axis names `axes`, with valid attributes for f32[4,6] operands.
std::vector<NamedBody> EveryCollective(const AxisNames& axes) {
  return {
      {"psum", [=](Tracer x) { return lax::psum(x, axes); }},
      {"pmean", [=](Tracer x) { return lax::pmean(x, axes); }},
      {"pmax", [=](Tracer x) { return lax::pmax(x, axes); }},
      {"pmin", [=](Tracer x) { return lax::pmin(x, axes); }},
      {"all_gather", [=](Tracer x) { return lax::all_gather(x, axes, 0, true); }},
      {"psum_scatter", [=](Tracer x) { return lax::psum_scatter(x, axes, 0, true); }},
      {"ppermute",
       [=](Tracer x) {
         return lax::ppermute(x, axes, {{0, 1}, {1, 0}});
       }},
      {"all_to_all", [=](Tracer x) { return lax::all_to_all(x, axes, 0, 1, true); }},
      {"axis_index",
       [=](Tracer x) { return x + lax::convert_element_type(lax::axis_index(axes), DType::kF32); }},
      {"axis_size",
       [=](Tracer x) { return x + lax::convert_element_type(lax::axis_size(axes), DType::kF32); }},
  };
}

TEST_F(CollectiveTraceErrors, ValidBodiesRun) {
  // The bodies used below are fine with a real axis: the errors come from what each test changes.
  for (const NamedBody& c : EveryCollective("x")) {
    EXPECT_TRUE(InShardMap(c.body).ok()) << c.op << ": " << InShardMap(c.body);
  }
}

TEST_F(CollectiveTraceErrors, UnknownAxisNamesTheOpAndTheAxis) {
  for (const NamedBody& c : EveryCollective("z")) {
    absl::Status s = InShardMap(c.body);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.op;
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr(c.op), HasSubstr("\"z\"")));
  }
  // One unknown name in a tuple.
  for (const NamedBody& c : EveryCollective({"x", "z"})) {
    absl::Status s = InShardMap(c.body);
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr(c.op), HasSubstr("\"z\""))) << c.op;
  }
}

// An empty list of axis names: JAX returns x unchanged for psum/all_gather/psum_scatter; this
// library rejects it ("needs at least one axis name"). Either is acceptable here, but not an
// internal error about the op's attributes, which is what axis_index, axis_size, and ppermute with
// an empty perm give today ("axis_index: expects attributes of kind axis, got none"): their
// attributes are only created when the first axis name (or perm pair) is added.
TEST_F(CollectiveTraceErrors, EmptyAxisListIsNotAnInternalError) {
  const std::vector<std::string> no_axes;
  std::vector<NamedBody> cases = EveryCollective(no_axes);
  cases.push_back({"ppermute", [&](Tracer x) { return lax::ppermute(x, no_axes, {}); }});
  for (const NamedBody& c : cases) {
    absl::Status s = InShardMap(c.body);
    if (s.ok()) continue;
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr(c.op), HasSubstr("axis name"),
                                                ::testing::Not(HasSubstr("expects attributes"))));
  }
}

TEST_F(CollectiveTraceErrors, RepeatedAxisName) {
  absl::Status s = InShardMap([](Tracer x) { return lax::psum(x, {"x", "x"}); });
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("psum"), HasSubstr("named twice")));
}

TEST_F(CollectiveTraceErrors, CollectiveOutsideShardMap) {
  for (const NamedBody& c : EveryCollective("x")) {
    absl::Status s = OutsideShardMap(c.body);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.op;
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr(c.op), HasSubstr("shard_map")));
  }
}

TEST_F(CollectiveTraceErrors, AllGatherAxisOutOfRange) {
  // Untiled: the new dimension goes at 0..rank; tiled: at an existing dimension 0..rank-1.
  EXPECT_TRUE(InShardMap([](Tracer x) { return lax::all_gather(x, "y", 2, false); }).ok());
  for (auto [axis, tiled] : std::vector<std::pair<int64_t, bool>>{{3, false}, {2, true}}) {
    absl::Status s = InShardMap([&](Tracer x) { return lax::all_gather(x, "y", axis, tiled); });
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr("all_gather"), HasSubstr("axis " + std::to_string(axis)),
                      HasSubstr("out of range")))
        << "tiled=" << tiled;
  }
}

TEST_F(CollectiveTraceErrors, PsumScatterBadDimension) {
  // Untiled: dim 0 (size 4) must equal the size of x (2).
  absl::Status s = InShardMap([](Tracer x) { return lax::psum_scatter(x, "x", 0, false); });
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("psum_scatter"), HasSubstr("size 4"), HasSubstr("axis size 2")));
  // Untiled with groups: the group size counts (2 for pairs on y).
  s = InShardMap([](Tracer x) { return lax::psum_scatter(x, "y", 0, false, {{0, 1}, {2, 3}}); });
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("psum_scatter"), HasSubstr("2")));
  // Tiled: 6 is not divisible by 4.
  s = InShardMap([](Tracer x) { return lax::psum_scatter(x, "y", 1, true); });
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("psum_scatter"), HasSubstr("divisible")));
  s = InShardMap([](Tracer x) { return lax::psum_scatter(x, "y", 2, true); });
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("psum_scatter"), HasSubstr("out of range")));
}

TEST_F(CollectiveTraceErrors, PpermuteBadPerm) {
  struct Case {
    std::vector<std::pair<int64_t, int64_t>> perm;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {{{0, 1}, {0, 2}}, "source 0 twice"}, {{{0, 1}, {2, 1}}, "target 1 twice"},
      {{{0, 4}}, "out of range"},           {{{4, 0}}, "out of range"},
      {{{-1, 0}}, "out of range"},
  };
  for (const Case& c : cases) {
    absl::Status s = InShardMap([&](Tracer x) { return lax::ppermute(x, "y", c.perm); });
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("ppermute"), HasSubstr(c.fragment)));
  }
}

TEST_F(CollectiveTraceErrors, AxisIndexGroupsMustCoverTheAxis) {
  struct Case {
    Groups groups;
    std::string fragment;
  };
  // y has size 4.
  const std::vector<Case> cases = {
      {{{0, 1}}, "cover"},          // 2 and 3 missing
      {{{0, 1}, {1, 3}}, "cover"},  // 1 twice, 2 missing
      {{{0, 1}, {2, 7}}, "out of range"},
      {{{0, 1}, {2, -1}}, "out of range"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(Describe({"y"}, c.groups));
    for (const NamedBody& op : std::vector<NamedBody>{
             {"psum", [&](Tracer x) { return lax::psum(x, "y", c.groups); }},
             {"pmax", [&](Tracer x) { return lax::pmax(x, "y", c.groups); }},
             {"all_gather", [&](Tracer x) { return lax::all_gather(x, "y", 0, false, c.groups); }},
             {"psum_scatter",
              [&](Tracer x) { return lax::psum_scatter(x, "y", 1, true, c.groups); }},
             {"all_to_all",
              [&](Tracer x) { return lax::all_to_all(x, "y", 0, 1, true, c.groups); }}}) {
      absl::Status s = InShardMap(op.body);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << op.op;
      EXPECT_THAT(std::string(s.message()),
                  AllOf(HasSubstr(op.op), HasSubstr("axis_index_groups"), HasSubstr(c.fragment)));
    }
  }
}

TEST_F(CollectiveTraceErrors, GatherScatterAndAllToAllNeedEqualGroups) {
  const Groups unequal = {{0, 1, 2}, {3}};
  for (const NamedBody& op : std::vector<NamedBody>{
           {"all_gather", [&](Tracer x) { return lax::all_gather(x, "y", 0, false, unequal); }},
           {"psum_scatter", [&](Tracer x) { return lax::psum_scatter(x, "y", 1, true, unequal); }},
           {"all_to_all",
            [&](Tracer x) { return lax::all_to_all(x, "y", 0, 1, true, unequal); }}}) {
    absl::Status s = InShardMap(op.body);
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr(op.op), HasSubstr("same")));
  }
}

TEST_F(CollectiveTraceErrors, AllToAllBadSplit) {
  // Tiled: dim 1 (size 6) is not divisible by 4.
  absl::Status s = InShardMap([](Tracer x) { return lax::all_to_all(x, "y", 1, 0, true); });
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("all_to_all"), HasSubstr("divisible")));
  // Untiled: dim 1 (size 6) must equal 4.
  s = InShardMap([](Tracer x) { return lax::all_to_all(x, "y", 1, 0, false); });
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("all_to_all"), HasSubstr("size 6")));
  s = InShardMap([](Tracer x) { return lax::all_to_all(x, "y", 2, 0, true); });
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("all_to_all"), HasSubstr("split_axis")));
  s = InShardMap([](Tracer x) { return lax::all_to_all(x, "y", 0, 2, true); });
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("all_to_all"), HasSubstr("concat_axis")));
}

// ---------------------------------------------------------------------------------------------
// Run-time disagreements between devices: per-device programs run directly on the runtime
// ---------------------------------------------------------------------------------------------

// A per-device program from IR text: `body` is the function body for a 1-D mesh {x:2}.
std::unique_ptr<backends::Executable> Program(const std::string& mesh, const std::string& body) {
  std::string text =
      "module m [view=per_device mesh={" + mesh + "} entry=main]\nfunc main = " + body + "\n";
  absl::StatusOr<ir::Module> m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status() << "\n" << text;
  if (!m.ok()) return nullptr;
  absl::Status verified = ir::VerifyModule(*m);
  EXPECT_TRUE(verified.ok()) << verified << "\n" << text;
  absl::StatusOr<std::unique_ptr<backends::Executable>> exe =
      backends::reference::Compile(m->functions(0));
  EXPECT_TRUE(exe.ok()) << exe.status();
  return exe.ok() ? std::move(*exe) : nullptr;
}

const char kPsum2[] = R"({ lambda ; a:f32[2]. let
    b:f32[2] = psum[axes=(x)] a
  in (b) })";
const char kPsum3[] = R"({ lambda ; a:f32[3]. let
    b:f32[3] = psum[axes=(x)] a
  in (b) })";
const char kGather2[] = R"({ lambda ; a:f32[2]. let
    b:f32[4] = all_gather[axes=(x) axis=0 tiled=True] a
  in (b) })";
const char kNoCollective2[] = R"({ lambda ; a:f32[2]. let
    b:f32[2] = neg a
  in (b) })";
const char kTwoPsums2[] = R"({ lambda ; a:f32[2]. let
    b:f32[2] = psum[axes=(x)] a
    c:f32[2] = psum[axes=(x)] b
  in (c) })";

ir::Tensor Vec(std::vector<double> v) {
  return ir::Tensor::FromDoubles({DType::kF32, {static_cast<int64_t>(v.size())}}, v);
}

class FabricErrors : public ::testing::Test {
 protected:
  // A fresh runtime per test; `timeout` bounds the wait at a collective.
  void MakeRuntime(int devices, absl::Duration timeout) {
    rt_ = std::make_unique<Runtime>(
        RuntimeOptions{.num_devices = devices, .collective_timeout = timeout});
  }
  absl::StatusOr<std::vector<std::vector<ir::Tensor>>> Run(
      const Mesh& mesh, const std::vector<const backends::Executable*>& programs,
      std::vector<std::vector<ir::Tensor>> args, double* seconds = nullptr) {
    auto start = std::chrono::steady_clock::now();
    auto out = rt_->RunSpmd(mesh.proto(), programs, std::move(args));
    if (seconds != nullptr) {
      *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return out;
  }
  // A correct psum run afterwards: the runtime is still usable after a failed run.
  void ExpectHealthy(const Mesh& mesh) {
    std::unique_ptr<backends::Executable> psum = Program("x:2", kPsum2);
    ASSERT_NE(psum, nullptr);
    auto out = Run(mesh, {psum.get(), psum.get()}, {{Vec({1, 2})}, {Vec({10, 20})}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0][0].ToDoubles(), (std::vector<double>{11, 22}));
    EXPECT_EQ((*out)[1][0].ToDoubles(), (std::vector<double>{11, 22}));
  }
  std::unique_ptr<Runtime> rt_;
};

TEST_F(FabricErrors, DifferentOpsFailWithMismatchNamingBoth) {
  // The default (60 s) timeout: the mismatch must be reported without waiting for it.
  MakeRuntime(2, absl::Seconds(60));
  absl::StatusOr<Mesh> mesh = make_mesh(*rt_, {{"x", 2}});
  ASSERT_TRUE(mesh.ok());
  std::unique_ptr<backends::Executable> psum = Program("x:2", kPsum2);
  std::unique_ptr<backends::Executable> gather = Program("x:2", kGather2);
  ASSERT_TRUE(psum && gather);
  // Repeated, so that both arrival orders are likely exercised.
  for (int i = 0; i < 20; ++i) {
    double seconds = 0;
    auto out = Run(*mesh, {psum.get(), gather.get()}, {{Vec({1, 2})}, {Vec({3, 4})}}, &seconds);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
    EXPECT_THAT(std::string(out.status().message()),
                AllOf(HasSubstr("mismatch"), HasSubstr("psum"), HasSubstr("all_gather")));
    EXPECT_LT(seconds, 10);
  }
  ExpectHealthy(*mesh);
}

TEST_F(FabricErrors, DifferentOperandShapesFailWithMismatch) {
  MakeRuntime(2, absl::Seconds(60));
  absl::StatusOr<Mesh> mesh = make_mesh(*rt_, {{"x", 2}});
  ASSERT_TRUE(mesh.ok());
  std::unique_ptr<backends::Executable> p2 = Program("x:2", kPsum2);
  std::unique_ptr<backends::Executable> p3 = Program("x:2", kPsum3);
  ASSERT_TRUE(p2 && p3);
  auto out = Run(*mesh, {p2.get(), p3.get()}, {{Vec({1, 2})}, {Vec({3, 4, 5})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  EXPECT_THAT(std::string(out.status().message()),
              AllOf(HasSubstr("mismatch"), HasSubstr("f32[2]"), HasSubstr("f32[3]")));
  ExpectHealthy(*mesh);
}

TEST_F(FabricErrors, MissingDeviceTimesOutNamingIt) {
  MakeRuntime(2, absl::Milliseconds(200));
  absl::StatusOr<Mesh> mesh = make_mesh(*rt_, {{"x", 2}});
  ASSERT_TRUE(mesh.ok());
  std::unique_ptr<backends::Executable> psum = Program("x:2", kPsum2);
  std::unique_ptr<backends::Executable> none = Program("x:2", kNoCollective2);
  ASSERT_TRUE(psum && none);
  double seconds = 0;
  auto out = Run(*mesh, {psum.get(), none.get()}, {{Vec({1, 2})}, {Vec({3, 4})}}, &seconds);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_THAT(std::string(out.status().message()),
              AllOf(HasSubstr("psum"), HasSubstr("device 0"), HasSubstr("devices [1]")));
  EXPECT_LT(seconds, 10);
  ExpectHealthy(*mesh);
}

TEST_F(FabricErrors, MissingDeviceIsNamedByDeviceIdNotPosition) {
  // Mesh position 0 is device 1 and position 1 is device 0: device 0 never arrives.
  MakeRuntime(2, absl::Milliseconds(200));
  absl::StatusOr<Mesh> mesh = make_mesh(*rt_, {{"x", 2}}, {1, 0});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::unique_ptr<backends::Executable> psum = Program("x:2", kPsum2);
  std::unique_ptr<backends::Executable> none = Program("x:2", kNoCollective2);
  ASSERT_TRUE(psum && none);
  auto out = Run(*mesh, {psum.get(), none.get()}, {{Vec({1, 2})}, {Vec({3, 4})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_THAT(std::string(out.status().message()),
              AllOf(HasSubstr("device 1"), HasSubstr("devices [0]")));
}

TEST_F(FabricErrors, ExtraCollectiveOnOneDeviceTimesOut) {
  MakeRuntime(2, absl::Milliseconds(200));
  absl::StatusOr<Mesh> mesh = make_mesh(*rt_, {{"x", 2}});
  ASSERT_TRUE(mesh.ok());
  std::unique_ptr<backends::Executable> one = Program("x:2", kPsum2);
  std::unique_ptr<backends::Executable> two = Program("x:2", kTwoPsums2);
  ASSERT_TRUE(one && two);
  auto out = Run(*mesh, {two.get(), one.get()}, {{Vec({1, 2})}, {Vec({3, 4})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_THAT(std::string(out.status().message()),
              AllOf(HasSubstr("#1"), HasSubstr("devices [1]")));
  ExpectHealthy(*mesh);
}

TEST_F(FabricErrors, DisagreeingGroupsFailInsteadOfHanging) {
  // On {x:2, y:2}, positions 0 and 1 reduce over y while positions 2 and 3 reduce over x: the
  // groups {0,2} and {1,3} can never be completed consistently.
  MakeRuntime(4, absl::Milliseconds(200));
  absl::StatusOr<Mesh> mesh = make_mesh(*rt_, {{"x", 2}, {"y", 2}});
  ASSERT_TRUE(mesh.ok());
  const std::string over_y = R"({ lambda ; a:f32[2]. let
    b:f32[2] = psum[axes=(y)] a
  in (b) })";
  const std::string over_x = R"({ lambda ; a:f32[2]. let
    b:f32[2] = psum[axes=(x)] a
  in (b) })";
  std::unique_ptr<backends::Executable> py = Program("x:2,y:2", over_y);
  std::unique_ptr<backends::Executable> px = Program("x:2,y:2", over_x);
  ASSERT_TRUE(py && px);
  for (int i = 0; i < 5; ++i) {
    double seconds = 0;
    auto out = Run(*mesh, {py.get(), py.get(), px.get(), px.get()},
                   {{Vec({1, 2})}, {Vec({3, 4})}, {Vec({5, 6})}, {Vec({7, 8})}}, &seconds);
    ASSERT_FALSE(out.ok());
    EXPECT_TRUE(out.status().code() == absl::StatusCode::kFailedPrecondition ||
                out.status().code() == absl::StatusCode::kDeadlineExceeded)
        << out.status();
    EXPECT_LT(seconds, 10);
  }
}

// A per-device program given as a C++ function (to fail, or to issue raw collectives).
class FnExecutable final : public backends::Executable {
 public:
  using Fn = std::function<absl::StatusOr<std::vector<ir::Tensor>>(const std::vector<ir::Tensor>&,
                                                                   backends::DeviceContext&)>;
  explicit FnExecutable(Fn fn) : fn_(std::move(fn)) {}
  absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>& args,
                                              backends::DeviceContext& device) const override {
    return fn_(args, device);
  }
  const backends::Backend& backend() const override {
    return backends::reference::ReferenceBackend();
  }

 private:
  Fn fn_;
};

TEST_F(FabricErrors, FailingDeviceWakesPeersWaitingAtACollective) {
  // Device 1 fails before its collective: device 0, waiting in psum, must be released at once
  // (not after the 60 s timeout) and the run must report device 1's error.
  MakeRuntime(2, absl::Seconds(60));
  absl::StatusOr<Mesh> mesh = make_mesh(*rt_, {{"x", 2}});
  ASSERT_TRUE(mesh.ok());
  std::unique_ptr<backends::Executable> psum = Program("x:2", kPsum2);
  ASSERT_NE(psum, nullptr);
  FnExecutable failing([](const std::vector<ir::Tensor>&,
                          backends::DeviceContext&) -> absl::StatusOr<std::vector<ir::Tensor>> {
    return absl::InternalError("boom");
  });
  double seconds = 0;
  auto out = Run(*mesh, {psum.get(), &failing}, {{Vec({1, 2})}, {Vec({3, 4})}}, &seconds);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal) << out.status();
  EXPECT_THAT(std::string(out.status().message()), AllOf(HasSubstr("device 1"), HasSubstr("boom")));
  EXPECT_LT(seconds, 10);
  ExpectHealthy(*mesh);
}

// A program verified for mesh {x:2} run on a mesh {i:2} names an axis the run's mesh lacks.
// psum reports it as an error; axis_index and axis_size must too, instead of crashing the
// process (today: protobuf "CHECK failed: (index) >= (0)" abort in RunState::Collective, which
// indexes mesh.axes(MeshAxisIndex(...)) = mesh.axes(-1)). Each case runs in a child process so
// that a crash fails only this test.
TEST(FabricForeignMesh, AxisOpsOverAnAxisNotInTheRunMeshFailCleanly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"psum", "b:f32[2] = psum[axes=(x)] a"},
      {"axis_index", "b:s32[] = axis_index[axes=(x)]"},
      {"axis_size", "b:s32[] = axis_size[axes=(x)]"},
  };
  for (const auto& [op, line] : cases) {
    SCOPED_TRACE(op);
    EXPECT_EXIT(
        {
          Runtime rt(RuntimeOptions{.num_devices = 2});
          absl::StatusOr<Mesh> mesh = make_mesh(rt, {{"i", 2}});
          std::unique_ptr<backends::Executable> exe =
              Program("x:2", "{ lambda ; a:f32[2]. let\n    " + line + "\n  in (b) }");
          if (!mesh.ok() || exe == nullptr) std::_Exit(2);
          auto out =
              rt.RunSpmd(mesh->proto(), {exe.get(), exe.get()}, {{Vec({1, 2})}, {Vec({3, 4})}});
          const bool clean = !out.ok() &&
                             out.status().code() == absl::StatusCode::kInvalidArgument &&
                             absl::StrContains(out.status().message(), "\"x\"");
          std::_Exit(clean ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
  }
}

TEST_F(FabricErrors, SameProgramRunsOnTheRuntimeDirectly) {
  // The positive control for the tests above: psum and all_gather through RunSpmd.
  MakeRuntime(2, absl::Seconds(60));
  absl::StatusOr<Mesh> mesh = make_mesh(*rt_, {{"x", 2}});
  ASSERT_TRUE(mesh.ok());
  ExpectHealthy(*mesh);
  std::unique_ptr<backends::Executable> gather = Program("x:2", kGather2);
  ASSERT_NE(gather, nullptr);
  auto out = Run(*mesh, {gather.get(), gather.get()}, {{Vec({1, 2})}, {Vec({3, 4})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[1][0].ToDoubles(), (std::vector<double>{1, 2, 3, 4}));
}

// ---------------------------------------------------------------------------------------------
// Asynchronous collectives: the same mismatch and timeout errors, naming the start op
// ---------------------------------------------------------------------------------------------

const char kPpermuteAsync2[] = R"({ lambda ; a:f32[2]. let
    b:future[f32[2]] = ppermute_start[axes=(x) perm=((0,1),(1,0))] a
    c:f32[2] = neg a
    d:f32[2] = ppermute_done b
    e:f32[2] = add c d
  in (e) })";
const char kPsumAsync2[] = R"({ lambda ; a:f32[2]. let
    b:future[f32[2]] = psum_start[axes=(x)] a
    c:f32[2] = psum_done b
  in (c) })";

TEST_F(FabricErrors, AsyncStartsThatDifferFailWithMismatchNamingBoth) {
  MakeRuntime(2, absl::Seconds(60));
  absl::StatusOr<Mesh> mesh = make_mesh(*rt_, {{"x", 2}});
  ASSERT_TRUE(mesh.ok());
  std::unique_ptr<backends::Executable> permute = Program("x:2", kPpermuteAsync2);
  std::unique_ptr<backends::Executable> psum_async = Program("x:2", kPsumAsync2);
  std::unique_ptr<backends::Executable> psum = Program("x:2", kPsum2);
  ASSERT_TRUE(permute && psum_async && psum);
  for (int i = 0; i < 10; ++i) {
    double seconds = 0;
    auto out = Run(*mesh, {permute.get(), psum_async.get()}, {{Vec({1, 2})}, {Vec({3, 4})}},
                   &seconds);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
    EXPECT_THAT(std::string(out.status().message()),
                AllOf(HasSubstr("mismatch"), HasSubstr("ppermute_start"), HasSubstr("psum_start")));
    EXPECT_LT(seconds, 10);
    // A blocking psum does not meet a psum_start either.
    out = Run(*mesh, {psum.get(), psum_async.get()}, {{Vec({1, 2})}, {Vec({3, 4})}});
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(std::string(out.status().message()),
                AllOf(HasSubstr("mismatch"), HasSubstr("psum["), HasSubstr("psum_start")));
  }
  ExpectHealthy(*mesh);
}

TEST_F(FabricErrors, AsyncStartedOnOneDeviceOnlyTimesOutNamingTheOpAndThePeer) {
  MakeRuntime(2, absl::Milliseconds(300));
  absl::StatusOr<Mesh> mesh = make_mesh(*rt_, {{"x", 2}});
  ASSERT_TRUE(mesh.ok());
  std::unique_ptr<backends::Executable> permute = Program("x:2", kPpermuteAsync2);
  std::unique_ptr<backends::Executable> none = Program("x:2", kNoCollective2);
  ASSERT_TRUE(permute && none);
  double seconds = 0;
  auto out = Run(*mesh, {permute.get(), none.get()}, {{Vec({1, 2})}, {Vec({3, 4})}}, &seconds);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_THAT(std::string(out.status().message()),
              AllOf(HasSubstr("ppermute_start"), HasSubstr("on device 0"),
                    HasSubstr("devices [1] of its group did not arrive")));
  EXPECT_LT(seconds, 10);
  ExpectHealthy(*mesh);
}

TEST_F(FabricErrors, AsyncPairRunsOnTheRuntimeDirectly) {
  MakeRuntime(2, absl::Seconds(60));
  absl::StatusOr<Mesh> mesh = make_mesh(*rt_, {{"x", 2}});
  ASSERT_TRUE(mesh.ok());
  std::unique_ptr<backends::Executable> permute = Program("x:2", kPpermuteAsync2);
  ASSERT_NE(permute, nullptr);
  auto out = Run(*mesh, {permute.get(), permute.get()}, {{Vec({1, 2})}, {Vec({30, 40})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0][0].ToDoubles(), (std::vector<double>{29, 38}));  // -a + the peer's a
  EXPECT_EQ((*out)[1][0].ToDoubles(), (std::vector<double>{-29, -38}));
}

}  // namespace
}  // namespace shardjit::collectives_test
