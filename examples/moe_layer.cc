#include "examples/moe_layer.h"

#include <vector>

namespace shardjit::examples {

Tracer ExclusiveCumsum(Tracer x, int64_t dim) { return lax::cumsum(x, dim) - x; }

namespace {

// One gmm by the device's expert weights [L, H, F].
ExpertFn Gmm(Tracer weights) {
  return [weights](Tracer rows, Tracer group_sizes) {
    return lax::gmm(rows, weights, group_sizes, rows.dtype());
  };
}

}  // namespace

Tracer MoeLayer(Tracer tokens, Tracer counts, Tracer weights, const std::string& axis,
                int64_t capacity) {
  return MoeLayer(tokens, counts, weights.shape()[0], Gmm(weights), axis, capacity);
}

Tracer RoutedMoeLayer(Tracer tokens, Tracer router, Tracer weights, const std::string& axis,
                      int64_t k, int64_t capacity) {
  return RoutedMoeLayer(tokens, router, weights.shape()[0], Gmm(weights), axis, k, capacity);
}

Tracer MoeLayer(Tracer tokens, Tracer counts, int64_t local, const ExpertFn& expert_fn,
                const std::string& axis, int64_t capacity) {
  const int64_t experts = counts.shape()[0];
  const int64_t devices = experts / local;
  const int64_t t = tokens.shape()[0];
  const Tracer d = lax::axis_index(axis);
  const Tracer my_first = d * static_cast<int32_t>(local);
  // sent[s, e]: rows device s sends to expert e.
  const Tracer sent = lax::all_gather(counts, axis, 0, /*tiled=*/false);
  // The receive buffer holds the rows of local expert j from every sender s at
  // sum_{j' < j} total[j'] + sum_{s' < s} sent[s', j]: experts contiguous, as gmm groups them.
  const Tracer total = lax::reduce_sum(sent, {0});                                // [E]
  const Tracer mine = lax::dynamic_slice(sent, {0, my_first}, {devices, local});  // [D, L]
  // Sender side: slice e of my rows goes to device e / L. On that device it lands after the
  // experts before e in e's block (all senders) and after the senders before me (expert e).
  std::vector<int64_t> pair_shape = {experts, experts};
  const Tracer same_block =
      lax::eq(lax::broadcasted_iota(DType::kS32, pair_shape, 0) / static_cast<int32_t>(local),
              lax::broadcasted_iota(DType::kS32, pair_shape, 1) / static_cast<int32_t>(local));
  const Tracer earlier = lax::lt(lax::broadcasted_iota(DType::kS32, pair_shape, 0),
                                 lax::broadcasted_iota(DType::kS32, pair_shape, 1));
  const Tracer in_block_before = lax::reduce_sum(
      lax::select(same_block,
                  lax::select(earlier, lax::broadcast_in_dim(total, pair_shape, {0}),
                              lax::full(pair_shape, 0, DType::kS32)),
                  lax::full(pair_shape, 0, DType::kS32)),
      {0});
  const Tracer senders_before =
      lax::reduce_sum(lax::select(lax::lt(lax::broadcasted_iota(DType::kS32, {devices, experts}, 0),
                                          lax::broadcast_in_dim(d, {devices, experts}, {})),
                                  sent, lax::full({devices, experts}, 0, DType::kS32)),
                      {0});
  const Tracer recv_sizes = lax::reshape(mine, {experts});
  Tracer received = lax::ragged_all_to_all(
      tokens, lax::full({capacity, tokens.shape()[1]}, 0, tokens.dtype()),
      ExclusiveCumsum(counts, 0), counts, in_block_before + senders_before, recv_sizes, axis);
  // Every local expert's rows, contiguous (as gmm groups them).
  const Tracer group_sizes = lax::reduce_sum(mine, {0});  // [L]
  Tracer out = expert_fn(received, group_sizes);
  const int64_t f = out.shape()[1];
  // Back: slice s*L + j (my expert j's rows from sender s) returns to s, at the row where s
  // kept those tokens: its exclusive prefix sum of counts at expert d*L + j.
  const Tracer back_offsets =
      lax::broadcast_in_dim(ExclusiveCumsum(group_sizes, 0), {devices, local}, {1}) +
      ExclusiveCumsum(mine, 0);
  const Tracer home = lax::dynamic_slice(ExclusiveCumsum(sent, 1), {0, my_first}, {devices, local});
  return lax::ragged_all_to_all(out, lax::full({t, f}, 0, out.dtype()),
                                lax::reshape(back_offsets, {experts}), recv_sizes,
                                lax::reshape(home, {experts}), counts, axis);
}

Tracer RoutedMoeLayer(Tracer tokens, Tracer router, int64_t local, const ExpertFn& expert_fn,
                      const std::string& axis, int64_t k, int64_t capacity) {
  const int64_t t = tokens.shape()[0], experts = router.shape()[1];
  const int64_t pairs = t * k;
  const int64_t devices = experts / local;
  // Routing: the top k logits of each token and their softmax.
  auto [top, chosen] = lax::top_k(jnp::matmul(tokens, router), k);  // [T, k]
  const std::vector<int64_t> tk = {t, k};
  Tracer e = lax::exp(top - lax::broadcast_in_dim(lax::reduce_max(top, {1}), tk, {0}));
  Tracer gates = e / lax::broadcast_in_dim(lax::reduce_sum(e, {1}), tk, {0});
  // The pairs, in token order, grouped by expert (a stable sort keeps token order inside).
  Tracer expert = lax::reshape(chosen, {pairs});
  Tracer token = lax::broadcasted_iota(DType::kS32, {pairs}, 0) / static_cast<int32_t>(k);
  Tracer order = jnp::argsort(expert);
  Tracer sorted_expert = jnp::take(expert, order, 0);
  Tracer sorted_token = jnp::take(token, order, 0);
  Tracer sorted_gate = jnp::take(lax::reshape(gates, {pairs}), order, 0);
  // Pairs per expert, and each pair's rank inside its expert's group.
  Tracer counts = lax::scatter_add(lax::full({experts}, 0, DType::kS32),
                                   lax::reshape(expert, {pairs, 1}),
                                   lax::full({pairs}, 1, DType::kS32),
                                   {.inserted_window_dims = {0},
                                    .scatter_dims_to_operand_dims = {0}});
  Tracer rank = lax::broadcasted_iota(DType::kS32, {pairs}, 0) -
                jnp::take(ExclusiveCumsum(counts, 0), sorted_expert, 0);
  // Capacity: the kept pairs move up to close the gaps (a dropped pair's row index is past the
  // end: the scatters drop it).
  Tracer kept = lax::min(counts, lax::full({experts}, static_cast<double>(capacity), DType::kS32));
  Tracer keep = lax::lt(rank, lax::full({pairs}, static_cast<double>(capacity), DType::kS32));
  Tracer row = lax::reshape(
      lax::select(keep, jnp::take(ExclusiveCumsum(kept, 0), sorted_expert, 0) + rank,
                  lax::full({pairs}, static_cast<double>(pairs), DType::kS32)),
      {pairs, 1});
  const lax::ScatterDimensionNumbers rows = {.update_window_dims = {1},
                                             .inserted_window_dims = {0},
                                             .scatter_dims_to_operand_dims = {0}};
  const lax::ScatterDimensionNumbers elements = {.inserted_window_dims = {0},
                                                 .scatter_dims_to_operand_dims = {0}};
  Tracer dispatched = lax::scatter(lax::full({pairs, tokens.shape()[1]}, 0, tokens.dtype()), row,
                                   jnp::take(tokens, sorted_token, 0), rows);
  Tracer home = lax::scatter(lax::full({pairs}, static_cast<double>(t), DType::kS32), row,
                             sorted_token, elements);
  Tracer weight = lax::scatter(lax::full({pairs}, 0, gates.dtype()), row, sorted_gate, elements);
  Tracer out = MoeLayer(dispatched, kept, local, expert_fn, axis, pairs * devices);  // [pairs, F]
  // Combine: each pair's result, weighted by its gate, added to its token (unused rows, whose
  // home is t, are dropped).
  const int64_t f = out.shape()[1];
  Tracer weighted = out * lax::broadcast_in_dim(weight, {pairs, f}, {0});
  return lax::scatter_add(lax::full({t, f}, 0, out.dtype()), lax::reshape(home, {pairs, 1}),
                          weighted, rows);
}

}  // namespace shardjit::examples
