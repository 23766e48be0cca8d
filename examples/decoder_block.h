// A transformer decoder block in the style of today's open models, written on the jax.lax
// primitives: RMSNorm, rotary position embeddings, causal multi-head attention (a -inf bias from
// iota and select, softmax by reduce_max / exp / reduce_sum), and a SwiGLU MLP, each with a
// residual.
// It is a global-view function: jit partitions it from the shardings of its arguments alone
// (batch over one mesh axis, the heads and the MLP's hidden units over another, as Megatron
// splits them).
#ifndef SHARDJIT_EXAMPLES_DECODER_BLOCK_H_
#define SHARDJIT_EXAMPLES_DECODER_BLOCK_H_

#include <cstdint>

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

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_DECODER_BLOCK_H_
