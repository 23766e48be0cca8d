// vmap against the same function applied to every slice of its arguments and stacked (traced in
// the same program, without batching rules), on both backends: elementwise ops (scalars and
// select's predicate among them), broadcasts, reductions, dot_general with the batch dimension on
// either or both sides, data movement, sorting and scans, per-example gradients (vmap of grad),
// collectives inside shard_map; in_axes/out_axes anywhere; the errors JAX gives.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Fn = std::function<std::vector<Tracer>(const std::vector<Tracer>&)>;
using Axes = std::vector<std::optional<int64_t>>;

std::vector<double> Values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-1.5, 1.5);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

// Slice `i` of x along `axis`, that axis removed.
Tracer Take(Tracer x, int64_t axis, int64_t i) {
  std::vector<int64_t> start(x.rank(), 0), limit = x.shape();
  start[axis] = i;
  limit[axis] = i + 1;
  std::vector<int64_t> shape = x.shape();
  shape.erase(shape.begin() + axis);
  return lax::reshape(lax::slice(x, start, limit), shape);
}

// f applied slice by slice and stacked along `out_axis`: the oracle.
std::vector<Tracer> Loop(const Fn& f, const std::vector<Tracer>& args, const Axes& in_axes,
                         int64_t out_axis, int64_t size) {
  std::vector<std::vector<Tracer>> per_result;
  for (int64_t i = 0; i < size; ++i) {
    std::vector<Tracer> slice;
    for (size_t a = 0; a < args.size(); ++a) {
      slice.push_back(in_axes[a] ? Take(args[a], *in_axes[a], i) : args[a]);
    }
    std::vector<Tracer> out = f(slice);
    per_result.resize(out.size());
    for (size_t r = 0; r < out.size(); ++r) {
      std::vector<int64_t> shape = out[r].shape();
      shape.insert(shape.begin() + out_axis, 1);
      per_result[r].push_back(lax::reshape(out[r], shape));
    }
  }
  std::vector<Tracer> stacked;
  for (auto& parts : per_result) stacked.push_back(lax::concatenate(parts, out_axis));
  return stacked;
}

class VmapTest : public ::testing::TestWithParam<Backend> {
 protected:
  VmapTest() : rt_({.num_devices = 1}), mesh_(*make_mesh(rt_, {{"x", 1}})) {}

  Array Put(std::vector<int64_t> shape, uint32_t seed) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return *device_put(HostTensor(DType::kF64, std::move(shape), Values(n, seed)),
                       NamedSharding(mesh_, P()));
  }

  void ExpectVmapMatchesLoop(const Fn& f, const std::vector<Array>& args, const Axes& in_axes,
                             int64_t out_axis, int64_t size) {
    absl::StatusOr<std::vector<Array>> out = jit(
        [&](const std::vector<Tracer>& a) {
          std::vector<Tracer> batched = vmap(f, in_axes, {out_axis})(a);
          std::vector<Tracer> looped = Loop(f, a, in_axes, out_axis, size);
          batched.insert(batched.end(), looped.begin(), looped.end());
          return batched;
        },
        {.backend = GetParam()}).call(args);
    ASSERT_TRUE(out.ok()) << out.status();
    const size_t n = out->size() / 2;
    for (size_t r = 0; r < n; ++r) {
      ASSERT_EQ((*out)[r].type(), (*out)[n + r].type()) << "result " << r;
      std::vector<double> got = (*out)[r].to_host()->ToDoubles();
      std::vector<double> want = (*out)[n + r].to_host()->ToDoubles();
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i])))
            << "result " << r << " element " << i;
      }
    }
  }

  Runtime rt_;
  Mesh mesh_;
};

TEST_P(VmapTest, ElementwiseBroadcastsAndReductions) {
  Fn f = [](const std::vector<Tracer>& a) {
    Tracer x = a[0], w = a[1], s = a[2];  // x [4], w [4] (unbatched), s [] per example
    Tracer y = lax::tanh(x * w) + lax::broadcast_in_dim(s, {4}, {}) * 2.0;
    Tracer pick = lax::select(s > lax::full({}, 0.0, DType::kF64), y, -y);
    Tracer m = lax::reduce_max(pick, {0});
    return std::vector<Tracer>{pick, m + s, lax::clamp(s, x, s + 1.0)};
  };
  ExpectVmapMatchesLoop(f, {Put({3, 4}, 1), Put({4}, 2), Put({3}, 3)}, {0, std::nullopt, 0}, 0, 3);
  ExpectVmapMatchesLoop(f, {Put({4, 5}, 4), Put({4}, 5), Put({5}, 6)}, {1, std::nullopt, 0}, 0,
                        5);
}

TEST_P(VmapTest, DotGeneralOnEitherOrBothSides) {
  Fn f = [](const std::vector<Tracer>& a) {
    Tracer x = a[0], w = a[1];  // x [3, 4], w [4, 2]
    Tracer y = jnp::matmul(x, w);
    Tracer z = lax::dot_general(x, x, {.lhs_contracting = {1}, .rhs_contracting = {1}});
    return std::vector<Tracer>{y, z};
  };
  ExpectVmapMatchesLoop(f, {Put({5, 3, 4}, 7), Put({4, 2}, 8)}, {0, std::nullopt}, 0, 5);
  ExpectVmapMatchesLoop(f, {Put({3, 4}, 9), Put({4, 2, 6}, 10)}, {std::nullopt, 2}, 1, 6);
  ExpectVmapMatchesLoop(f, {Put({3, 6, 4}, 11), Put({6, 4, 2}, 12)}, {1, 0}, 2, 6);
}

TEST_P(VmapTest, DataMovementSortingAndScans) {
  Fn f = [](const std::vector<Tracer>& a) {
    Tracer x = a[0];  // [6, 4]
    Tracer s = lax::slice(x, {1, 0}, {6, 4}, {2, 3});
    Tracer p = lax::pad(x, 0.5, {{1, -1, 1}, {0, 2, 0}});
    Tracer c = lax::concatenate({x, lax::rev(x, {1})}, 1);
    Tracer t = lax::reshape(lax::transpose(x, {1, 0}), {24});
    Tracer d = lax::dynamic_slice(x, {2, 1}, {3, 2});
    Tracer u = lax::dynamic_update_slice(x, d * 2.0, {1, 1});
    Tracer sorted = lax::sort(x, 0);
    auto [top, top_index] = lax::top_k(x, 2);
    Tracer arg = lax::convert_element_type(lax::argmax(x, 1, DType::kS32), DType::kF64);
    Tracer scan = lax::cumsum(x, 1, /*reverse=*/true);
    return std::vector<Tracer>{s, p, c, t, u, sorted, top,
                               lax::convert_element_type(top_index, DType::kF64), arg, scan};
  };
  ExpectVmapMatchesLoop(f, {Put({3, 6, 4}, 13)}, {0}, 0, 3);
  ExpectVmapMatchesLoop(f, {Put({6, 4, 3}, 14)}, {2}, 1, 3);
}

// Loops and branches: a carry that becomes batched in the body, scan, cond on a predicate that
// depends on the example (a select of both branches) and on one that does not, switch.
TEST_P(VmapTest, LoopsAndBranches) {
  Fn f = [](const std::vector<Tracer>& a) {
    Tracer x = a[0], w = a[1];  // x [4] per example, w [4] shared
    Tracer acc = lax::fori_loop(
        0, 3, [&](Tracer i, Tracer c) { return c * 0.5 + x * lax::convert_element_type(i, DType::kF64); },
        w);  // starts unbatched, batched after one trip
    lax::ScanResult s = lax::scan(
        [&](std::vector<Tracer> c, std::vector<Tracer> xs) {
          Tracer next = c[0] * 0.9 + xs[0] * lax::reduce_sum(w, {0});
          return std::pair<std::vector<Tracer>, std::vector<Tracer>>{{next}, {next * 2.0}};
        },
        {lax::full({}, 0.0, DType::kF64)}, {x});
    Tracer by_data = lax::cond(
        lax::reduce_sum(x, {0}) > lax::full({}, 0.0, DType::kF64),
        [&](std::vector<Tracer> o) { return std::vector<Tracer>{lax::sin(o[0]) + w}; },
        [&](std::vector<Tracer> o) { return std::vector<Tracer>{o[0] * o[0]}; }, {x})[0];
    Tracer fixed = lax::cond(
        lax::full({}, true, DType::kPred),
        [&](std::vector<Tracer> o) { return std::vector<Tracer>{o[0] - w}; },
        [&](std::vector<Tracer> o) { return std::vector<Tracer>{o[0]}; }, {x})[0];
    Tracer index = lax::convert_element_type(lax::floor(lax::abs(lax::reduce_sum(x, {0})) * 2.0),
                                             DType::kS32);
    Tracer pick = lax::switch_(
        index,
        {[&](std::vector<Tracer> o) { return std::vector<Tracer>{o[0]}; },
         [&](std::vector<Tracer> o) { return std::vector<Tracer>{o[0] * 3.0}; },
         [&](std::vector<Tracer> o) { return std::vector<Tracer>{-o[0]}; }},
        {x})[0];
    // A while_loop whose trip count depends on the example (doubling until above 10).
    std::vector<Tracer> grown = lax::while_loop(
        [](std::vector<Tracer> c) {
          return lax::reduce_sum(lax::abs(c[1]), {0}) < lax::full({}, 10.0, DType::kF64);
        },
        [](std::vector<Tracer> c) {
          return std::vector<Tracer>{c[0] + 1, c[1] * 2.0};
        },
        {lax::full({}, 0, DType::kS32), x + 0.01});
    // One whose trip count does not.
    std::vector<Tracer> fixed_trips = lax::while_loop(
        [](std::vector<Tracer> c) { return c[0] < lax::full({}, 3, DType::kS32); },
        [&](std::vector<Tracer> c) { return std::vector<Tracer>{c[0] + 1, c[1] * 0.5 + x}; },
        {lax::full({}, 0, DType::kS32), w});
    return std::vector<Tracer>{acc, s.carry[0], s.ys[0], by_data, fixed, pick,
                               lax::convert_element_type(grown[0], DType::kF64), grown[1],
                               fixed_trips[1]};
  };
  ExpectVmapMatchesLoop(f, {Put({6, 4}, 20), Put({4}, 21)}, {0, std::nullopt}, 0, 6);
}

// gather with the operand, the indices or both batched; dynamic_slice with batched starts.
TEST_P(VmapTest, GathersAndDynamicSlices) {
  Fn f = [](const std::vector<Tracer>& a) {
    Tracer table = a[0], ids_f = a[1];  // table [5, 3], ids_f [4] (made integer indices)
    Tracer ids = lax::convert_element_type(lax::floor(lax::abs(ids_f) * 3.0), DType::kS32);
    Tracer rows = jnp::take(table, ids, 0, lax::GatherScatterMode::kClip);          // [4, 3]
    Tracer start = lax::convert_element_type(lax::reduce_sum(lax::abs(ids_f), {0}), DType::kS32);
    Tracer window = lax::dynamic_slice(table, {start, -1}, {2, 2});
    Tracer updated = lax::dynamic_update_slice(table, window * 3.0, {start - 1, 1});
    Tracer shift = lax::reshape(lax::slice(ids, {0}, {1}), {});
    Tracer along = jnp::take_along_axis(
        table,
        lax::rem(lax::broadcasted_iota(DType::kS32, {5, 3}, 0) + shift,
                 lax::full({}, 3, DType::kS32)),
        1);
    Tracer row_ids = lax::reshape(ids, {4, 1});
    Tracer added = lax::scatter_add(table, row_ids, rows * 2.0,
                                    {.update_window_dims = {1},
                                     .inserted_window_dims = {0},
                                     .scatter_dims_to_operand_dims = {0}});
    Tracer maxed = lax::scatter_max(table, row_ids, rows * 2.0,
                                    {.update_window_dims = {1},
                                     .inserted_window_dims = {0},
                                     .scatter_dims_to_operand_dims = {0}});
    return std::vector<Tracer>{rows, window, along, added, maxed, updated};
  };
  ExpectVmapMatchesLoop(f, {Put({3, 5, 3}, 23), Put({4}, 24)}, {0, std::nullopt}, 0, 3);
  ExpectVmapMatchesLoop(f, {Put({5, 3}, 25), Put({4, 3}, 26)}, {std::nullopt, 1}, 0, 3);
  ExpectVmapMatchesLoop(f, {Put({5, 3, 2}, 27), Put({2, 4}, 28)}, {2, 0}, 1, 2);
}

// Per-example gradients: vmap(grad(f)).
TEST_P(VmapTest, PerExampleGradients) {
  auto loss = [](Tracer w, Tracer x) { return lax::reduce_sum(lax::tanh(jnp::matmul(x, w)), {0, 1}); };
  Fn f = [loss](const std::vector<Tracer>& a) {
    return std::vector<Tracer>{grad(loss, 0)(a)};
  };
  ExpectVmapMatchesLoop(f, {Put({4, 3}, 15), Put({5, 2, 4}, 16)}, {std::nullopt, 0}, 0, 5);
}

TEST(VmapCollectives, InsideShardMap) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  Array xs = *device_put(HostTensor(DType::kF32, {4, 6}, Values(24, 17)),
                         NamedSharding(mesh, P(None, "x")));
  auto body = [](Tracer x) {  // x: [4, 3] per device; vmapped over its rows
    Tracer summed = vmap([](Tracer row) { return lax::psum(row * row, "x"); })({x});
    Tracer gathered = vmap([](Tracer row) { return lax::all_gather(row, "x", 0, true); })({x});
    return std::vector<Tracer>{summed, gathered};  // [4, 3], [4, 6]
  };
  auto direct = [](Tracer x) {
    return std::vector<Tracer>{lax::psum(x * x, "x"), lax::all_gather(x, "x", 1, true)};
  };
  auto run = [&](auto f) {
    return jit(shard_map(f, mesh, {P(None, "x")}, {P(None, "x"), P()}, /*check_vma=*/false))(xs);
  };
  absl::StatusOr<std::vector<Array>> got = run(body), want = run(direct);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ((*got)[r].to_host()->ToDoubles(), (*want)[r].to_host()->ToDoubles()) << r;
  }
}

// vmap of a shard_map (typed and not): the batch leads each operand unsplit; against the
// shard_map applied to each slice and stacked.
TEST(VmapCollectives, OfShardMap) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  for (bool check_vma : {true, false}) {
    SCOPED_TRACE(check_vma ? "check_vma" : "check_vma=false");
    auto program = shard_map(
        [](Tracer a, Tracer w) {  // a: [2] local, w: [4] replicated
          Tracer summed = lax::psum(a * lax::slice(w, {0}, {2}), "x");
          Tracer gathered = lax::all_gather(a * 2.0, "x", 0, true);
          return std::vector<Tracer>{summed, gathered + w};
        },
        mesh, {P("x"), P()}, {P(), P("x")}, check_vma);
    Array xs = *device_put(HostTensor(DType::kF64, {3, 4}, Values(12, 41)), NamedSharding(mesh, P()));
    Array w = *device_put(HostTensor(DType::kF64, {4}, Values(4, 42)), NamedSharding(mesh, P()));
    absl::StatusOr<std::vector<Array>> got = jit([&](Tracer xs, Tracer w) {
      return vmap([&](const std::vector<Tracer>& a) { return program(a); }, {0, std::nullopt})(
          {xs, w});
    })(xs, w);
    absl::StatusOr<std::vector<Array>> want = jit([&](Tracer xs, Tracer w) {
      return Loop([&](const std::vector<Tracer>& a) { return program(a); }, {xs, w},
                  {0, std::nullopt}, 0, 3);
    })(xs, w);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ((*got)[r].to_host()->ToDoubles(), (*want)[r].to_host()->ToDoubles()) << r;
    }
  }
}

// vmap with an axis_name: collectives over the vmapped axis act across the batch. Each case
// against the value computed element by element on the host (f64).
class VmapAxisNameTest : public ::testing::Test {
 protected:
  VmapAxisNameTest() : rt_({.num_devices = 1}), mesh_(*make_mesh(rt_, {{"x", 1}})) {}

  // vmap(f, axis_name="b") over the rows of xs ([n, m]), on both backends.
  std::vector<double> Run(const std::function<Tracer(Tracer)>& f, int64_t n, int64_t m,
                          const std::vector<double>& xs) {
    Array x = *device_put(HostTensor(DType::kF64, {n, m}, xs), NamedSharding(mesh_, P()));
    std::vector<double> first;
    for (Backend backend : {Backend::kX86, Backend::kReference}) {
      absl::StatusOr<Array> out =
          jit([f](Tracer x) { return vmap(f, {0}, {0}, "b")({x}); }, {.backend = backend})(x);
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) return {};
      std::vector<double> got = out->to_host()->ToDoubles();
      if (first.empty()) first = got;
      EXPECT_EQ(got, first) << "the backends differ";
    }
    return first;
  }

  Runtime rt_;
  Mesh mesh_;
};

TEST_F(VmapAxisNameTest, ReductionsAndAxisIndex) {
  const int64_t n = 4, m = 5;
  const std::vector<double> xs = Values(n * m, 31);
  auto at = [&](int64_t b, int64_t i) { return xs[b * m + i]; };
  std::vector<double> sum(m, 0), mx(m, -1e300), mn(m, 1e300);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      sum[i] += at(b, i);
      mx[i] = std::max(mx[i], at(b, i));
      mn[i] = std::min(mn[i], at(b, i));
    }
  }
  // psum + pmean * 10 + pmax * 100 - pmin + axis_index * 1000 + n * (psum of an unbatched 1).
  std::vector<double> got = Run(
      [](Tracer x) {
        Tracer one = lax::full({}, 1.0, DType::kF64);
        Tracer index = lax::convert_element_type(lax::axis_index("b"), DType::kF64);
        return lax::psum(x, "b") + lax::pmean(x, "b") * 10.0 + lax::pmax(x, "b") * 100.0 -
               lax::pmin(x, "b") + index * 1000.0 + lax::psum(one, "b") * 10000.0;
      },
      n, m, xs);
  ASSERT_EQ(got.size(), static_cast<size_t>(n * m));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      const double want =
          sum[i] + sum[i] / n * 10 + mx[i] * 100 - mn[i] + b * 1000.0 + n * 10000.0;
      EXPECT_NEAR(got[b * m + i], want, 1e-9) << b << "," << i;
    }
  }
}

TEST_F(VmapAxisNameTest, DataMovement) {
  const int64_t n = 4, m = 8;
  const std::vector<double> xs = Values(n * m, 32);
  auto at = [&](int64_t b, int64_t i) { return xs[b * m + i]; };
  // all_gather (stacked, then tiled) read back at a position that depends on the element.
  std::vector<double> got = Run(
      [](Tracer x) {
        Tracer stacked = lax::all_gather(x, "b", 0, false);  // [4, 8]
        Tracer tiled = lax::all_gather(x, "b", 0, true);     // [32]
        return lax::reduce_sum(stacked, {0}) + lax::slice(tiled, {8}, {16}) * 2.0;
      },
      n, m, xs);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (int64_t c = 0; c < n; ++c) s += at(c, i);
      EXPECT_NEAR(got[b * m + i], s + 2 * at(1, i), 1e-12);
    }
  }
  // psum_scatter (tiled: element b keeps block b of the sum), ppermute (a shift and a partial
  // permutation), pbroadcast.
  got = Run(
      [](Tracer x) {
        Tracer scattered = lax::psum_scatter(x, "b", 0, true);  // [2]
        Tracer wide = lax::concatenate({scattered, scattered, scattered, scattered}, 0);
        Tracer shifted = lax::ppermute(x, "b", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
        Tracer partial = lax::ppermute(x, "b", {{3, 0}});
        return wide + shifted * 10.0 + partial * 100.0 + lax::pbroadcast(x, "b", 2) * 1000.0;
      },
      n, m, xs);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      double block = 0;
      for (int64_t c = 0; c < n; ++c) block += at(c, b * 2 + i % 2);
      const double want = block + at((b + n - 1) % n, i) * 10 + (b == 0 ? at(3, i) * 100 : 0) +
                          at(2, i) * 1000;
      EXPECT_NEAR(got[b * m + i], want, 1e-12) << b << "," << i;
    }
  }
  // all_to_all, tiled (element j gets chunk j of every element, in order) and not tiled.
  got = Run(
      [](Tracer x) {
        Tracer tiled = lax::all_to_all(x, "b", 0, 0, true);                       // [8]
        Tracer grid = lax::reshape(x, {4, 2});
        Tracer untiled = lax::all_to_all(grid, "b", 0, 1, false);                  // [2, 4]
        return tiled + lax::reshape(untiled, {8}) * 10.0;
      },
      n, m, xs);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      const double tiled = at(i / 2, j * 2 + i % 2);
      // untiled[r][c]: from element c (the new dimension at 1), row j of its [4, 2] grid.
      const double untiled = at(i % 4, j * 2 + i / 4);
      EXPECT_NEAR(got[j * m + i], tiled + 10 * untiled, 1e-12) << j << "," << i;
    }
  }
}

// A loop whose carry is not batched but whose body names the vmapped axis: batched through it.
TEST_F(VmapAxisNameTest, LoopsThatNameTheAxisInside) {
  const int64_t n = 3, m = 2;
  const std::vector<double> xs = Values(n * m, 35);
  std::vector<double> got = Run(
      [](Tracer x) {
        Tracer zeros = lax::full({2}, 0.0, DType::kF64);
        Tracer loop = lax::fori_loop(
            0, 2,
            [](Tracer, Tracer c) {
              Tracer index = lax::convert_element_type(lax::axis_index("b"), DType::kF64);
              return c + lax::broadcast_in_dim(index, {2}, {}) +
                     lax::psum(lax::full({2}, 1.0, DType::kF64), "b");
            },
            zeros);
        return x + loop;
      },
      n, m, xs);
  ASSERT_EQ(got.size(), static_cast<size_t>(n * m));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      EXPECT_NEAR(got[b * m + i], xs[b * m + i] + 2.0 * b + 2.0 * n, 1e-12) << b << "," << i;
    }
  }
}

TEST_F(VmapAxisNameTest, GradientThroughTheBatchedCollective) {
  // loss(xs) = sum_b sum_i psum(x_b)_i * x_bi: d loss / d x_bi = 2 * sum_c x_ci.
  const int64_t n = 3, m = 4;
  const std::vector<double> xs = Values(n * m, 33);
  Array x = *device_put(HostTensor(DType::kF64, {n, m}, xs), NamedSharding(mesh_, P()));
  absl::StatusOr<Array> g = jit(grad([](Tracer xs) {
    Tracer per = vmap([](Tracer x) { return lax::psum(x, "b") * x; }, {0}, {0}, "b")({xs});
    return lax::reduce_sum(per, {0, 1});
  }))(x);
  ASSERT_TRUE(g.ok()) << g.status();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (int64_t c = 0; c < n; ++c) s += xs[c * m + i];
      EXPECT_NEAR(g->to_host()->ToDoubles()[b * m + i], 2 * s, 1e-12);
    }
  }
}

// At top level (no shard_map) collectives may name only the vmapped axis.
TEST_F(VmapAxisNameTest, MeshAxesNeedAShardMap) {
  Array x = *device_put(HostTensor(DType::kF64, {2, 3}, Values(6, 36)), NamedSharding(mesh_, P()));
  absl::StatusOr<Array> out = jit([](Tracer x) {
    return vmap([](Tracer r) { return lax::psum(r, {"x", "b"}); }, {0}, {0}, "b")({x});
  })(x);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("psum: collectives need a mapped axis"));
}

// Inside a shard_map on {x:2}: collectives over the mesh axis and the vmapped one together.
TEST(VmapAxisName, WithMeshAxes) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  const std::vector<double> xs = Values(2 * 3 * 4, 34);  // [2 devices, 3 elements, 4]
  Array x = *device_put(HostTensor(DType::kF64, {6, 4}, xs), NamedSharding(mesh, P("x")));
  auto body = [](Tracer x) {  // [3, 4] per device
    return vmap(
        [](Tracer row) {
          Tracer index = lax::convert_element_type(lax::axis_index({"x", "b"}), DType::kF64);
          Tracer size = lax::convert_element_type(lax::axis_size({"b", "x"}), DType::kF64);
          return lax::psum(row, {"x", "b"}) + index * 100.0 + size * 1000.0;
        },
        {0}, {0}, "b")({x});
  };
  absl::StatusOr<Array> out = jit(shard_map(body, mesh, {P("x")}, {P("x")}))(x);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> got = out->to_host()->ToDoubles();
  for (int64_t d = 0; d < 2; ++d) {
    for (int64_t b = 0; b < 3; ++b) {
      for (int64_t i = 0; i < 4; ++i) {
        double s = 0;
        for (int64_t k = 0; k < 6; ++k) s += xs[k * 4 + i];
        const double want = s + (d * 3 + b) * 100.0 + 6 * 1000.0;
        EXPECT_NEAR(got[(d * 3 + b) * 4 + i], want, 1e-12) << d << "," << b << "," << i;
      }
    }
  }
  // Moving data over the vmapped axis and a mesh axis at once is refused, clearly.
  absl::StatusOr<Array> mixed = jit(shard_map(
      [](Tracer x) {
        return vmap([](Tracer row) { return lax::all_gather(row, {"b", "x"}, 0, true); }, {0},
                    {0}, "b")({x});
      },
      mesh, {P("x")}, {P("x")}))(x);
  EXPECT_THAT(std::string(mixed.status().message()),
              HasSubstr("vmap: a all_gather over the vmapped axis 'b' together with other axes "
                        "(b, x) is not supported"));
  absl::StatusOr<Array> clash = jit(shard_map(
      [](Tracer x) { return vmap([](Tracer row) { return row; }, {0}, {0}, "x")({x}); }, mesh,
      {P("x")}, {P("x")}))(x);
  EXPECT_THAT(std::string(clash.status().message()),
              HasSubstr("vmap: axis_name 'x' is already an axis of the mesh"));
}

TEST(VmapErrors, AsJaxGivesThem) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(DType::kF32, {3, 4}, Values(12, 18)), NamedSharding(mesh, P()));
  Array y = *device_put(HostTensor(DType::kF32, {5}, Values(5, 19)), NamedSharding(mesh, P()));
  auto message = [](const absl::Status& s) { return std::string(s.message()); };
  EXPECT_THAT(message(jit([](Tracer x, Tracer y) {
                        return vmap([](Tracer a, Tracer b) {
                          return lax::reduce_sum(a, {0}) * 0.0 + b;
                        })({x, y});
                      })(x, y).status()),
              HasSubstr("vmap got inconsistent sizes for array axes to be mapped"));
  EXPECT_THAT(message(jit([](Tracer x) {
                        return vmap([](Tracer a) { return a; }, {2})({x});
                      })(x).status()),
              HasSubstr("vmap was requested to map its argument along axis 2"));
  EXPECT_THAT(message(jit([](Tracer x) {
                        return vmap([](Tracer a) {
                          return lax::nextafter(a, a * 2.0) + lax::full({}, 1, DType::kF32);
                        })({x});
                      })(x).status()),
              Not(HasSubstr("Batching rule")));
  EXPECT_THAT(message(jit([](Tracer x) {
                        return vmap([](Tracer a) {
                          return lax::sort(a, 0);
                        })({x});
                      })(x).status()),
              Not(HasSubstr("Batching rule")));
}

INSTANTIATE_TEST_SUITE_P(Backends, VmapTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

}  // namespace
}  // namespace shardjit
