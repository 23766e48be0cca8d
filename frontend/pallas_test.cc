// pallas_call through jit on both backends, against values computed here in double precision:
// a matmul accumulating into its output block (exact and overhanging blocks), padding read and
// writes clipped at the edges, squeezed block dimensions, scalar prefetch driving index maps,
// input/output aliasing, fori_loop and dynamic windows inside kernels, whole-array refs, grids
// sized at run time, mpmd_map and global-view calls; the IR text round trip; the errors: block
// indices out of range, windows leaving a ref, kernel arity, refs used as values, kernel ops
// outside kernels; and the x86 backend's compiled kernels against the interpreter.
#include <bit>
#include <climits>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/x86/pallas_call.h"
#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/ir.pb.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;

class PallasTest : public ::testing::TestWithParam<Backend> {
 protected:
  Runtime rt_{{.num_devices = 1}};
  Mesh mesh_ = *make_mesh(rt_, {{"x", 1}});

  Array Put(DType dtype, std::vector<int64_t> dims, std::vector<double> values) {
    return *device_put(HostTensor(dtype, std::move(dims), std::move(values)),
                       NamedSharding(mesh_, P()));
  }
};

std::vector<double> Ramp(int64_t n, double scale, double offset) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::fmod(i * scale, 7.0) - offset;
  return v;
}

std::vector<double> MatmulF64(const std::vector<double>& x, const std::vector<double>& y,
                              int64_t m, int64_t k, int64_t n) {
  std::vector<double> out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) out[i * n + j] += x[i * k + p] * y[p * n + j];
    }
  }
  return out;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
  }
}

// o[i, j] += x[i, k-block] @ y[k-block, j] over the k axis, o zeroed at k = 0: the dot
// accumulates straight into the output block (in place for inner blocks, through padding at the
// edges, on the x86 backend).
pl::PallasCall AccumulatingMatmul(int64_t m, int64_t k, int64_t n, int64_t bm, int64_t bk,
                                  int64_t bn, pl::GridSemantics first = pl::kParallel) {
  return pl::pallas_call(
      [=](pl::Ref xr, pl::Ref yr, pl::Ref o) {
        pl::when(lax::eq(pl::program_id(1), lax::scalar(0, DType::kS32)),
                 [&] { o.store(lax::full({bm, bn}, 0, DType::kF32)); });
        o.store(o.load() + pl::dot(xr.load(), yr.load(), DType::kF32));
      },
      {.out_shapes = {{DType::kF32, {m, n}}},
       .grid = {pl::cdiv(m, bm), pl::cdiv(k, bk), pl::cdiv(n, bn)},
       .in_specs = {pl::BlockSpec({bm, bk}, [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; }),
                    pl::BlockSpec({bk, bn}, [](pl::Idx g) { return pl::Blocks{g[1], g[2]}; })},
       .out_specs = {pl::BlockSpec({bm, bn}, [](pl::Idx g) { return pl::Blocks{g[0], g[2]}; })},
       .dimension_semantics = {first, pl::kArbitrary, pl::kArbitrary},
       .name = "matmul"});
}

TEST_P(PallasTest, AccumulatingMatmulMatchesF64) {
  // Exact blocks, and blocks overhanging m and n (k divides: its padding would be NaN).
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{32, 48, 16}, {37, 32, 29}}) {
    std::vector<double> xv = Ramp(m * k, 0.37, 3), yv = Ramp(k * n, 0.61, 2.5);
    Array x = Put(DType::kF32, {m, k}, xv), y = Put(DType::kF32, {k, n}, yv);
    auto f = jit(
        [&](Tracer a, Tracer b) { return AccumulatingMatmul(m, k, n, 16, 16, 8)(a, b)[0]; },
        {.backend = GetParam()});
    absl::StatusOr<Array> got = f(x, y);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(got->to_host()->ToDoubles(), MatmulF64(xv, yv, m, k, n), 1e-5);
  }
}

TEST_P(PallasTest, OverhangingBlocksReadPaddingAndClipWrites) {
  // Blocks of 4 over 10 elements: the last block's two elements past the end read NaN (their
  // sum is NaN), and the kernel's writes there are dropped.
  Array x = Put(DType::kF32, {10}, Ramp(10, 1, 0));
  auto f = jit([](Tracer a) {
    return pl::pallas_call(
        [](pl::Ref in, pl::Ref out, pl::Ref sums) {
          out.store(in.load() + 1.0f);
          sums.store({pl::program_id(0)}, lax::reduce_sum(in.load(), {0}));
        },
        {.out_shapes = {{DType::kF32, {10}}, {DType::kF32, {3}}},
         .grid = {3},
         .in_specs = {pl::BlockSpec({4}, [](pl::Idx g) { return pl::Blocks{g[0]}; })},
         .out_specs = {pl::BlockSpec({4}, [](pl::Idx g) { return pl::Blocks{g[0]}; }),
                       pl::BlockSpec::Any()}})(a);
  }, {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> got = f(x);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<double> xv = Ramp(10, 1, 0), want(10);
  for (int i = 0; i < 10; ++i) want[i] = xv[i] + 1;
  EXPECT_EQ((*got)[0].to_host()->ToDoubles(), want);
  std::vector<double> sums = (*got)[1].to_host()->ToDoubles();
  EXPECT_EQ(sums[0], xv[0] + xv[1] + xv[2] + xv[3]);
  EXPECT_EQ(sums[1], xv[4] + xv[5] + xv[6] + xv[7]);
  EXPECT_TRUE(std::isnan(sums[2]));
}

TEST_P(PallasTest, SqueezedDimsAndWholeArrayRefs) {
  // x[3, 10]: each step sees one row (squeezed) and adds the whole bias vector to it.
  std::vector<double> xv = Ramp(30, 1.3, 2), bv = Ramp(10, 0.7, 1);
  Array x = Put(DType::kF32, {3, 10}, xv), bias = Put(DType::kF32, {10}, bv);
  auto f = jit([](Tracer a, Tracer b) {
    return pl::pallas_call(
        [](pl::Ref row, pl::Ref bias, pl::Ref out) {
          EXPECT_EQ(row.shape(), (std::vector<int64_t>{10}));
          out.store(row.load() * 2.0f + bias.load());
        },
        {.out_shapes = {{DType::kF32, {3, 10}}},
         .grid = {3},
         .in_specs = {pl::BlockSpec({pl::kSqueezed, 10},
                                    [](pl::Idx g) { return pl::Blocks{g[0], 0}; }),
                      pl::BlockSpec::Any()},
         .out_specs = {pl::BlockSpec({pl::kSqueezed, 10},
                                     [](pl::Idx g) { return pl::Blocks{g[0], 0}; })}})(a, b)[0];
  }, {.backend = GetParam()});
  absl::StatusOr<Array> got = f(x, bias);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<double> want(30);
  for (int i = 0; i < 30; ++i) want[i] = 2 * xv[i] + bv[i % 10];
  ExpectNear(got->to_host()->ToDoubles(), want, 1e-6);
}

TEST_P(PallasTest, ScalarPrefetchDrivesTheIndexMap) {
  // out block i = x block order[i] + order[i] (a gather of row blocks by a prefetched table).
  std::vector<double> xv = Ramp(4 * 3 * 5, 0.9, 1);
  Array order = Put(DType::kS32, {4}, {2, 0, 3, 2});
  Array x = Put(DType::kF32, {12, 5}, xv);
  auto f = jit([](Tracer table, Tracer a) {
    return pl::pallas_call(
        [](pl::Ref table, pl::Ref block, pl::Ref out) {
          Tracer which = table.load({pl::program_id(0)});
          out.store(block.load() + lax::convert_element_type(which, DType::kF32));
        },
        {.out_shapes = {{DType::kF32, {12, 5}}},
         .grid = {4},
         .in_specs = {pl::BlockSpec({3, 5},
                                    [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                      return pl::Blocks{p[0].load({g[0]}), 0};
                                    })},
         .out_specs = {pl::BlockSpec({3, 5}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; })},
         .num_scalar_prefetch = 1})(table, a)[0];
  }, {.backend = GetParam()});
  absl::StatusOr<Array> got = f(order, x);
  ASSERT_TRUE(got.ok()) << got.status();
  const int table[4] = {2, 0, 3, 2};
  std::vector<double> want(60);
  for (int i = 0; i < 4; ++i) {
    for (int r = 0; r < 15; ++r) want[i * 15 + r] = xv[table[i] * 15 + r] + table[i];
  }
  ExpectNear(got->to_host()->ToDoubles(), want, 1e-6);
}

TEST_P(PallasTest, AliasedOutputKeepsUnvisitedBlocks) {
  // Only the blocks at even grid indices are written; the others keep the aliased input.
  std::vector<double> xv = Ramp(16, 1.1, 0);
  Array x = Put(DType::kS32, {16}, std::vector<double>(16, 5));
  auto f = jit([](Tracer a) {
    return pl::pallas_call(
        [](pl::Ref in, pl::Ref out) {
          pl::when(lax::eq(lax::rem(pl::program_id(0), lax::scalar(2, DType::kS32)),
                           lax::scalar(0, DType::kS32)),
                   [&] { out.store(in.load() * 3 + pl::program_id(0)); });
        },
        {.out_shapes = {{DType::kS32, {16}}},
         .grid = {4},
         .in_specs = {pl::BlockSpec({4}, [](pl::Idx g) { return pl::Blocks{g[0]}; })},
         .out_specs = {pl::BlockSpec({4}, [](pl::Idx g) { return pl::Blocks{g[0]}; })},
         .input_output_aliases = {{0, 0}}})(a)[0];
  }, {.backend = GetParam()});
  absl::StatusOr<Array> got = f(x);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<double> want(16, 5);
  for (int i = 0; i < 16; ++i) {
    if ((i / 4) % 2 == 0) want[i] = 15 + i / 4;
  }
  EXPECT_EQ(got->to_host()->ToDoubles(), want);
}

TEST_P(PallasTest, ForiLoopWithDynamicWindowsInsideTheKernel) {
  // A running sum over the rows of each [6, 4] block, row by row through ds(i, 1) windows.
  std::vector<double> xv = Ramp(12 * 4, 0.8, 2);
  Array x = Put(DType::kF32, {12, 4}, xv);
  auto f = jit([](Tracer a) {
    return pl::pallas_call(
        [](pl::Ref in, pl::Ref out) {
          out.store({pl::ds(0, 1)}, in.load({pl::ds(0, 1)}));
          lax::fori_loop(1, 6, [&](Tracer i, std::vector<Tracer> c) {
            Tracer prev = out.load({pl::ds(i - 1, 1)});
            out.store({pl::ds(i, 1)}, prev + in.load({pl::ds(i, 1)}));
            return c;
          }, std::vector<Tracer>{});
        },
        {.out_shapes = {{DType::kF32, {12, 4}}},
         .grid = {2},
         .in_specs = {pl::BlockSpec({6, 4}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; })},
         .out_specs = {pl::BlockSpec({6, 4}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; })}})(
        a)[0];
  }, {.backend = GetParam()});
  absl::StatusOr<Array> got = f(x);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<double> want(48);
  for (int r = 0; r < 12; ++r) {
    for (int c = 0; c < 4; ++c) {
      want[r * 4 + c] = xv[r * 4 + c] + (r % 6 == 0 ? 0 : want[(r - 1) * 4 + c]);
    }
  }
  ExpectNear(got->to_host()->ToDoubles(), want, 1e-5);
}

TEST_P(PallasTest, DefaultSpecsAreWholeBlocksAndFreshOutputsArePadding) {
  Array x = Put(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto f = jit([](Tracer a) {
    return pl::pallas_call(
        [](pl::Ref in, pl::Ref out, pl::Ref untouched) { out.store(-in.load()); },
        {.out_shapes = {{DType::kF32, {2, 3}}, {DType::kS32, {2}}}})(a);
  }, {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> got = f(x);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].to_host()->ToDoubles(), (std::vector<double>{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ((*got)[1].to_host()->ToDoubles(),
            (std::vector<double>{-2147483648.0, -2147483648.0}));
}

TEST_P(PallasTest, IrTextRoundTripsAndRuns) {
  Array x = Put(DType::kF32, {16, 8}, Ramp(128, 0.3, 1));
  Array y = Put(DType::kF32, {8, 4}, Ramp(32, 0.7, 1));
  auto f = jit([](Tracer a, Tracer b) { return AccumulatingMatmul(16, 8, 4, 8, 4, 4)(a, b)[0]; },
               {.backend = GetParam()});
  absl::StatusOr<LoweredBase> lowered = f.lower(x, y);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  const std::string text = ir::PrintModule(lowered->traced_module());
  EXPECT_THAT(text, HasSubstr("pallas_call[name=matmul grid=(2,2,1)"));
  EXPECT_THAT(text, HasSubstr("ref[f32[8,4]]"));
  absl::StatusOr<ir::Module> parsed = ir::ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(ir::VerifyModule(*parsed).ok()) << ir::VerifyModule(*parsed);
  EXPECT_EQ(ir::PrintModule(*parsed), text);
}

TEST_P(PallasTest, BlockIndexOutOfRangeNamesKernelGridIndexAndSpec) {
  Array x = Put(DType::kF32, {8}, Ramp(8, 1, 0));
  auto f = jit([](Tracer a) {
    return pl::pallas_call([](pl::Ref in, pl::Ref out) { out.store(in.load()); },
                           {.out_shapes = {{DType::kF32, {8}}},
                            .grid = {3},
                            .in_specs = {pl::BlockSpec(
                                {4}, [](pl::Idx g) { return pl::Blocks{g[0]}; })},
                            .out_specs = {pl::BlockSpec(
                                {4}, [](pl::Idx g) { return pl::Blocks{g[0]}; })},
                            .name = "copy"})(a)[0];
  }, {.backend = GetParam()});
  absl::StatusOr<Array> got = f(x);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("kernel copy at grid index (2)"));
  EXPECT_THAT(got.status().message(), HasSubstr("in_specs[0] index_map gives block indices (2)"));
}

TEST_P(PallasTest, WindowLeavingARefNamesTheRef) {
  Array x = Put(DType::kF32, {8}, Ramp(8, 1, 0));
  auto f = jit([](Tracer a) {
    return pl::pallas_call(
        [](pl::Ref in, pl::Ref out) {
          out.store({pl::ds(0, 4)}, in.load({pl::ds(pl::program_id(0) * 5, 4)}));
        },
        {.out_shapes = {{DType::kF32, {8}}},
         .grid = {2},
         .in_specs = {pl::BlockSpec::Any()},
         .out_specs = {pl::BlockSpec({4}, [](pl::Idx g) { return pl::Blocks{g[0]}; })},
         .name = "shift"})(a)[0];
  }, {.backend = GetParam()});
  absl::StatusOr<Array> got = f(x);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(),
              HasSubstr("ref_load: kernel shift at grid index (1): the window at (5) of sizes "
                        "(4) leaves the in_specs[0] block of shape f32[8]"));
}

TEST_P(PallasTest, GridSizedAtRunTime) {
  // The grid's second axis has as many steps as the traced scalar says (none when negative);
  // each step writes its indices and num_programs into its own element.
  auto f = jit([](Tracer n) {
    return pl::pallas_call(
        [](pl::Ref out) {
          Tracer i = pl::program_id(0), j = pl::program_id(1);
          out.store({i * 8 + j}, j * 100 + i * 10 + pl::num_programs(1));
        },
        {.out_shapes = {{DType::kS32, {16}}},
         .grid = {2, n * 2},
         .out_specs = {pl::BlockSpec::Any()},
         .dimension_semantics = {pl::kParallel, pl::kArbitrary}})()[0];
  }, {.backend = GetParam()});
  const double pad = -2147483648.0;
  for (int n : {0, 1, 3, -2}) {
    absl::StatusOr<Array> got =
        f(Put(DType::kS32, {}, {static_cast<double>(n)}));
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<double> want(16, pad);
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < std::max(0, 2 * n); ++j) want[i * 8 + j] = j * 100 + i * 10 + 2 * n;
    }
    EXPECT_EQ(got->to_host()->ToDoubles(), want) << n;
  }
}

TEST_P(PallasTest, TracingErrors) {
  Array x = Put(DType::kF32, {8}, Ramp(8, 1, 0));
  auto run = [&](auto body) {
    auto f = jit(body, {.backend = GetParam()});
    absl::StatusOr<Array> got = f(x);
    EXPECT_FALSE(got.ok());
    return got.ok() ? std::string() : std::string(got.status().message());
  };
  EXPECT_THAT(run([](Tracer a) {
                return pl::pallas_call([](pl::Ref in) {}, {.out_shapes = {{DType::kF32, {8}}}})(
                    a)[0];
              }),
              HasSubstr("the kernel takes 1 refs, but the call gives 2"));
  EXPECT_THAT(run([](Tracer a) {
                return pl::pallas_call(
                    [](pl::Ref in, pl::Ref out) {
                      out.store(lax::add(in.tracer(), in.tracer()));
                    },
                    {.out_shapes = {{DType::kF32, {8}}}})(a)[0];
              }),
              HasSubstr("operand 0 is a ref (ref[f32[8]]); read it with ref_load first"));
  EXPECT_THAT(run([](Tracer a) { return a + lax::convert_element_type(pl::program_id(0),
                                                                       DType::kF32); }),
              HasSubstr("program_id: only allowed inside a pallas_call kernel"));
  EXPECT_THAT(run([](Tracer a) {
                return pl::pallas_call(
                    [](pl::Ref in, pl::Ref out) { out.store(in.load()); },
                    {.out_shapes = {{DType::kF32, {8}}},
                     .grid = {2},
                     .in_specs = {pl::BlockSpec({4, 1}, [](pl::Idx g) {
                       return pl::Blocks{g[0], 0};
                     })}})(a)[0];
              }),
              HasSubstr("in_specs[0] has a block shape of rank 2 (4,1) for an array of rank 1"));
  EXPECT_THAT(run([](Tracer a) {
                return pl::pallas_call(
                    [](pl::Ref in, pl::Ref out) { out.store(in.load({pl::ds(0, 4)})); },
                    {.out_shapes = {{DType::kF32, {8}}}})(a)[0];
              }),
              HasSubstr("ref_store: stores f32[4] into a window of f32[8]"));
  EXPECT_THAT(run([](Tracer a) {
                return pl::pallas_call([](pl::Ref in, pl::Ref out) { out.store(in.load()); },
                                       {.out_shapes = {{DType::kF32, {8}}},
                                        .grid = {lax::reduce_sum(a, {0})}})(a)[0];
              }),
              HasSubstr("a grid size traced at run time must be an integer scalar, got f32[]"));
}

// In a global-view program on sharded arrays the call is partitioned as replicated: the operands
// are gathered, every device runs the whole grid, the result is the same everywhere.
TEST_P(PallasTest, GlobalViewCallOnShardedOperands) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  const int64_t m = 24, k = 16, n = 12;
  std::vector<double> xv = Ramp(m * k, 0.3, 2), yv = Ramp(k * n, 0.45, 2);
  Array x = *device_put(HostTensor(DType::kF32, {m, k}, xv), NamedSharding(mesh, P("x", "y")));
  Array y = *device_put(HostTensor(DType::kF32, {k, n}, yv), NamedSharding(mesh, P(None, "x")));
  auto f = jit([&](Tracer a, Tracer b) {
    return AccumulatingMatmul(m, k, n, 8, 8, 4)(lax::exp(a * 0.1f), b)[0] * 2.0f;
  }, {.backend = GetParam()});
  absl::StatusOr<Array> got = f(x, y);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<double> ex(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) ex[i] = std::exp(static_cast<float>(xv[i]) * 0.1f);
  std::vector<double> want = MatmulF64(ex, yv, m, k, n);
  for (double& v : want) v *= 2;
  ExpectNear(got->to_host()->ToDoubles(), want, 1e-5);
}

// Seed 002's form: mpmd_map of (positions, kernel) pairs. On {x:2,y:2}, row x=0 scales its block
// by a kernel of 2-row blocks, row x=1 adds its position's row index by a kernel of squeezed
// rows; both under shard_map-style specs, on both backends.
// vmap of pallas_call: the batch becomes a leading parallel grid axis. The accumulating matmul
// batched over x (batch on its axis 1, y shared), over y (x shared) and over both; a kernel that
// writes program_id / num_programs and an aliased output (its initial values batched too). Each
// against the kernel applied element by element and against f64.
TEST_P(PallasTest, VmapAddsALeadingGridAxis) {
  const int64_t m = 20, k = 24, n = 12, batch = 3;
  std::vector<double> xv = Ramp(m * batch * k, 0.41, 3), yv = Ramp(batch * k * n, 0.29, 3);
  Array x = Put(DType::kF32, {m, batch, k}, xv), y = Put(DType::kF32, {batch, k, n}, yv);
  auto matmul = [&](Tracer a, Tracer b) { return AccumulatingMatmul(m, k, n, 8, 8, 4)(a, b)[0]; };
  struct Case {
    std::optional<int64_t> x_axis, y_axis;
  };
  for (const Case& c : {Case{1, std::nullopt}, Case{std::nullopt, 0}, Case{1, 0}}) {
    SCOPED_TRACE(::testing::PrintToString(c.x_axis) + " " + ::testing::PrintToString(c.y_axis));
    absl::StatusOr<Array> got = jit(
        [&](Tracer a, Tracer b) {
          Tracer xs = c.x_axis ? a : lax::slice(a, {0, 0, 0}, {m, 1, k});
          Tracer ys = c.y_axis ? b : lax::slice(b, {0, 0, 0}, {1, k, n});
          if (!c.x_axis) xs = lax::reshape(xs, {m, k});
          if (!c.y_axis) ys = lax::reshape(ys, {k, n});
          return vmap(matmul, {c.x_axis, c.y_axis})({xs, ys});
        },
        {.backend = GetParam()})(x, y);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->shape(), (std::vector<int64_t>{batch, m, n}));
    std::vector<double> want;
    for (int64_t e = 0; e < batch; ++e) {
      const int64_t xe = c.x_axis ? e : 0, ye = c.y_axis ? e : 0;
      std::vector<double> xs(m * k), ys(yv.begin() + ye * k * n, yv.begin() + (ye + 1) * k * n);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t p = 0; p < k; ++p) xs[i * k + p] = xv[(i * batch + xe) * k + p];
      }
      for (double v : MatmulF64(xs, ys, m, k, n)) want.push_back(v);
    }
    ExpectNear(got->to_host()->ToDoubles(), want, 1e-5);
  }
  // Grid queries see the kernel's own grid; an aliased output starts from its batched input.
  Array base = Put(DType::kF32, {4, 6}, Ramp(24, 0.5, 1));
  absl::StatusOr<Array> got = jit(
      [](Tracer b) {
        return vmap([](Tracer row) {
          return pl::pallas_call(
              [](pl::Ref in, pl::Ref out) {
                Tracer i = pl::program_id(0);
                Tracer v = lax::convert_element_type(i * 10 + pl::num_programs(0), DType::kF32);
                out.store(in.load() + v);
              },
              {.out_shapes = {{DType::kF32, {6}}},
               .grid = {3},
               .in_specs = {pl::BlockSpec({2}, [](pl::Idx g) { return pl::Blocks{g[0]}; })},
               .out_specs = {pl::BlockSpec({2}, [](pl::Idx g) { return pl::Blocks{g[0]}; })},
               .input_output_aliases = {{0, 0}}})(row)[0];
        })({b});
      },
      {.backend = GetParam()})(base);
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<double> in = base.to_host()->ToDoubles();
  std::vector<double> want(24);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 6; ++c) want[r * 6 + c] = in[r * 6 + c] + (c / 2) * 10 + 3;
  }
  ExpectNear(got->to_host()->ToDoubles(), want, 0);
}

TEST_P(PallasTest, VmapRefusesWhatItCannotBatch) {
  Array x = Put(DType::kF32, {2, 4}, Ramp(8, 0.5, 1));
  Array t = Put(DType::kS32, {2, 1}, {0, 0});
  auto run = [&](auto f, const std::vector<Array>& args) {
    return jit(f, {.backend = GetParam()}).call(args).status();
  };
  // A batched scalar prefetch.
  absl::Status s = run(
      [](Tracer table, Tracer a) {
        return vmap([](Tracer tb, Tracer row) {
          return pl::pallas_call([](pl::Ref, pl::Ref in, pl::Ref out) { out.store(in.load()); },
                                 {.out_shapes = {{DType::kF32, {4}}}, .num_scalar_prefetch = 1,
                                  .name = "copy"})(tb, row)[0];
        })({table, a});
      },
      {t, x});
  EXPECT_THAT(s.message(), HasSubstr("vmap of pallas_call copy: operand 0 (a grid size or scalar "
                                     "prefetch) is batched"));
  // A whole-array ref of a batched operand.
  s = run(
      [](Tracer a) {
        return vmap([](Tracer row) {
          return pl::pallas_call([](pl::Ref in, pl::Ref out) { out.store(in.load()); },
                                 {.out_shapes = {{DType::kF32, {4}}},
                                  .in_specs = {pl::BlockSpec::Any()}})(row)[0];
        })({a});
      },
      {x});
  EXPECT_THAT(s.message(), HasSubstr("in_specs[0] is a whole-array ref of a batched operand"));
}

TEST_P(PallasTest, KernelsOfAnMpmdMap) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  std::vector<double> xv = Ramp(8 * 6, 0.9, 2);
  Array x = *device_put(HostTensor(DType::kF32, {8, 6}, xv), NamedSharding(mesh, P("x", "y")));
  auto scale = [](Tracer a) {
    return pl::pallas_call(
        [](pl::Ref in, pl::Ref out) { out.store(in.load() * 3.0f); },
        {.out_shapes = {{DType::kF32, {4, 3}}},
         .grid = {2},
         .in_specs = {pl::BlockSpec({2, 3}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; })},
         .out_specs = {pl::BlockSpec({2, 3}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; })},
         .name = "scale"})(a)[0];
  };
  auto add_row = [](Tracer a) {
    return pl::pallas_call(
        [](pl::Ref in, pl::Ref out) {
          out.store(in.load() + lax::convert_element_type(pl::program_id(0), DType::kF32));
        },
        {.out_shapes = {{DType::kF32, {4, 3}}},
         .grid = {4},
         .in_specs = {pl::BlockSpec({pl::kSqueezed, 3},
                                    [](pl::Idx g) { return pl::Blocks{g[0], 0}; })},
         .out_specs = {pl::BlockSpec({pl::kSqueezed, 3},
                                     [](pl::Idx g) { return pl::Blocks{g[0], 0}; })},
         .name = "add_row"})(a)[0];
  };
  MpmdMapped f = mpmd_map(mesh,
                          {Program(PositionsAt(mesh, "x", 0), scale),
                           Program(PositionsAt(mesh, "x", 1), add_row)},
                          {P("x", "y")}, {P("x", "y")}, {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> got = f(x);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<double> want(48);
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 6; ++c) {
      want[r * 6 + c] = r < 4 ? 3 * xv[r * 6 + c] : xv[r * 6 + c] + (r - 4);
    }
  }
  ExpectNear((*got)[0].to_host()->ToDoubles(), want, 1e-6);
}

// The x86 backend compiles these kernels (no interpreter) and gives the interpreter's results:
// bitwise for data movement and elementwise code, to rounding for GEMMs.
class PallasCompiledTest : public ::testing::Test {
 protected:
  Runtime rt_{{.num_devices = 1, .num_threads = 2}};
  Mesh mesh_ = *make_mesh(rt_, {{"x", 1}});

  // Runs `f` on both backends; returns (reference, x86) results and checks the x86 run compiled.
  template <typename F>
  std::pair<std::vector<double>, std::vector<double>> Both(F f, const std::vector<Array>& args) {
    std::vector<double> out[2];
    for (Backend backend : {Backend::kReference, Backend::kX86}) {
      const backends::x86::PallasCallStats before = backends::x86::GetPallasCallStats();
      absl::StatusOr<std::vector<Array>> got =
          jit([&](const std::vector<Tracer>& a) { return std::vector<Tracer>{f(a)}; },
              {.backend = backend})(args);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) return {};
      out[backend == Backend::kX86] = (*got)[0].to_host()->ToDoubles();
      const backends::x86::PallasCallStats after = backends::x86::GetPallasCallStats();
      if (backend == Backend::kX86) {
        EXPECT_EQ(after.compiled, before.compiled + 1);
        EXPECT_EQ(after.interpreted, before.interpreted);
      }
    }
    return {out[0], out[1]};
  }
  Array Put(DType dtype, std::vector<int64_t> dims, std::vector<double> values) {
    return *device_put(HostTensor(dtype, std::move(dims), std::move(values)),
                       NamedSharding(mesh_, P()));
  }
};

TEST_F(PallasCompiledTest, AccumulatingIntoTheOutputBlockAcrossAnArbitraryAxis) {
  const int64_t m = 40, k = 48, n = 24;
  std::vector<double> xv = Ramp(m * k, 0.41, 3), yv = Ramp(k * n, 0.29, 3);
  Array x = Put(DType::kF32, {m, k}, xv), y = Put(DType::kF32, {k, n}, yv);
  for (auto semantics : {pl::kParallel, pl::kArbitrary}) {
    auto [ref, x86] = Both(
        [&](const std::vector<Tracer>& a) {
          return AccumulatingMatmul(m, k, n, 16, 16, 8, semantics)(a[0], a[1])[0];
        },
        {x, y});
    ExpectNear(x86, MatmulF64(xv, yv, m, k, n), 1e-5);
    ExpectNear(ref, x86, 1e-5);
  }
}

TEST_F(PallasCompiledTest, ElementwiseKernelsMatchTheInterpreterBitwise) {
  // Squeezed rows, an overhanging column block, scalar prefetch, a value loaded before the ref is
  // overwritten (it keeps the old contents), exp and a mask.
  std::vector<double> xv = Ramp(5 * 11, 0.77, 3);
  Array x = Put(DType::kF32, {5, 11}, xv);
  Array table = Put(DType::kS32, {5}, {4, 3, 2, 1, 0});
  for (auto semantics : {pl::kParallel, pl::kArbitrary}) {
    auto [ref, x86] = Both(
        [&](const std::vector<Tracer>& a) {
          return pl::pallas_call(
              [](pl::Ref t, pl::Ref row, pl::Ref out, pl::Ref tmp) {
                Tracer v = row.load();
                tmp.store(v);
                Tracer old = tmp.load();
                tmp.store(lax::exp(old * 0.25f));
                Tracer mask = lax::broadcasted_iota(DType::kS32, {4}, 0) <
                              (t.load({pl::program_id(0)}) + 1);
                out.store(lax::select(mask, tmp.load() + old, lax::full({4}, -1, DType::kF32)));
              },
              {.out_shapes = {{DType::kF32, {5, 11}}},
               .grid = {5, 3},
               .in_specs = {pl::BlockSpec({pl::kSqueezed, 4},
                                          [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                            return pl::Blocks{p[0].load({g[0]}), g[1]};
                                          })},
               .out_specs = {pl::BlockSpec({pl::kSqueezed, 4},
                                           [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; })},
               .scratch_shapes = {{DType::kF32, {4}}},
               .num_scalar_prefetch = 1,
               .dimension_semantics = {semantics, pl::kArbitrary}})(a[0], a[1])[0];
        },
        {table, x});
    ASSERT_EQ(ref.size(), x86.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint64_t>(ref[i]), std::bit_cast<uint64_t>(x86[i])) << i;
    }
  }
}

TEST_F(PallasCompiledTest, AccumulatorReadInTheMiddleOfTheReduction) {
  // Consecutive k steps accumulating into one window run as one deferred GEMM on x86; reading
  // the accumulator after the second k step (a snapshot output) and writing the window between
  // steps must see every step before it.
  const int64_t m = 32, k = 64, n = 24;
  std::vector<double> xv = Ramp(m * k, 0.41, 3), yv = Ramp(k * n, 0.29, 3);
  Array x = Put(DType::kF32, {m, k}, xv), y = Put(DType::kF32, {k, n}, yv);
  auto f = [&](const std::vector<Tracer>& a) {
    std::vector<Tracer> out = pl::pallas_call(
        [](pl::Ref xr, pl::Ref yr, pl::Ref o, pl::Ref snap, pl::Ref acc) {
          Tracer kk = pl::program_id(2);
          pl::when(lax::eq(kk, lax::scalar(0, DType::kS32)),
                   [&] { acc.store(lax::full({16, 8}, 0, DType::kF32)); });
          acc.store(acc.load() + pl::dot(xr.load(), yr.load(), DType::kF32));
          pl::when(lax::eq(kk, lax::scalar(1, DType::kS32)), [&] {
            snap.store(acc.load());
            acc.store(acc.load() * 0.5f);
          });
          pl::when(lax::eq(kk, pl::num_programs(2) - 1), [&] { o.store(acc.load()); });
        },
        {.out_shapes = {{DType::kF32, {m, n}}, {DType::kF32, {m, n}}},
         .grid = {m / 16, n / 8, k / 16},
         .in_specs = {pl::BlockSpec({16, 16}, [](pl::Idx g) { return pl::Blocks{g[0], g[2]}; }),
                      pl::BlockSpec({16, 8}, [](pl::Idx g) { return pl::Blocks{g[2], g[1]}; })},
         .out_specs = {pl::BlockSpec({16, 8}, [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; }),
                       pl::BlockSpec({16, 8}, [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; })},
         .scratch_shapes = {{DType::kF32, {16, 8}}},
         .dimension_semantics = {pl::kParallel, pl::kParallel, pl::kArbitrary}})(a[0], a[1]);
    return lax::concatenate({out[0], out[1]}, 0);
  };
  auto [ref, x86] = Both(f, {x, y});
  // f64: the snapshot is the sum over k < 32; the result halves it and adds the rest.
  std::vector<double> want(2 * m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double head = 0, tail = 0;
      for (int64_t p = 0; p < k; ++p) (p < 32 ? head : tail) += xv[i * k + p] * yv[p * n + j];
      want[i * n + j] = 0.5 * head + tail;
      want[(m + i) * n + j] = head;
    }
  }
  ExpectNear(x86, want, 1e-5);
  ExpectNear(ref, x86, 1e-5);
}

TEST_F(PallasCompiledTest, LoopsInsideTheKernel) {
  // A contraction over k in chunks of 8 inside the kernel, its partial product and a step count
  // carried through fori_loop (an array and a scalar carry); then a running sum over rows
  // written through ds(i, 1) windows by a loop without carries.
  const int64_t m = 16, k = 40, n = 12;
  std::vector<double> xv = Ramp(m * k, 0.37, 3), yv = Ramp(k * n, 0.53, 3);
  Array x = Put(DType::kF32, {m, k}, xv), y = Put(DType::kF32, {k, n}, yv);
  auto [ref, x86] = Both(
      [&](const std::vector<Tracer>& a) {
        return pl::pallas_call(
            [&](pl::Ref xr, pl::Ref yr, pl::Ref out) {
              std::vector<Tracer> c = lax::fori_loop(
                  0, k / 8,
                  [&](Tracer i, std::vector<Tracer> carry) {
                    Tracer part = pl::dot(xr.load({pl::all(), pl::ds(i * 8, 8)}),
                                          yr.load({pl::ds(i * 8, 8)}), DType::kF32);
                    return std::vector<Tracer>{carry[0] + part, carry[1] + 1};
                  },
                  {lax::full({m, n}, 0, DType::kF32), lax::scalar(0, DType::kS32)});
              out.store(c[0] + lax::convert_element_type(c[1], DType::kF32));
              lax::fori_loop(1, m, [&](Tracer i, std::vector<Tracer> none) {
                out.store({pl::ds(i, 1)}, out.load({pl::ds(i - 1, 1)}) + out.load({pl::ds(i, 1)}));
                return none;
              }, std::vector<Tracer>{});
            },
            {.out_shapes = {{DType::kF32, {m, n}}}})(a[0], a[1])[0];
      },
      {x, y});
  std::vector<double> want = MatmulF64(xv, yv, m, k, n);
  for (double& v : want) v += k / 8;
  for (int64_t r = 1; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) want[r * n + c] += want[(r - 1) * n + c];
  }
  ExpectNear(x86, want, 1e-4);
  ExpectNear(ref, x86, 1e-5);
}

TEST_F(PallasCompiledTest, KernelsWritingTheirInputRefs) {
  // Input blocks are the kernel's own buffers: a kernel may overwrite them (here in place, then
  // reading them back) without changing the caller's array; a whole (ANY) input ref written at
  // one step keeps the write for the later steps of the call.
  std::vector<double> xv = Ramp(10 * 3, 0.6, 1);
  Array x = Put(DType::kF32, {10, 3}, xv);
  auto [ref, x86] = Both(
      [&](const std::vector<Tracer>& a) {
        return pl::pallas_call(
            [](pl::Ref block, pl::Ref whole, pl::Ref out) {
              block.store(block.load() * 2.0f);
              Tracer i = pl::program_id(0);
              whole.store({i, pl::all()}, whole.load({i, pl::all()}) + 100.0f);
              out.store(block.load() + whole.load({pl::ds(0, 4), pl::all()}));
            },
            {.out_shapes = {{DType::kF32, {10, 3}}},
             .grid = {3},
             .in_specs = {pl::BlockSpec({4, 3}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; }),
                          pl::BlockSpec::Any()},
             .out_specs = {pl::BlockSpec({4, 3}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; })},
             .dimension_semantics = {pl::kArbitrary}})(a[0], a[0])[0];
      },
      {x});
  ASSERT_EQ(ref.size(), x86.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint64_t>(ref[i]), std::bit_cast<uint64_t>(x86[i])) << i;
  }
  // Step s adds 100 to row s of the whole ref before reading rows 0-3 (rows < s+1 changed).
  for (int r = 0; r < 10; ++r) {
    for (int c = 0; c < 3; ++c) {
      const int s = r / 4;
      const int top = r % 4;  // the row of the whole ref this element adds
      const float base = static_cast<float>(xv[top * 3 + c]);
      const float whole = top <= s ? base + 100.0f : base;
      const float doubled = static_cast<float>(xv[r * 3 + c]) * 2.0f;
      EXPECT_EQ(ref[r * 3 + c], doubled + whole) << r << "," << c;
    }
  }
  EXPECT_EQ(x.to_host()->ToDoubles(), Put(DType::kF32, {10, 3}, xv).to_host()->ToDoubles());
}

TEST_F(PallasCompiledTest, SwitchAndWhileLoopCarryingValues) {
  // Per row block i: a switch on i % 3 over a tile and a scalar (both returned), then a
  // while_loop halving the tile until its largest magnitude drops below 1 (at most 20 times,
  // counted in a scalar carry); compiled, against the interpreter and values derived here.
  const int64_t rows = 12, cols = 8;
  std::vector<double> xv = Ramp(rows * cols, 0.73, 2);
  for (int64_t c = 0; c < cols; ++c) xv[4 * cols + c] *= 40.0;  // block 1 needs several halvings
  Array x = Put(DType::kF32, {rows, cols}, xv);
  auto [ref, x86] = Both(
      [&](const std::vector<Tracer>& a) {
        return pl::pallas_call(
            [](pl::Ref xb, pl::Ref out) {
              Tracer i = pl::program_id(0);
              std::vector<Tracer> r = lax::switch_(
                  i % 3,
                  {[](std::vector<Tracer> v) { return std::vector<Tracer>{v[0] * 2.0f, v[1] + 1}; },
                   [](std::vector<Tracer> v) {
                     return std::vector<Tracer>{lax::exp(v[0] * 0.1f), v[1] * 3};
                   },
                   [](std::vector<Tracer> v) { return std::vector<Tracer>{v[0] - 1.0f, v[1]}; }},
                  {xb.load(), i});
              std::vector<Tracer> w = lax::while_loop(
                  [](std::vector<Tracer> c) {
                    return lax::bitwise_and(c[1] < 20,
                                            lax::reduce_max(lax::abs(c[0]), {0, 1}) >= 1.0f);
                  },
                  [](std::vector<Tracer> c) {
                    return std::vector<Tracer>{c[0] * 0.5f, c[1] + 1};
                  },
                  {r[0], lax::scalar(0, DType::kS32)});
              out.store(w[0] + lax::convert_element_type(w[1] * 100 + r[1], DType::kF32));
            },
            {.out_shapes = {{DType::kF32, {rows, cols}}},
             .grid = {rows / 4},
             .in_specs = {pl::BlockSpec({4, cols}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; })},
             .out_specs = {pl::BlockSpec({4, cols},
                                         [](pl::Idx g) { return pl::Blocks{g[0], 0}; })}})(a[0])[0];
      },
      {x});
  std::vector<double> want(rows * cols);
  for (int64_t b = 0; b < rows / 4; ++b) {
    std::vector<float> t(4 * cols);
    int64_t s = b;
    for (int64_t e = 0; e < 4 * cols; ++e) {
      const float v = static_cast<float>(xv[b * 4 * cols + e]);
      t[e] = b % 3 == 0 ? v * 2.0f : b % 3 == 1 ? std::exp(v * 0.1f) : v - 1.0f;
    }
    s = b % 3 == 0 ? b + 1 : b % 3 == 1 ? b * 3 : b;
    int64_t count = 0;
    auto largest = [&] {
      float m = 0;
      for (float v : t) m = std::max(m, std::abs(v));
      return m;
    };
    while (count < 20 && largest() >= 1.0f) {
      for (float& v : t) v *= 0.5f;
      ++count;
    }
    for (int64_t e = 0; e < 4 * cols; ++e) {
      want[b * 4 * cols + e] = t[e] + static_cast<double>(count * 100 + s);
    }
  }
  ExpectNear(x86, want, 1e-5);
  ExpectNear(ref, x86, 1e-5);
}

TEST_F(PallasCompiledTest, EndlessWhileLoopStopsAtTheDeadline) {
  Array x = Put(DType::kF32, {4}, {1, 2, 3, 4});
  for (Backend backend : {Backend::kReference, Backend::kX86}) {
    auto f = jit(
        [](Tracer a) {
          return pl::pallas_call(
              [](pl::Ref in, pl::Ref out) {
                Tracer n = lax::while_loop([](Tracer c) { return c >= 0; },
                                           [](Tracer c) { return c * 1; },
                                           lax::scalar(0, DType::kS32));
                out.store(in.load() + lax::convert_element_type(n, DType::kF32));
              },
              {.out_shapes = {{DType::kF32, {4}}}})(a)[0];
        },
        {.backend = backend});
    const backends::x86::PallasCallStats before = backends::x86::GetPallasCallStats();
    absl::StatusOr<Array> got = f.call({x}, RunOptions::WithTimeout(absl::Milliseconds(50)));
    EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
    if (backend == Backend::kX86) {  // stopped inside the compiled kernel
      EXPECT_EQ(backends::x86::GetPallasCallStats().compiled, before.compiled + 1);
    }
  }
}

// Equal where both are NaN, else within `tol` relative.
void ExpectNearOrBothNan(const std::vector<double>& got, const std::vector<double>& want,
                         double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " is " << got[i];
    } else {
      ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
    }
  }
}

int32_t Wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

// Dots of blocks masked by iota comparisons with scalars (bounds from scalar prefetch), as
// megablox masks a group's rows: where both operands keep the same depth, the x86 GEMM runs
// over that depth alone; otherwise over zero-filled copies of the masked blocks. x holds NaN in
// columns 0 and 14, y inf at (1, 2) and NaN at (14, 5), just outside the masks, so a mask one
// index too wide, or one that leaves them next to a zero, gives NaN where f64 (and the
// interpreter) do. Each case also counts the selects compiled away.
TEST_F(PallasCompiledTest, DotsOfMaskedBlocks) {
  const int64_t m = 12, k = 20, n = 8;
  const std::vector<int64_t> b = {3, 14, 5, 11, int64_t{INT32_MAX} - 5};
  using Keep = std::function<bool(int64_t, int64_t)>;  // (row, col) of the block
  struct Case {
    std::string name;
    // The masks of x [m, k] and y [k, n] from the row and column iotas and the bounds; null: no
    // mask.
    std::function<Tracer(Tracer, Tracer, const std::vector<Tracer>&)> x_mask, y_mask;
    Keep x_keep, y_keep;
    int dropped;
    bool x_used_unmasked = false;  // out = dot(xs, ys) + dot(2 xs, ys): xs's select stays
  };
  auto in = [](int64_t v, int64_t lo, int64_t hi) { return lo <= v && v < hi; };
  const std::vector<Case> cases = {
      {"same_depth",
       [](Tracer, Tracer c, const std::vector<Tracer>& s) {
         return lax::bitwise_and(c >= s[0], c < s[1]);
       },
       [](Tracer r, Tracer, const std::vector<Tracer>& s) {
         return lax::bitwise_and(r >= s[0], r < s[1]);
       },
       [&](int64_t, int64_t c) { return in(c, b[0], b[1]); },
       [&](int64_t r, int64_t) { return in(r, b[0], b[1]); }, 2},
      {"different_depths",
       [](Tracer, Tracer c, const std::vector<Tracer>& s) {
         return lax::bitwise_and(c >= s[0], c < s[1]);
       },
       [](Tracer r, Tracer, const std::vector<Tracer>& s) {
         return lax::bitwise_and(r >= s[2], r < s[3]);
       },
       [&](int64_t, int64_t c) { return in(c, b[0], b[1]); },
       [&](int64_t r, int64_t) { return in(r, b[2], b[3]); }, 2},
      {"one_side_zero_times_inf",
       [](Tracer, Tracer c, const std::vector<Tracer>& s) {
         return lax::bitwise_and(c >= s[2], c < s[3]);
       },
       nullptr, [&](int64_t, int64_t c) { return in(c, b[2], b[3]); }, nullptr, 1},
      {"rows_and_columns",
       [](Tracer r, Tracer c, const std::vector<Tracer>& s) {
         return lax::bitwise_and(lax::bitwise_and(r >= s[0], r < s[1]),
                                 lax::bitwise_and(c >= s[0], c < s[1]));
       },
       [](Tracer r, Tracer, const std::vector<Tracer>& s) {
         return lax::bitwise_and(r >= s[0], r < s[1]);
       },
       [&](int64_t r, int64_t c) { return in(r, b[0], b[1]) && in(c, b[0], b[1]); },
       [&](int64_t r, int64_t) { return in(r, b[0], b[1]); }, 2},
      {"bound_on_the_left",
       [](Tracer, Tracer c, const std::vector<Tracer>& s) {
         return lax::bitwise_and(s[0] <= c, s[1] > c);
       },
       [](Tracer r, Tracer, const std::vector<Tracer>& s) {
         return lax::bitwise_and(r > s[0] - 1, r <= s[1] - 1);
       },
       [&](int64_t, int64_t c) { return in(c, b[0], b[1]); },
       [&](int64_t r, int64_t) { return in(r, b[0], b[1]); }, 2},
      {"offset_wrapping_past_int32_max",
       [](Tracer, Tracer c, const std::vector<Tracer>& s) { return c + s[4] > 0; },
       [](Tracer r, Tracer, const std::vector<Tracer>& s) { return r + s[4] > 0; },
       [&](int64_t, int64_t c) { return Wrap32(c + b[4]) > 0; },
       [&](int64_t r, int64_t) { return Wrap32(r + b[4]) > 0; }, 2},
      {"not_equal_leaves_two_intervals",
       [](Tracer, Tracer c, const std::vector<Tracer>& s) { return lax::ne(c, s[2]); },
       [](Tracer r, Tracer, const std::vector<Tracer>& s) { return lax::ne(r, s[2]); },
       [&](int64_t, int64_t c) { return c != b[2]; },
       [&](int64_t r, int64_t) { return r != b[2]; }, 2},
      {"equal_to_one_index",
       [](Tracer, Tracer c, const std::vector<Tracer>& s) { return lax::eq(c, s[3]); },
       [](Tracer r, Tracer, const std::vector<Tracer>& s) { return lax::eq(r, s[3]); },
       [&](int64_t, int64_t c) { return c == b[3]; },
       [&](int64_t r, int64_t) { return r == b[3]; }, 2},
      {"empty",
       [](Tracer, Tracer c, const std::vector<Tracer>& s) {
         return lax::bitwise_and(c >= s[1], c < s[0]);
       },
       [](Tracer r, Tracer, const std::vector<Tracer>& s) {
         return lax::bitwise_and(r >= s[1], r < s[0]);
       },
       [](int64_t, int64_t) { return false; }, [](int64_t, int64_t) { return false; }, 2},
      {"select_also_used_unmasked",
       [](Tracer, Tracer c, const std::vector<Tracer>& s) {
         return lax::bitwise_and(c >= s[0], c < s[1]);
       },
       [](Tracer r, Tracer, const std::vector<Tracer>& s) {
         return lax::bitwise_and(r >= s[0], r < s[1]);
       },
       [&](int64_t, int64_t c) { return in(c, b[0], b[1]); },
       [&](int64_t r, int64_t) { return in(r, b[0], b[1]); }, 1, true},
  };
  std::vector<double> xv = Ramp(m * k, 0.37, 3), yv = Ramp(k * n, 0.53, 3);
  for (int64_t i = 0; i < m; ++i) xv[i * k + 14] = xv[i * k] = NAN;
  yv[1 * n + 2] = INFINITY;
  yv[14 * n + 5] = NAN;
  Array bounds = Put(DType::kS32, {5}, std::vector<double>(b.begin(), b.end()));
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    Array x = Put(dtype, {m, k}, xv), y = Put(dtype, {k, n}, yv);
    const std::vector<double> xr = x.to_host()->ToDoubles(), yr = y.to_host()->ToDoubles();
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name + (dtype == DType::kBF16 ? " bf16" : " f32"));
      const int64_t before = backends::x86::GetPallasCallStats().masked_selects;
      auto [ref, x86] = Both(
          [&](const std::vector<Tracer>& a) {
            return pl::pallas_call(
                [&](pl::Ref bs, pl::Ref xb, pl::Ref yb, pl::Ref out) {
                  std::vector<Tracer> s;
                  for (int i = 0; i < 5; ++i) s.push_back(bs.load({lax::scalar(i, DType::kS32)}));
                  auto masked = [&](Tracer v, const auto& mask) {
                    if (!mask) return v;
                    const std::vector<int64_t> dims = v.shape();
                    return lax::select(mask(lax::broadcasted_iota(DType::kS32, dims, 0),
                                            lax::broadcasted_iota(DType::kS32, dims, 1), s),
                                       v, lax::full(dims, 0, v.dtype()));
                  };
                  Tracer xs = masked(xb.load(), c.x_mask), ys = masked(yb.load(), c.y_mask);
                  Tracer product = pl::dot(xs, ys, DType::kF32);
                  if (c.x_used_unmasked) product = product + pl::dot(xs * 2.0f, ys, DType::kF32);
                  out.store(product);
                },
                {.out_shapes = {{DType::kF32, {m, n}}}, .num_scalar_prefetch = 1})(a[0], a[1],
                                                                                  a[2])[0];
          },
          {bounds, x, y});
      EXPECT_EQ(backends::x86::GetPallasCallStats().masked_selects - before, c.dropped);
      std::vector<double> want(m * n, 0.0);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t p = 0; p < k; ++p) {
          const double xe = !c.x_keep || c.x_keep(i, p) ? xr[i * k + p] : 0.0;
          for (int64_t j = 0; j < n; ++j) {
            const double ye = !c.y_keep || c.y_keep(p, j) ? yr[p * n + j] : 0.0;
            want[i * n + j] += xe * ye * (c.x_used_unmasked ? 3.0 : 1.0);
          }
        }
      }
      ExpectNearOrBothNan(x86, want, 1e-5);
      ExpectNearOrBothNan(ref, x86, 1e-5);
    }
  }
}

// A store of select(mask, v, the window's old contents) copies v where the mask holds, on a
// grid of column blocks (a row range, a 2-D box, and a mask of two intervals), bitwise as the
// interpreter.
TEST_F(PallasCompiledTest, MaskedStoresKeepTheOldContents) {
  const int64_t rows = 9, cols = 12;
  std::vector<double> xv = Ramp(rows * cols, 0.61, 3), yv = Ramp(rows * cols, 0.83, 2);
  Array x = Put(DType::kF32, {rows, cols}, xv), y = Put(DType::kF32, {rows, cols}, yv);
  Array bounds = Put(DType::kS32, {2}, {2, 7});
  using Mask = std::function<Tracer(Tracer, Tracer, Tracer, Tracer)>;
  const std::vector<std::pair<std::string, Mask>> masks = {
      {"rows", [](Tracer r, Tracer, Tracer lo, Tracer hi) {
         return lax::bitwise_and(r >= lo, r < hi);
       }},
      {"box", [](Tracer r, Tracer c, Tracer lo, Tracer hi) {
         return lax::bitwise_and(lax::bitwise_and(r >= lo, r < hi), c + 1 > lo);
       }},
      {"two_intervals", [](Tracer r, Tracer, Tracer lo, Tracer) { return lax::ne(r, lo); }},
  };
  for (const auto& [name, mask] : masks) {
    SCOPED_TRACE(name);
    const int64_t before = backends::x86::GetPallasCallStats().masked_selects;
    auto [ref, x86] = Both(
        [&](const std::vector<Tracer>& a) {
          return pl::pallas_call(
              [&](pl::Ref bs, pl::Ref xb, pl::Ref yb, pl::Ref out) {
                out.store(xb.load());
                Tracer r = lax::broadcasted_iota(DType::kS32, {rows, 4}, 0);
                Tracer c = lax::broadcasted_iota(DType::kS32, {rows, 4}, 1) + pl::program_id(0) * 4;
                Tracer lo = bs.load({lax::scalar(0, DType::kS32)});
                Tracer hi = bs.load({lax::scalar(1, DType::kS32)});
                out.store(lax::select(mask(r, c, lo, hi), yb.load(), out.load()));
              },
              {.out_shapes = {{DType::kF32, {rows, cols}}},
               .grid = {cols / 4},
               .in_specs = {pl::BlockSpec({rows, 4}, [](pl::Idx g) { return pl::Blocks{0, g[0]}; }),
                            pl::BlockSpec({rows, 4}, [](pl::Idx g) { return pl::Blocks{0, g[0]}; })},
               .out_specs = {pl::BlockSpec({rows, 4},
                                           [](pl::Idx g) { return pl::Blocks{0, g[0]}; })},
               .num_scalar_prefetch = 1})(a[0], a[1], a[2])[0];
        },
        {bounds, x, y});
    EXPECT_EQ(backends::x86::GetPallasCallStats().masked_selects - before, 1);
    ASSERT_EQ(ref.size(), x86.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint64_t>(ref[i]), std::bit_cast<uint64_t>(x86[i])) << i;
    }
    // Hand-derived: rows 2..6 of y (every row but 2 for two_intervals); the box also needs
    // col + 1 > 2.
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const bool keep = name == "two_intervals" ? r != 2
                                                  : r >= 2 && r < 7 && (name == "rows" || c + 1 > 2);
        EXPECT_EQ(x86[r * cols + c], static_cast<float>((keep ? yv : xv)[r * cols + c]))
            << r << "," << c;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, PallasTest,
                         ::testing::Values(Backend::kReference, Backend::kX86),
                         [](const auto& info) {
                           return info.param == Backend::kX86 ? "x86" : "reference";
                         });

}  // namespace
}  // namespace shardjit
