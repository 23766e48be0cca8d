// The decoder block (examples/decoder_block.h) timed end to end through jit, as
// bench/xla_decoder.py times the same block on XLA-CPU: f32, the batch (or, for a batch of one,
// the sequence) over the mesh's x axis, heads and MLP units over y (Megatron's split), partitioned
// from the arguments' shardings. Prints one JSON object per mesh:
// {"mesh": "2x2", "shape": "serving", "median_ms": ..., "p90_ms": ..., "compile_ms": ...}
// (compile_ms: trace, grad with --grad, lower and compile).
//   decoder_block --meshes=2x2,4x4 --shape=serving|decode --runs=5 --warmup=1 [--grad]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "examples/decoder_block.h"
#include "frontend/shardjit.h"

ABSL_FLAG(std::string, meshes, "2x2,4x4", "meshes AxB, comma-separated");
ABSL_FLAG(std::string, shape, "serving", "serving (batch 8, sequence 512) or decode (1, 16)");
ABSL_FLAG(int, runs, 5, "timed runs");
ABSL_FLAG(int, warmup, 1, "untimed runs first");
ABSL_FLAG(bool, grad, false,
          "time value_and_grad of the block's mean squared output with respect to its weights "
          "(a training step's forward and backward) instead of the block");

namespace shardjit {
namespace {

// The block's sizes: model width 1024, 16 heads of 64, SwiGLU width 2816.
constexpr int64_t kModel = 1024, kHeads = 16, kHeadDim = 64, kInner = kHeads * kHeadDim,
                  kMlp = 2816;

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

absl::Status Run(const std::string& mesh_name, const std::string& shape) {
  const std::vector<std::string> sizes = absl::StrSplit(mesh_name, 'x');
  const int64_t sx = std::stoll(sizes[0]), sy = std::stoll(sizes[1]);
  const bool decode = shape == "decode";
  const int64_t batch = decode ? 1 : 8, seq = decode ? 16 : 512;
  Runtime rt({.num_devices = static_cast<int>(sx * sy)});
  ASSIGN_OR_RETURN(Mesh mesh, make_mesh(rt, {{"x", sx}, {"y", sy}}));
  const PartitionSpec x_spec = decode ? P(None, "x", None) : P("x", None, None);
  struct Arg {
    std::vector<int64_t> dims;
    PartitionSpec spec;
    double scale;
  };
  const std::vector<Arg> args_spec = {
      {{batch, seq, kModel}, x_spec, 1.0},     {{kModel}, P(), 1.0},
      {{kModel, kInner}, P(None, "y"), 0.03},  {{kModel, kInner}, P(None, "y"), 0.03},
      {{kModel, kInner}, P(None, "y"), 0.03},  {{kInner, kModel}, P("y", None), 0.03},
      {{kModel}, P(), 1.0},                    {{kModel, kMlp}, P(None, "y"), 0.03},
      {{kModel, kMlp}, P(None, "y"), 0.03},    {{kMlp, kModel}, P("y", None), 0.02}};
  std::vector<Array> args;
  uint32_t seed = 1;
  for (const Arg& a : args_spec) {
    ASSIGN_OR_RETURN(Tensor host, random::normal(random::key(seed++), a.dims, DType::kF32));
    for (int64_t i = 0; i < host.num_elements(); ++i) {
      host.data_as<float>()[i] *= static_cast<float>(a.scale);
    }
    ASSIGN_OR_RETURN(Array arg, device_put(host, NamedSharding(mesh, a.spec)));
    args.push_back(std::move(arg));
  }
  auto forward = [](const std::vector<Tracer>& a) {
    return examples::DecoderBlock(a[0], {a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]},
                                  kHeads);
  };
  auto loss = [forward](const std::vector<Tracer>& a) {
    Tracer y = forward(a);
    return lax::reduce_sum(y * y, {0, 1, 2});
  };
  auto block = absl::GetFlag(FLAGS_grad)
                   ? jit([loss](const std::vector<Tracer>& a) {
                       return value_and_grad(loss, {1, 2, 3, 4, 5, 6, 7, 8, 9})(a);
                     })
                   : jit([forward](const std::vector<Tracer>& a) {
                       return std::vector<Tracer>{forward(a)};
                     });
  auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(auto lowered, block.lower(args));
  ASSIGN_OR_RETURN(auto compiled, lowered.compile());
  const double compile_ms = Ms(std::chrono::steady_clock::now() - start);
  std::vector<double> times;
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_runs); ++i) {
    start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(std::vector<Array> out, compiled.call(args));
    const double ms = Ms(std::chrono::steady_clock::now() - start);
    if (i >= absl::GetFlag(FLAGS_warmup)) times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  const double p90 = times[std::min(times.size() - 1, times.size() * 9 / 10)];
  std::printf(
      "{\"mesh\": \"%s\", \"shape\": \"%s\", \"median_ms\": %.3f, \"p90_ms\": %.3f, "
      "\"compile_ms\": %.1f%s}\n",
      mesh_name.c_str(), shape.c_str(), median, p90, compile_ms,
      absl::GetFlag(FLAGS_grad) ? ", \"mode\": \"grad\"" : "");
  return absl::OkStatus();
}

}  // namespace
}  // namespace shardjit

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::vector<std::string> meshes = absl::StrSplit(absl::GetFlag(FLAGS_meshes), ',');
  for (const std::string& mesh : meshes) {
    if (absl::Status s = shardjit::Run(mesh, absl::GetFlag(FLAGS_shape)); !s.ok()) {
      std::fprintf(stderr, "decoder_block: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}
