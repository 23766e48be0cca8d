// Seed 000's blocked matmul kernel against an f64 product and the built-in dot_general on both
// backends (the x86 backend compiling it, the reference backend interpreting it): exact blocks,
// blocks overhanging m and n (the seed's 128^3 blocks among them), a masked k edge, one partial
// block, f32 and bf16 inputs, f32 and bf16 outputs.
#include "examples/kernels/blocked_matmul.h"

#include <cmath>
#include <vector>

#include "backends/x86/pallas_call.h"
#include "fmt/format.h"
#include "gtest/gtest.h"

namespace shardjit::examples {
namespace {

struct Case {
  int64_t m, k, n;
  MatmulBlocks blocks;
  DType in, out;
};

class BlockedMatmulTest : public ::testing::TestWithParam<Backend> {};

TEST_P(BlockedMatmulTest, MatchesF64) {
  Runtime rt({.num_devices = 1, .num_threads = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  for (const Case& c : {Case{64, 96, 48, {32, 32, 16}, DType::kF32, DType::kF32},
                        Case{70, 64, 45, {32, 32, 16}, DType::kBF16, DType::kF32},
                        Case{37, 50, 29, {16, 16, 8}, DType::kF32, DType::kF32},
                        Case{5, 7, 3, {8, 8, 8}, DType::kF32, DType::kF32},
                        Case{96, 128, 64, {32, 64, 32}, DType::kBF16, DType::kBF16},
                        // The seed's 128^3 blocks, overhanging m and n.
                        Case{300, 256, 200, {128, 128, 128}, DType::kBF16, DType::kF32}}) {
    SCOPED_TRACE(fmt::format("{}x{}x{} {}", c.m, c.k, c.n, DTypeName(c.in)));
    Tensor xh = *random::normal(random::key(1), {c.m, c.k}, c.in);
    Tensor yh = *random::normal(random::key(2), {c.k, c.n}, c.in);
    Array x = *device_put(xh, NamedSharding(mesh, P()));
    Array y = *device_put(yh, NamedSharding(mesh, P()));
    const backends::x86::PallasCallStats before = backends::x86::GetPallasCallStats();
    absl::StatusOr<Array> got =
        jit([&](Tracer a,
                Tracer b) { return BlockedMatmul(c.m, c.k, c.n, c.blocks, c.out)(a, b)[0]; },
            {.backend = GetParam()})(x, y);
    ASSERT_TRUE(got.ok()) << got.status();
    absl::StatusOr<Array> builtin =
        jit([&](Tracer a, Tracer b) {
          return lax::dot_general(a, b, {.lhs_contracting = {1}, .rhs_contracting = {0}}, c.out);
        }, {.backend = GetParam()})(x, y);
    ASSERT_TRUE(builtin.ok()) << builtin.status();
    Tensor dot = *builtin->to_host();
    if (GetParam() == Backend::kX86) {
      EXPECT_EQ(backends::x86::GetPallasCallStats().compiled, before.compiled + 1);
    }
    std::vector<double> xd = xh.ToDoubles(), yd = yh.ToDoubles();
    Tensor out = *got->to_host();
    EXPECT_EQ(out.dtype(), c.out);
    const double rel = c.out == DType::kBF16 ? std::ldexp(1.0, -8) : 1e-5;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double want = 0;
        for (int64_t p = 0; p < c.k; ++p) want += xd[i * c.k + p] * yd[p * c.n + j];
        ASSERT_NEAR(out.GetDouble(i * c.n + j), want, 1e-4 + rel * std::abs(want))
            << i << "," << j;
        ASSERT_NEAR(out.GetDouble(i * c.n + j), dot.GetDouble(i * c.n + j),
                    2e-4 + 2 * rel * std::abs(want))
            << "against dot_general at " << i << "," << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BlockedMatmulTest,
                         ::testing::Values(Backend::kReference, Backend::kX86),
                         [](const auto& info) {
                           return info.param == Backend::kX86 ? "x86" : "reference";
                         });

}  // namespace
}  // namespace shardjit::examples
