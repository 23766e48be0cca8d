#include "examples/decoder_block.h"

#include <cmath>
#include <limits>
#include <vector>

#include "examples/moe_layer.h"

namespace shardjit::examples {
namespace {

// x [.., K] @ w [K, N] -> [.., N].
Tracer Linear(Tracer x, Tracer w) {
  return lax::dot_general(x, w, DotDims{{x.rank() - 1}, {0}});
}

Tracer Silu(Tracer x) { return x * lax::logistic(x); }

}  // namespace

Tracer RmsNorm(Tracer x, Tracer scale, double eps) {
  const int64_t last = x.rank() - 1;
  const double width = static_cast<double>(x.shape()[last]);
  Tracer mean_square = lax::reduce_sum(x * x, {last}) / width;
  std::vector<int64_t> kept(x.rank() - 1);
  for (int64_t d = 0; d < last; ++d) kept[d] = d;
  Tracer inv = lax::broadcast_in_dim(lax::rsqrt(mean_square + eps), x.shape(), kept);
  return x * inv * lax::broadcast_in_dim(scale, x.shape(), {last});
}

Tracer Rope(Tracer x, double theta) {
  const int64_t b = x.shape()[0], s = x.shape()[1], h = x.shape()[2], dh = x.shape()[3];
  const int64_t half = dh / 2;
  // angle[s, i] = s * exp(-(2i / Dh) * log(theta))
  Tracer position = lax::broadcasted_iota(DType::kF32, {s, half}, 0);
  Tracer i = lax::broadcasted_iota(DType::kF32, {s, half}, 1);
  Tracer angle = position * lax::exp(i * (-2.0 * std::log(theta) / static_cast<double>(dh)));
  const std::vector<int64_t> shape = {b, s, h, half};
  Tracer cos = lax::broadcast_in_dim(lax::cos(angle), shape, {1, 3});
  Tracer sin = lax::broadcast_in_dim(lax::sin(angle), shape, {1, 3});
  Tracer x1 = lax::slice(x, {0, 0, 0, 0}, {b, s, h, half});
  Tracer x2 = lax::slice(x, {0, 0, 0, half}, {b, s, h, dh});
  return lax::concatenate({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, 3);
}

Tracer AttentionResidual(Tracer x, const DecoderWeights& w, int64_t heads) {
  const int64_t b = x.shape()[0], s = x.shape()[1];
  const int64_t inner = w.wq.shape()[1], dh = inner / heads;
  // Attention.
  Tracer h = RmsNorm(x, w.attention_norm);
  auto split_heads = [&](Tracer t) { return lax::reshape(t, {b, s, heads, dh}); };
  Tracer q = Rope(split_heads(Linear(h, w.wq)));
  Tracer k = Rope(split_heads(Linear(h, w.wk)));
  Tracer v = split_heads(Linear(h, w.wv));
  // scores [B, H, S, T] = q . k over Dh, batched over (B, H).
  Tracer scores = lax::dot_general(q, k, DotDims{{3}, {3}, {0, 2}, {0, 2}}) /
                  std::sqrt(static_cast<double>(dh));
  // The causal mask as a bias, built once at [S, T]: 0 where t <= s, -inf after.
  const std::vector<int64_t> bhst = {b, heads, s, s};
  Tracer causal = lax::ge(lax::broadcasted_iota(DType::kS32, {s, s}, 0),
                          lax::broadcasted_iota(DType::kS32, {s, s}, 1));
  Tracer bias = lax::select(causal, lax::full({s, s}, 0, DType::kF32),
                            lax::full({s, s}, -std::numeric_limits<double>::infinity(),
                                      DType::kF32));
  scores = scores + lax::broadcast_in_dim(bias, bhst, {2, 3});
  Tracer peak = lax::broadcast_in_dim(lax::reduce_max(scores, {3}), bhst, {0, 1, 2});
  Tracer e = lax::exp(scores - peak);
  Tracer probs = e / lax::broadcast_in_dim(lax::reduce_sum(e, {3}), bhst, {0, 1, 2});
  // out [B, H, S, Dh] = probs . v over T, batched over (B, H); back to [B, S, H * Dh].
  Tracer out = lax::dot_general(probs, v, DotDims{{3}, {1}, {0, 1}, {0, 2}});
  out = lax::reshape(lax::transpose(out, {0, 2, 1, 3}), {b, s, inner});
  return x + Linear(out, w.wo);
}

Tracer DecoderBlock(Tracer x, const DecoderWeights& w, int64_t heads) {
  x = AttentionResidual(x, w, heads);
  // SwiGLU MLP.
  Tracer m = RmsNorm(x, w.mlp_norm);
  return x + Linear(Silu(Linear(m, w.w_gate)) * Linear(m, w.w_up), w.w_down);
}

Tracer MoeDecoderBlock(Tracer x, const DecoderWeights& w, const MoeWeights& moe, int64_t heads,
                       const Mesh& mesh, const std::string& batch_axis,
                       const std::string& expert_axis, int64_t k, int64_t capacity) {
  x = AttentionResidual(x, w, heads);
  // Each device's tokens [b, s, D] as rows, through the experts, back to [b, s, D].
  auto experts = [expert_axis, k, capacity](Tracer tokens, Tracer router, Tracer gate,
                                            Tracer up, Tracer down) {
    const std::vector<int64_t> shape = tokens.shape();
    Tracer rows = lax::reshape(tokens, {shape[0] * shape[1], shape[2]});
    ExpertFn swiglu = [gate, up, down](Tracer r, Tracer sizes) {
      Tracer hidden =
          Silu(lax::gmm(r, gate, sizes, r.dtype())) * lax::gmm(r, up, sizes, r.dtype());
      return lax::gmm(hidden, down, sizes, r.dtype());
    };
    Tracer out =
        RoutedMoeLayer(rows, router, gate.shape()[0], swiglu, expert_axis, k, capacity);
    return lax::reshape(out, shape);
  };
  const PartitionSpec tokens = P(batch_axis, expert_axis, None);
  const PartitionSpec by_expert = P(expert_axis, None, None);
  Tracer mixed = shard_map(experts, mesh, {tokens, P(), by_expert, by_expert, by_expert},
                           {tokens})(RmsNorm(x, moe.norm), moe.router, moe.w_gate, moe.w_up,
                                     moe.w_down);
  return x + mixed;
}

Tracer GlobalMoeDecoderBlock(Tracer x, const DecoderWeights& w, const MoeWeights& moe,
                             int64_t heads, int64_t k, int64_t capacity) {
  x = AttentionResidual(x, w, heads);
  const std::vector<int64_t> shape = x.shape();
  const int64_t t = shape[0] * shape[1], d = shape[2], e = moe.router.shape()[1];
  Tracer tokens = lax::reshape(RmsNorm(x, moe.norm), {t, d});
  // Routing: the top k experts of each token, their gates the softmax of their logits.
  auto [top, chosen] = lax::top_k(Linear(tokens, moe.router), k);  // [T, k]
  Tracer ex = lax::exp(top - lax::broadcast_in_dim(lax::reduce_max(top, {1}), {t, k}, {0}));
  Tracer gates = ex / lax::broadcast_in_dim(lax::reduce_sum(ex, {1}), {t, k}, {0});
  // Per (token, expert): chosen or not, and its gate (the k choices are distinct experts).
  Tracer onehot = lax::convert_element_type(
      lax::eq(lax::broadcast_in_dim(chosen, {t, k, e}, {0, 1}),
              lax::broadcasted_iota(DType::kS32, {t, k, e}, 2)),
      DType::kF32);
  Tracer selected = lax::reduce_sum(onehot, {1});                                        // [T, E]
  Tracer gate = lax::reduce_sum(onehot * lax::broadcast_in_dim(gates, {t, k, e}, {0, 1}), {1});
  // The pair's slot in its expert: the pairs of earlier tokens before it; past the capacity,
  // no slot matches and the pair is dropped.
  Tracer slot = lax::cumsum(selected, 0) - selected;
  const std::vector<int64_t> tec = {t, e, capacity};
  Tracer dispatch = lax::convert_element_type(
      lax::eq(lax::broadcast_in_dim(slot, tec, {0, 1}),
              lax::broadcasted_iota(DType::kF32, tec, 2)),
      DType::kF32) * lax::broadcast_in_dim(selected, tec, {0, 1});
  // Slots [E, C, D], the experts batched over E, and back to the tokens weighted by the gates.
  Tracer slots = lax::dot_general(dispatch, tokens, DotDims{{0}, {0}});  // [E, C, D]
  auto batched = [](Tracer a, Tracer b) {  // [E, C, K] x [E, K, N] -> [E, C, N]
    return lax::dot_general(a, b, DotDims{{2}, {1}, {0}, {0}});
  };
  Tracer hidden = Silu(batched(slots, moe.w_gate)) * batched(slots, moe.w_up);
  Tracer outputs = batched(hidden, moe.w_down);                               // [E, C, D]
  Tracer combine = dispatch * lax::broadcast_in_dim(gate, tec, {0, 1});       // [T, E, C]
  Tracer mixed = lax::dot_general(combine, outputs, DotDims{{1, 2}, {0, 1}});  // [T, D]
  return x + lax::reshape(mixed, shape);
}

}  // namespace shardjit::examples
