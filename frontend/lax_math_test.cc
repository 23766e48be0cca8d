// The math and bit primitives through jit on both backends: sharded operands on a 2x2 mesh
// (elementwise ops partition like any other), odd sizes, against f64 oracles; tracer errors.
#include <bit>
#include <cmath>
#include <vector>

#include "fmt/format.h"
#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;

std::vector<double> Values(int64_t n, double lo, double hi) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * static_cast<double>(i) / (n - 1);
  return v;
}

class LaxMathTest : public ::testing::TestWithParam<Backend> {};

TEST_P(LaxMathTest, FloatFunctionsMatchF64OnAShardedArray) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  const int64_t rows = 6, cols = 10;
  const std::vector<double> host = Values(rows * cols, -3.7, 4.1);
  Array x = *device_put(HostTensor(DType::kF32, {rows, cols}, host),
                        NamedSharding(mesh, P("x", "y")));
  struct Case {
    const char* name;
    Tracer (*op)(Tracer);
    double (*oracle)(double);
  };
  const Case cases[] = {
      {"sin", [](Tracer t) { return lax::sin(t); }, [](double v) { return std::sin(v); }},
      {"cos", [](Tracer t) { return lax::cos(t); }, [](double v) { return std::cos(v); }},
      {"erf", [](Tracer t) { return lax::erf(t); }, [](double v) { return std::erf(v); }},
      {"floor", [](Tracer t) { return lax::floor(t); }, [](double v) { return std::floor(v); }},
      {"round", [](Tracer t) { return lax::round(t); }, [](double v) { return std::round(v); }},
      {"expm1", [](Tracer t) { return lax::expm1(t); }, [](double v) { return std::expm1(v); }},
      {"sign*x^3", [](Tracer t) { return lax::sign(t) * lax::integer_pow(t, 3); },
       [](double v) { return v * v * std::abs(v); }},
      {"atan2(x,2)", [](Tracer t) { return lax::atan2(t, lax::full(t.shape(), 2.0, t.dtype())); },
       [](double v) { return std::atan2(v, 2.0); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Array> out = jit(c.op, {.backend = GetParam()})(x);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->sharding().spec().to_string(), P("x", "y").to_string());
    std::vector<double> got = out->to_host()->ToDoubles();
    for (size_t i = 0; i < host.size(); ++i) {
      const double want = c.oracle(static_cast<float>(host[i]));
      EXPECT_NEAR(got[i], want, 4e-7 * std::max(1.0, std::abs(want))) << "x=" << host[i];
    }
  }
}

TEST_P(LaxMathTest, RotationWithSinAndCosInOneFusion) {
  // x cos(t) - y sin(t) fuses into one loop on x86 (sin and cos generated); angles beyond the
  // generated reduction's range (and inf, NaN) make the loop decline and the reference kernels
  // run the fusion. Against f64 either way.
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  const int64_t n = 37;
  std::vector<double> xv = Values(n, -2.0, 3.0), yv = Values(n, 1.5, -0.5);
  std::vector<double> in_range = Values(n, -71476.0, 71476.0);
  std::vector<double> beyond = Values(n, -10.0, 10.0);
  beyond[3] = 1e6;
  beyond[17] = -3.5e30;
  beyond[20] = INFINITY;
  beyond[21] = NAN;
  auto put = [&](const std::vector<double>& v) {
    return *device_put(HostTensor(DType::kF32, {n}, v), NamedSharding(mesh, P()));
  };
  for (const std::vector<double>* angles : {&in_range, &beyond}) {
    absl::StatusOr<Array> out = jit([](Tracer x, Tracer y, Tracer t) {
      return x * lax::cos(t) - y * lax::sin(t);
    }, {.backend = GetParam()})(put(xv), put(yv), put(*angles));
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<double> got = out->to_host()->ToDoubles();
    for (int64_t i = 0; i < n; ++i) {
      const double t = static_cast<float>((*angles)[i]);
      const double x = static_cast<float>(xv[i]), y = static_cast<float>(yv[i]);
      const double want = x * std::cos(t) - y * std::sin(t);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << "t=" << t;
        continue;
      }
      EXPECT_NEAR(got[i], want, 1e-6 * std::max(1.0, std::abs(x) + std::abs(y))) << "t=" << t;
    }
  }
}

TEST_P(LaxMathTest, MatmulFollowsNumpy) {
  // jnp.matmul over every rank pairing numpy defines: matrices, vector-matrix, matrix-vector,
  // vector-vector, stacks with equal and broadcast leading dimensions; against f64 loops.
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  auto put = [&](std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return *device_put(HostTensor(DType::kF32, shape, Values(n, -1.5, 2.0)),
                       NamedSharding(mesh, P()));
  };
  struct Case {
    std::vector<int64_t> a, b, out;
  };
  const Case cases[] = {{{3, 4}, {4, 5}, {3, 5}},          {{4}, {4, 5}, {5}},
                        {{3, 4}, {4}, {3}},                {{4}, {4}, {}},
                        {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}}, {{2, 1, 3, 4}, {3, 4, 5}, {2, 3, 3, 5}},
                        {{2, 3, 4}, {4, 5}, {2, 3, 5}},    {{4}, {2, 4, 5}, {2, 5}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.a) + " @ " + ::testing::PrintToString(c.b));
    Array a = put(c.a), b = put(c.b);
    absl::StatusOr<Array> out = jit([](Tracer x, Tracer y) { return jnp::matmul(x, y); },
                                    {.backend = GetParam()})(a, b);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->shape(), c.out);
    // f64: promote vectors to matrices, broadcast the stacks, multiply, drop the added dims.
    auto as_stack = [](std::vector<int64_t> s, bool lhs) {
      if (s.size() == 1) s.insert(lhs ? s.begin() : s.end(), 1);
      return s;
    };
    const std::vector<int64_t> sa = as_stack(c.a, true), sb = as_stack(c.b, false);
    const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
    const std::vector<double> av = a.to_host()->ToDoubles(), bv = b.to_host()->ToDoubles();
    const std::vector<int64_t> ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
    const size_t nb = std::max(ba.size(), bb.size());
    std::vector<int64_t> batch(nb);
    for (size_t i = 0; i < nb; ++i) {
      const int64_t x = i + ba.size() >= nb ? ba[i + ba.size() - nb] : 1;
      const int64_t y = i + bb.size() >= nb ? bb[i + bb.size() - nb] : 1;
      batch[i] = std::max(x, y);
    }
    // The stack of an operand with batch dims `own` at the output's batch index `at`.
    auto stack_of = [&](const std::vector<int64_t>& own, const std::vector<int64_t>& at) {
      int64_t flat = 0;
      for (size_t i = 0; i < own.size(); ++i) {
        flat = flat * own[i] + (own[i] == 1 ? 0 : at[i + nb - own.size()]);
      }
      return flat;
    };
    const std::vector<double> got = out->to_host()->ToDoubles();
    const int64_t stacks = static_cast<int64_t>(got.size()) / (m * n);
    for (int64_t s = 0; s < stacks; ++s) {
      std::vector<int64_t> at(nb);
      for (int64_t i = static_cast<int64_t>(nb) - 1, rest = s; i >= 0; --i) {
        at[i] = rest % batch[i];
        rest /= batch[i];
      }
      const int64_t sa_i = stack_of(ba, at), sb_i = stack_of(bb, at);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double want = 0;
          for (int64_t p = 0; p < k; ++p) {
            want += av[(sa_i * m + i) * k + p] * bv[(sb_i * k + p) * n + j];
          }
          EXPECT_NEAR(got[(s * m + i) * n + j], want, 1e-5 * (1 + std::abs(want)));
        }
      }
    }
  }
  absl::StatusOr<Array> bad = jit([](Tracer x, Tracer y) { return jnp::matmul(x, y); },
                                  {.backend = GetParam()})(put({2, 3, 4}), put({3, 4, 5}));
  EXPECT_THAT(bad.status().message(),
              HasSubstr("matmul: the batch dimensions of f32[2,3,4] and f32[3,4,5] do not "
                        "broadcast together"));
}

TEST_P(LaxMathTest, BitsAndIsFinite) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  Array a = *device_put(HostTensor(DType::kS32, {6}, {12, -1, -2147483648.0, 5, 0, 255}),
                        NamedSharding(mesh, P("x")));
  auto bits = jit(
      [](Tracer a) {
        Tracer n = lax::population_count(a);
        return lax::bitwise_xor(lax::shift_left(a, n),
                                lax::bitwise_not(lax::shift_right_logical(a, n)));
      },
      {.backend = GetParam()});
  absl::StatusOr<Array> out = bits(a);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> want;
  for (int64_t v : {12, -1, -2147483647 - 1, 5, 0, 255}) {
    const uint32_t u = static_cast<uint32_t>(v);
    const int n = std::popcount(u);
    const uint32_t left = n < 32 ? u << n : 0, right = n < 32 ? u >> n : 0;
    want.push_back(static_cast<int32_t>(left ^ ~right));
  }
  EXPECT_EQ(out->to_host()->ToDoubles(), want);

  Array f = *device_put(HostTensor(DType::kBF16, {4}, {1, INFINITY, NAN, -2}),
                        NamedSharding(mesh, P("x")));
  absl::StatusOr<Array> finite = jit([](Tracer x) { return lax::is_finite(x); }, {.backend = GetParam()})(f);
  ASSERT_TRUE(finite.ok()) << finite.status();
  EXPECT_EQ(finite->dtype(), DType::kPred);
  EXPECT_EQ(finite->to_host()->ToDoubles(), (std::vector<double>{1, 0, 0, 1}));
}

INSTANTIATE_TEST_SUITE_P(Backends, LaxMathTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

TEST(LaxMathErrors, NameTheOpAndTheOperands) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array i = *device_put(HostTensor(DType::kS32, {3}, {1, 2, 3}), NamedSharding(mesh, P()));
  absl::StatusOr<Array> neg = jit([](Tracer x) { return lax::integer_pow(x, -1); })(i);
  EXPECT_THAT(neg.status().message(),
              HasSubstr("integer_pow: integers cannot be raised to negative powers (y=-1)"));
  absl::StatusOr<Array> sin = jit([](Tracer x) { return lax::sin(x); })(i);
  EXPECT_THAT(sin.status().message(), HasSubstr("sin: needs a floating dtype, got s32"));
}

}  // namespace
}  // namespace shardjit
