#include "examples/train_mlp.h"

#include <cmath>

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

std::function<std::vector<Tracer>(const std::vector<Tracer>&)> MlpAdamStep(const Mesh& mesh,
                                                                           float learning_rate) {
  auto loss = MlpLoss(mesh);
  return [loss, learning_rate](const std::vector<Tracer>& a) {
    constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    std::vector<Tracer> out = value_and_grad(loss, {0, 1})({a[0], a[1], a[6], a[7]});
    const Tracer t = a[8];
    // 1 - b^t, as scalars.
    auto one_minus_pow = [&](double b) {
      return lax::full({}, 1.0, DType::kF32) -
             lax::exp(t * static_cast<double>(std::log(b)));
    };
    const Tracer c1 = one_minus_pow(b1), c2 = one_minus_pow(b2);
    std::vector<Tracer> result(7);
    for (int i = 0; i < 2; ++i) {
      const Tracer g = out[1 + i];
      const Tracer m = a[2 + i] * b1 + g * (1 - b1);
      const Tracer v = a[4 + i] * b2 + g * g * (1 - b2);
      const Tracer m_hat = m / lax::broadcast_in_dim(c1, m.shape(), {});
      const Tracer v_hat = v / lax::broadcast_in_dim(c2, v.shape(), {});
      result[i] = a[i] - m_hat / (lax::sqrt(v_hat) + eps) * learning_rate;
      result[2 + i] = m;
      result[4 + i] = v;
    }
    result[6] = out[0];
    return result;
  };
}

}  // namespace shardjit::examples
