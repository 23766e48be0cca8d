// A transformer decoder block in the style of today's open models, written on the jax.lax
// primitives: RMSNorm, rotary position embeddings, causal multi-head attention (a -inf bias from
// iota and select, softmax by reduce_max / exp / reduce_sum), and a SwiGLU MLP, each with a
// residual.
// It is a global-view function: jit partitions it from the shardings of its arguments alone
// (batch over one mesh axis, the heads and the MLP's hidden units over another, as Megatron
// splits them). MoeDecoderBlock has a mixture of SwiGLU experts in place of the MLP, sharded
// over a mesh axis (examples/moe_layer.h).
#ifndef SHARDJIT_EXAMPLES_DECODER_BLOCK_H_
#define SHARDJIT_EXAMPLES_DECODER_BLOCK_H_

#include <cstdint>
#include <string>

#include "frontend/shardjit.h"

namespace shardjit::examples {

// The block's parameters (D the model width, H heads of width Dh, F the MLP width).
struct DecoderWeights {
  Tracer attention_norm;  // [D]
  Tracer wq, wk, wv;      // [D, H * Dh]
  Tracer wo;              // [H * Dh, D]
  Tracer mlp_norm;        // [D]
  Tracer w_gate, w_up;    // [D, F]
  Tracer w_down;          // [F, D]
};

// x / sqrt(mean(x^2 over the last dim) + eps) * scale.
Tracer RmsNorm(Tracer x, Tracer scale, double eps = 1e-6);

// Rotates x [B, S, H, Dh] by position (rotate-half form): with x = (x1, x2) split along Dh and
// angle[s, i] = s * theta^(-2i/Dh), returns (x1 cos - x2 sin, x2 cos + x1 sin).
Tracer Rope(Tracer x, double theta = 10000.0);

// x [B, S, D] -> [B, S, D]: x + attention(RmsNorm(x)), then + SwiGLU MLP of its RmsNorm.
Tracer DecoderBlock(Tracer x, const DecoderWeights& w, int64_t heads);

// x + attention(RmsNorm(x)): the block's first half (the attention fields of `w`).
Tracer AttentionResidual(Tracer x, const DecoderWeights& w, int64_t heads);

// A mixture of E SwiGLU experts (F their hidden width).
struct MoeWeights {
  Tracer norm;          // [D]
  Tracer router;        // [D, E]
  Tracer w_gate, w_up;  // [E, D, F]
  Tracer w_down;        // [E, F, D]
};

// The block with the mixture in place of the MLP: AttentionResidual (the attention fields of
// `w`), then + the experts on its RmsNorm. Each token takes its top `k` experts by router logits
// (ties to the lower expert), weighted by the softmax of those logits. On `mesh` the tokens are
// split over `batch_axis` (the batch) and `expert_axis` (the sequence) and the experts over
// `expert_axis`: tokens travel to their experts' devices and back by ragged_all_to_all
// (RoutedMoeLayer), and every expert takes at most `capacity` of a device's (token, expert)
// pairs.
Tracer MoeDecoderBlock(Tracer x, const DecoderWeights& w, const MoeWeights& moe, int64_t heads,
                       const Mesh& mesh, const std::string& batch_axis,
                       const std::string& expert_axis, int64_t k, int64_t capacity);

// The same block as a global-view function (GShard's dense dispatch, no shard_map), which jit
// partitions from the arguments' shardings alone: each (token, expert) pair gets a slot c <
// `capacity` of its expert by token order (later pairs are dropped), tokens reach their slots by
// a product with the one-hot dispatch tensor [T, E, C], the experts run batched over E, and a
// second product with the gates brings the results back. On one device and with the same
// capacity it equals MoeDecoderBlock.
Tracer GlobalMoeDecoderBlock(Tracer x, const DecoderWeights& w, const MoeWeights& moe,
                             int64_t heads, int64_t k, int64_t capacity);

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_DECODER_BLOCK_H_
