#include "examples/pipeline.h"

#include <vector>

namespace shardjit::examples {
namespace {

// [1, hidden, hidden] -> [hidden, hidden].
Tracer Weights(Tracer w) { return lax::reshape(w, {w.shape()[1], w.shape()[2]}); }

Tracer Stack(const std::vector<Tracer>& blocks) {
  std::vector<Tracer> rows;
  for (const Tracer& b : blocks) rows.push_back(lax::reshape(b, {1, b.shape()[0], b.shape()[1]}));
  return lax::concatenate(rows, 0);
}

}  // namespace

MpmdMapped TwoStagePipeline(const Mesh& mesh, int64_t microbatches) {
  const std::vector<std::pair<int64_t, int64_t>> forward = {{0, 1}};
  auto stage0 = [=](Tracer x, Tracer w) {
    std::vector<Tracer> activations;
    for (int64_t i = 0; i < microbatches; ++i) {
      Tracer xi = lax::reshape(lax::slice(x, {i, 0, 0}, {i + 1, x.shape()[1], x.shape()[2]}),
                               {x.shape()[1], x.shape()[2]});
      Tracer h = lax::tanh(jnp::matmul(xi, Weights(w)));
      lax::psend(h, "stage", forward);
      activations.push_back(h);
    }
    return Stack(activations);
  };
  auto stage1 = [=](Tracer x, Tracer w) {
    std::vector<Tracer> outputs;
    const ShapedType block{x.dtype(), {x.shape()[1], x.shape()[2]}};
    for (int64_t i = 0; i < microbatches; ++i) {
      Tracer h = lax::precv(lax::create_token(), block, "stage", forward);
      outputs.push_back(lax::tanh(jnp::matmul(h, Weights(w))));
    }
    return Stack(outputs);
  };
  return mpmd_map(mesh,
                  {Program(PositionsAt(mesh, "stage", 0), stage0),
                   Program(PositionsAt(mesh, "stage", 1), stage1)},
                  {P(None, "x", None), P("stage")}, {P("stage", "x")});
}

}  // namespace shardjit::examples
