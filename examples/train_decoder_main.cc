// Trains the decoder block of examples/decoder_block.h (RMSNorm, rotary embeddings, causal
// attention, SwiGLU) as a regression of random targets from random inputs: value_and_grad of the
// global-view block, partitioned from the weights' Megatron shardings (batch over x, heads and
// MLP units over y), SGD or Adam, printing the loss as it goes beside the same steps on one
// device, then how far the final weights are from that run's.
//   bazel run //examples:train_decoder_main -- --mesh=4x4 --optimizer=adam --steps=100
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "base/status_macros.h"
#include "examples/decoder_block.h"
#include "examples/train_util.h"

ABSL_FLAG(std::string, mesh, "2x2", "the mesh, AxB (x: data parallel, y: tensor parallel)");
ABSL_FLAG(std::string, optimizer, "adam", "sgd or adam");
ABSL_FLAG(int, steps, 100, "training steps");
ABSL_FLAG(double, learning_rate, 0.01, "learning rate");

namespace shardjit::examples {
namespace {

// batch, sequence, model width, heads, MLP width (heads and MLP units split over y).
constexpr int64_t kBatch = 4, kSeq = 16, kModel = 64, kHeads = 4, kMlp = 128;
constexpr int kWeights = 9;

// (weights..., [m..., v..., t] for Adam, x, target) -> (weights..., [m..., v...], loss).
auto Step(bool adam, float lr) {
  return [adam, lr](const std::vector<Tracer>& a) {
    const size_t data = adam ? 3 * kWeights + 1 : kWeights;
    auto loss = [data](const std::vector<Tracer>& w) {
      Tracer y = DecoderBlock(w[kWeights], {w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8]},
                              kHeads);
      Tracer diff = y - w[kWeights + 1];
      return lax::reduce_sum(diff * diff, {0, 1, 2}) * (1.0 / (kBatch * kSeq * kModel));
    };
    std::vector<Tracer> args(a.begin(), a.begin() + kWeights);
    args.push_back(a[data]);
    args.push_back(a[data + 1]);
    std::vector<int> argnums;
    for (int i = 0; i < kWeights; ++i) argnums.push_back(i);
    const std::vector<Tracer> vg = value_and_grad(loss, argnums)(args);
    std::vector<Tracer> out(kWeights);
    if (!adam) {
      for (int i = 0; i < kWeights; ++i) out[i] = a[i] - vg[1 + i] * lr;
    } else {  // Kingma & Ba: b1 0.9, b2 0.999, eps 1e-8, bias-corrected by step t
      const Tracer t = a[3 * kWeights];
      const Tracer c1 = 1.0 - lax::pow(lax::full({}, 0.9, DType::kF32), t);
      const Tracer c2 = 1.0 - lax::pow(lax::full({}, 0.999, DType::kF32), t);
      std::vector<Tracer> m(kWeights), v(kWeights);
      for (int i = 0; i < kWeights; ++i) {
        const Tracer g = vg[1 + i];
        m[i] = a[kWeights + i] * 0.9 + g * 0.1;
        v[i] = a[2 * kWeights + i] * 0.999 + g * g * 0.001;
        const Tracer m_hat = m[i] / lax::broadcast_in_dim(c1, g.shape(), {});
        const Tracer v_hat = v[i] / lax::broadcast_in_dim(c2, g.shape(), {});
        out[i] = a[i] - m_hat / (lax::sqrt(v_hat) + 1e-8) * lr;
      }
      out.insert(out.end(), m.begin(), m.end());
      out.insert(out.end(), v.begin(), v.end());
    }
    out.push_back(vg[0]);
    return out;
  };
}

struct Run {
  Mesh mesh;
  std::vector<Array> state;  // weights, then Adam's moments
  std::vector<Array> data;   // x, target
};

absl::Status Init(Run& run, bool adam, bool sharded) {
  const PartitionSpec split_cols = sharded ? P(None, "y") : P();
  const PartitionSpec split_rows = sharded ? P("y", None) : P();
  const PartitionSpec batch = sharded ? P("x", None, None) : P();
  const std::vector<std::pair<std::vector<int64_t>, PartitionSpec>> weights = {
      {{kModel}, P()},           {{kModel, kModel}, split_cols}, {{kModel, kModel}, split_cols},
      {{kModel, kModel}, split_cols}, {{kModel, kModel}, split_rows}, {{kModel}, P()},
      {{kModel, kMlp}, split_cols},   {{kModel, kMlp}, split_cols},   {{kMlp, kModel}, split_rows}};
  auto put = [&](uint32_t seed, const std::vector<int64_t>& shape, const PartitionSpec& spec,
                 float scale) { return RandomArray(run.mesh, seed, shape, spec, scale); };
  for (int pass = 0; pass < (adam ? 3 : 1); ++pass) {  // weights, then m and v (zeros)
    for (int i = 0; i < kWeights; ++i) {
      const float scale = pass > 0 ? 0.0f : weights[i].first.size() == 1 ? 1.0f : 0.15f;
      ASSIGN_OR_RETURN(Array w, put(10 + i, weights[i].first, weights[i].second, scale));
      run.state.push_back(w);
    }
  }
  for (uint32_t seed : {1u, 2u}) {
    ASSIGN_OR_RETURN(Array a, put(seed, {kBatch, kSeq, kModel}, batch, 1.0f));
    run.data.push_back(a);
  }
  return absl::OkStatus();
}

absl::StatusOr<double> Advance(Run& run, auto& step, bool adam, int t) {
  std::vector<Array> args = run.state;
  if (adam) {
    ASSIGN_OR_RETURN(Array step_number, device_put(HostTensor(DType::kF32, {}, {double(t)}),
                                                   NamedSharding(run.mesh, P())));
    args.push_back(step_number);
  }
  args.insert(args.end(), run.data.begin(), run.data.end());
  ASSIGN_OR_RETURN(std::vector<Array> out, step.call(args));
  run.state.assign(out.begin(), out.end() - 1);
  ASSIGN_OR_RETURN(Tensor loss, out.back().to_host());
  return loss.GetDouble(0);
}

absl::Status Main() {
  ASSIGN_OR_RETURN(auto sizes, ParseMeshFlag(absl::GetFlag(FLAGS_mesh)));
  ASSIGN_OR_RETURN(const bool adam, ParseOptimizerFlag(absl::GetFlag(FLAGS_optimizer)));
  const int64_t sx = sizes.first, sy = sizes.second;
  Runtime rt({.num_devices = static_cast<int>(sx * sy)});
  Runtime one_rt({.num_devices = 1});
  ASSIGN_OR_RETURN(Mesh mesh, make_mesh(rt, {{"x", sx}, {"y", sy}}));
  ASSIGN_OR_RETURN(Mesh one_mesh, make_mesh(one_rt, {{"x", 1}, {"y", 1}}));
  Run sharded{mesh, {}, {}};
  Run single{one_mesh, {}, {}};
  RETURN_IF_ERROR(Init(sharded, adam, /*sharded=*/true));
  RETURN_IF_ERROR(Init(single, adam, /*sharded=*/false));
  const float lr = static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  auto step = jit(Step(adam, lr));
  std::printf("decoder block (batch %lld, sequence %lld, model %lld, %lld heads, MLP %lld), "
              "mesh %s, %s, learning rate %g\n",
              static_cast<long long>(kBatch), static_cast<long long>(kSeq),
              static_cast<long long>(kModel), static_cast<long long>(kHeads),
              static_cast<long long>(kMlp), absl::GetFlag(FLAGS_mesh).c_str(),
              adam ? "adam" : "sgd", lr);
  for (int t = 1; t <= absl::GetFlag(FLAGS_steps); ++t) {
    ASSIGN_OR_RETURN(double loss, Advance(sharded, step, adam, t));
    ASSIGN_OR_RETURN(double loss1, Advance(single, step, adam, t));
    if (t == 1 || t % 10 == 0) {
      std::printf("step %4d  loss %.6f  (one device %.6f)\n", t, loss, loss1);
    }
  }
  double worst = 0;
  for (int i = 0; i < kWeights; ++i) {
    ASSIGN_OR_RETURN(Tensor a, sharded.state[i].to_host());
    ASSIGN_OR_RETURN(Tensor b, single.state[i].to_host());
    const std::vector<double> va = a.ToDoubles(), vb = b.ToDoubles();
    for (size_t k = 0; k < va.size(); ++k) {
      worst = std::max(worst, std::abs(va[k] - vb[k]) / std::max(1.0, std::abs(vb[k])));
    }
  }
  std::printf("final weights: largest relative difference from one device %.3g\n", worst);
  return absl::OkStatus();
}

}  // namespace
}  // namespace shardjit::examples

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::Status s = shardjit::examples::Main(); !s.ok()) {
    std::fprintf(stderr, "train_decoder_main: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
