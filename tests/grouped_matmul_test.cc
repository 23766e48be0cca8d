// gmm and tgmm through jit: experts sharded over a mesh axis in shard_map (each device its groups,
// selected by group_offset = axis_index * local groups), global-view programs partitioned over n
// and over k, all against an f64 computation of the whole product; the shape rule's errors at
// trace time and the kernels' errors for bad group sizes at run time.
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

Runtime& SharedRuntime() {
  static Runtime* rt = new Runtime({.num_devices = 8});
  return *rt;
}

std::vector<double> Random(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

Tensor Host(DType dtype, std::vector<int64_t> dims, const std::vector<double>& v) {
  return Tensor::FromDoubles({dtype, std::move(dims)}, v);
}

// The whole gmm (every group) in f64: lhs[m,k], rhs[G,k,n].
std::vector<double> GmmF64(const std::vector<double>& lhs, const std::vector<double>& rhs,
                           const std::vector<int>& sizes, int64_t m, int64_t k, int64_t n) {
  std::vector<double> out(m * n, 0);
  int64_t row = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    for (int64_t r = row; r < row + sizes[g]; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t l = 0; l < k; ++l) out[r * n + j] += lhs[r * k + l] * rhs[(g * k + l) * n + j];
      }
    }
    row += sizes[g];
  }
  return out;
}

// The whole tgmm in f64: lhs[k,m], rhs[m,n] -> [G,k,n].
std::vector<double> TgmmF64(const std::vector<double>& lhs, const std::vector<double>& rhs,
                            const std::vector<int>& sizes, int64_t m, int64_t k, int64_t n) {
  std::vector<double> out(sizes.size() * k * n, 0);
  int64_t row = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t r = row; r < row + sizes[g]; ++r) {
          out[(g * k + i) * n + j] += lhs[i * m + r] * rhs[r * n + j];
        }
      }
    }
    row += sizes[g];
  }
  return out;
}

void ExpectNear(const Array& got, const std::vector<double>& want, double tol) {
  absl::StatusOr<Tensor> host = got.to_host();
  ASSERT_TRUE(host.ok()) << host.status();
  const std::vector<double> values = host->ToDoubles();
  ASSERT_EQ(values.size(), want.size());
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_NEAR(values[i], want[i], tol) << "element " << i;
  }
}

struct Problem {
  int64_t m, k, n;
  std::vector<int> sizes;
};

std::vector<double> Sizes(const Problem& p) { return {p.sizes.begin(), p.sizes.end()}; }

// Experts sharded over "e": each device multiplies its groups' rows; the psum over "e" is the
// whole gmm (rows of other devices' groups are zeros on each device).
TEST(GroupedMatmulJitTest, ExpertsShardedInShardMap) {
  for (int devices : {1, 2, 4}) {
    for (const Problem& p : {Problem{67, 24, 40, {9, 0, 17, 3, 0, 21, 11, 6}},
                             Problem{48, 16, 32, {0, 0, 48, 0, 0, 0, 0, 0}},
                             Problem{30, 8, 20, {2, 3, 0, 0, 5, 1, 0, 4}}}) {
      SCOPED_TRACE("devices " + std::to_string(devices) + " m " + std::to_string(p.m));
      absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(), {{"e", devices}});
      ASSERT_TRUE(mesh.ok()) << mesh.status();
      const int64_t g = static_cast<int64_t>(p.sizes.size());
      const int64_t local = g / devices;
      const std::vector<double> lhs = Random(p.m * p.k, 1), rhs = Random(g * p.k * p.n, 2);
      Array a = *device_put(Host(DType::kF32, {p.m, p.k}, lhs), NamedSharding(*mesh, P()));
      Array b = *device_put(Host(DType::kF32, {g, p.k, p.n}, rhs), NamedSharding(*mesh, P("e")));
      Array s = *device_put(Host(DType::kS32, {g}, Sizes(p)), NamedSharding(*mesh, P()));
      auto f = jit(shard_map(
          [local](Tracer x, Tracer w, Tracer sizes) {
            Tracer offset = lax::axis_index("e") * static_cast<int32_t>(local);
            return lax::psum(lax::gmm(x, w, sizes, DType::kF32, offset), "e");
          },
          *mesh, {P(), P("e"), P()}, {P()}));
      absl::StatusOr<Array> out = f(a, b, s);
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectNear(*out, GmmF64(lhs, rhs, p.sizes, p.m, p.k, p.n), 1e-4);

      // tgmm: each device computes its groups' [local, k, n] blocks of the whole result.
      const std::vector<double> lhs_t = Random(p.k * p.m, 3), rhs_t = Random(p.m * p.n, 4);
      Array at = *device_put(Host(DType::kF32, {p.k, p.m}, lhs_t), NamedSharding(*mesh, P()));
      Array bt = *device_put(Host(DType::kF32, {p.m, p.n}, rhs_t), NamedSharding(*mesh, P()));
      auto t = jit(shard_map(
          [local](Tracer x, Tracer y, Tracer sizes) {
            Tracer offset = lax::axis_index("e") * static_cast<int32_t>(local);
            return lax::tgmm(x, y, sizes, DType::kF32, offset, local);
          },
          *mesh, {P(), P(), P()}, {P("e")}));
      absl::StatusOr<Array> out_t = t(at, bt, s);
      ASSERT_TRUE(out_t.ok()) << out_t.status();
      ExpectNear(*out_t, TgmmF64(lhs_t, rhs_t, p.sizes, p.m, p.k, p.n), 1e-4);
    }
  }
}

// A global-view gmm / tgmm on operands sharded over n or k: the partitioner keeps the grouped
// rows whole and splits the columns, or contracts k in pieces and adds them with a psum.
TEST(GroupedMatmulJitTest, GlobalViewPartitionsColumnsAndDepth) {
  absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(), {{"x", 2}, {"y", 2}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const Problem p{37, 32, 48, {5, 0, 20, 12}};
  const int64_t g = 4;
  const std::vector<double> lhs = Random(p.m * p.k, 5), rhs = Random(g * p.k * p.n, 6);
  const std::vector<double> want = GmmF64(lhs, rhs, p.sizes, p.m, p.k, p.n);
  struct Layout {
    PartitionSpec lhs, rhs;
  };
  for (const Layout& l : {Layout{P(), P(None, None, "x")}, Layout{P(None, "y"), P(None, "y", None)},
                          Layout{P(None, "x"), P(None, "x", "y")}}) {
    Array a = *device_put(Host(DType::kF32, {p.m, p.k}, lhs), NamedSharding(*mesh, l.lhs));
    Array b = *device_put(Host(DType::kF32, {g, p.k, p.n}, rhs), NamedSharding(*mesh, l.rhs));
    Array s = *device_put(Host(DType::kS32, {g}, Sizes(p)), NamedSharding(*mesh, P()));
    auto f = jit([](Tracer x, Tracer w, Tracer sizes) { return lax::gmm(x, w, sizes); });
    absl::StatusOr<Array> out = f(a, b, s);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear(*out, want, 1e-4);
  }
  const std::vector<double> lhs_t = Random(p.k * p.m, 7), rhs_t = Random(p.m * p.n, 8);
  Array at = *device_put(Host(DType::kF32, {p.k, p.m}, lhs_t), NamedSharding(*mesh, P("x")));
  Array bt = *device_put(Host(DType::kF32, {p.m, p.n}, rhs_t), NamedSharding(*mesh, P(None, "y")));
  Array s = *device_put(Host(DType::kS32, {g}, Sizes(p)), NamedSharding(*mesh, P()));
  auto t = jit([](Tracer x, Tracer y, Tracer sizes) { return lax::tgmm(x, y, sizes); });
  absl::StatusOr<Array> out_t = t(at, bt, s);
  ASSERT_TRUE(out_t.ok()) << out_t.status();
  ExpectNear(*out_t, TgmmF64(lhs_t, rhs_t, p.sizes, p.m, p.k, p.n), 1e-4);
}

// bf16 operands with f32 and bf16 results, and transpose_rhs, on one device.
TEST(GroupedMatmulJitTest, Bf16AndTransposedRhs) {
  absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(), {{"x", 1}});
  const Problem p{45, 40, 24, {7, 0, 30, 3}};
  const int64_t g = 4;
  // Values exact in bf16.
  std::vector<double> lhs = Random(p.m * p.k, 9), rhs = Random(g * p.k * p.n, 10);
  for (double& v : lhs) v = std::round(v * 8) / 8;
  for (double& v : rhs) v = std::round(v * 8) / 8;
  const std::vector<double> want = GmmF64(lhs, rhs, p.sizes, p.m, p.k, p.n);
  // rhs transposed to [g, n, k].
  std::vector<double> rhs_t(rhs.size());
  for (int64_t e = 0; e < g; ++e) {
    for (int64_t l = 0; l < p.k; ++l) {
      for (int64_t j = 0; j < p.n; ++j) {
        rhs_t[(e * p.n + j) * p.k + l] = rhs[(e * p.k + l) * p.n + j];
      }
    }
  }
  const NamedSharding rep(*mesh, P());
  Array a = *device_put(Host(DType::kBF16, {p.m, p.k}, lhs), rep);
  Array b = *device_put(Host(DType::kBF16, {g, p.n, p.k}, rhs_t), rep);
  Array s = *device_put(Host(DType::kS32, {g}, Sizes(p)), rep);
  for (DType out_type : {DType::kF32, DType::kBF16}) {
    auto f = jit([out_type](Tracer x, Tracer w, Tracer sizes) {
      return lax::gmm(x, w, sizes, out_type, Tracer(), /*transpose_rhs=*/true);
    });
    absl::StatusOr<Array> out = f(a, b, s);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->dtype(), out_type);
    // Products of eighths sum exactly in f32; bf16 rounds once (|values| < 16: error < 1/16).
    ExpectNear(*out, want, out_type == DType::kF32 ? 1e-6 : 1.0 / 16);
  }
}

// The shape rule's errors, at trace time.
TEST(GroupedMatmulJitTest, ShapeErrors) {
  absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(), {{"x", 1}});
  const NamedSharding rep(*mesh, P());
  auto lower = [&](const std::vector<ShapedType>& types, bool tgmm_op,
                   bool transpose = false, int64_t groups = -1) {
    auto f = jit([&](const std::vector<Tracer>& x) {
      Tracer offset = x.size() > 3 ? x[3] : Tracer();
      return tgmm_op ? lax::tgmm(x[0], x[1], x[2], DType::kF32, offset, groups)
                     : lax::gmm(x[0], x[1], x[2], DType::kF32, offset, transpose);
    });
    return f.lower(types, std::vector<NamedSharding>(types.size(), rep)).status();
  };
  const ShapedType sizes{DType::kS32, {4}};
  struct Case {
    std::vector<ShapedType> types;
    bool tgmm;
    std::string message;
    bool transpose = false;
    int64_t groups = -1;
  };
  const std::vector<Case> cases = {
      {{{DType::kF32, {8, 5}}, {DType::kF32, {4, 6, 3}}, sizes}, false,
       "gmm: lhs k (5) differs from rhs k (6, dim 1, transpose_rhs=False)"},
      {{{DType::kF32, {8, 5}}, {DType::kF32, {4, 5, 3}}, sizes}, false,
       "gmm: lhs k (5) differs from rhs k (3, dim 2, transpose_rhs=True)", true},
      {{{DType::kF32, {8, 5}}, {DType::kF32, {5, 3}}, sizes}, false,
       "gmm: rhs must be rank 3 [num_groups, k, n]"},
      {{{DType::kF32, {8, 5}}, {DType::kBF16, {4, 5, 3}}, sizes}, false,
       "gmm: lhs and rhs dtypes differ (f32 vs bf16)"},
      {{{DType::kS32, {8, 5}}, {DType::kS32, {4, 5, 3}}, sizes}, false,
       "gmm: lhs and rhs must be f32 or bf16, got s32"},
      {{{DType::kF32, {8, 5}}, {DType::kF32, {4, 5, 3}}, {DType::kF32, {4}}}, false,
       "gmm: group_sizes must be s32[num_groups] with num_groups >= 1, got f32[4]"},
      {{{DType::kF32, {8, 5}}, {DType::kF32, {5, 5, 3}}, sizes}, false,
       "gmm: rhs has 5 groups but group_sizes only 4"},
      {{{DType::kF32, {8, 5}}, {DType::kF32, {4, 5, 3}}, sizes, {DType::kS32, {1}}}, false,
       "gmm: group_offset must be an s32 scalar, got s32[1]"},
      {{{DType::kF32, {5, 8}}, {DType::kF32, {9, 3}}, sizes}, true,
       "tgmm: lhs m (8, dim 1) differs from rhs m (9, dim 0)"},
      {{{DType::kF32, {5, 8}}, {DType::kF32, {8, 3}}, sizes}, true,
       "tgmm: num_actual_groups 5 is out of range [1, 4]", false, 5},
  };
  for (const Case& c : cases) {
    absl::Status s = lower(c.types, c.tgmm, c.transpose, c.groups);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

// Bad group sizes fail the run with the kernel's error.
TEST(GroupedMatmulJitTest, BadGroupSizesFailTheRun) {
  absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(), {{"x", 1}});
  const NamedSharding rep(*mesh, P());
  Array a = *device_put(Host(DType::kF32, {6, 2}, std::vector<double>(12, 1)), rep);
  Array b = *device_put(Host(DType::kF32, {2, 2, 3}, std::vector<double>(12, 1)), rep);
  auto f = jit([](Tracer x, Tracer w, Tracer sizes) { return lax::gmm(x, w, sizes); });
  Array neg = *device_put(Host(DType::kS32, {2}, {3, -1}), rep);
  absl::StatusOr<Array> out = f(a, b, neg);
  EXPECT_THAT(out.status().message(), HasSubstr("gmm: group_sizes[1] is negative (-1)"));
  Array past = *device_put(Host(DType::kS32, {2}, {3, 4}), rep);
  out = f(a, b, past);
  EXPECT_THAT(out.status().message(), HasSubstr("gmm: group_sizes[0..1] sum to 7, past the 6 rows of lhs"));
}

}  // namespace
}  // namespace shardjit
