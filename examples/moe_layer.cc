#include "examples/moe_layer.h"

#include <vector>

namespace shardjit::examples {

Tracer ExclusiveCumsum(Tracer x, int64_t dim) { return lax::cumsum(x, dim) - x; }

Tracer MoeLayer(Tracer tokens, Tracer counts, Tracer weights, const std::string& axis,
                int64_t capacity) {
  const int64_t experts = counts.shape()[0];
  const int64_t local = weights.shape()[0];
  const int64_t devices = experts / local;
  const int64_t t = tokens.shape()[0], f = weights.shape()[2];
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
  // Every local expert's rows, contiguous: one grouped matmul.
  const Tracer group_sizes = lax::reduce_sum(mine, {0});  // [L]
  Tracer out = lax::gmm(received, weights, group_sizes, tokens.dtype());
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

}  // namespace shardjit::examples
