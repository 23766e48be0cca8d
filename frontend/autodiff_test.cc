// grad, value_and_grad, jvp and vjp through jit on both backends, against central finite
// differences in f64 (the oracle), over functions that exercise every rule: elementwise and math
// primitives, reductions (ties included), dot_general with batch and several contracting dims,
// and data movement (strided slices, negative and interior padding, concatenation, dynamic
// slices and updates); jvp against vjp (<J v, w> = <v, J^T w>), second derivatives, a sharded
// global-view gradient, and the errors JAX gives.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;
using Fn = std::function<Tracer(const std::vector<Tracer>&)>;

struct Input {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

Input RandomInput(std::vector<int64_t> shape, uint32_t seed, double lo = -1.5, double hi = 1.5) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Input in{std::move(shape), std::vector<double>(n)};
  for (double& v : in.values) v = d(rng);
  return in;
}

class AutodiffTest : public ::testing::TestWithParam<Backend> {
 protected:
  AutodiffTest() : rt_({.num_devices = 1}), mesh_(*make_mesh(rt_, {{"x", 1}})) {}

  Array Put(const Input& in) {
    return *device_put(HostTensor(DType::kF64, in.shape, in.values), NamedSharding(mesh_, P()));
  }

  // f at `inputs` (f64).
  double Eval(const Fn& f, const std::vector<Input>& inputs) {
    std::vector<Array> args;
    for (const Input& in : inputs) args.push_back(Put(in));
    absl::StatusOr<Array> out = jit(f, {.backend = GetParam()}).call(args);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->to_host()->GetDouble(0) : NAN;
  }

  // Checks grad(f) with respect to every input against central differences.
  void ExpectGradMatchesDifferences(const Fn& f, const std::vector<Input>& inputs,
                                    double tol = 1e-6) {
    std::vector<int> argnums;
    for (size_t i = 0; i < inputs.size(); ++i) argnums.push_back(static_cast<int>(i));
    std::vector<Array> args;
    for (const Input& in : inputs) args.push_back(Put(in));
    absl::StatusOr<std::vector<Array>> grads =
        jit(grad(f, argnums), {.backend = GetParam()}).call(args);
    ASSERT_TRUE(grads.ok()) << grads.status();
    ASSERT_EQ(grads->size(), inputs.size());
    const double h = 1e-6;
    for (size_t a = 0; a < inputs.size(); ++a) {
      std::vector<double> got = (*grads)[a].to_host()->ToDoubles();
      ASSERT_EQ(got.size(), inputs[a].values.size());
      for (size_t i = 0; i < got.size(); ++i) {
        std::vector<Input> plus = inputs, minus = inputs;
        plus[a].values[i] += h;
        minus[a].values[i] -= h;
        const double want = (Eval(f, plus) - Eval(f, minus)) / (2 * h);
        EXPECT_NEAR(got[i], want, tol * (1 + std::abs(want)))
            << "d/d input " << a << " element " << i;
      }
    }
  }

  Runtime rt_;
  Mesh mesh_;
};

TEST_P(AutodiffTest, ElementwiseAndMath) {
  ExpectGradMatchesDifferences(
      [](const std::vector<Tracer>& a) {
        Tracer x = a[0], y = a[1];
        Tracer u = lax::sin(x) * lax::exp(y) / (x * x + 1.0) - lax::cos(y) * lax::tanh(x);
        Tracer v = lax::logistic(x) + lax::log1p(y * y) + lax::expm1(x) * lax::erf(y);
        Tracer w = lax::sqrt(x * x + 2.0) + lax::rsqrt(y * y + 1.0) + lax::atan2(x, y + 3.0);
        Tracer z = lax::pow(lax::abs(x) + 0.5, y) + lax::integer_pow(x, 3) + lax::tan(y * 0.5);
        Tracer m = lax::max(x, y) * lax::min(x, -y) + lax::rem(x * 3.0, y + 2.5);
        Tracer e = lax::erf_inv(x * 0.3) + lax::log(y * y + 0.5) - lax::neg(x) + lax::abs(y);
        return lax::reduce_sum(u + v + w + z + m + e, {0, 1});
      },
      {RandomInput({2, 3}, 1), RandomInput({2, 3}, 2)});
}

TEST_P(AutodiffTest, SelectClampConvertAndRounding) {
  ExpectGradMatchesDifferences(
      [](const std::vector<Tracer>& a) {
        Tracer x = a[0], y = a[1];
        Tracer s = lax::select(x > y, x * y, x + y);
        Tracer c = lax::clamp(-0.5, x, 0.7) + lax::clamp(y * 0.1, x, y + 2.0);
        Tracer r = lax::floor(x) * y + lax::round(y) + lax::sign(x) * x;
        return lax::reduce_sum(s + c + r, {0});
      },
      {RandomInput({7}, 3), RandomInput({7}, 4)}, 1e-5);
  // Through f32 and back (finite differences would see f32's rounding): the derivative of
  // sum(f64(f32(x)) * 3) is 3, exactly.
  absl::StatusOr<Array> g = jit(grad([](Tracer x) {
                                  Tracer narrow = lax::convert_element_type(x, DType::kF32);
                                  return lax::reduce_sum(narrow * 3.0, {0});
                                }),
                                {.backend = GetParam()})(Put(RandomInput({4}, 15)));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->dtype(), DType::kF64);
  EXPECT_EQ(g->to_host()->ToDoubles(), (std::vector<double>{3, 3, 3, 3}));
}

TEST_P(AutodiffTest, ReductionsAndDots) {
  ExpectGradMatchesDifferences(
      [](const std::vector<Tracer>& a) {
        Tracer w = a[0], x = a[1], b = a[2];
        // [batch 2, 3, 4] x [batch 2, 4, 5]: batched matmul.
        Tracer y = lax::dot_general(x, w, {.lhs_contracting = {2}, .rhs_contracting = {1},
                                           .lhs_batch = {0}, .rhs_batch = {0}});
        Tracer h = lax::tanh(y + lax::broadcast_in_dim(b, {2, 3, 5}, {2}));
        // Two contracting dims, the rhs transposed.
        Tracer k = lax::dot_general(h, h, {.lhs_contracting = {0, 2}, .rhs_contracting = {0, 2}});
        Tracer mx = lax::reduce_max(h, {1});
        Tracer mn = lax::reduce_min(lax::reshape(h, {6, 5}), {0});
        return lax::reduce_sum(k, {0, 1}) + lax::reduce_sum(mx * mx, {0, 1}) +
               lax::reduce_sum(mn, {0});
      },
      {RandomInput({2, 4, 5}, 5), RandomInput({2, 3, 4}, 6), RandomInput({5}, 7)});
}

TEST_P(AutodiffTest, DataMovement) {
  ExpectGradMatchesDifferences(
      [](const std::vector<Tracer>& a) {
        Tracer x = a[0], p = a[1];
        Tracer s = lax::slice(x, {1, 0}, {6, 4}, {2, 3});                 // [3, 2]
        Tracer padded = lax::pad(x, lax::reshape(p, {}), {{-1, 2, 1}, {1, -1, 0}});
        Tracer t = lax::transpose(lax::rev(x, {0}), {1, 0});              // [4, 6]
        Tracer c = lax::concatenate({x, x * x}, 1);                       // [6, 8]
        Tracer d = lax::dynamic_slice(c, {2, -3}, {3, 2});
        Tracer u = lax::dynamic_update_slice(x, s * 3.0, {1, 1});
        return lax::reduce_sum(lax::sin(padded), {0, 1}) + lax::reduce_sum(t * t, {0, 1}) +
               lax::reduce_sum(d * d, {0, 1}) + lax::reduce_sum(lax::exp(u * 0.5), {0, 1});
      },
      {RandomInput({6, 4}, 8), RandomInput({1}, 9)});
}

TEST_P(AutodiffTest, IndexingSortingAndScans) {
  ExpectGradMatchesDifferences(
      [](const std::vector<Tracer>& a) {
        Tracer table = a[0], u = a[1];
        Tracer ids = lax::convert_element_type(
            lax::rem(lax::broadcasted_iota(DType::kS32, {7}, 0) * 3, lax::full({}, 5, DType::kS32)),
            DType::kS32);  // 0 3 1 4 2 0 3: repeated rows
        Tracer rows = jnp::take(table, ids, 0);                            // [7, 3]
        Tracer added = lax::scatter_add(table, lax::reshape(ids, {7, 1}), rows * u,
                                        {.update_window_dims = {1},
                                         .inserted_window_dims = {0},
                                         .scatter_dims_to_operand_dims = {0}});
        Tracer sorted = lax::sort(lax::sin(added) + lax::reshape(table, {5, 3}), 0);
        auto [top, top_indices] = lax::top_k(lax::reshape(added, {15}) * 1.3, 4);
        Tracer scans = lax::cumsum(table, 1) * lax::cumsum(table, 0, /*reverse=*/true);
        return lax::reduce_sum(lax::exp(sorted * 0.3) * lax::broadcasted_iota(
                                   DType::kF64, {5, 3}, 0), {0, 1}) +
               lax::reduce_sum(top * top, {0}) + lax::reduce_sum(lax::tanh(scans), {0, 1});
      },
      {RandomInput({5, 3}, 23), RandomInput({7, 3}, 24)});
}

// sort's JVP sorts once, the keys with an iota: that sort's other results are the primal ones,
// so the lowered gradient holds one sort (two operands and the permutation), not two.
TEST_P(AutodiffTest, SortIsDifferentiatedWithOneSort) {
  const Fn f = [](const std::vector<Tracer>& a) {
    std::vector<Tracer> s = lax::sort({a[0], lax::sin(a[1])}, 1);
    return lax::reduce_sum(lax::exp(s[0] * 0.3) * s[1], {0, 1});
  };
  ExpectGradMatchesDifferences(f, {RandomInput({3, 7}, 25), RandomInput({3, 7}, 26)});
  absl::StatusOr<LoweredBase> lowered =
      jit(grad(f, {0, 1}), {.backend = GetParam()})
          .lower({Put(RandomInput({3, 7}, 25)), Put(RandomInput({3, 7}, 26))});
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  const std::string text = lowered->as_text();
  int sorts = 0;
  for (size_t at = text.find("= sort["); at != std::string::npos; at = text.find("= sort[", at + 1)) {
    ++sorts;
  }
  EXPECT_EQ(sorts, 1) << text;
}

// scatter (replace) with a position written twice: the winning update's tangent, the operand's
// where nothing was written (jax's rule), against finite differences.
TEST_P(AutodiffTest, ScatterReplace) {
  ExpectGradMatchesDifferences(
      [](const std::vector<Tracer>& a) {
        Tracer table = a[0], u = a[1];
        Tracer ids = lax::reshape(
            lax::rem(lax::broadcasted_iota(DType::kS32, {4}, 0) * 3, lax::full({}, 5, DType::kS32)),
            {4, 1});  // 0 3 1 4
        Tracer dup = lax::concatenate({ids, lax::full({1, 1}, 3, DType::kS32)}, 0);  // 3 twice
        Tracer out = lax::scatter(table, dup, lax::sin(u), {.update_window_dims = {1},
                                                            .inserted_window_dims = {0},
                                                            .scatter_dims_to_operand_dims = {0}});
        return lax::reduce_sum(lax::exp(out * 0.5) * (table + 1.0), {0, 1});
      },
      {RandomInput({6, 3}, 45), RandomInput({5, 3}, 46)});
}

// scatter_mul in its operand (positions hit twice multiply both updates), against finite
// differences; in its updates, JAX's error without unique indices.
TEST_P(AutodiffTest, ScatterMul) {
  auto f = [](const std::vector<Tracer>& a) {
    Tracer ids = lax::reshape(
        lax::rem(lax::broadcasted_iota(DType::kS32, {5}, 0) * 3, lax::full({}, 4, DType::kS32)),
        {5, 1});  // 0 3 2 1 0
    Tracer out = lax::scatter_mul(lax::sin(a[0]), ids, a[1], {.update_window_dims = {1},
                                                              .inserted_window_dims = {0},
                                                              .scatter_dims_to_operand_dims = {0}});
    return lax::reduce_sum(out * out, {0, 1});
  };
  const Input table = RandomInput({5, 3}, 47), updates = RandomInput({5, 3}, 48);
  ExpectGradMatchesDifferences(
      [&](const std::vector<Tracer>& a) {
        return f({a[0], lax::full({5, 3}, 0.0, DType::kF64) + 1.25});
      },
      {table});
  absl::StatusOr<Array> g = jit(grad([&](Tracer t, Tracer u) { return f({t, u}); }, 1),
                                {.backend = GetParam()})(Put(table), Put(updates));
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr("scatter_mul gradients are only implemented if `unique_indices=True`"));
}

// reduce_prod (over several axes, with an exact zero among the factors), cumprod, cummax and
// cummin (forward and reversed), and with_sharding_constraint.
TEST_P(AutodiffTest, ProductsScansAndConstraints) {
  Input x = RandomInput({3, 4, 2}, 41, 0.5, 1.5);
  x.values[5] = 0;  // the product's derivative at a zero factor
  Input y = RandomInput({4, 5}, 42);
  ExpectGradMatchesDifferences(
      [](const std::vector<Tracer>& a) {
        Tracer x = a[0], y = a[1];
        Tracer p = lax::reduce_sum(lax::reduce_prod(x, {0, 2}), {0}) +
                   lax::reduce_sum(lax::reduce_prod(x, {1}), {0, 1});
        Tracer scans = lax::cumprod(y, 1) + lax::cumprod(y, 0, /*reverse=*/true) * 0.5 +
                       lax::cummax(y * 2.0, 1) * lax::cummin(y, 0, /*reverse=*/true);
        Tracer constrained = lax::with_sharding_constraint(lax::sin(y), P());
        return p + lax::reduce_sum(lax::tanh(scans) + constrained * y, {0, 1});
      },
      {x, y});
}

// gmm and tgmm (megablox's rules: gmm with the rhs transposed, tgmm) against the same products
// written with dot_general and row masks (differentiated by dot_general's rules), in f32; group
// sizes with an empty group and rows past their sum, a group offset, transpose_rhs.
TEST_P(AutodiffTest, GroupedMatmulsMatchMaskedDots) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  auto put = [&](std::vector<int64_t> shape, uint32_t seed) {
    return *device_put(HostTensor(DType::kF32, shape, RandomInput(shape, seed).values),
                       NamedSharding(mesh, P()));
  };
  const std::vector<int64_t> sizes = {3, 0, 4, 2};  // rows 9 and 10 of 11 are in no group
  const int64_t m = 11, k = 5, n = 6;
  // The rows of group `g` as a [m, 1] f32 mask.
  auto mask = [&](int64_t g) {
    int64_t start = 0;
    for (int64_t i = 0; i < g; ++i) start += sizes[i];
    Tracer row = lax::broadcasted_iota(DType::kS32, {m, 1}, 0);
    Tracer in = lax::bitwise_and(row >= lax::full({m, 1}, static_cast<double>(start), DType::kS32),
                                 row < lax::full({m, 1}, static_cast<double>(start + sizes[g]),
                                                 DType::kS32));
    return lax::convert_element_type(in, DType::kF32);
  };
  auto group_sizes = [&] {
    std::vector<Tracer> parts;
    for (int64_t s : sizes) parts.push_back(lax::full({1}, static_cast<double>(s), DType::kS32));
    return lax::concatenate(parts, 0);
  };
  auto mm = [](Tracer a, Tracer b) { return jnp::matmul(a, b); };
  // gmm over groups 1..3 (offset 1; rhs [3, k, n], or [3, n, k] transposed), then tgmm of the
  // result's rows against lhs.
  auto with_grouped = [&](bool transposed) {
    return [=](Tracer lhs, Tracer rhs) {
      Tracer offset = lax::full({}, 1, DType::kS32);
      Tracer out = lax::gmm(lhs, rhs, group_sizes(), DType::kF32, offset, transposed);
      Tracer t = lax::tgmm(lax::transpose(lhs, {1, 0}), lax::sin(out), group_sizes(),
                           DType::kF32, offset, 3);  // [3, k, n]
      return lax::reduce_sum(out * out, {0, 1}) + lax::reduce_sum(t * t, {0, 1, 2});
    };
  };
  auto with_masks = [&](bool transposed) {
    return [=](Tracer lhs, Tracer rhs) {
      Tracer out = lax::full({m, n}, 0.0, DType::kF32);
      std::vector<Tracer> t;
      for (int64_t g = 1; g < 4; ++g) {
        Tracer r = lax::reshape(lax::slice(rhs, {g - 1, 0, 0}, {g, rhs.shape()[1], rhs.shape()[2]}),
                                {rhs.shape()[1], rhs.shape()[2]});
        if (transposed) r = lax::transpose(r, {1, 0});
        Tracer rows = lax::broadcast_in_dim(mask(g), {m, k}, {0, 1});
        out = out + mm(lhs * rows, r);
      }
      for (int64_t g = 1; g < 4; ++g) {
        Tracer rows = lax::broadcast_in_dim(mask(g), {m, k}, {0, 1});
        t.push_back(lax::reshape(mm(lax::transpose(lhs * rows, {1, 0}), lax::sin(out)),
                                 {1, k, n}));
      }
      Tracer tt = lax::concatenate(t, 0);
      return lax::reduce_sum(out * out, {0, 1}) + lax::reduce_sum(tt * tt, {0, 1, 2});
    };
  };
  for (bool transposed : {false, true}) {
    SCOPED_TRACE(transposed ? "transpose_rhs" : "rhs");
    Array lhs = put({m, k}, 43);
    Array rhs = put(transposed ? std::vector<int64_t>{3, n, k} : std::vector<int64_t>{3, k, n}, 44);
    absl::StatusOr<std::vector<Array>> got =
        jit(grad(with_grouped(transposed), {0, 1}), {.backend = GetParam()})(lhs, rhs);
    absl::StatusOr<std::vector<Array>> want =
        jit(grad(with_masks(transposed), {0, 1}), {.backend = GetParam()})(lhs, rhs);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    for (int a = 0; a < 2; ++a) {
      std::vector<double> g = (*got)[a].to_host()->ToDoubles();
      std::vector<double> w = (*want)[a].to_host()->ToDoubles();
      ASSERT_EQ(g.size(), w.size());
      for (size_t i = 0; i < g.size(); ++i) {
        EXPECT_NEAR(g[i], w[i], 1e-4 * (1 + std::abs(w[i]))) << "operand " << a << " " << i;
      }
    }
  }
}

// Loops and branches the differentiated inputs do not reach, reading values the function
// computed (captured): re-emitted with those values.
TEST_P(AutodiffTest, RegionsReadingTheFunctionsValues) {
  ExpectGradMatchesDifferences(
      [](const std::vector<Tracer>& a) {
        Tracer x = a[0];
        Tracer y = lax::full({3}, 0.5, DType::kF64) * 2.0;  // computed inside f, no tangent
        Tracer loop = lax::fori_loop(0, 3, [&](Tracer, Tracer c) { return c + y; }, y);
        Tracer pick = lax::cond(lax::full({}, 1, DType::kS32) > lax::full({}, 0, DType::kS32),
                                [&](std::vector<Tracer> o) { return std::vector<Tracer>{o[0] * y}; },
                                [&](std::vector<Tracer> o) { return std::vector<Tracer>{o[0] - y}; },
                                {loop})[0];
        return lax::reduce_sum(x * pick, {0});
      },
      {RandomInput({3}, 25)});
}

// fori_loop and scan (a fori_loop): carries, values the body reads from outside (a weight used
// every trip), the loop index, nested loops, and a loop that runs no trip.
TEST_P(AutodiffTest, ThroughLoops) {
  ExpectGradMatchesDifferences(
      [](const std::vector<Tracer>& a) {
        Tracer x = a[0], w = a[1];
        Tracer k = lax::full({1, 4}, 0.3, DType::kF64) * 1.5;  // read by the body, no tangent
        // h = tanh(h @ w + x[i] + k) for 3 trips, reading w, x and k from outside.
        Tracer h = lax::fori_loop(
            0, 3,
            [&](Tracer i, Tracer h) {
              Tracer row = lax::reshape(lax::dynamic_slice(x, {i, 0}, {1, 4}), {1, 4});
              return lax::tanh(jnp::matmul(h, w) + row + k * h);
            },
            lax::full({1, 4}, 0.1, DType::kF64));
        // A nested loop: two carries, one integer.
        std::vector<Tracer> nested = lax::fori_loop(
            1, 3,
            [&](Tracer i, std::vector<Tracer> c) {
              Tracer inner = lax::fori_loop(
                  0, 2, [&](Tracer, Tracer d) { return d * lax::sin(w) + c[0] * 0.5; }, c[0]);
              return std::vector<Tracer>{inner, c[1] + i};
            },
            {w, lax::full({}, 0, DType::kS32)});
        Tracer none = lax::fori_loop(2, 2, [&](Tracer, Tracer c) { return c * w; }, w);
        // scan: carry c and stacked outputs over x's rows.
        lax::ScanResult s = lax::scan(
            [&](std::vector<Tracer> c, std::vector<Tracer> xs) {
              Tracer next = c[0] * 0.9 + xs[0] * xs[0];
              return std::pair<std::vector<Tracer>, std::vector<Tracer>>{{next}, {next * 2.0}};
            },
            {lax::full({4}, 0.0, DType::kF64)}, {x});
        return lax::reduce_sum(h, {0, 1}) + lax::reduce_sum(nested[0] * nested[0], {0, 1}) +
               lax::reduce_sum(none, {0, 1}) + lax::reduce_sum(s.ys[0], {0, 1}) +
               lax::reduce_sum(s.carry[0], {0});
      },
      {RandomInput({3, 4}, 26), RandomInput({4, 4}, 27, -0.5, 0.5)});
}

// cond and switch: the branch the data picks, branches of different residuals, reading a
// differentiated value and a plain one from outside.
TEST_P(AutodiffTest, ThroughBranches) {
  ExpectGradMatchesDifferences(
      [](const std::vector<Tracer>& a) {
        Tracer x = a[0], w = a[1];
        Tracer k = lax::full({4}, 0.25, DType::kF64) * 2.0;
        auto pick = [&](Tracer pred) {
          return lax::cond(
              pred,
              [&](std::vector<Tracer> o) {
                return std::vector<Tracer>{lax::sin(o[0]) * w + k, o[1] * 2.0};
              },
              [&](std::vector<Tracer> o) {
                return std::vector<Tracer>{o[0] * o[0] * lax::exp(w), o[1] - k};
              },
              {x, w});
        };
        std::vector<Tracer> yes = pick(lax::reduce_sum(x, {0}) > lax::full({}, -100.0, DType::kF64));
        std::vector<Tracer> no = pick(lax::reduce_sum(x, {0}) > lax::full({}, 100.0, DType::kF64));
        std::vector<Tracer> sw = lax::switch_(
            lax::full({}, 2, DType::kS32),
            {[&](std::vector<Tracer> o) { return std::vector<Tracer>{o[0]}; },
             [&](std::vector<Tracer> o) { return std::vector<Tracer>{o[0] * w}; },
             [&](std::vector<Tracer> o) { return std::vector<Tracer>{lax::tanh(o[0] * x)}; }},
            {w});
        return lax::reduce_sum(yes[0] * yes[1] + no[0] * no[1] + sw[0], {0});
      },
      {RandomInput({4}, 28), RandomInput({4}, 29)});
}

// Forward mode through while_loop (JAX has no reverse mode for it): the tangent against central
// differences along a direction.
TEST_P(AutodiffTest, JvpThroughWhileLoop) {
  auto f = [](Tracer x, Tracer w) {
    std::vector<Tracer> out = lax::while_loop(
        [](std::vector<Tracer> c) { return c[0] < lax::full({}, 4, DType::kS32); },
        [&](std::vector<Tracer> c) {
          return std::vector<Tracer>{c[0] + 1, lax::tanh(c[1] * w + x)};
        },
        {lax::full({}, 0, DType::kS32), x});
    return lax::reduce_sum(out[1] * out[1], {0});
  };
  const Input x = RandomInput({5}, 30), w = RandomInput({5}, 31), dx = RandomInput({5}, 32),
              dw = RandomInput({5}, 33);
  absl::StatusOr<Array> t = jit(
      [f](Tracer x, Tracer w, Tracer dx, Tracer dw) {
        return jvp(f, {x, w}, {dx, dw}).tangents_out[0];
      },
      {.backend = GetParam()})(Put(x), Put(w), Put(dx), Put(dw));
  ASSERT_TRUE(t.ok()) << t.status();
  const double h = 1e-6;
  Input xp = x, xm = x, wp = w, wm = w;
  for (size_t i = 0; i < 5; ++i) {
    xp.values[i] += h * dx.values[i];
    xm.values[i] -= h * dx.values[i];
    wp.values[i] += h * dw.values[i];
    wm.values[i] -= h * dw.values[i];
  }
  auto eval = [&](const Input& a, const Input& b) {
    return jit(f, {.backend = GetParam()})(Put(a), Put(b))->to_host()->GetDouble(0);
  };
  const double want = (eval(xp, wp) - eval(xm, wm)) / (2 * h);
  EXPECT_NEAR(t->to_host()->GetDouble(0), want, 1e-6 * (1 + std::abs(want)));
}

// <J v, w> = <v, J^T w> on a function with a vector result, and grad(grad(f)) against the
// analytic second derivative.
TEST_P(AutodiffTest, JvpAgreesWithVjpAndSecondDerivatives) {
  auto f = [](const std::vector<Tracer>& a) {
    Tracer x = a[0];
    Tracer y = lax::dot_general(x, x, {.lhs_contracting = {1}, .rhs_contracting = {1}});
    return std::vector<Tracer>{lax::sin(y) + lax::reduce_sum(x, {1}) * 2.0};
  };
  const Input x = RandomInput({3, 4}, 10), v = RandomInput({3, 4}, 11), w = RandomInput({3, 3}, 12);
  absl::StatusOr<std::vector<Array>> out = jit(
      [f](Tracer x, Tracer v, Tracer w) {
        JvpOut j = jvp(f, {x}, {v});
        VjpOut p = vjp(f, {x});
        std::vector<Tracer> back = p.pullback({w});
        return std::vector<Tracer>{lax::reduce_sum(j.tangents_out[0] * w, {0, 1}),
                                   lax::reduce_sum(v * back[0], {0, 1}),
                                   lax::reduce_sum(j.primals_out[0] - p.primals_out[0], {0, 1})};
      },
      {.backend = GetParam()})(Put(x), Put(v), Put(w));
  ASSERT_TRUE(out.ok()) << out.status();
  const double jv_w = (*out)[0].to_host()->GetDouble(0);
  EXPECT_NEAR(jv_w, (*out)[1].to_host()->GetDouble(0), 1e-12 * (1 + std::abs(jv_w)));
  EXPECT_EQ((*out)[2].to_host()->GetDouble(0), 0.0);

  // d2/dx2 of sin(x) * x^3 = -sin x * x^3 + 6 x^2 cos x + 6 x sin x.
  auto g = [](Tracer x) { return lax::sin(x) * lax::integer_pow(x, 3); };
  const Input s{{}, {0.7}};
  absl::StatusOr<Array> second = jit(grad(grad(g)), {.backend = GetParam()})(Put(s));
  ASSERT_TRUE(second.ok()) << second.status();
  const double z = 0.7;
  EXPECT_NEAR(second->to_host()->GetDouble(0),
              -std::sin(z) * z * z * z + 6 * z * z * std::cos(z) + 6 * z * std::sin(z), 1e-12);
}

TEST_P(AutodiffTest, ValueAndGradWithAuxiliaryOutputs) {
  const Input x = RandomInput({5}, 13);
  absl::StatusOr<std::vector<Array>> out =
      jit(value_and_grad(
              [](const std::vector<Tracer>& a) {
                Tracer loss = lax::reduce_sum(a[0] * a[0] * a[1], {0});
                return std::vector<Tracer>{loss, a[0] + 1.0};
              },
              {0}, /*has_aux=*/true),
          {.backend = GetParam()})(Put(x), Put(x));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  double loss = 0;
  for (size_t i = 0; i < 5; ++i) {
    loss += x.values[i] * x.values[i] * x.values[i];
    EXPECT_NEAR((*out)[1].to_host()->GetDouble(i), 2 * x.values[i] * x.values[i], 1e-12);
    EXPECT_EQ((*out)[2].to_host()->GetDouble(i), x.values[i] + 1.0);
  }
  EXPECT_NEAR((*out)[0].to_host()->GetDouble(0), loss, 1e-12);
}

// A global-view gradient of an array sharded over 2 devices: the backward ops are partitioned
// like the forward ones.
TEST_P(AutodiffTest, ShardedGlobalViewGradient) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  const Input x = RandomInput({8, 3}, 14);
  Array xs = *device_put(HostTensor(DType::kF32, x.shape, x.values), NamedSharding(mesh, P("x")));
  absl::StatusOr<Array> g = jit(grad([](Tracer x) {
                                  return lax::reduce_sum(lax::sin(x) * x, {0, 1});
                                }),
                                {.backend = GetParam()})(xs);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<double> got = g->to_host()->ToDoubles();
  for (size_t i = 0; i < got.size(); ++i) {
    const double v = static_cast<float>(x.values[i]);
    EXPECT_NEAR(got[i], std::cos(v) * v + std::sin(v), 1e-5) << i;
  }
}

// grad inside shard_map on a 2x2 mesh through every linear collective. With psum transposing
// to psum (jax.lax's psum_p, check_vma=False), the gradient each device computes is that of the
// sum over devices of their losses: the oracle differentiates that sum by finite differences.
TEST(AutodiffCollectives, GradInsideShardMapMatchesDifferences) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  auto loss = [](Tracer x) {  // x: the local [2, 4] block
    Tracer a = lax::psum(lax::sin(x), "x");
    Tracer b = lax::all_gather(x * x, "y", 1, /*tiled=*/true);               // [2, 8]
    Tracer c = lax::psum_scatter(b, "x", 1, /*tiled=*/true);                 // [2, 4]
    Tracer d = lax::ppermute(x, "y", {{0, 1}, {1, 0}});
    Tracer e = lax::all_to_all(lax::exp(x * 0.5), "x", 0, 1, /*tiled=*/true);  // [1, 8]
    Tracer f = lax::pbroadcast(x * 3.0, "y", 1) + lax::pmean(x, {"x", "y"}) +
               lax::pmax(lax::sin(x), "x") - lax::pmin(x * x, {"x", "y"});
    return lax::reduce_sum(a * c + d * x + f * f, {0, 1}) + lax::reduce_sum(e * e, {0, 1});
  };
  auto stacked_loss = [loss](Tracer x) { return lax::reshape(loss(x), {1}); };
  const Input x0 = RandomInput({4, 8}, 16);
  auto put = [&](const Input& in) {
    return *device_put(HostTensor(DType::kF64, in.shape, in.values),
                       NamedSharding(mesh, P("x", "y")));
  };
  for (Backend backend : {Backend::kX86, Backend::kReference}) {
    auto total = [&](const Input& in) {  // the sum of the four devices' losses
      absl::StatusOr<Array> per_device =
          jit(shard_map(stacked_loss, mesh, {P("x", "y")}, {P(Axes{"x", "y"})}, /*check_vma=*/false),
              {.backend = backend})(
              put(in));
      EXPECT_TRUE(per_device.ok()) << per_device.status();
      double sum = 0;
      for (double v : per_device->to_host()->ToDoubles()) sum += v;
      return sum;
    };
    absl::StatusOr<Array> g =
        jit(shard_map(grad(loss), mesh, {P("x", "y")}, {P("x", "y")}, /*check_vma=*/false), {.backend = backend})(
            put(x0));
    ASSERT_TRUE(g.ok()) << g.status();
    std::vector<double> got = g->to_host()->ToDoubles();
    const double h = 1e-6;
    for (size_t i = 0; i < got.size(); ++i) {
      Input plus = x0, minus = x0;
      plus.values[i] += h;
      minus.values[i] -= h;
      const double want = (total(plus) - total(minus)) / (2 * h);
      EXPECT_NEAR(got[i], want, 1e-6 * (1 + std::abs(want))) << "element " << i;
    }
  }
}

// grad and jvp of a global-view program through shard_map: a tensor- and data-parallel MLP
// (Megatron's column/row split over y, batch over x) on 2x2, against finite differences of the
// whole program.
TEST(AutodiffCollectives, GradOfShardMapMatchesDifferences) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  auto body = [](Tracer x, Tracer w1, Tracer w2) {
    Tracer h = lax::tanh(jnp::matmul(x, w1));
    Tracer y = lax::psum(jnp::matmul(h, w2), "y");
    return lax::psum(lax::reduce_sum(y * y, {0, 1}), "x");
  };
  auto program = shard_map(body, mesh, {P("x", None), P(None, "y"), P("y", None)}, {P()});
  const std::vector<Input> inputs = {RandomInput({8, 4}, 17), RandomInput({4, 6}, 18, -0.8, 0.8),
                                     RandomInput({6, 4}, 19, -0.8, 0.8)};
  const std::vector<PartitionSpec> specs = {P("x", None), P(None, "y"), P("y", None)};
  auto put = [&](const std::vector<Input>& in) {
    std::vector<Array> args;
    for (size_t i = 0; i < in.size(); ++i) {
      args.push_back(*device_put(HostTensor(DType::kF64, in[i].shape, in[i].values),
                                 NamedSharding(mesh, specs[i])));
    }
    return args;
  };
  for (Backend backend : {Backend::kX86, Backend::kReference}) {
    auto eval = [&](const std::vector<Input>& in) {
      absl::StatusOr<Array> out = jit(program, {.backend = backend}).call(put(in));
      EXPECT_TRUE(out.ok()) << out.status();
      return out.ok() ? out->to_host()->GetDouble(0) : NAN;
    };
    absl::StatusOr<std::vector<Array>> grads =
        jit(grad(program, {0, 1, 2}), {.backend = backend}).call(put(inputs));
    ASSERT_TRUE(grads.ok()) << grads.status();
    const double h = 1e-6;
    for (size_t a = 0; a < inputs.size(); ++a) {
      std::vector<double> got = (*grads)[a].to_host()->ToDoubles();
      for (size_t i = 0; i < got.size(); ++i) {
        std::vector<Input> plus = inputs, minus = inputs;
        plus[a].values[i] += h;
        minus[a].values[i] -= h;
        const double want = (eval(plus) - eval(minus)) / (2 * h);
        EXPECT_NEAR(got[i], want, 1e-6 * (1 + std::abs(want))) << "input " << a << " element " << i;
      }
    }
    // Forward mode along one direction.
    const std::vector<Input> dir = {RandomInput({8, 4}, 20), RandomInput({4, 6}, 21),
                                    RandomInput({6, 4}, 22)};
    std::vector<Array> args = put(inputs), tangents = put(dir);
    args.insert(args.end(), tangents.begin(), tangents.end());
    absl::StatusOr<Array> jv = jit(
        [program](const std::vector<Tracer>& a) {
          return jvp(program, {a[0], a[1], a[2]}, {a[3], a[4], a[5]}).tangents_out[0];
        },
        {.backend = backend}).call(args);
    ASSERT_TRUE(jv.ok()) << jv.status();
    std::vector<Input> plus = inputs, minus = inputs;
    for (size_t a = 0; a < inputs.size(); ++a) {
      for (size_t i = 0; i < inputs[a].values.size(); ++i) {
        plus[a].values[i] += h * dir[a].values[i];
        minus[a].values[i] -= h * dir[a].values[i];
      }
    }
    const double want = (eval(plus) - eval(minus)) / (2 * h);
    EXPECT_NEAR(jv->to_host()->GetDouble(0), want, 1e-6 * (1 + std::abs(want)));
  }
}

TEST(AutodiffErrors, AsJaxGivesThem) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(DType::kF32, {3}, {3, 1, 2}), NamedSharding(mesh, P()));
  Array i = *device_put(HostTensor(DType::kS32, {3}, {3, 1, 2}), NamedSharding(mesh, P()));
  auto message = [](const absl::Status& s) { return std::string(s.message()); };
  EXPECT_THAT(message(jit(grad([](Tracer x) {
                        return lax::reduce_sum(lax::nextafter(x, x * 2.0), {0});
                      }))(x).status()),
              HasSubstr("Differentiation rule for 'nextafter' not implemented"));
  // Reverse mode through a while_loop: JAX's error (forward mode works: JvpThroughWhileLoop).
  EXPECT_THAT(message(jit(grad([](Tracer x) {
                        std::vector<Tracer> s = lax::while_loop(
                            [](std::vector<Tracer> c) {
                              return c[0] < lax::full({}, 3, DType::kS32);
                            },
                            [&](std::vector<Tracer> c) {
                              return std::vector<Tracer>{c[0] + 1, c[1] + x};
                            },
                            {lax::full({}, 0, DType::kS32), lax::full({3}, 0, DType::kF32)});
                        return lax::reduce_sum(s[1], {0});
                      }))(x).status()),
              HasSubstr("Reverse-mode differentiation does not work for lax.while_loop"));
  EXPECT_THAT(message(jit(grad([](Tracer x) { return x * 2.0; }))(x).status()),
              HasSubstr("Gradient only defined for scalar-output functions. Output had shape: "
                        "f32[3]"));
  EXPECT_THAT(message(jit(grad([](Tracer i) { return lax::reduce_sum(i, {0}); }))(i).status()),
              HasSubstr("grad requires real-valued inputs"));
  EXPECT_THAT(message(jit([](Tracer x) {
                        return jvp([](Tracer a) { return a; }, {x}, {x * 2.0 + 1}).tangents_out;
                      })(x).status()),
              Not(HasSubstr("jvp")));
  EXPECT_THAT(message(jit([](Tracer x) {
                        Tracer wrong = lax::convert_element_type(x, DType::kF64);
                        return jvp([](Tracer a) { return a; }, {x}, {wrong}).tangents_out;
                      })(x).status()),
              HasSubstr("jvp: primal and tangent arguments do not match: primal 0 is f32[3] but "
                        "its tangent is f64[3]"));
}

INSTANTIATE_TEST_SUITE_P(Backends, AutodiffTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

}  // namespace
}  // namespace shardjit
