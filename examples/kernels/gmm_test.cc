// Seed 003's gmm and tgmm as user kernels against f64 grouped products and the built-in
// lax::gmm / lax::tgmm, on both backends: groups that start inside tiles (tiles visited once per
// group), empty groups, groups summing to less than m (zero rows), partial k and n tiles, bf16
// inputs; and the group metadata against hand-derived values.
#include "examples/kernels/gmm.h"

#include <cmath>
#include <vector>

#include "backends/x86/pallas_call.h"
#include "fmt/format.h"
#include "gtest/gtest.h"

namespace shardjit::examples {
namespace {

class GmmKernelTest : public ::testing::TestWithParam<Backend> {
 protected:
  // The kernel's and the built-in's results of `f` on (x, y, group sizes), through jit on the
  // backend under test (checking that the x86 backend compiled the kernel); empty on failure.
  template <typename F>
  std::pair<std::vector<double>, std::vector<double>> KernelAndBuiltin(
      F f, const Tensor& x, const Tensor& y, const std::vector<double>& sizes) {
    auto put = [&](const Tensor& t) { return *device_put(t, NamedSharding(mesh_, P())); };
    const int64_t g = static_cast<int64_t>(sizes.size());
    const backends::x86::PallasCallStats before = backends::x86::GetPallasCallStats();
    absl::StatusOr<std::vector<Array>> got =
        jit(f, {.backend = GetParam()})(put(x), put(y), put(HostTensor(DType::kS32, {g}, sizes)));
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return {};
    if (GetParam() == Backend::kX86) {
      EXPECT_EQ(backends::x86::GetPallasCallStats().compiled, before.compiled + 1);
      EXPECT_EQ(backends::x86::GetPallasCallStats().interpreted, before.interpreted);
    }
    return {(*got)[0].to_host()->ToDoubles(), (*got)[1].to_host()->ToDoubles()};
  }

  Runtime rt_{{.num_devices = 1, .num_threads = 2}};
  Mesh mesh_ = *make_mesh(rt_, {{"x", 1}});
};

TEST_P(GmmKernelTest, MatchesF64AndTheBuiltInGmm) {
  struct Case {
    int64_t m, k, n;
    std::vector<double> sizes;
    GmmTiles tiles;
    DType dtype;
    DType out = DType::kF32;  // megablox's preferred_element_type
  };
  const std::vector<Case> cases = {
      {64, 48, 40, {10, 0, 22, 17, 0, 15}, {16, 16, 16}, DType::kF32},  // sums to 64
      {64, 50, 24, {5, 30, 0, 9}, {16, 16, 8}, DType::kF32},            // 44 of 64 rows
      {48, 32, 32, {48}, {16, 32, 32}, DType::kBF16},
      {32, 20, 12, {0, 0, 0}, {16, 8, 8}, DType::kF32},  // nothing to compute
      // bf16 results: the store narrows (convert(select(mask, acc, convert(old)))).
      {64, 48, 40, {10, 0, 22, 17, 0, 15}, {16, 16, 16}, DType::kBF16, DType::kBF16},
      {64, 50, 24, {5, 30, 0, 9}, {16, 16, 8}, DType::kF32, DType::kBF16},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{}x{}x{} groups {} out {}", c.m, c.k, c.n, c.sizes.size(),
                             DTypeName(c.out)));
    const int64_t g = static_cast<int64_t>(c.sizes.size());
    Tensor xh = *random::normal(random::key(5), {c.m, c.k}, c.dtype);
    Tensor wh = *random::normal(random::key(6), {g, c.k, c.n}, c.dtype);
    auto [kernel, builtin] = KernelAndBuiltin(
        [&](Tracer a, Tracer b, Tracer s) {
          return std::vector<Tracer>{Gmm(a, b, s, c.tiles, c.out), lax::gmm(a, b, s, c.out)};
        },
        xh, wh, c.sizes);
    ASSERT_FALSE(kernel.empty());
    std::vector<double> xd = xh.ToDoubles(), wd = wh.ToDoubles();
    int64_t row = 0;
    std::vector<double> want(c.m * c.n, 0.0);
    for (int64_t gi = 0; gi < g; ++gi) {
      for (int64_t r = row; r < row + static_cast<int64_t>(c.sizes[gi]); ++r) {
        for (int64_t j = 0; j < c.n; ++j) {
          double s = 0;
          for (int64_t p = 0; p < c.k; ++p) {
            s += xd[r * c.k + p] * wd[(gi * c.k + p) * c.n + j];
          }
          want[r * c.n + j] = s;
        }
      }
      row += static_cast<int64_t>(c.sizes[gi]);
    }
    // A bf16 result: one rounding of the f32 sum (2^-8 relative), which may fall on either side
    // for sums that differ in their last f32 bits.
    const double tol = c.out == DType::kBF16 ? 1.0 / 128 : 1e-4;
    for (int64_t i = 0; i < c.m * c.n; ++i) {
      ASSERT_NEAR(kernel[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
      ASSERT_NEAR(kernel[i], builtin[i], tol * (1 + std::abs(want[i]))) << "element " << i;
    }
  }
}

TEST_P(GmmKernelTest, TgmmMatchesF64AndTheBuiltInTgmm) {
  struct Case {
    int64_t k, m, n;
    std::vector<double> sizes;
    GmmTiles tiles;
    DType dtype;
  };
  const std::vector<Case> cases = {
      {40, 64, 24, {10, 0, 22, 17, 0, 15}, {16, 16, 8}, DType::kF32},
      {24, 48, 36, {5, 30, 0}, {16, 16, 16}, DType::kBF16},  // 35 of 48 rows
      {16, 32, 16, {0, 0}, {16, 16, 16}, DType::kF32},       // every group empty
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{}x{}x{} groups {}", c.k, c.m, c.n, c.sizes.size()));
    const int64_t g = static_cast<int64_t>(c.sizes.size());
    Tensor xh = *random::normal(random::key(7), {c.k, c.m}, c.dtype);
    Tensor yh = *random::normal(random::key(8), {c.m, c.n}, c.dtype);
    auto [kernel, builtin] = KernelAndBuiltin(
        [&](Tracer a, Tracer b, Tracer s) {
          return std::vector<Tracer>{Tgmm(a, b, s, c.tiles), lax::tgmm(a, b, s)};
        },
        xh, yh, c.sizes);
    ASSERT_FALSE(kernel.empty());
    std::vector<double> xd = xh.ToDoubles(), yd = yh.ToDoubles();
    std::vector<double> want(g * c.k * c.n, 0.0);
    int64_t row = 0;
    for (int64_t gi = 0; gi < g; ++gi) {
      for (int64_t r = row; r < row + static_cast<int64_t>(c.sizes[gi]); ++r) {
        for (int64_t i = 0; i < c.k; ++i) {
          for (int64_t j = 0; j < c.n; ++j) {
            want[(gi * c.k + i) * c.n + j] += xd[i * c.m + r] * yd[r * c.n + j];
          }
        }
      }
      row += static_cast<int64_t>(c.sizes[gi]);
    }
    ASSERT_EQ(kernel.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(kernel[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << "element " << i;
      ASSERT_NEAR(kernel[i], builtin[i], 1e-4 * (1 + std::abs(want[i]))) << "element " << i;
    }
  }
}

// megablox's metadata for sizes (10, 0, 22, 17, 0, 15) over 64 rows in tiles of 16: group 0
// owns tile 0, group 2 starts inside it (a second visit) and owns tile 1, group 3 starts inside
// tile 1 and owns tile 2, group 5 starts inside tile 3 only after group 3 owns it.
TEST_P(GmmKernelTest, GroupMetadataByHand) {
  Array sizes =
      *device_put(HostTensor(DType::kS32, {6}, {10, 0, 22, 17, 0, 15}), NamedSharding(mesh_, P()));
  absl::StatusOr<std::vector<Array>> got = jit(
      [](Tracer s) {
        GroupMetadata m = MakeGroupMetadata(s, 64, 16);
        return std::vector<Tracer>{m.group_offsets, m.group_ids, m.m_tile_ids, m.num_tiles};
      },
      {.backend = GetParam()})(sizes);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].to_host()->ToDoubles(), (std::vector<double>{0, 10, 10, 32, 49, 49, 64}));
  // Tiles: group 0 -> tile 0; group 2 -> tiles 0, 1; group 3 -> tiles 2, 3; group 5 -> tile 3.
  EXPECT_EQ((*got)[1].to_host()->ToDoubles(), (std::vector<double>{0, 2, 2, 3, 3, 5, 5, 5, 5}));
  EXPECT_EQ((*got)[2].to_host()->ToDoubles(), (std::vector<double>{0, 0, 1, 2, 3, 3, 3, 3, 3}));
  EXPECT_EQ((*got)[3].to_host()->ToDoubles(), (std::vector<double>{6}));
  // Visiting empty groups (tgmm): group 1 (empty, at row 10) gets tile 0, group 4 (empty, at
  // row 49) tile 3.
  absl::StatusOr<std::vector<Array>> visiting = jit(
      [](Tracer s) {
        GroupMetadata m = MakeGroupMetadata(s, 64, 16, /*visit_empty_groups=*/true);
        return std::vector<Tracer>{m.group_ids, m.m_tile_ids, m.num_tiles};
      },
      {.backend = GetParam()})(sizes);
  ASSERT_TRUE(visiting.ok()) << visiting.status();
  EXPECT_EQ((*visiting)[0].to_host()->ToDoubles(),
            (std::vector<double>{0, 1, 2, 2, 3, 3, 4, 5, 5}));
  EXPECT_EQ((*visiting)[1].to_host()->ToDoubles(),
            (std::vector<double>{0, 0, 0, 1, 2, 3, 3, 3, 3}));
  EXPECT_EQ((*visiting)[2].to_host()->ToDoubles(), (std::vector<double>{8}));
}

INSTANTIATE_TEST_SUITE_P(Backends, GmmKernelTest,
                         ::testing::Values(Backend::kReference, Backend::kX86),
                         [](const auto& info) {
                           return info.param == Backend::kX86 ? "x86" : "reference";
                         });

}  // namespace
}  // namespace shardjit::examples
