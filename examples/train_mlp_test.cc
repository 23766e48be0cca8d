// The MLP training step on a 2x2 mesh (tensor-parallel over y, data-parallel over x) against an
// f64 forward and backward pass written out by hand, on both backends; then twenty steps on 2x2
// and on one device: the same losses, decreasing.
#include "examples/train_mlp.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace shardjit::examples {
namespace {

constexpr int64_t kBatch = 8, kDim = 6, kHidden = 8;

using Matrix = std::vector<double>;  // row-major

Matrix Random(int64_t n, uint32_t seed, double scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-scale, scale);
  Matrix m(n);
  for (double& v : m) v = static_cast<float>(d(rng));  // exact in f32
  return m;
}

// One SGD step in f64: the new w1, w2 and the loss before the step.
struct Step {
  Matrix w1, w2;
  double loss = 0;
};
Step OracleStep(const Matrix& w1, const Matrix& w2, const Matrix& x, const Matrix& t, double lr) {
  Matrix h(kBatch * kHidden), out(kBatch * kDim, 0.0);
  for (int64_t i = 0; i < kBatch; ++i) {
    for (int64_t k = 0; k < kHidden; ++k) {
      double z = 0;
      for (int64_t j = 0; j < kDim; ++j) z += x[i * kDim + j] * w1[j * kHidden + k];
      h[i * kHidden + k] = std::tanh(z);
    }
    for (int64_t j = 0; j < kDim; ++j) {
      for (int64_t k = 0; k < kHidden; ++k) out[i * kDim + j] += h[i * kHidden + k] * w2[k * kDim + j];
    }
  }
  Step s{w1, w2, 0};
  Matrix dout(kBatch * kDim), dh(kBatch * kHidden, 0.0);
  for (int64_t n = 0; n < kBatch * kDim; ++n) {
    const double e = out[n] - t[n];
    s.loss += e * e / kBatch;
    dout[n] = 2 * e / kBatch;
  }
  for (int64_t k = 0; k < kHidden; ++k) {
    for (int64_t j = 0; j < kDim; ++j) {
      double g = 0;
      for (int64_t i = 0; i < kBatch; ++i) g += h[i * kHidden + k] * dout[i * kDim + j];
      s.w2[k * kDim + j] -= lr * g;
    }
  }
  for (int64_t i = 0; i < kBatch; ++i) {
    for (int64_t k = 0; k < kHidden; ++k) {
      double g = 0;
      for (int64_t j = 0; j < kDim; ++j) g += dout[i * kDim + j] * w2[k * kDim + j];
      dh[i * kHidden + k] = g * (1 - h[i * kHidden + k] * h[i * kHidden + k]);
    }
  }
  for (int64_t j = 0; j < kDim; ++j) {
    for (int64_t k = 0; k < kHidden; ++k) {
      double g = 0;
      for (int64_t i = 0; i < kBatch; ++i) g += x[i * kDim + j] * dh[i * kHidden + k];
      s.w1[j * kHidden + k] -= lr * g;
    }
  }
  return s;
}

struct Problem {
  Matrix w1 = Random(kDim * kHidden, 1, 0.5), w2 = Random(kHidden * kDim, 2, 0.5);
  Matrix x = Random(kBatch * kDim, 3, 1.0), t = Random(kBatch * kDim, 4, 1.0);
};

// The step's results on `mesh`: new w1, new w2, loss.
std::vector<Matrix> RunSteps(const Mesh& mesh, const Problem& p, float lr, int steps,
                             Backend backend, std::vector<double>* losses) {
  auto put = [&](const Matrix& m, std::vector<int64_t> shape, PartitionSpec spec) {
    return *device_put(HostTensor(DType::kF32, std::move(shape), m), NamedSharding(mesh, spec));
  };
  Array w1 = put(p.w1, {kDim, kHidden}, P(None, "y"));
  Array w2 = put(p.w2, {kHidden, kDim}, P("y", None));
  const Array x = put(p.x, {kBatch, kDim}, P("x", None));
  const Array t = put(p.t, {kBatch, kDim}, P("x", None));
  auto step = jit(MlpTrainStep(mesh, lr), {.backend = backend});
  for (int i = 0; i < steps; ++i) {
    absl::StatusOr<std::vector<Array>> out = step(w1, w2, x, t);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    w1 = (*out)[0];
    w2 = (*out)[1];
    losses->push_back((*out)[2].to_host()->GetDouble(0));
  }
  return {w1.to_host()->ToDoubles(), w2.to_host()->ToDoubles()};
}

TEST(TrainMlp, OneStepMatchesAHandWrittenBackwardPass) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  const Problem p;
  const Step want = OracleStep(p.w1, p.w2, p.x, p.t, 0.1);
  for (Backend backend : {Backend::kX86, Backend::kReference}) {
    std::vector<double> losses;
    std::vector<Matrix> got = RunSteps(mesh, p, 0.1f, 1, backend, &losses);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_NEAR(losses[0], want.loss, 1e-5 * want.loss);
    for (size_t i = 0; i < want.w1.size(); ++i) EXPECT_NEAR(got[0][i], want.w1[i], 1e-5) << i;
    for (size_t i = 0; i < want.w2.size(); ++i) EXPECT_NEAR(got[1][i], want.w2[i], 1e-5) << i;
  }
}

TEST(TrainMlp, ShardedTrainingFollowsTheSingleDeviceRun) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  Mesh one = *make_mesh(rt, {{"x", 1}, {"y", 1}});
  const Problem p;
  std::vector<double> sharded, single;
  RunSteps(mesh, p, 0.2f, 20, Backend::kX86, &sharded);
  RunSteps(one, p, 0.2f, 20, Backend::kX86, &single);
  ASSERT_EQ(sharded.size(), 20u);
  ASSERT_EQ(single.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_NEAR(sharded[i], single[i], 1e-4 * single[i]) << "step " << i;
  EXPECT_LT(sharded.back(), 0.5 * sharded.front());
}

// Adam: 30 steps on 2x2 follow the single-device run, and the loss falls.
TEST(TrainMlp, AdamShardedFollowsTheSingleDeviceRun) {
  Runtime rt({.num_devices = 4});
  const Problem p;
  auto run = [&](const Mesh& mesh) {
    auto put = [&](const Matrix& m, std::vector<int64_t> shape, PartitionSpec spec) {
      return *device_put(HostTensor(DType::kF32, std::move(shape), m), NamedSharding(mesh, spec));
    };
    const Matrix zeros1(kDim * kHidden, 0.0), zeros2(kHidden * kDim, 0.0);
    std::vector<Array> state = {put(p.w1, {kDim, kHidden}, P(None, "y")),
                                put(p.w2, {kHidden, kDim}, P("y", None)),
                                put(zeros1, {kDim, kHidden}, P(None, "y")),
                                put(zeros2, {kHidden, kDim}, P("y", None)),
                                put(zeros1, {kDim, kHidden}, P(None, "y")),
                                put(zeros2, {kHidden, kDim}, P("y", None))};
    const Array x = put(p.x, {kBatch, kDim}, P("x", None));
    const Array t = put(p.t, {kBatch, kDim}, P("x", None));
    auto step = jit(MlpAdamStep(mesh, 0.01f));
    std::vector<double> losses;
    for (int i = 1; i <= 30; ++i) {
      std::vector<Array> args = state;
      args.push_back(x);
      args.push_back(t);
      args.push_back(*device_put(HostTensor(DType::kF32, {}, {static_cast<double>(i)}),
                                 NamedSharding(mesh, P())));
      absl::StatusOr<std::vector<Array>> out = step.call(args);
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) break;
      state.assign(out->begin(), out->begin() + 6);
      losses.push_back((*out)[6].to_host()->GetDouble(0));
    }
    return losses;
  };
  const std::vector<double> sharded = run(*make_mesh(rt, {{"x", 2}, {"y", 2}}));
  const std::vector<double> single = run(*make_mesh(rt, {{"x", 1}, {"y", 1}}));
  ASSERT_EQ(sharded.size(), 30u);
  ASSERT_EQ(single.size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_NEAR(sharded[i], single[i], 1e-3 * single[i]) << "step " << i;
  EXPECT_LT(sharded.back(), 0.5 * sharded.front());
}

}  // namespace
}  // namespace shardjit::examples
