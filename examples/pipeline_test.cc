// The two-stage pipeline against an f64 computation on 2+2 devices (and 1+1), several
// microbatches; and mpmd_map's errors: positions in no program or in two, programs returning
// different types, a stage receiving what was never sent (the collective timeout) or of another
// type, a send nobody receives.
#include "examples/pipeline.h"

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "gtest/gtest.h"

namespace shardjit::examples {
namespace {

using ::testing::HasSubstr;

Runtime& SharedRuntime() {
  // A short collective timeout, so that a precv nobody sends to fails fast.
  static Runtime* rt =
      new Runtime({.num_devices = 4, .collective_timeout = absl::Milliseconds(300)});
  return *rt;
}

TEST(PipelineTest, TwoStagesMatchF64) {
  constexpr int64_t kMicro = 3, kBatch = 6, kHidden = 5;
  for (int64_t x : {1, 2}) {
    SCOPED_TRACE("stages of " + std::to_string(x) + " devices");
    absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(), {{"stage", 2}, {"x", x}});
    ASSERT_TRUE(mesh.ok()) << mesh.status();
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> dist(-1, 1);
    std::vector<double> xs(kMicro * kBatch * kHidden), ws(2 * kHidden * kHidden);
    for (double& v : xs) v = dist(rng);
    for (double& v : ws) v = dist(rng);
    Array in = *device_put(Tensor::FromDoubles({DType::kF32, {kMicro, kBatch, kHidden}}, xs),
                           NamedSharding(*mesh, P(None, "x", None)));
    Array w = *device_put(Tensor::FromDoubles({DType::kF32, {2, kHidden, kHidden}}, ws),
                          NamedSharding(*mesh, P("stage")));
    MpmdMapped pipeline = TwoStagePipeline(*mesh, kMicro);
    absl::StatusOr<std::vector<Array>> out = pipeline(in, w);
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<double> got = (*out)[0].to_host()->ToDoubles();
    ASSERT_EQ(got.size(), static_cast<size_t>(2 * kMicro * kBatch * kHidden));
    for (int64_t i = 0; i < kMicro; ++i) {
      for (int64_t b = 0; b < kBatch; ++b) {
        std::vector<double> h(kHidden), y(kHidden);
        for (int64_t j = 0; j < kHidden; ++j) {
          double acc = 0;
          for (int64_t l = 0; l < kHidden; ++l) {
            acc += xs[(i * kBatch + b) * kHidden + l] * ws[l * kHidden + j];
          }
          h[j] = std::tanh(acc);
        }
        for (int64_t j = 0; j < kHidden; ++j) {
          double acc = 0;
          for (int64_t l = 0; l < kHidden; ++l) acc += h[l] * ws[(kHidden + l) * kHidden + j];
          y[j] = std::tanh(acc);
        }
        for (int64_t j = 0; j < kHidden; ++j) {
          EXPECT_NEAR(got[(i * kBatch + b) * kHidden + j], h[j], 1e-5);
          EXPECT_NEAR(got[((kMicro + i) * kBatch + b) * kHidden + j], y[j], 1e-5);
        }
      }
    }
    // One module: both stages' functions, and which one each position runs.
    absl::StatusOr<ir::Module> module = pipeline.lower({in, w});
    ASSERT_TRUE(module.ok()) << module.status();
    const std::string text = ir::PrintModule(*module);
    EXPECT_THAT(text, HasSubstr(x == 1 ? "position_functions=(main_program0,main_program1)"
                                       : "position_functions=(main_program0,main_program0,"
                                         "main_program1,main_program1)"));
    EXPECT_THAT(text, HasSubstr("func main_program0 = "));
    EXPECT_THAT(text, HasSubstr("psend[axes=(stage) perm=((0,1))]"));
    EXPECT_THAT(text, HasSubstr("func main_program1 = "));
    EXPECT_THAT(text, HasSubstr("precv[axes=(stage) perm=((0,1))"));
    // It parses back to the same module.
    absl::StatusOr<ir::Module> parsed = ir::ParseModule(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(ir::PrintModule(*parsed), text);
  }
}

class MpmdErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(), {{"stage", 2}});
    ASSERT_TRUE(mesh.ok()) << mesh.status();
    mesh_.emplace(*mesh);
    x_.emplace(*device_put(Tensor::FromDoubles({DType::kF32, {4}}, {1, 2, 3, 4}),
                           NamedSharding(*mesh_, P())));
  }
  absl::Status Run(std::vector<MpmdProgram> programs) {
    return mpmd_map(*mesh_, std::move(programs), {P()}, {P("stage")})(*x_).status();
  }
  std::optional<Mesh> mesh_;
  std::optional<Array> x_;
};

Tracer Identity(Tracer x) { return x; }

TEST_F(MpmdErrorsTest, PositionsMustBeCoveredOnce) {
  EXPECT_THAT(Run({Program({0}, Identity)}).message(),
              HasSubstr("mpmd_map: position 1 of the mesh runs no program"));
  EXPECT_THAT(Run({Program({0, 1}, Identity), Program({1}, Identity)}).message(),
              HasSubstr("mpmd_map: position 1 is in programs 0 and 1"));
  EXPECT_THAT(Run({Program({0, 2}, Identity)}).message(),
              HasSubstr("mpmd_map: program 0 names position 2, not in mesh of 2 positions"));
}

TEST_F(MpmdErrorsTest, ProgramsMustReturnTheSameTypes) {
  absl::Status s = Run({Program({0}, Identity), Program({1}, [](Tracer x) {
                          return lax::concatenate({x, x}, 0);
                        })});
  EXPECT_THAT(s.message(), HasSubstr("mpmd_map: "));
  EXPECT_THAT(s.message(), HasSubstr("position 1 runs main_program1 (f32[4] -> f32[8]) but the "
                                     "entry main_program0 is (f32[4] -> f32[4])"));
}

TEST_F(MpmdErrorsTest, MismatchedSendAndReceive) {
  const std::vector<std::pair<int64_t, int64_t>> forward = {{0, 1}};
  auto sender = [&](Tracer x) {
    lax::psend(x, "stage", forward);
    return x;
  };
  // Receives another shape than is sent.
  auto bad_type = [&](Tracer x) {
    Tracer got = lax::precv(lax::create_token(), ShapedType{DType::kF32, {2}}, "stage", forward);
    return lax::concatenate({got, got}, 0);
  };
  absl::Status s = Run({Program({0}, sender), Program({1}, bad_type)});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("precv on device 1 expects f32[2] from device 0, which sent "
                                     "f32[4]"));
  // Receives one more than is sent: times out.
  auto twice = [&](Tracer x) {
    Tracer a = lax::precv(lax::create_token(), x.type(), "stage", forward);
    Tracer b = lax::precv(lax::create_token(), x.type(), "stage", forward);
    return a + b;
  };
  s = Run({Program({0}, sender), Program({1}, twice)});
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("precv on device 1 waited"));
  // Sends what nobody receives.
  s = Run({Program({0}, sender), Program({1}, Identity)});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("psend(s) from device 0 to device 1 (f32[4] first) were "
                                     "never received"));
}

}  // namespace
}  // namespace shardjit::examples
