#include "examples/kernels/gmm.h"

#include "fmt/format.h"

namespace shardjit::examples {
namespace {

Tracer S32(double v) { return lax::scalar(v, DType::kS32); }

// jnp.repeat(arange(n), counts, total_repeat_length=total): step p belongs to the number of
// running sums of `counts` that are <= p (past their total, the last index).
Tracer RepeatIndices(Tracer counts, int64_t total) {
  const int64_t n = counts.shape()[0];
  Tracer ends = lax::broadcast_in_dim(lax::cumsum(counts), {total, n}, {1});
  Tracer at = lax::broadcasted_iota(DType::kS32, {total, n}, 0);
  Tracer before = lax::reduce_sum(lax::convert_element_type(ends <= at, DType::kS32), {1});
  return lax::min(before, lax::full({total}, static_cast<double>(n - 1), DType::kS32));
}

}  // namespace

GroupMetadata MakeGroupMetadata(Tracer group_sizes, int64_t m, int64_t tm,
                                bool visit_empty_groups) {
  const int64_t groups = group_sizes.shape()[0];
  const int64_t tiles_m = m / tm;
  const int64_t total = tiles_m + groups - 1;
  Tracer ends = lax::cumsum(group_sizes);
  Tracer offsets = lax::concatenate({lax::full({1}, 0, DType::kS32), ends}, 0);
  Tracer starts = lax::slice(offsets, {0}, {groups});
  // Each group's tiles: its rows rounded out to whole tiles (none for an empty group).
  Tracer rounded = (ends + (tm - 1)) / tm * tm - starts / tm * tm;
  Tracer empty = lax::eq(group_sizes, lax::full({groups}, 0, DType::kS32));
  Tracer one_tile = lax::full({groups}, visit_empty_groups ? tm : 0, DType::kS32);
  Tracer group_tiles = lax::select(empty, one_tile, rounded) / tm;
  // A tile is visited once by the group owning its first row, and once more by every group
  // starting inside it (non-empty ones, or every one when empty groups are visited).
  Tracer aligned = lax::eq(starts % tm, lax::full({groups}, 0, DType::kS32));
  if (!visit_empty_groups) aligned = lax::bitwise_or(aligned, empty);
  Tracer none = lax::full({groups}, static_cast<double>(tiles_m), DType::kS32);
  Tracer partial = lax::select(aligned, none, starts / tm);
  Tracer hits = lax::eq(lax::broadcasted_iota(DType::kS32, {tiles_m, groups}, 0),
                        lax::broadcast_in_dim(partial, {tiles_m, groups}, {1}));
  Tracer visits = lax::reduce_sum(lax::convert_element_type(hits, DType::kS32), {1}) + 1;
  return {offsets, RepeatIndices(group_tiles, total), RepeatIndices(visits, total),
          lax::reduce_sum(group_tiles, {0})};
}

Tracer Gmm(Tracer lhs, Tracer rhs, Tracer group_sizes, GmmTiles t, DType preferred) {
  const int64_t m = lhs.shape()[0], k = lhs.shape()[1], n = rhs.shape()[2];
  const int64_t groups = rhs.shape()[0];
  const int64_t tiles_k = pl::cdiv(k, t.tk), tiles_n = pl::cdiv(n, t.tn);
  const int64_t k_rem = k % t.tk;
  GroupMetadata meta = MakeGroupMetadata(group_sizes, m, t.tm);
  auto kernel = [=](const std::vector<pl::Ref>& r) {
    const pl::Ref &offsets = r[0], &group_ids = r[1], &m_tile_ids = r[2];
    const pl::Ref &x = r[3], &w = r[4], &out = r[5], &acc = r[6];
    Tracer grid_id = pl::program_id(1);
    Tracer kk = pl::program_id(2);
    pl::when(lax::eq(kk, S32(0)), [&] { acc.store(lax::full({t.tm, t.tn}, 0, DType::kF32)); });
    Tracer a = x.load(), b = w.load();
    if (k_rem != 0) {
      // The last k tile's columns of lhs and rows of rhs past k hold padding.
      Tracer limit = lax::select(lax::eq(kk, S32(tiles_k - 1)), S32(k_rem), S32(t.tk));
      a = lax::select(lax::broadcasted_iota(DType::kS32, {t.tm, t.tk}, 1) < limit, a,
                      lax::full({t.tm, t.tk}, 0, a.dtype()));
      b = lax::select(lax::broadcasted_iota(DType::kS32, {t.tk, t.tn}, 0) < limit, b,
                      lax::full({t.tk, t.tn}, 0, b.dtype()));
    }
    acc.store(acc.load() + pl::dot(a, b, DType::kF32));
    pl::when(lax::eq(kk, S32(tiles_k - 1)), [&] {
      // Only this group's rows of the tile: a tile shared with the next group is stored again
      // at the next step with that group's rows.
      Tracer group = group_ids.load({grid_id});
      Tracer begin = offsets.load({group});
      Tracer end = offsets.load({group + 1});
      Tracer row = lax::broadcasted_iota(DType::kS32, {t.tm, t.tn}, 0) +
                   m_tile_ids.load({grid_id}) * t.tm;
      Tracer mine = lax::bitwise_and(row >= begin, row < end);
      out.store(lax::convert_element_type(
          lax::select(mine, acc.load(), lax::convert_element_type(out.load(), DType::kF32)),
          preferred));
    });
  };
  pl::PallasCall call = pl::pallas_call(
      kernel,
      {.out_shapes = {{preferred, {m, n}}},
       .grid = {tiles_n, meta.num_tiles, tiles_k},
       .in_specs = {pl::BlockSpec({t.tm, t.tk},
                                  [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                    return pl::Blocks{p[2].load({g[1]}), g[2]};
                                  }),
                    pl::BlockSpec({pl::kSqueezed, t.tk, t.tn},
                                  [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                    return pl::Blocks{p[1].load({g[1]}), g[2], g[0]};
                                  })},
       .out_specs = {pl::BlockSpec({t.tm, t.tn},
                                   [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                     return pl::Blocks{p[2].load({g[1]}), g[0]};
                                   })},
       .scratch_shapes = {{DType::kF32, {t.tm, t.tn}}},
       .num_scalar_prefetch = 3,
       .dimension_semantics = {pl::kParallel, pl::kArbitrary, pl::kArbitrary},
       .name = "gmm"});
  Tracer out = call({meta.group_offsets, meta.group_ids, meta.m_tile_ids, lhs, rhs})[0];
  // Rows past the groups' sum were never stored (they hold padding): zeros, as megablox. The
  // select runs only when there are such rows (a pass over the whole output otherwise).
  Tracer total = lax::reshape(lax::slice(meta.group_offsets, {groups}, {groups + 1}), {});
  return lax::cond(
      total < S32(m),
      [&](Tracer o) {
        Tracer rows = lax::broadcasted_iota(DType::kS32, {m, n}, 0);
        return lax::select(rows < total, o, lax::full({m, n}, 0, preferred));
      },
      [](Tracer o) { return o; }, out);
}

Tracer Tgmm(Tracer lhs, Tracer rhs, Tracer group_sizes, GmmTiles t, DType preferred) {
  const int64_t k = lhs.shape()[0], m = lhs.shape()[1], n = rhs.shape()[1];
  const int64_t groups = group_sizes.shape()[0];
  const int64_t tiles_k = pl::cdiv(k, t.tk), tiles_n = pl::cdiv(n, t.tn);
  GroupMetadata meta = MakeGroupMetadata(group_sizes, m, t.tm, /*visit_empty_groups=*/true);
  auto kernel = [=](const std::vector<pl::Ref>& r) {
    const pl::Ref &offsets = r[0], &group_ids = r[1], &m_tile_ids = r[2];
    const pl::Ref &x = r[3], &y = r[4], &out = r[5], &acc = r[6];
    Tracer grid_id = pl::program_id(2);
    Tracer last = pl::num_programs(2) - 1;
    Tracer group = group_ids.load({grid_id});
    Tracer prev = group_ids.load({lax::max(grid_id - 1, S32(0))});
    Tracer next = group_ids.load({lax::min(grid_id + 1, last)});
    pl::when(lax::bitwise_or(lax::eq(grid_id, S32(0)), lax::ne(prev, group)),
             [&] { acc.store(lax::full({t.tk, t.tn}, 0, DType::kF32)); });
    Tracer begin = offsets.load({group});
    Tracer end = offsets.load({group + 1});
    pl::when(end > begin, [&] {
      // This group's rows of the m tile; the others (and padding) count as zeros.
      Tracer first = m_tile_ids.load({grid_id}) * t.tm;
      auto mine = [&](Tracer block, int64_t cols) {
        Tracer row = lax::broadcasted_iota(DType::kS32, {t.tm, cols}, 0) + first;
        return lax::select(lax::bitwise_and(row >= begin, row < end), block,
                           lax::full({t.tm, cols}, 0, block.dtype()));
      };
      acc.store(acc.load() + pl::dot(mine(x.load(), t.tk), mine(y.load(), t.tn), DType::kF32,
                                     /*trans_a=*/true));
    });
    pl::when(lax::bitwise_or(lax::eq(grid_id, last), lax::ne(next, group)),
             [&] { out.store(lax::convert_element_type(acc.load(), preferred)); });
  };
  pl::PallasCall call = pl::pallas_call(
      kernel,
      {.out_shapes = {{preferred, {groups, k, n}}},
       .grid = {tiles_n, tiles_k, meta.num_tiles},
       .in_specs = {pl::BlockSpec({t.tm, t.tk},
                                  [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                    return pl::Blocks{p[2].load({g[2]}), g[1]};
                                  }),
                    pl::BlockSpec({t.tm, t.tn},
                                  [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                    return pl::Blocks{p[2].load({g[2]}), g[0]};
                                  })},
       .out_specs = {pl::BlockSpec({pl::kSqueezed, t.tk, t.tn},
                                   [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                     return pl::Blocks{p[1].load({g[2]}), g[1], g[0]};
                                   })},
       .scratch_shapes = {{DType::kF32, {t.tk, t.tn}}},
       .num_scalar_prefetch = 3,
       .dimension_semantics = {pl::kParallel, pl::kArbitrary, pl::kArbitrary},
       .name = "tgmm"});
  return call({meta.group_offsets, meta.group_ids, meta.m_tile_ids,
               lax::transpose(lhs, {1, 0}), rhs})[0];
}

}  // namespace shardjit::examples
