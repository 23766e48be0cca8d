// A mixture-of-experts layer over experts sharded on a mesh axis (seed 003's grouped matmul with
// seed 004's ragged_all_to_all): each device holds tokens sorted by the expert they are routed
// to and the number per expert; the tokens travel to the devices owning their experts with one
// ragged_all_to_all, each device multiplies what it received by its experts with one gmm, and a
// second ragged_all_to_all brings every result back to the token's original row.
#ifndef SHARDJIT_EXAMPLES_MOE_LAYER_H_
#define SHARDJIT_EXAMPLES_MOE_LAYER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "frontend/shardjit.h"

namespace shardjit::examples {

// The shard_map body, on one device of an axis `axis` of D devices, E = D * L experts (device d
// owns experts d*L .. d*L+L-1):
//   tokens:  [T, H], rows grouped by expert (expert 0's first), rows past sum(counts) unused;
//   counts:  s32[E], how many of the rows go to each expert;
//   weights: [L, H, F], this device's experts.
// Returns [T, F]: row t is tokens[t] @ weights of its expert (zeros past sum(counts)).
// `capacity` is the rows a device can receive (T * D always suffices).
Tracer MoeLayer(Tracer tokens, Tracer counts, Tracer weights, const std::string& axis,
                int64_t capacity);

// The layer with its router (as Mixtral's): each of this device's tokens [T, H] picks its top
// `k` experts by router logits (tokens @ router, router [H, E]; ties to the lower expert), with
// gates the softmax of those k logits; every expert takes at most `capacity` of this device's
// (token, expert) pairs, in token order, and drops the rest; the pairs go through MoeLayer and
// come back summed per token, weighted by their gates. Returns [T, F].
Tracer RoutedMoeLayer(Tracer tokens, Tracer router, Tracer weights, const std::string& axis,
                      int64_t k, int64_t capacity);

// A device's experts on the rows it received: rows [R, H] grouped by local expert (group_sizes
// s32[L]; rows past their sum unused) -> [R, F].
using ExpertFn = std::function<Tracer(Tracer rows, Tracer group_sizes)>;

// MoeLayer and RoutedMoeLayer with `local_experts` experts per device computed by `experts`
// (the forms above: one gmm by `weights`).
Tracer MoeLayer(Tracer tokens, Tracer counts, int64_t local_experts, const ExpertFn& experts,
                const std::string& axis, int64_t capacity);
Tracer RoutedMoeLayer(Tracer tokens, Tracer router, int64_t local_experts,
                      const ExpertFn& experts, const std::string& axis, int64_t k,
                      int64_t capacity);

// An exclusive prefix sum of s32 `x` along `dim` (out[.., i, ..] = sum of x[.., j, ..], j < i).
Tracer ExclusiveCumsum(Tracer x, int64_t dim);

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_MOE_LAYER_H_
