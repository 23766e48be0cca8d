// custom_jvp, custom_vjp, checkpoint and linearize through jit on both backends: the rules are
// what differentiation uses (hand-derived values where the rule differs from the function's
// derivative, f64 central differences where it agrees), under grad, vjp, jvp, grad of grad,
// vmap (against a loop over the batch) and inside shard_map and fori_loop; checkpoint's
// backward pass recomputes behind an optimization_barrier (the staged ops say so); JAX's errors.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;

std::vector<double> Random(size_t n, uint32_t seed, double lo = -1.5, double hi = 1.5) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

class CustomDerivativesTest : public ::testing::TestWithParam<Backend> {
 protected:
  CustomDerivativesTest() : rt_({.num_devices = 1}), mesh_(*make_mesh(rt_, {{"x", 1}})) {}

  Array Put(std::vector<int64_t> shape, std::vector<double> values, DType dtype = DType::kF64) {
    return *device_put(HostTensor(dtype, std::move(shape), std::move(values)),
                       NamedSharding(mesh_, P()));
  }
  JitOptions Options() const { return {.backend = GetParam()}; }

  // Central differences of the scalar function f at x (f64), along every element.
  template <typename F>
  std::vector<double> Differences(F f, const std::vector<int64_t>& shape,
                                  const std::vector<double>& x) {
    auto eval = [&](const std::vector<double>& v) {
      absl::StatusOr<Array> out = jit(f, Options())(Put(shape, v));
      EXPECT_TRUE(out.ok()) << out.status();
      return out.ok() ? out->to_host()->GetDouble(0) : NAN;
    };
    std::vector<double> out;
    const double h = 1e-6;
    for (size_t i = 0; i < x.size(); ++i) {
      std::vector<double> plus = x, minus = x;
      plus[i] += h;
      minus[i] -= h;
      out.push_back((eval(plus) - eval(minus)) / (2 * h));
    }
    return out;
  }

  Runtime rt_;
  Mesh mesh_;
};

// JAX's documentation example: log(1 + exp(x)) with a stable derivative.
auto Log1pExp() {
  return custom_jvp(
      [](Tracer x) { return lax::log1p(lax::exp(x)); },
      [](const std::vector<Tracer>& p, const std::vector<Tracer>& t) {
        Tracer x = p[0];
        Tracer ans = lax::log1p(lax::exp(x));
        return JvpOut{{ans}, {(1.0 - 1.0 / (1.0 + lax::exp(x))) * t[0]}};
      });
}

TEST_P(CustomDerivativesTest, CustomJvpRuleGivesTheDerivatives) {
  auto f = Log1pExp();
  Array x = Put({4}, {0, 1, -3, 100}, DType::kF32);
  // The function itself runs unchanged; without the rule the derivative at 100 is inf/inf.
  absl::StatusOr<Array> y = jit(f, Options())(x);
  ASSERT_TRUE(y.ok()) << y.status();
  absl::StatusOr<Array> g =
      jit(grad([f](Tracer x) { return lax::reduce_sum(f({x}), {0}); }), Options())(x);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<double> got = g->to_host()->ToDoubles();
  const std::vector<double> xs = {0, 1, -3, 100};
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(got[i], 1 / (1 + std::exp(-xs[i])), 1e-6) << xs[i];
  }
  absl::StatusOr<Array> naive = jit(grad([](Tracer x) {
                                      return lax::reduce_sum(lax::log1p(lax::exp(x)), {0});
                                    }),
                                    Options())(x);
  ASSERT_TRUE(naive.ok());
  EXPECT_TRUE(std::isnan(naive->to_host()->ToDoubles()[3]));
  // Forward mode and linearize use the rule too; the second derivative differentiates it.
  absl::StatusOr<std::vector<Array>> forward = jit(
      [f](Tracer x) {
        JvpOut a = jvp(f, {x}, {x * 0.0 + 2.0});
        LinearizeOut l = linearize(f, {x});
        return std::vector<Tracer>{a.tangents_out[0], l.jvp({x * 0.0 + 2.0})[0],
                                   l.jvp({x * 0.0 - 1.0})[0], l.primals_out[0]};
      },
      Options())(x);
  ASSERT_TRUE(forward.ok()) << forward.status();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double d = 1 / (1 + std::exp(-xs[i]));
    EXPECT_NEAR((*forward)[0].to_host()->ToDoubles()[i], 2 * d, 1e-6);
    EXPECT_NEAR((*forward)[1].to_host()->ToDoubles()[i], 2 * d, 1e-6);
    EXPECT_NEAR((*forward)[2].to_host()->ToDoubles()[i], -d, 1e-6);
  }
  EXPECT_EQ((*forward)[3].to_host()->ToDoubles(), y->to_host()->ToDoubles());
  absl::StatusOr<Array> g2 = jit(grad([f](Tracer x) {
                                   return lax::reduce_sum(
                                       grad([f](Tracer v) { return lax::reduce_sum(f({v}), {0}); })(
                                           {x}),
                                       {0});
                                 }),
                                 Options())(Put({3}, {0, 1, -2}));
  // d/dx sigmoid(x) = sigmoid(x) (1 - sigmoid(x)), here through the rule's expression.
  ASSERT_TRUE(g2.ok()) << g2.status();
  const std::vector<double> x2 = {0, 1, -2};
  for (size_t i = 0; i < x2.size(); ++i) {
    const double s = 1 / (1 + std::exp(-x2[i]));
    EXPECT_NEAR(g2->to_host()->ToDoubles()[i], s * (1 - s), 1e-12);
  }
}

TEST_P(CustomDerivativesTest, CustomJvpRuleIsUsedNotTheFunction) {
  // A rule that is not the function's derivative shows which one differentiation used: grad of
  // sum(f(x, n)) with the rule's tangent 3 t_x is 3 everywhere; the s32 input gets zeros.
  auto f = custom_jvp(
      [](Tracer x, Tracer n) { return lax::sin(x) * lax::convert_element_type(n, DType::kF64); },
      [](const std::vector<Tracer>& p, const std::vector<Tracer>& t) {
        EXPECT_EQ(t[1].dtype(), DType::kS32);
        Tracer out = lax::sin(p[0]) * lax::convert_element_type(p[1], DType::kF64);
        return JvpOut{{out}, {t[0] * 3.0}};
      });
  Array x = Put({5}, Random(5, 1));
  Array n = Put({5}, {1, 2, 3, 4, 5}, DType::kS32);
  absl::StatusOr<Array> g = jit(
      [f](Tracer x, Tracer n) {
        return grad([f, n](Tracer v) { return lax::reduce_sum(f({v, n}), {0}); })({x});
      },
      Options())(x, n);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->to_host()->ToDoubles(), std::vector<double>(5, 3.0));
  // vmap of it, then grad: the batched rule is still the rule.
  Array xs = Put({3, 5}, Random(15, 2));
  absl::StatusOr<Array> gv = jit(
      [f](Tracer xs, Tracer n) {
        return grad([f, n](Tracer v) {
          Tracer per_row = vmap([f, n](Tracer row) { return f({row, n}); })({v});
          return lax::reduce_sum(per_row, {0, 1});
        })({xs});
      },
      Options())(xs, n);
  ASSERT_TRUE(gv.ok()) << gv.status();
  EXPECT_EQ(gv->to_host()->ToDoubles(), std::vector<double>(15, 3.0));
  // vmap alone computes the function row by row.
  absl::StatusOr<Array> batched =
      jit([f](Tracer xs, Tracer n) { return vmap([f, n](Tracer r) { return f({r, n}); })({xs}); },
          Options())(xs, n);
  ASSERT_TRUE(batched.ok()) << batched.status();
  const std::vector<double> xv = xs.to_host()->ToDoubles();
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_NEAR(batched->to_host()->ToDoubles()[i],
                std::sin(xv[i]) * static_cast<double>(i % 5 + 1), 1e-12);
  }
}

// JAX's documentation example: the identity, with the cotangent clipped to [lo, hi].
auto ClipGradient(double lo, double hi) {
  return custom_vjp(
      [](Tracer x) { return x; },
      [](const std::vector<Tracer>& p) { return VjpFwdOut{{p[0]}, {}}; },
      [lo, hi](const std::vector<Tracer>&, const std::vector<Tracer>& ct) {
        return std::vector<Tracer>{lax::clamp(lo, ct[0], hi)};
      });
}

TEST_P(CustomDerivativesTest, CustomVjpRulesGiveTheGradient) {
  auto clip = ClipGradient(-0.75, 0.75);
  const std::vector<double> xv = Random(6, 3);
  Array x = Put({6}, xv);
  absl::StatusOr<Array> g = jit(grad([clip](Tracer x) {
                                  return lax::reduce_sum(clip({lax::sin(x) * 3.0}), {0});
                                }),
                                Options())(x);
  ASSERT_TRUE(g.ok()) << g.status();
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_NEAR(g->to_host()->ToDoubles()[i], 0.75 * 3 * std::cos(xv[i]), 1e-12);
  }
  // Residuals from fwd, and an input cotangent left to zeros (an invalid Tracer, JAX's None).
  auto f = custom_vjp(
      [](Tracer x, Tracer y) { return lax::sin(x) * y; },
      [](const std::vector<Tracer>& p) {
        return VjpFwdOut{{lax::sin(p[0]) * p[1]}, {lax::cos(p[0]), lax::sin(p[0]), p[1]}};
      },
      [](const std::vector<Tracer>& r, const std::vector<Tracer>& ct) {
        return std::vector<Tracer>{ct[0] * r[0] * r[2], Tracer()};
      });
  Array y = Put({6}, Random(6, 4));
  absl::StatusOr<std::vector<Array>> gs = jit(
      [f](Tracer x, Tracer y) {
        return grad([f](Tracer a, Tracer b) { return lax::reduce_sum(f({a, b}) * a, {0}); },
                    {0, 1})({x, y});
      },
      Options())(x, y);
  ASSERT_TRUE(gs.ok()) << gs.status();
  const std::vector<double> yv = y.to_host()->ToDoubles();
  for (size_t i = 0; i < xv.size(); ++i) {
    // d/dx (sin(x) y x) = cos(x) y x + sin(x) y; the rule gives y nothing through f.
    EXPECT_NEAR((*gs)[0].to_host()->ToDoubles()[i],
                std::cos(xv[i]) * yv[i] * xv[i] + std::sin(xv[i]) * yv[i], 1e-12);
    EXPECT_NEAR((*gs)[1].to_host()->ToDoubles()[i], 0.0, 0);
  }
}

TEST_P(CustomDerivativesTest, GradOfGradDifferentiatesTheBwdRule) {
  // f(x) = x^3 whose bwd is ct * 3 x^2 from the residual x: the second derivative is 6 x.
  auto cube = custom_vjp(
      [](Tracer x) { return x * x * x; },
      [](const std::vector<Tracer>& p) { return VjpFwdOut{{p[0] * p[0] * p[0]}, {p[0]}}; },
      [](const std::vector<Tracer>& r, const std::vector<Tracer>& ct) {
        return std::vector<Tracer>{ct[0] * 3.0 * r[0] * r[0]};
      });
  auto dcube = [cube](Tracer x) {
    return lax::reduce_sum(grad([cube](Tracer v) { return lax::reduce_sum(cube({v}), {0}); })({x}),
                           {0});
  };
  const std::vector<double> xv = {0.5, -1.25, 2};
  absl::StatusOr<Array> g2 = jit(grad(dcube), Options())(Put({3}, xv));
  ASSERT_TRUE(g2.ok()) << g2.status();
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_NEAR(g2->to_host()->ToDoubles()[i], 6 * xv[i], 1e-12);
  }
}

TEST_P(CustomDerivativesTest, VmapOfCustomVjpSumsTheCotangentsOfUnbatchedInputs) {
  // f(w, x) = sum(w * x) with the true rule; vmapped over x only, grad with respect to w is the
  // sum over the batch of each element's cotangent: 2 * sum_b x_b (through the loss below).
  auto f = custom_vjp(
      [](Tracer w, Tracer x) { return lax::reduce_sum(w * x, {0}); },
      [](const std::vector<Tracer>& p) {
        return VjpFwdOut{{lax::reduce_sum(p[0] * p[1], {0})}, {p[0], p[1]}};
      },
      [](const std::vector<Tracer>& r, const std::vector<Tracer>& ct) {
        Tracer c = lax::broadcast_in_dim(ct[0], r[0].shape(), {});
        return std::vector<Tracer>{c * r[1], c * r[0]};
      });
  const std::vector<double> wv = Random(4, 5), xv = Random(12, 6);
  absl::StatusOr<std::vector<Array>> g = jit(
      [f](Tracer w, Tracer xs) {
        return grad(
            [f](Tracer w, Tracer xs) {
              Tracer per_row = vmap([f, w](Tracer x) { return f({w, x}); })({xs});  // [3]
              return lax::reduce_sum(per_row * per_row, {0});
            },
            {0, 1})({w, xs});
      },
      Options())(Put({4}, wv), Put({3, 4}, xv));
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<double> gw(4, 0.0), gx(12, 0.0);
  for (int b = 0; b < 3; ++b) {
    double s = 0;
    for (int j = 0; j < 4; ++j) s += wv[j] * xv[b * 4 + j];
    for (int j = 0; j < 4; ++j) {
      gw[j] += 2 * s * xv[b * 4 + j];
      gx[b * 4 + j] = 2 * s * wv[j];
    }
  }
  for (int j = 0; j < 4; ++j) EXPECT_NEAR((*g)[0].to_host()->ToDoubles()[j], gw[j], 1e-12);
  for (int j = 0; j < 12; ++j) EXPECT_NEAR((*g)[1].to_host()->ToDoubles()[j], gx[j], 1e-12);
}

// The number of `opcode` ops in the module after canonicalize (common subexpressions merged).
int CountAfterCanonicalize(const LoweredBase& lowered, const std::string& opcode) {
  std::string text;
  for (const passes::StageRecord& s : lowered.stages()) {
    if (s.text != "(unchanged)") text = s.text;
    if (s.pass == "canonicalize") break;
  }
  int count = 0;
  for (size_t at = text.find("= " + opcode); at != std::string::npos;
       at = text.find("= " + opcode, at + 1)) {
    const char next = text[at + 2 + opcode.size()];
    count += next == ' ' || next == '[';  // the op itself, not another one it prefixes
  }
  return count;
}

TEST_P(CustomDerivativesTest, CheckpointRecomputesInTheBackwardPass) {
  auto body = [](Tracer x, Tracer w) { return lax::sin(lax::sin(jnp::matmul(x, w))); };
  auto loss = [](auto inner) {
    return [inner](Tracer x, Tracer w) { return lax::reduce_sum(inner(x, w), {0, 1}); };
  };
  auto remat_body = [body](CheckpointOptions o) {
    return [body, o](Tracer x, Tracer w) { return checkpoint(body, o)({x, w}); };
  };
  Array x = Put({3, 5}, Random(15, 7)), w = Put({5, 2}, Random(10, 8));
  std::vector<std::vector<double>> grads;
  std::vector<int> sines, barriers, dots;
  for (const auto& f : std::vector<std::function<Tracer(Tracer, Tracer)>>{
           loss(body), loss(remat_body({})), loss(remat_body({.prevent_cse = false})),
           loss(remat_body({.policy = CheckpointPolicy::kEverythingSaveable})),
           loss(remat_body({.policy = CheckpointPolicy::kDotsSaveable})),
           loss(remat_body({.policy = CheckpointPolicy::kDotsWithNoBatchDimsSaveable}))}) {
    auto g = jit(value_and_grad(f, {0, 1}), Options());
    absl::StatusOr<LoweredBase> lowered = g.lower(x, w);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    sines.push_back(CountAfterCanonicalize(*lowered, "sin"));
    barriers.push_back(CountAfterCanonicalize(*lowered, "optimization_barrier"));
    dots.push_back(CountAfterCanonicalize(*lowered, "dot_general"));
    absl::StatusOr<std::vector<Array>> out = g(x, w);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> flat = (*out)[1].to_host()->ToDoubles();
    for (double v : (*out)[2].to_host()->ToDoubles()) flat.push_back(v);
    flat.push_back((*out)[0].to_host()->GetDouble(0));
    grads.push_back(flat);
  }
  // The forward pass's two sines (the value is a result); checkpoint recomputes the inner one
  // (the outer one's result is not needed) and the product behind one barrier; without
  // prevent_cse the recomputation merges with the forward pass; everything_saveable is no
  // checkpoint at all; the dots policies keep the product (forward, plus the two products of the
  // backward pass) and recompute the sine from it.
  EXPECT_EQ(sines, (std::vector<int>{2, 3, 2, 2, 3, 3}));
  EXPECT_EQ(barriers, (std::vector<int>{0, 1, 0, 0, 1, 1}));
  EXPECT_EQ(dots, (std::vector<int>{3, 4, 3, 3, 3, 3}));
  for (size_t k = 1; k < grads.size(); ++k) {
    ASSERT_EQ(grads[k].size(), grads[0].size());
    for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_NEAR(grads[k][i], grads[0][i], 1e-12);
  }
}

TEST_P(CustomDerivativesTest, DotsWithNoBatchDimsSaveableRecomputesBatchedProducts) {
  // A batched product (jnp.matmul of 3-D arrays: one batch dimension): dots_saveable keeps it,
  // dots_with_no_batch_dims_saveable recomputes it; the gradients agree.
  auto body = [](Tracer x, Tracer w) { return lax::sin(jnp::matmul(x, w)); };
  Array x = Put({2, 3, 4}, Random(24, 9)), w = Put({2, 4, 5}, Random(40, 10));
  std::vector<int> dots;
  std::vector<std::vector<double>> grads;
  for (CheckpointPolicy policy :
       {CheckpointPolicy::kDotsSaveable, CheckpointPolicy::kDotsWithNoBatchDimsSaveable}) {
    auto loss = [body, policy](Tracer a, Tracer b) {
      return lax::reduce_sum(checkpoint(body, {.policy = policy})({a, b}), {0, 1, 2});
    };
    // The value too: the forward product is needed then, saved or not.
    auto g = jit(value_and_grad(loss, {0, 1}), Options());
    absl::StatusOr<LoweredBase> lowered = g.lower(x, w);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    dots.push_back(CountAfterCanonicalize(*lowered, "dot_general"));
    absl::StatusOr<std::vector<Array>> out = g(x, w);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> flat = (*out)[1].to_host()->ToDoubles();
    for (double v : (*out)[2].to_host()->ToDoubles()) flat.push_back(v);
    grads.push_back(flat);
  }
  EXPECT_EQ(dots, (std::vector<int>{3, 4}));
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_NEAR(grads[0][i], grads[1][i], 1e-12);
}

TEST_P(CustomDerivativesTest, NamePoliciesKeepTheNamedValues) {
  // sin(s) with s = sin(p) named "s" and p = x @ w named "p": the backward pass needs p (for
  // cos(p)) and s (for cos(s)); what is not kept is recomputed from x and w.
  auto body = [](Tracer x, Tracer w) {
    Tracer p = checkpoint_name(jnp::matmul(x, w), "p");
    return lax::sin(checkpoint_name(lax::sin(p), "s"));
  };
  Array x = Put({3, 5}, Random(15, 11)), w = Put({5, 2}, Random(10, 12));
  struct Case {
    CheckpointOptions options;
    int dots, sines;  // after canonicalize; the forward pass has 1 and 2
  };
  using enum CheckpointPolicy;
  const std::vector<Case> cases = {
      {{.policy = kEverythingSaveable}, 3, 2},
      {{.policy = kNothingSaveable}, 4, 3},
      {{.policy = kSaveOnlyTheseNames, .names = {"p"}}, 3, 3},
      {{.policy = kSaveOnlyTheseNames, .names = {"s"}}, 4, 2},
      {{.policy = kSaveOnlyTheseNames, .names = {"s", "p"}}, 3, 2},
      {{.policy = kSaveOnlyTheseNames, .names = {"q"}}, 4, 3},
      {{.policy = kSaveAnyNamesButThese, .names = {"s"}}, 3, 3},
      {{.policy = kSaveAnyNamesButThese}, 3, 2},
      // Everything but the value named "p" itself: the product it labels is kept all the same.
      {{.policy = kSaveAnythingExceptTheseNames, .names = {"p"}}, 3, 2},
      // save_from_both_policies: the product (a dot) and "s"; nothing of "q" and nothing; of
      // three policies (nested), "p" and "s"; one that saves everything.
      {save_from_both_policies({.policy = kDotsSaveable},
                               {.policy = kSaveOnlyTheseNames, .names = {"s"}}),
       3, 2},
      {save_from_both_policies({.policy = kSaveOnlyTheseNames, .names = {"q"}},
                               {.policy = kNothingSaveable}),
       4, 3},
      {save_from_both_policies(save_from_both_policies(
                                   {.policy = kSaveOnlyTheseNames, .names = {"q"}},
                                   {.policy = kSaveOnlyTheseNames, .names = {"p"}}),
                               {.policy = kSaveOnlyTheseNames, .names = {"s"}}),
       3, 2},
      {save_from_both_policies({.policy = kNothingSaveable}, {.policy = kEverythingSaveable}), 3,
       2},
  };
  std::vector<double> want;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "policy " << static_cast<int>(c.options.policy) << " names "
                                    << c.options.names.size() << " more policies "
                                    << c.options.also_save.size());
    auto loss = [body, o = c.options](Tracer a, Tracer b) {
      return lax::reduce_sum(checkpoint(body, o)({a, b}), {0, 1});
    };
    auto g = jit(value_and_grad(loss, {0, 1}), Options());
    absl::StatusOr<LoweredBase> lowered = g.lower(x, w);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    EXPECT_EQ(CountAfterCanonicalize(*lowered, "dot_general"), c.dots);
    EXPECT_EQ(CountAfterCanonicalize(*lowered, "sin"), c.sines);
    EXPECT_EQ(CountAfterCanonicalize(*lowered, "name"), 0);  // inline-calls drops the labels
    absl::StatusOr<std::vector<Array>> out = g(x, w);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> flat = (*out)[1].to_host()->ToDoubles();
    for (double v : (*out)[2].to_host()->ToDoubles()) flat.push_back(v);
    flat.push_back((*out)[0].to_host()->GetDouble(0));
    if (want.empty()) want = flat;
    ASSERT_EQ(flat.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(flat[i], want[i], 1e-12);
  }
  // The gradient itself, by hand: d/dx sum(sin(sin(xw))) = (cos(s) cos(p)) w^T.
  const std::vector<double> xv = Random(15, 11), wv = Random(10, 12);
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 5; ++k) {
      double gx = 0;
      for (int j = 0; j < 2; ++j) {
        double p = 0;
        for (int l = 0; l < 5; ++l) p += xv[i * 5 + l] * wv[l * 2 + j];
        gx += std::cos(std::sin(p)) * std::cos(p) * wv[k * 2 + j];
      }
      EXPECT_NEAR(want[i * 5 + k], gx, 1e-12);
    }
  }
}

TEST_P(CustomDerivativesTest, CheckpointNameIsTheIdentityUnderEveryTransformation) {
  // jvp passes the tangent through (JAX does not name it); vmap names the batched value; the
  // compiled function is the identity.
  auto f = [](Tracer x) { return checkpoint_name(x * x, "sq") * 3.0; };
  const std::vector<double> xv = Random(6, 13);
  Array x = Put({2, 3}, xv);
  absl::StatusOr<std::vector<Array>> j = jit(
      [f](Tracer x) {
        JvpOut r = jvp(f, {x}, {x * 0.0 + 1.0});
        return std::vector<Tracer>{r.primals_out[0], r.tangents_out[0]};
      },
      Options())(x);
  ASSERT_TRUE(j.ok()) << j.status();
  absl::StatusOr<Array> v = jit(vmap(f), Options())(x);
  ASSERT_TRUE(v.ok()) << v.status();
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_NEAR((*j)[0].to_host()->ToDoubles()[i], 3 * xv[i] * xv[i], 1e-12);
    EXPECT_NEAR((*j)[1].to_host()->ToDoubles()[i], 6 * xv[i], 1e-12);
    EXPECT_NEAR(v->to_host()->ToDoubles()[i], 3 * xv[i] * xv[i], 1e-12);
  }
}

TEST_P(CustomDerivativesTest, CheckpointInLoopsWithClosuresMatchesDifferences) {
  // A scan-like fori_loop whose body is checkpointed and reads a closed-over parameter: the
  // loop's reverse pass recomputes each step from the saved carry.
  auto f = [](Tracer x) {
    Tracer w = lax::cos(x) * 0.5;
    auto step = checkpoint([w](Tracer h) { return lax::tanh(h * w + lax::sin(h)); });
    Tracer out = lax::fori_loop(0, 4, [&](Tracer, Tracer h) { return step({h}); }, x);
    return lax::reduce_sum(out * out, {0});
  };
  const std::vector<double> xv = Random(5, 9);
  absl::StatusOr<Array> g = jit(grad(f), Options())(Put({5}, xv));
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<double> want = Differences(f, {5}, xv);
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_NEAR(g->to_host()->ToDoubles()[i], want[i], 1e-6 * (1 + std::abs(want[i])));
  }
  // Forward mode through it, and vmap of its gradient against a loop over the rows.
  absl::StatusOr<Array> jv = jit(
      [f](Tracer x) { return jvp(f, {x}, {x * 0.0 + 1.0}).tangents_out[0]; }, Options())(
      Put({5}, xv));
  ASSERT_TRUE(jv.ok()) << jv.status();
  double sum = 0;
  for (double d : want) sum += d;
  EXPECT_NEAR(jv->to_host()->GetDouble(0), sum, 1e-6 * (1 + std::abs(sum)));
  const std::vector<double> rows = Random(10, 10);
  absl::StatusOr<Array> gv = jit(vmap(grad(f)), Options())(Put({2, 5}, rows));
  ASSERT_TRUE(gv.ok()) << gv.status();
  for (int r = 0; r < 2; ++r) {
    std::vector<double> row(rows.begin() + 5 * r, rows.begin() + 5 * r + 5);
    absl::StatusOr<Array> one = jit(grad(f), Options())(Put({5}, row));
    ASSERT_TRUE(one.ok());
    for (int i = 0; i < 5; ++i) {
      EXPECT_NEAR(gv->to_host()->ToDoubles()[5 * r + i], one->to_host()->ToDoubles()[i], 1e-12);
    }
  }
}

TEST_P(CustomDerivativesTest, InsideShardMap) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  // A psum whose backward pass is the identity (a straight-through reduction) and a
  // checkpointed all_gather, inside a shard_map body.
  auto straight_psum = custom_vjp(
      [](Tracer x) { return lax::psum(x, "x"); },
      [](const std::vector<Tracer>& p) { return VjpFwdOut{{lax::psum(p[0], "x")}, {}}; },
      [](const std::vector<Tracer>&, const std::vector<Tracer>& ct) {
        return std::vector<Tracer>{ct[0]};
      });
  auto gathered = checkpoint([](Tracer x) { return lax::all_gather(lax::sin(x), "y", 0, true); });
  auto local = [=](Tracer x) {
    return grad([=](Tracer v) {
      return lax::reduce_sum(straight_psum({v}) * 2.0, {0}) +
             lax::reduce_sum(gathered({v}), {0});
    })({x});
  };
  const std::vector<double> xv = Random(8, 11);
  Array x = *device_put(HostTensor(DType::kF64, {8}, xv), NamedSharding(mesh, P(Axes{"x", "y"})));
  for (bool check_vma : {true, false}) {
    absl::StatusOr<Array> g = jit(shard_map(local, mesh, {P(Axes{"x", "y"})},
                                            {P(Axes{"x", "y"})}, check_vma),
                                  Options())(x);
    ASSERT_TRUE(g.ok()) << g.status();
    // Per device (2 elements): the identity rule's 2, and 2 cos(x) from the gathered sum (the
    // transpose of all_gather is a psum_scatter over y: both devices' sums read x). Typed, the
    // psum's result is invariant over x and meets the x-varying gathered sum through a pvary,
    // whose transpose sums the loss's cotangent over x: the identity rule then passes 2 * 2.
    const double through_rule = check_vma ? 4 : 2;
    for (size_t i = 0; i < xv.size(); ++i) {
      EXPECT_NEAR(g->to_host()->ToDoubles()[i], through_rule + 2 * std::cos(xv[i]), 1e-12)
          << i << (check_vma ? " check_vma" : "");
    }
  }
}

TEST(CustomDerivativesErrors, AsJaxGivesThem) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(DType::kF32, {3}, {3, 1, 2}), NamedSharding(mesh, P()));
  auto clip = ClipGradient(-1, 1);
  EXPECT_THAT(Message(jit([clip](Tracer x) {
                        return jvp(clip, {x}, {x}).tangents_out;
                      })(x).status()),
              HasSubstr("can't apply forward-mode autodiff (jvp) to a custom_vjp function."));
  // Differentiating with respect to a value the function reads from outside.
  auto closes_over = [](Tracer y) {
    auto f = custom_jvp([y](Tracer x) { return x * y; },
                        [y](const std::vector<Tracer>& p, const std::vector<Tracer>& t) {
                          return JvpOut{{p[0] * y}, {t[0] * y}};
                        });
    return lax::reduce_sum(f({y * 2.0}), {0});
  };
  EXPECT_THAT(Message(jit(grad(closes_over))(x).status()),
              HasSubstr("Detected differentiation of a custom_jvp function with respect to a "
                        "closed-over value"));
  // Rules that return the wrong number or types of values.
  auto bad_count = custom_vjp(
      [](Tracer x) { return x; },
      [](const std::vector<Tracer>& p) { return VjpFwdOut{{p[0]}, {}}; },
      [](const std::vector<Tracer>&, const std::vector<Tracer>& ct) {
        return std::vector<Tracer>{ct[0], ct[0]};
      });
  EXPECT_THAT(Message(jit(grad([bad_count](Tracer x) {
                        return lax::reduce_sum(bad_count({x}), {0});
                      }))(x).status()),
              HasSubstr("Custom VJP bwd rule must produce an output with the same container"));
  auto bad_type = custom_vjp(
      [](Tracer x) { return x; },
      [](const std::vector<Tracer>& p) { return VjpFwdOut{{p[0]}, {}}; },
      [](const std::vector<Tracer>&, const std::vector<Tracer>& ct) {
        return std::vector<Tracer>{lax::convert_element_type(ct[0], DType::kF64)};
      });
  EXPECT_THAT(Message(jit([bad_type](Tracer x) { return bad_type({x}); })(x).status()),
              HasSubstr("custom_vjp: the bwd rule's cotangents (one per primal input, of its shape "
                        "and dtype): value 0 is f64[3], but it must be f32[3]"));
  auto bad_jvp = custom_jvp([](Tracer x) { return x; },
                            [](const std::vector<Tracer>& p, const std::vector<Tracer>& t) {
                              return JvpOut{{p[0]}, {t[0], t[0]}};
                            });
  EXPECT_THAT(Message(jit([bad_jvp](Tracer x) { return bad_jvp({x}); })(x).status()),
              HasSubstr("Custom JVP rule must produce primal and tangent outputs with equal "
                        "container (pytree) structures, but got 1 and 2 values"));
  auto bad_fwd = custom_vjp(
      [](Tracer x) { return x; },
      [](const std::vector<Tracer>& p) { return VjpFwdOut{{p[0] * 2.0 + 1}, {}}; },
      [](const std::vector<Tracer>&, const std::vector<Tracer>& ct) { return ct; });
  EXPECT_TRUE(jit([bad_fwd](Tracer x) { return bad_fwd({x}); })(x).ok());  // types agree
  auto bad_fwd_type = custom_vjp(
      [](Tracer x) { return x; },
      [](const std::vector<Tracer>& p) { return VjpFwdOut{{lax::reshape(p[0], {3, 1})}, {}}; },
      [](const std::vector<Tracer>&, const std::vector<Tracer>& ct) { return ct; });
  EXPECT_THAT(Message(jit([bad_fwd_type](Tracer x) { return bad_fwd_type({x}); })(x).status()),
              HasSubstr("the fwd rule's primal outputs"));
  // Names given to a policy that takes none.
  auto named_dots = checkpoint([](Tracer x) { return x * 2.0; },
                               {.policy = CheckpointPolicy::kDotsSaveable, .names = {"a"}});
  EXPECT_THAT(Message(jit([named_dots](Tracer x) { return named_dots({x}); })(x).status()),
              HasSubstr("checkpoint: policy DOTS_SAVEABLE takes no names (got 1)"));
  auto named_both = checkpoint(
      [](Tracer x) { return x * 2.0; },
      save_from_both_policies({.policy = CheckpointPolicy::kNothingSaveable},
                              {.policy = CheckpointPolicy::kEverythingSaveable, .names = {"a"}}));
  EXPECT_THAT(Message(jit([named_both](Tracer x) { return named_both({x}); })(x).status()),
              HasSubstr("checkpoint: policy EVERYTHING_SAVEABLE takes no names (got 1)"));
}

INSTANTIATE_TEST_SUITE_P(Backends, CustomDerivativesTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

}  // namespace
}  // namespace shardjit
