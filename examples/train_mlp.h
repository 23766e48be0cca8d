// Training with gradients of a sharded program: one SGD step of a two-layer MLP
// y = tanh(x @ w1) @ w2 on the mean squared error, tensor-parallel over mesh axis "y" (w1's
// columns and w2's rows: Megatron's column/row split, one psum per forward pass) and data-parallel
// over "x" (the batch). The gradient is jax.grad of the global-view shard_map program, so the
// backward pass is partitioned, fused and run like the forward one.
#ifndef SHARDJIT_EXAMPLES_TRAIN_MLP_H_
#define SHARDJIT_EXAMPLES_TRAIN_MLP_H_

#include <functional>
#include <vector>

#include "frontend/shardjit.h"

namespace shardjit::examples {

// The loss of parameters w1 [d, h] (laid out P(None, "y")) and w2 [h, d] (P("y", None)) on a
// batch x [b, d] and its target [b, d] (both P("x", None)): mean over the batch of the squared
// error summed over d, an f32 scalar.
std::function<Tracer(const std::vector<Tracer>&)> MlpLoss(const Mesh& mesh);

// One step: (w1, w2, x, target) -> (w1 - lr * dloss/dw1, w2 - lr * dloss/dw2, loss before it).
std::function<std::vector<Tracer>(const std::vector<Tracer>&)> MlpTrainStep(const Mesh& mesh,
                                                                            float learning_rate);

// One Adam step (Kingma & Ba; b1 0.9, b2 0.999, eps 1e-8): (w1, w2, m1, m2, v1, v2, x, target,
// t) -> (w1, w2, m1, m2, v1, v2 updated, loss before the step), the moments laid out as their
// weights, t the f32 step number from 1 (for the bias corrections).
std::function<std::vector<Tracer>(const std::vector<Tracer>&)> MlpAdamStep(const Mesh& mesh,
                                                                           float learning_rate);

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_TRAIN_MLP_H_
