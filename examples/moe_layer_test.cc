// The MoE layer against an f64 computation of every token through its expert, on 1, 2 and 4
// devices, with experts that get no token, devices that send an expert nothing, unused rows, and
// f32 and bf16.
#include "examples/moe_layer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardjit::examples {
namespace {

Runtime& SharedRuntime() {
  static Runtime* rt = new Runtime({.num_devices = 4});
  return *rt;
}

TEST(MoeLayerTest, MatchesEachTokenThroughItsExpert) {
  constexpr int64_t kTokens = 13, kHidden = 8, kOut = 6, kLocal = 2;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (int devices : {1, 2, 4}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(std::to_string(devices) + " devices, " + std::string(DTypeName(dtype)));
      const int64_t experts = devices * kLocal;
      absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(), {{"e", devices}});
      ASSERT_TRUE(mesh.ok()) << mesh.status();
      // Per device: how many rows go to each expert (some none), summing to at most kTokens.
      std::vector<double> counts;
      for (int p = 0; p < devices; ++p) {
        int64_t left = kTokens - static_cast<int64_t>(rng() % 3);
        for (int64_t e = 0; e < experts; ++e) {
          const int64_t c = e + 1 == experts ? left : std::min<int64_t>(left, rng() % 5);
          counts.push_back(static_cast<double>(c));
          left -= c;
        }
      }
      // Values on a grid of eighths: exact in bf16, and their products sum exactly in f32.
      auto grid = [&](int64_t n) {
        std::vector<double> v(n);
        for (double& x : v) x = std::round(dist(rng) * 8) / 8;
        return v;
      };
      const std::vector<double> x = grid(devices * kTokens * kHidden);
      const std::vector<double> w = grid(experts * kHidden * kOut);
      const NamedSharding by_device(*mesh, P("e"));
      Array tokens = *device_put(
          Tensor::FromDoubles({dtype, {devices * kTokens, kHidden}}, x), by_device);
      Array count = *device_put(Tensor::FromDoubles({DType::kS32, {devices * experts}}, counts),
                                by_device);
      Array weights =
          *device_put(Tensor::FromDoubles({dtype, {experts, kHidden, kOut}}, w), by_device);
      auto layer = jit(shard_map(
          [&](Tracer t, Tracer c, Tracer ws) {
            return MoeLayer(t, c, ws, "e", kTokens * devices);
          },
          *mesh, {P("e"), P("e"), P("e")}, {P("e")}));
      absl::StatusOr<Array> out = layer(tokens, count, weights);
      ASSERT_TRUE(out.ok()) << out.status();
      absl::StatusOr<Tensor> host = out->to_host();
      ASSERT_TRUE(host.ok()) << host.status();
      const std::vector<double> got = host->ToDoubles();
      for (int p = 0; p < devices; ++p) {
        int64_t row = 0;
        std::vector<int64_t> expert_of(kTokens, -1);
        for (int64_t e = 0; e < experts; ++e) {
          for (int64_t i = 0; i < counts[p * experts + e]; ++i) expert_of[row++] = e;
        }
        for (int64_t r = 0; r < kTokens; ++r) {
          for (int64_t j = 0; j < kOut; ++j) {
            double want = 0;
            if (expert_of[r] >= 0) {
              for (int64_t h = 0; h < kHidden; ++h) {
                want += x[(p * kTokens + r) * kHidden + h] *
                        w[(expert_of[r] * kHidden + h) * kOut + j];
              }
            }
            const double g = got[(p * kTokens + r) * kOut + j];
            // bf16 results round once (|want| < 8).
            ASSERT_NEAR(g, want, dtype == DType::kF32 ? 1e-6 : 1.0 / 32)
                << "device " << p << " row " << r << " (expert " << expert_of[r] << ") col " << j;
          }
        }
      }
    }
  }
}

// Every token through its top-k experts (ties to the lower expert), weighted by the softmax of
// their logits, pairs past an expert's capacity (in token order) dropped: f64 against the layer on
// 1, 2 and 4 devices.
TEST(MoeLayerTest, RoutedLayerMatchesTopKGatingWithCapacity) {
  constexpr int64_t kTokens = 11, kHidden = 8, kOut = 6, kLocal = 2, kTopK = 2, kCapacity = 3;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> dist(-1, 1);
  auto values = [&](int64_t n) {
    std::vector<double> v(n);
    for (double& x : v) x = static_cast<float>(dist(rng));
    return v;
  };
  for (int devices : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(devices) + " devices");
    const int64_t experts = devices * kLocal;
    absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(), {{"e", devices}});
    ASSERT_TRUE(mesh.ok()) << mesh.status();
    const std::vector<double> x = values(devices * kTokens * kHidden);
    const std::vector<double> router = values(kHidden * experts);
    const std::vector<double> w = values(experts * kHidden * kOut);
    Array tokens = *device_put(HostTensor(DType::kF32, {devices * kTokens, kHidden}, x),
                               NamedSharding(*mesh, P("e")));
    Array route = *device_put(HostTensor(DType::kF32, {kHidden, experts}, router),
                              NamedSharding(*mesh, P()));
    Array weights = *device_put(HostTensor(DType::kF32, {experts, kHidden, kOut}, w),
                                NamedSharding(*mesh, P("e")));
    auto layer = jit(shard_map(
        [&](Tracer t, Tracer r, Tracer ws) {
          return RoutedMoeLayer(t, r, ws, "e", kTopK, kCapacity);
        },
        *mesh, {P("e"), P(), P("e")}, {P("e")}));
    absl::StatusOr<Array> out = layer(tokens, route, weights);
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<double> got = out->to_host()->ToDoubles();
    int dropped = 0;
    for (int p = 0; p < devices; ++p) {
      std::vector<int64_t> taken(experts, 0);  // pairs each expert took from this device
      for (int64_t t = 0; t < kTokens; ++t) {
        const double* row = &x[(p * kTokens + t) * kHidden];
        std::vector<double> logit(experts, 0);
        for (int64_t e = 0; e < experts; ++e) {
          for (int64_t h = 0; h < kHidden; ++h) logit[e] += row[h] * router[h * experts + e];
        }
        std::vector<int64_t> order(experts);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return logit[a] > logit[b]; });
        double total = 0;
        for (int64_t s = 0; s < kTopK; ++s) total += std::exp(logit[order[s]] - logit[order[0]]);
        std::vector<double> want(kOut, 0);
        for (int64_t s = 0; s < kTopK; ++s) {
          const int64_t e = order[s];
          // Tokens come in order, so a pair's rank in its expert is how many it took before.
          if (taken[e]++ >= kCapacity) {
            ++dropped;
            continue;
          }
          const double gate = std::exp(logit[e] - logit[order[0]]) / total;
          for (int64_t j = 0; j < kOut; ++j) {
            double y = 0;
            for (int64_t h = 0; h < kHidden; ++h) y += row[h] * w[(e * kHidden + h) * kOut + j];
            want[j] += gate * y;
          }
        }
        for (int64_t j = 0; j < kOut; ++j) {
          ASSERT_NEAR(got[(p * kTokens + t) * kOut + j], want[j], 1e-5)
              << "device " << p << " token " << t << " col " << j;
        }
      }
    }
    EXPECT_GT(dropped, 0);  // the capacity is exercised
  }
}

TEST(MoeLayerTest, ExclusiveCumsum) {
  absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(), {{"e", 1}});
  Array v = *device_put(Tensor::FromDoubles({DType::kS32, {2, 3}}, {1, 2, 3, 4, 5, 6}),
                        NamedSharding(*mesh, P()));
  auto f = jit([](Tracer x) {
    return std::vector<Tracer>{ExclusiveCumsum(x, 0), ExclusiveCumsum(x, 1)};
  });
  absl::StatusOr<std::vector<Array>> out = f(v);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].to_host()->ToDoubles(), (std::vector<double>{0, 0, 0, 1, 2, 3}));
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(), (std::vector<double>{0, 1, 3, 0, 4, 9}));
}

}  // namespace
}  // namespace shardjit::examples
