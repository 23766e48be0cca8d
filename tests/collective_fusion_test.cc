// collective-fusion end to end: every program it rewrites gives what the program gives with the
// pass disabled (f32 within accumulation-order tolerance, bf16 within one ulp), over random
// shapes, operand sides and dims, dtypes f32/bf16 and the meshes {i:2}, {i:4}, {i:8}, {x:2,y:2}
// and {x:4,y:4} (rings over one axis and over both); each case also checks that the rewrite
// happened (the lowered text has the ring's ops and no gather), so no case passes vacuously.
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
using ::testing::Not;

struct MeshCase {
  std::string name;
  std::vector<std::pair<std::string, int64_t>> axes;
  AxisNames ring;  // the axes the collectives run over
};

// What one case runs: a shard_map body over two arguments, their global shapes and specs.
struct Program {
  std::string what;
  std::function<Tracer(Tracer, Tracer)> body;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<PartitionSpec> in_specs;
  PartitionSpec out_spec;
  std::vector<std::string> fused_ops;  // must appear in the lowered text
  std::string gone;                    // must not
  // For rings that sum bf16 partial products in f32 and round once (more precise than the
  // unfused per-device rounding): the global result in f64, which a bf16 result must match
  // within one rounding. (transpose_rhs: the product is x . w^T.)
  bool f64_oracle_for_bf16 = false;
  bool transpose_rhs = false;
};

// x . w (or x . w^T) of two host matrices, in f64.
std::vector<double> MatmulF64(const Tensor& x, const Tensor& w, bool transpose_rhs) {
  const int64_t m = x.dims()[0], k = x.dims()[1];
  const int64_t n = transpose_rhs ? w.dims()[0] : w.dims()[1];
  std::vector<double> out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t l = 0; l < k; ++l) {
      const double a = x.GetDouble(i * k + l);
      for (int64_t j = 0; j < n; ++j) {
        out[i * n + j] += a * w.GetDouble(transpose_rhs ? j * k + l : l * n + j);
      }
    }
  }
  return out;
}

class CollectiveFusionTest : public ::testing::TestWithParam<MeshCase> {
 protected:
  int64_t RingSize() const {
    int64_t n = 1;
    for (const std::string& a : GetParam().ring.names) {
      for (const auto& [name, size] : GetParam().axes) n *= name == a ? size : 1;
    }
    return n;
  }
  // The spec entry of a dim split over the ring's axes.
  SpecEntry Ring() const {
    SpecEntry entry(None);
    entry.axes = GetParam().ring.names;
    return entry;
  }

  // Runs `p` fused (the time model ignored) and unfused and compares.
  void Check(const Program& p, DType dtype, Runtime& rt, const Mesh& mesh, int seed) {
    SCOPED_TRACE(p.what + " " + std::string(ir::DTypeName(dtype)));
    std::vector<Array> args;
    std::vector<Tensor> hosts;
    for (size_t i = 0; i < p.shapes.size(); ++i) {
      absl::StatusOr<Tensor> host = random::normal(random::key(seed * 7 + i), p.shapes[i], dtype);
      ASSERT_TRUE(host.ok());
      hosts.push_back(*host);
      absl::StatusOr<Array> a = device_put(*host, NamedSharding(mesh, p.in_specs[i]));
      ASSERT_TRUE(a.ok()) << a.status();
      args.push_back(*a);
    }
    auto program = [&](bool fused) {
      JitOptions options;
      options.collective_fusion.ignore_time_model = true;
      if (!fused) options.pipeline.disabled = {"collective-fusion"};
      return jit(shard_map(p.body, mesh, p.in_specs, {p.out_spec}, /*check_vma=*/false), options);
    };
    auto fused = program(true), unfused = program(false);
    auto lowered = fused.lower(args);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    const std::string text = lowered->as_text();
    for (const std::string& op : p.fused_ops) EXPECT_THAT(text, HasSubstr(op)) << text;
    if (!p.gone.empty()) EXPECT_THAT(text, Not(HasSubstr(p.gone))) << text;
    absl::StatusOr<Array> got = fused(args[0], args[1]);
    ASSERT_TRUE(got.ok()) << got.status();
    absl::StatusOr<Array> want = unfused(args[0], args[1]);
    ASSERT_TRUE(want.ok()) << want.status();
    Tensor g = *got->to_host(), w = *want->to_host();
    ASSERT_EQ(g.type(), w.type());
    if (p.f64_oracle_for_bf16 && dtype == DType::kBF16) {
      const std::vector<double> exact = MatmulF64(hosts[0], hosts[1], p.transpose_rhs);
      ASSERT_EQ(static_cast<int64_t>(exact.size()), g.num_elements());
      for (int64_t i = 0; i < g.num_elements(); ++i) {
        // One rounding to bf16 (half an ulp, 2^-9 relative) of an f32-accurate sum.
        ASSERT_NEAR(g.GetDouble(i), exact[i], 1e-4 + std::abs(exact[i]) / 256) << "element " << i;
      }
      return;
    }
    // f32: sums of k products in another order; bf16: one rounding of nearly equal f32 sums.
    const double rel = g.dtype() == DType::kBF16 ? 1.0 / 128 : 1e-5;
    const double abs = g.dtype() == DType::kBF16 ? 1e-2 : 1e-4;
    for (int64_t i = 0; i < g.num_elements(); ++i) {
      ASSERT_NEAR(g.GetDouble(i), w.GetDouble(i), abs + rel * std::abs(w.GetDouble(i)))
          << "element " << i;
    }
  }
};

TEST_P(CollectiveFusionTest, RingsMatchTheUnfusedProgram) {
  const int64_t n = RingSize();
  const AxisNames axes = GetParam().ring;
  const SpecEntry ring = Ring();
  Runtime rt({.num_devices = 16});
  absl::StatusOr<Mesh> mesh = make_mesh(rt, GetParam().axes);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::mt19937 gen(n * 31 + GetParam().axes.size());
  auto odd = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen) | 1;
  };
  for (int round = 0; round < 2; ++round) {
    const int64_t m = odd(1, 9), k = odd(3, 21), c = odd(1, 13);
    std::vector<Program> programs = {
        // The gathered rows of the lhs (a free dim): each shard lands in its rows of the result.
        {"gather lhs rows",
         [&](Tracer x, Tracer w) {
           return lax::dot_general(lax::all_gather(x, axes, 0, true), w, DotDims{{1}, {0}});
         },
         {{n * m, k}, {k, c}},
         {P(ring), P()},
         P(),
         {"ppermute_start", "dot_accumulate"},
         "all_gather"},
        // The gathered columns of the rhs, its contracting dim first.
        {"gather rhs columns",
         [&](Tracer x, Tracer w) {
           return lax::dot_general(w, lax::all_gather(x, axes, 1, true), DotDims{{1}, {0}});
         },
         {{k, n * m}, {c, k}},
         {P(None, ring), P()},
         P(),
         {"ppermute_start", "dot_accumulate"},
         "all_gather"},
        // The lhs gathered along its contracting dim: partial products accumulate.
        {"gather lhs contracting",
         [&](Tracer x, Tracer w) {
           return lax::dot_general(lax::all_gather(x, axes, 1, true), w, DotDims{{1}, {0}});
         },
         {{m, n * k}, {n * k, c}},
         {P(None, ring), P()},
         P(),
         {"ppermute_start", "dot_accumulate", "dynamic_slice"},
         "all_gather"},
        // dot + psum_scatter along the lhs rows: a reduce-scatter ring.
        {"reduce-scatter lhs rows",
         [&](Tracer x, Tracer w) {
           return lax::psum_scatter(lax::dot_general(x, w, DotDims{{1}, {0}}), axes, 0, true);
         },
         {{n * m, n * k}, {n * k, c}},
         {P(None, ring), P(ring)},
         P(ring),
         {"ppermute_start", "dot_accumulate"},
         "psum_scatter",
         true},
        // ... and along the rhs columns, with a transposed rhs.
        {"reduce-scatter rhs columns",
         [&](Tracer x, Tracer w) {
           return lax::psum_scatter(lax::dot_general(x, w, DotDims{{1}, {1}}), axes, 1, true);
         },
         {{m, n * k}, {n * c, n * k}},
         {P(None, ring), P(None, ring)},
         P(None, ring),
         {"ppermute_start", "dot_accumulate"},
         "psum_scatter",
         true,
         true},
    };
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (const Program& p : programs) Check(p, dtype, rt, *mesh, round);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, CollectiveFusionTest,
    ::testing::Values(MeshCase{"i2", {{"i", 2}}, {"i"}}, MeshCase{"i4", {{"i", 4}}, {"i"}},
                      MeshCase{"i8", {{"i", 8}}, {"i"}},
                      MeshCase{"x2y2_y", {{"x", 2}, {"y", 2}}, {"y"}},
                      MeshCase{"x2y2_xy", {{"x", 2}, {"y", 2}}, AxisNames({"x", "y"})},
                      MeshCase{"x4y4_x", {{"x", 4}, {"y", 4}}, {"x"}},
                      MeshCase{"x4y4_yx", {{"x", 4}, {"y", 4}}, AxisNames({"y", "x"})}),
    [](const ::testing::TestParamInfo<MeshCase>& info) { return info.param.name; });

}  // namespace
}  // namespace shardjit
