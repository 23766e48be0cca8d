// The decoder block against an f64 implementation written here, on one device, and partitioned
// from its arguments' shardings on a 2x2 mesh (batch over x; heads and MLP units over y) against
// the one-device run, on both backends; the same for the block with a mixture of experts (the
// experts over y).
#include "examples/decoder_block.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit::examples {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Vec = std::vector<double>;

constexpr int64_t kB = 2, kS = 8, kD = 16, kHeads = 4, kDh = 4, kInner = kHeads * kDh, kF = 24;

// Deterministic values, rounded to f32 (the oracle sees what the device holds).
Vec Values(int64_t n, double scale, double phase) {
  Vec v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(scale * std::sin(0.37 * static_cast<double>(i) + phase));
  }
  return v;
}

struct Host {
  Vec x = Values(kB * kS * kD, 1.0, 0.1);
  Vec attention_norm = Values(kD, 0.2, 1.0), mlp_norm = Values(kD, 0.2, 2.0);
  Vec wq = Values(kD * kInner, 0.3, 0.3), wk = Values(kD * kInner, 0.3, 0.7);
  Vec wv = Values(kD * kInner, 0.3, 1.3), wo = Values(kInner * kD, 0.3, 1.9);
  Vec w_gate = Values(kD * kF, 0.3, 2.3), w_up = Values(kD * kF, 0.3, 2.9);
  Vec w_down = Values(kF * kD, 0.3, 3.1);
};

// rows [n, k] @ w [k, m].
Vec MatMul(const Vec& a, const Vec& w, int64_t n, int64_t k, int64_t m) {
  Vec out(n * m, 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t c = 0; c < m; ++c) out[i * m + c] += a[i * k + j] * w[j * m + c];
  return out;
}

Vec RmsNormF64(const Vec& x, const Vec& scale, int64_t rows, int64_t width) {
  Vec out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < width; ++c) ms += x[r * width + c] * x[r * width + c];
    const double inv = 1 / std::sqrt(ms / static_cast<double>(width) + 1e-6);
    for (int64_t c = 0; c < width; ++c) out[r * width + c] = x[r * width + c] * inv * scale[c];
  }
  return out;
}

// In place on [B, S, H, Dh] rows.
void RopeF64(Vec& t) {
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t s = 0; s < kS; ++s)
      for (int64_t h = 0; h < kHeads; ++h) {
        double* row = &t[((b * kS + s) * kHeads + h) * kDh];
        for (int64_t i = 0; i < kDh / 2; ++i) {
          const double angle = s * std::pow(10000.0, -2.0 * i / kDh);
          const double x1 = row[i], x2 = row[i + kDh / 2];
          row[i] = x1 * std::cos(angle) - x2 * std::sin(angle);
          row[i + kDh / 2] = x2 * std::cos(angle) + x1 * std::sin(angle);
        }
      }
}

// x + attention(RmsNorm(x)) in f64.
Vec AttentionResidualF64(const Host& p) {
  const int64_t rows = kB * kS;
  Vec h = RmsNormF64(p.x, p.attention_norm, rows, kD);
  Vec q = MatMul(h, p.wq, rows, kD, kInner), k = MatMul(h, p.wk, rows, kD, kInner);
  Vec v = MatMul(h, p.wv, rows, kD, kInner);
  RopeF64(q);
  RopeF64(k);
  Vec attn(rows * kInner, 0);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t hd = 0; hd < kHeads; ++hd)
      for (int64_t s = 0; s < kS; ++s) {
        Vec score(s + 1);
        double peak = -INFINITY, total = 0;
        for (int64_t t = 0; t <= s; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < kDh; ++d) {
            dot += q[((b * kS + s) * kHeads + hd) * kDh + d] * k[((b * kS + t) * kHeads + hd) * kDh + d];
          }
          score[t] = dot / std::sqrt(static_cast<double>(kDh));
          peak = std::max(peak, score[t]);
        }
        for (double& e : score) total += (e = std::exp(e - peak));
        for (int64_t t = 0; t <= s; ++t)
          for (int64_t d = 0; d < kDh; ++d) {
            attn[(b * kS + s) * kInner + hd * kDh + d] +=
                score[t] / total * v[((b * kS + t) * kHeads + hd) * kDh + d];
          }
      }
  Vec x = p.x;
  Vec o = MatMul(attn, p.wo, rows, kInner, kD);
  for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  return x;
}

Vec DecoderF64(const Host& p) {
  const int64_t rows = kB * kS;
  Vec x = AttentionResidualF64(p);
  Vec m = RmsNormF64(x, p.mlp_norm, rows, kD);
  Vec gate = MatMul(m, p.w_gate, rows, kD, kF), up = MatMul(m, p.w_up, rows, kD, kF);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
  Vec down = MatMul(gate, p.w_down, rows, kF, kD);
  for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  return x;
}

auto Block(Backend backend) {
  return jit(
      [](Tracer x, Tracer an, Tracer wq, Tracer wk, Tracer wv, Tracer wo, Tracer mn, Tracer wg,
         Tracer wu, Tracer wd) {
        return DecoderBlock(x, {an, wq, wk, wv, wo, mn, wg, wu, wd}, kHeads);
      },
      {.backend = backend});
}

// The block's arguments on `mesh`, laid out by the given specs.
std::vector<Array> Arguments(const Host& p, const Mesh& mesh, const std::vector<PartitionSpec>& s) {
  const std::vector<std::pair<const Vec*, std::vector<int64_t>>> args = {
      {&p.x, {kB, kS, kD}},        {&p.attention_norm, {kD}}, {&p.wq, {kD, kInner}},
      {&p.wk, {kD, kInner}},       {&p.wv, {kD, kInner}},     {&p.wo, {kInner, kD}},
      {&p.mlp_norm, {kD}},         {&p.w_gate, {kD, kF}},     {&p.w_up, {kD, kF}},
      {&p.w_down, {kF, kD}}};
  std::vector<Array> out;
  for (size_t i = 0; i < args.size(); ++i) {
    out.push_back(*device_put(HostTensor(DType::kF32, args[i].second, *args[i].first),
                              NamedSharding(mesh, s[i])));
  }
  return out;
}

class DecoderBlockTest : public ::testing::TestWithParam<Backend> {};

TEST_P(DecoderBlockTest, OneDeviceMatchesF64AndTheShardedBlockMatchesOneDevice) {
  const Host p;
  const Vec want = DecoderF64(p);
  Runtime one({.num_devices = 1});
  Mesh single = *make_mesh(one, {{"x", 1}});
  absl::StatusOr<Array> result =
      Block(GetParam()).call(Arguments(p, single, std::vector<PartitionSpec>(10, P())));
  ASSERT_TRUE(result.ok()) << result.status();
  const Vec got = result->to_host()->ToDoubles();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 2e-5 * std::max(1.0, std::abs(want[i]))) << i;
  }

  Runtime four({.num_devices = 4});
  Mesh mesh = *make_mesh(four, {{"x", 2}, {"y", 2}});
  const std::vector<PartitionSpec> specs = {
      P("x", None, None), P(), P(None, "y"), P(None, "y"), P(None, "y"), P("y", None),
      P(),                P(None, "y"), P(None, "y"), P("y", None)};
  auto block = Block(GetParam());
  const std::vector<Array> args = Arguments(p, mesh, specs);
  absl::StatusOr<Array> sharded = block.call(args);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  const std::string text = block.lower(args)->as_text();
  EXPECT_THAT(text, Not(HasSubstr("unpartitioned")));
  // Megatron's split: the heads' and the MLP's partial outputs are summed over y (reduced and
  // scattered along the sequence), and no collective reads an argument: the weights stay where
  // they are.
  EXPECT_THAT(text, HasSubstr("psum_scatter[axes=(y)"));
  const std::string params = text.substr(text.find("lambda ;"), text.find(". let") - text.find("lambda ;"));
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("all_gather") == std::string::npos && line.find("psum") == std::string::npos) {
      continue;
    }
    const std::string operand = line.substr(line.rfind(' ') + 1);
    EXPECT_THAT(params, Not(HasSubstr(" " + operand + ":"))) << line;
  }
  const Vec sharded_host = sharded->to_host()->ToDoubles();
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(sharded_host[i], got[i], 1e-5 * std::max(1.0, std::abs(got[i]))) << i;
  }
}

// Training the block: SGD steps on the squared error against a target, value_and_grad of the
// global-view block (partitioned forward and backward) on 2x2 from the weights' Megatron
// shardings, against the same steps on one device: losses and weights within f32
// accumulation-order tolerance, and the loss falls.
TEST_P(DecoderBlockTest, TrainingOnTwoByTwoMatchesOneDevice) {
  const Host p;
  auto step = jit(
      [](const std::vector<Tracer>& a) {
        auto loss = [](const std::vector<Tracer>& v) {
          Tracer y = DecoderBlock(v[9], {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]},
                                  kHeads);
          Tracer diff = y - v[10];
          return lax::reduce_sum(diff * diff, {0, 1, 2}) * (1.0 / (kB * kS * kD));
        };
        std::vector<int> argnums;
        for (int i = 0; i < 9; ++i) argnums.push_back(i);
        std::vector<Tracer> vg = value_and_grad(loss, argnums)(a);
        std::vector<Tracer> out;
        for (int i = 0; i < 9; ++i) out.push_back(a[i] - vg[1 + i] * 0.05);
        out.push_back(vg[0]);
        return out;
      },
      {.backend = GetParam()});
  // Weights first (as the block takes them), then x and the target.
  auto arguments = [&](const Mesh& mesh, const std::vector<PartitionSpec>& specs) {
    std::vector<Array> a = Arguments(p, mesh, specs);
    std::rotate(a.begin(), a.begin() + 1, a.end());
    Vec target(p.x.size());
    for (size_t i = 0; i < target.size(); ++i) target[i] = std::sin(p.x[i]) * 0.5;
    a.push_back(*device_put(HostTensor(DType::kF32, {kB, kS, kD}, target),
                            NamedSharding(mesh, specs[0])));
    return a;
  };
  Runtime one({.num_devices = 1});
  Mesh single = *make_mesh(one, {{"x", 1}});
  Runtime four({.num_devices = 4});
  Mesh mesh = *make_mesh(four, {{"x", 2}, {"y", 2}});
  const std::vector<PartitionSpec> specs = {
      P("x", None, None), P(), P(None, "y"), P(None, "y"), P(None, "y"), P("y", None),
      P(),                P(None, "y"), P(None, "y"), P("y", None)};
  std::vector<Array> a1 = arguments(single, std::vector<PartitionSpec>(10, P()));
  std::vector<Array> a4 = arguments(mesh, specs);
  std::vector<double> losses;
  for (int s = 0; s < 8; ++s) {
    absl::StatusOr<std::vector<Array>> o1 = step.call(a1);
    absl::StatusOr<std::vector<Array>> o4 = step.call(a4);
    ASSERT_TRUE(o1.ok()) << o1.status();
    ASSERT_TRUE(o4.ok()) << o4.status();
    const double l1 = (*o1)[9].to_host()->GetDouble(0), l4 = (*o4)[9].to_host()->GetDouble(0);
    EXPECT_NEAR(l4, l1, 1e-5 * std::max(1.0, l1)) << "step " << s;
    losses.push_back(l1);
    for (int i = 0; i < 9; ++i) {
      a1[i] = (*o1)[i];
      a4[i] = (*o4)[i];
    }
  }
  for (int i = 0; i < 9; ++i) {
    const Vec w1 = a1[i].to_host()->ToDoubles(), w4 = a4[i].to_host()->ToDoubles();
    for (size_t k = 0; k < w1.size(); ++k) {
      EXPECT_NEAR(w4[k], w1[k], 1e-4 * std::max(1.0, std::abs(w1[k]))) << "weight " << i;
    }
  }
  EXPECT_LT(losses.back(), losses.front() * 0.9);
  EXPECT_THAT(step.lower(a4)->as_text(), Not(HasSubstr("unpartitioned")));
}

// The block with a mixture of experts: E = 4 SwiGLU experts of width 8, the top 2 per token.
constexpr int64_t kExperts = 4, kTop = 2, kExpertWidth = 8;

struct MoeHost {
  Vec norm = Values(kD, 0.2, 4.1), router = Values(kD * kExperts, 2.0, 4.7);
  Vec gate = Values(kExperts * kD * kExpertWidth, 0.3, 5.3);
  Vec up = Values(kExperts * kD * kExpertWidth, 0.3, 5.9);
  Vec down = Values(kExperts * kExpertWidth * kD, 0.3, 6.1);
};

// The f64 block: each row's top kTop experts by router logits, their SwiGLU outputs weighted by
// the softmax of those logits. Fails if a row's kTop-th and next logits are too close for f32
// to pick the same experts.
Vec MoeDecoderF64(const Host& p, const MoeHost& moe) {
  const int64_t rows = kB * kS;
  Vec x = AttentionResidualF64(p);
  const Vec m = RmsNormF64(x, moe.norm, rows, kD);
  const Vec logits = MatMul(m, moe.router, rows, kD, kExperts);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> order(kExperts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return logits[r * kExperts + a] > logits[r * kExperts + b];
    });
    EXPECT_GT(logits[r * kExperts + order[kTop - 1]] - logits[r * kExperts + order[kTop]], 1e-3)
        << "row " << r << ": a tie too close to route";
    double total = 0;
    Vec gates(kTop);
    for (int64_t j = 0; j < kTop; ++j) {
      total += gates[j] = std::exp(logits[r * kExperts + order[j]] -
                                   logits[r * kExperts + order[0]]);
    }
    const Vec row(m.begin() + r * kD, m.begin() + (r + 1) * kD);
    for (int64_t j = 0; j < kTop; ++j) {
      const int64_t e = order[j];
      const auto expert = [&](const Vec& w, int64_t in, int64_t out) {
        return Vec(w.begin() + e * in * out, w.begin() + (e + 1) * in * out);
      };
      Vec g = MatMul(row, expert(moe.gate, kD, kExpertWidth), 1, kD, kExpertWidth);
      const Vec u = MatMul(row, expert(moe.up, kD, kExpertWidth), 1, kD, kExpertWidth);
      for (int64_t i = 0; i < kExpertWidth; ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const Vec y = MatMul(g, expert(moe.down, kExpertWidth, kD), 1, kExpertWidth, kD);
      for (int64_t c = 0; c < kD; ++c) x[r * kD + c] += gates[j] / total * y[c];
    }
  }
  return x;
}

// The MoE block, by shard_map and in global view, on one device against f64, and on 2x2 (batch
// over x, the attention split as Megatron's, the experts over y; the shard_map form splits the
// sequence over y too) against one device. The capacity keeps every pair, so that both meshes
// compute the same thing; with a capacity that drops pairs, the two forms agree on one device.
TEST_P(DecoderBlockTest, MoeBlockOnTwoByTwoMatchesOneDeviceAndF64) {
  const Host p;
  const MoeHost moe;
  const Vec want = MoeDecoderF64(p, moe);
  int64_t capacity = kB * kS * kTop;
  bool global = false;
  auto run = [&](const Mesh& mesh, const std::vector<PartitionSpec>& specs,
                 const std::vector<PartitionSpec>& moe_specs,
                 std::string* text) -> absl::StatusOr<Vec> {
    std::vector<Array> args = Arguments(p, mesh, specs);
    const std::vector<std::pair<const Vec*, std::vector<int64_t>>> extra = {
        {&moe.norm, {kD}},
        {&moe.router, {kD, kExperts}},
        {&moe.gate, {kExperts, kD, kExpertWidth}},
        {&moe.up, {kExperts, kD, kExpertWidth}},
        {&moe.down, {kExperts, kExpertWidth, kD}}};
    for (size_t i = 0; i < extra.size(); ++i) {
      args.push_back(*device_put(HostTensor(DType::kF32, extra[i].second, *extra[i].first),
                                 NamedSharding(mesh, moe_specs[i])));
    }
    auto block = jit(
        [&mesh, capacity, global](const std::vector<Tracer>& a) {
          DecoderWeights w{a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]};
          const MoeWeights experts{a[10], a[11], a[12], a[13], a[14]};
          return global ? GlobalMoeDecoderBlock(a[0], w, experts, kHeads, kTop, capacity)
                        : MoeDecoderBlock(a[0], w, experts, kHeads, mesh, "x", "y", kTop,
                                          capacity);
        },
        {.backend = GetParam()});
    ASSIGN_OR_RETURN(Array out, block.call(args));
    ASSIGN_OR_RETURN(LoweredBase lowered, block.lower(args));
    *text = lowered.as_text();
    return out.to_host()->ToDoubles();
  };
  Runtime one({.num_devices = 1});
  Mesh single = *make_mesh(one, {{"x", 1}, {"y", 1}});
  Runtime four({.num_devices = 4});
  Mesh mesh = *make_mesh(four, {{"x", 2}, {"y", 2}});
  const std::vector<PartitionSpec> specs = {
      P("x", None, None), P(), P(None, "y"), P(None, "y"), P(None, "y"), P("y", None),
      P(),                P(None, "y"), P(None, "y"), P("y", None)};
  const PartitionSpec by_expert = P("y", None, None);
  std::string text;
  for (bool form : {false, true}) {
    global = form;
    SCOPED_TRACE(global ? "global view" : "shard_map");
    absl::StatusOr<Vec> got = run(single, std::vector<PartitionSpec>(10, P()),
                                  std::vector<PartitionSpec>(5, P()), &text);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR((*got)[i], want[i], 2e-5 * std::max(1.0, std::abs(want[i]))) << i;
    }
    absl::StatusOr<Vec> sharded =
        run(mesh, specs, {P(), P(), by_expert, by_expert, by_expert}, &text);
    ASSERT_TRUE(sharded.ok()) << sharded.status();
    // The attention is partitioned; the shard_map form sends the tokens to their experts and
    // back over y.
    EXPECT_THAT(text, Not(HasSubstr("unpartitioned")));
    if (!global) EXPECT_THAT(text, HasSubstr("ragged_all_to_all[axes=(y)"));
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_NEAR((*sharded)[i], (*got)[i], 1e-5 * std::max(1.0, std::abs((*got)[i]))) << i;
    }
  }
  // Three slots an expert: the later pairs are dropped, the same ones in both forms.
  capacity = 3;
  std::vector<Vec> dropped;
  for (bool form : {false, true}) {
    global = form;
    absl::StatusOr<Vec> got = run(single, std::vector<PartitionSpec>(10, P()),
                                  std::vector<PartitionSpec>(5, P()), &text);
    ASSERT_TRUE(got.ok()) << got.status();
    dropped.push_back(*got);
  }
  double moved = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(dropped[1][i], dropped[0][i], 1e-5 * std::max(1.0, std::abs(dropped[0][i]))) << i;
    moved = std::max(moved, std::abs(dropped[0][i] - want[i]));
  }
  EXPECT_GT(moved, 1e-4);  // some pairs were dropped (f32 noise is about 1e-6 here)
}

INSTANTIATE_TEST_SUITE_P(Backends, DecoderBlockTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

}  // namespace
}  // namespace shardjit::examples
