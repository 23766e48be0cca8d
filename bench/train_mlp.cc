// One training step of examples/train_mlp.h (value_and_grad of the MLP, tensor-parallel over y,
// data-parallel over x, then the SGD update) timed end to end through jit, as
// bench/xla_train_mlp.py times the same step on XLA-CPU; also the forward alone (the loss), for
// the backward's share. Prints one JSON object per mesh:
// {"mesh": "2x2", "median_ms": ..., "p90_ms": ..., "forward_ms": ..., "compile_ms": ...}.
//   train_mlp --meshes=2x2,4x4 --runs=10 --warmup=2
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "examples/train_mlp.h"
#include "frontend/shardjit.h"

ABSL_FLAG(std::string, meshes, "2x2,4x4", "meshes AxB, comma-separated");
ABSL_FLAG(int, runs, 10, "timed runs");
ABSL_FLAG(int, warmup, 2, "untimed runs first");

namespace shardjit {
namespace {

// Batch 256, model width 1024, hidden width 4096, f32.
constexpr int64_t kBatch = 256, kDim = 1024, kHidden = 4096;

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Median and 90th percentile of `times` (sorted here).
std::pair<double, double> Stats(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times[std::min(times.size() - 1, times.size() * 9 / 10)]};
}

absl::Status Run(const std::string& mesh_name) {
  const std::vector<std::string> sizes = absl::StrSplit(mesh_name, 'x');
  const int64_t sx = std::stoll(sizes[0]), sy = std::stoll(sizes[1]);
  Runtime rt({.num_devices = static_cast<int>(sx * sy)});
  ASSIGN_OR_RETURN(Mesh mesh, make_mesh(rt, {{"x", sx}, {"y", sy}}));
  struct Arg {
    std::vector<int64_t> dims;
    PartitionSpec spec;
    float scale;
  };
  const std::vector<Arg> specs = {{{kDim, kHidden}, P(None, "y"), 0.02f},
                                  {{kHidden, kDim}, P("y", None), 0.02f},
                                  {{kBatch, kDim}, P("x", None), 1.0f},
                                  {{kBatch, kDim}, P("x", None), 1.0f}};
  std::vector<Array> args;
  uint32_t seed = 1;
  for (const Arg& a : specs) {
    ASSIGN_OR_RETURN(Tensor host, random::normal(random::key(seed++), a.dims, DType::kF32));
    for (int64_t i = 0; i < host.num_elements(); ++i) host.data_as<float>()[i] *= a.scale;
    ASSIGN_OR_RETURN(Array x, device_put(host, NamedSharding(mesh, a.spec)));
    args.push_back(std::move(x));
  }
  auto step = jit(examples::MlpTrainStep(mesh, 0.01f));
  auto forward = jit(examples::MlpLoss(mesh));
  const auto compile_start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::vector<Array> out, step.call(args));
  const double compile_ms = Ms(std::chrono::steady_clock::now() - compile_start);
  RETURN_IF_ERROR(forward.call(args).status());
  std::vector<double> step_times, forward_times;
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_runs); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(out, step.call(args));
    auto t1 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(forward.call(args).status());
    auto t2 = std::chrono::steady_clock::now();
    if (i < absl::GetFlag(FLAGS_warmup)) continue;
    step_times.push_back(Ms(t1 - t0));
    forward_times.push_back(Ms(t2 - t1));
  }
  const auto [median, p90] = Stats(step_times);
  const double forward_median = Stats(forward_times).first;
  std::printf(
      "{\"mesh\": \"%s\", \"median_ms\": %.3f, \"p90_ms\": %.3f, \"forward_ms\": %.3f, "
      "\"compile_ms\": %.1f}\n",
      mesh_name.c_str(), median, p90, forward_median, compile_ms);
  return absl::OkStatus();
}

}  // namespace
}  // namespace shardjit

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  for (const std::string& mesh :
       std::vector<std::string>(absl::StrSplit(absl::GetFlag(FLAGS_meshes), ','))) {
    if (absl::Status s = shardjit::Run(mesh); !s.ok()) {
      std::fprintf(stderr, "train_mlp %s: %s\n", mesh.c_str(), s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}
