#include "examples/train_mlp.h"

namespace shardjit::examples {

std::function<Tracer(const std::vector<Tracer>&)> MlpLoss(const Mesh& mesh) {
  auto body = [](Tracer w1, Tracer w2, Tracer x, Tracer target, Tracer batch) {
    Tracer hidden = lax::tanh(jnp::matmul(x, w1));              // [b/x, h/y]
    Tracer out = lax::psum(jnp::matmul(hidden, w2), "y");       // [b/x, d]: row-parallel w2
    Tracer err = out - target;
    Tracer local = lax::reduce_sum(err * err, {0, 1}) / batch;  // this batch shard's share
    return lax::psum(local, "x");
  };
  auto program = shard_map(body, mesh,
                           {P(None, "y"), P("y", None), P("x", None), P("x", None), P()}, {P()});
  return [program](const std::vector<Tracer>& a) {
    const double batch = static_cast<double>(a[2].shape()[0]);
    return program(a[0], a[1], a[2], a[3], lax::full({}, batch, DType::kF32));
  };
}

std::function<std::vector<Tracer>(const std::vector<Tracer>&)> MlpTrainStep(const Mesh& mesh,
                                                                            float learning_rate) {
  auto loss = MlpLoss(mesh);
  return [loss, learning_rate](const std::vector<Tracer>& a) {
    std::vector<Tracer> out = value_and_grad(loss, {0, 1})(a);  // loss, dw1, dw2
    return std::vector<Tracer>{a[0] - out[1] * learning_rate, a[1] - out[2] * learning_rate,
                               out[0]};
  };
}

}  // namespace shardjit::examples
