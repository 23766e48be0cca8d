// vmap against the same function applied to every slice of its arguments and stacked (traced in
// the same program, without batching rules), on both backends: elementwise ops (scalars and
// select's predicate among them), broadcasts, reductions, dot_general with the batch dimension on
// either or both sides, data movement, sorting and scans, per-example gradients (vmap of grad),
// collectives inside shard_map; in_axes/out_axes anywhere; the errors JAX gives.
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
    return jit(shard_map(f, mesh, {P(None, "x")}, {P(None, "x"), P()}))(xs);
  };
  absl::StatusOr<std::vector<Array>> got = run(body), want = run(direct);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ((*got)[r].to_host()->ToDoubles(), (*want)[r].to_host()->ToDoubles()) << r;
  }
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
