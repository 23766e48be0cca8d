#include "examples/collective_matmul.h"

#include <utility>
#include <vector>

namespace shardjit::examples {
namespace {

using Perm = std::vector<std::pair<int64_t, int64_t>>;

Perm Shift(int64_t n, int64_t by) {
  Perm perm;
  for (int64_t i = 0; i < n; ++i) perm.push_back({i, ((i + by) % n + n) % n});
  return perm;
}

}  // namespace

Jitted<Array> BidirectionalCollectiveMatmul(const Mesh& mesh, const std::string& axis,
                                            JitOptions options) {
  const int64_t n = mesh.axis_size(axis);
  auto body = [axis, n](Tracer x, Tracer w) -> Tracer {
    const int64_t rows = x.shape()[0];
    const Perm right = Shift(n, +1), left = Shift(n, -1);
    Tracer me = lax::axis_index(axis);
    // Places block (me + shift) mod n of the rows: its product with my columns of w.
    auto place = [&](Tracer acc, Tracer block, Tracer shift) {
      Tracer index = (me + shift + n) % n;
      return lax::dynamic_update_slice(acc,
                                       lax::dot_general(block, w, DotDims{{1}, {0}}, DType::kF32),
                                       {index * rows, 0});
    };
    auto constant = [](double v) { return lax::full({}, v, DType::kS32); };
    Tracer acc = lax::full({n * rows, w.shape()[1]}, 0, DType::kF32);
    if (n == 1) return place(acc, x, constant(0));
    // Blocks me-1 .. me-F arrive from the left, me+1 .. me+B from the right (F + B = n - 1).
    const int64_t forward = n / 2, backward = (n - 1) / 2;
    Tracer from_left = lax::ppermute_start(x, axis, right);
    if (backward == 0) {  // two devices: one hop
      acc = place(acc, x, constant(0));
      return place(acc, lax::ppermute_done(from_left), constant(-1));
    }
    Tracer from_right = lax::ppermute_start(x, axis, left);
    acc = place(acc, x, constant(0));
    // Hops 1 .. B-1: take both arrivals, pass them on, multiply them while they travel.
    std::vector<Tracer> carry =
        lax::fori_loop(1, backward,
                       [&](Tracer hop, std::vector<Tracer> c) {
                         Tracer l = lax::ppermute_done(c[1]);
                         Tracer r = lax::ppermute_done(c[2]);
                         Tracer next_l = lax::ppermute_start(l, axis, right);
                         Tracer next_r = lax::ppermute_start(r, axis, left);
                         Tracer a = place(place(c[0], l, 0 - hop), r, hop);
                         return std::vector<Tracer>{a, next_l, next_r};
                       },
                       {acc, from_left, from_right});
    // Hop B, and for an even ring the last block from the left.
    Tracer l = lax::ppermute_done(carry[1]);
    Tracer r = lax::ppermute_done(carry[2]);
    Tracer last = forward > backward ? lax::ppermute_start(l, axis, right) : Tracer();
    acc = place(place(carry[0], l, constant(-backward)), r, constant(backward));
    if (forward > backward) acc = place(acc, lax::ppermute_done(last), constant(-forward));
    return acc;
  };
  options.name = "bidirectional_collective_matmul";
  return jit(shard_map(body, mesh, {P(axis, None), P(None, axis)}, {P(None, axis)}),
             std::move(options));
}

}  // namespace shardjit::examples
