// Trains the MLP of examples/train_mlp.h on a mesh and prints the loss as it goes: a regression
// of random targets from random inputs (batch 64, model 64, hidden 256), SGD or Adam.
//   bazel run //examples:train_mlp_main -- --mesh=2x2 --optimizer=adam --steps=100
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "base/status_macros.h"
#include "examples/train_mlp.h"
#include "examples/train_util.h"

ABSL_FLAG(std::string, mesh, "2x2", "the mesh, AxB (x: data parallel, y: tensor parallel)");
ABSL_FLAG(std::string, optimizer, "adam", "sgd or adam");
ABSL_FLAG(int, steps, 100, "training steps");
ABSL_FLAG(double, learning_rate, 0.01, "learning rate");

namespace shardjit::examples {
namespace {

constexpr int64_t kBatch = 64, kDim = 64, kHidden = 256;

absl::Status Main() {
  ASSIGN_OR_RETURN(auto sizes, ParseMeshFlag(absl::GetFlag(FLAGS_mesh)));
  ASSIGN_OR_RETURN(const bool adam, ParseOptimizerFlag(absl::GetFlag(FLAGS_optimizer)));
  Runtime rt({.num_devices = static_cast<int>(sizes.first * sizes.second)});
  ASSIGN_OR_RETURN(Mesh mesh, make_mesh(rt, {{"x", sizes.first}, {"y", sizes.second}}));
  auto put = [&](uint32_t seed, std::vector<int64_t> shape, PartitionSpec spec, float scale) {
    return RandomArray(mesh, seed, shape, spec, scale);
  };
  std::vector<Array> state;
  ASSIGN_OR_RETURN(Array w1, put(1, {kDim, kHidden}, P(None, "y"), 0.1f));
  ASSIGN_OR_RETURN(Array w2, put(2, {kHidden, kDim}, P("y", None), 0.1f));
  state = {w1, w2};
  if (adam) {
    for (int i = 0; i < 2; ++i) {
      ASSIGN_OR_RETURN(Array m1, put(3, {kDim, kHidden}, P(None, "y"), 0.0f));
      ASSIGN_OR_RETURN(Array m2, put(3, {kHidden, kDim}, P("y", None), 0.0f));
      state.push_back(m1);
      state.push_back(m2);
    }
  }
  ASSIGN_OR_RETURN(Array x, put(4, {kBatch, kDim}, P("x", None), 1.0f));
  ASSIGN_OR_RETURN(Array target, put(5, {kBatch, kDim}, P("x", None), 1.0f));
  const float lr = static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  auto step = jit(adam ? MlpAdamStep(mesh, lr) : MlpTrainStep(mesh, lr));
  std::printf("mesh %s, %s, learning rate %g\n", absl::GetFlag(FLAGS_mesh).c_str(),
              adam ? "adam" : "sgd", lr);
  for (int i = 1; i <= absl::GetFlag(FLAGS_steps); ++i) {
    std::vector<Array> args = state;
    args.push_back(x);
    args.push_back(target);
    if (adam) {
      ASSIGN_OR_RETURN(Array t, device_put(HostTensor(DType::kF32, {}, {double(i)}),
                                           NamedSharding(mesh, P())));
      args.push_back(t);
    }
    ASSIGN_OR_RETURN(std::vector<Array> out, step.call(args));
    state.assign(out.begin(), out.end() - 1);
    ASSIGN_OR_RETURN(Tensor loss, out.back().to_host());
    if (i == 1 || i % 10 == 0) std::printf("step %4d  loss %.6f\n", i, loss.GetDouble(0));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace shardjit::examples

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::Status s = shardjit::examples::Main(); !s.ok()) {
    std::fprintf(stderr, "train_mlp_main: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
