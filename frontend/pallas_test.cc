// pallas_call through jit on both backends, against values computed here in double precision:
// a matmul accumulating into its output block (exact and overhanging blocks), padding read and
// writes clipped at the edges, squeezed block dimensions, scalar prefetch driving index maps,
// input/output aliasing, fori_loop and dynamic windows inside kernels, whole-array refs, grids
// sized at run time, mpmd_map and global-view calls; the IR text round trip; the errors: block
// indices out of range, windows leaving a ref (loads, stores, copies), kernel arity, refs used as
// values, stores of another dtype, kernel ops outside kernels; vmap of calls. The x86 backend's
// compiled kernels against the interpreter are pallas_compiled_test.cc.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backends/x86/pallas_call.h"
#include "frontend/pallas_test_util.h"
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
using namespace pallas_test;  // NOLINT: this test's helpers

class PallasTest : public ::testing::TestWithParam<Backend> {
 protected:
  // On the x86 backend every kernel here runs compiled: none falls back to the interpreter.
  void SetUp() override { interpreted_ = backends::x86::GetPallasCallStats().interpreted; }
  void TearDown() override {
    if (GetParam() == Backend::kX86) {
      EXPECT_EQ(backends::x86::GetPallasCallStats().interpreted, interpreted_);
    }
  }

  int64_t interpreted_ = 0;
  Runtime rt_{{.num_devices = 1}};
  Mesh mesh_ = *make_mesh(rt_, {{"x", 1}});

  Array Put(DType dtype, std::vector<int64_t> dims, std::vector<double> values) {
    return *device_put(HostTensor(dtype, std::move(dims), std::move(values)),
                       NamedSharding(mesh_, P()));
  }
};

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
  // A store, and a local copy's destination window.
  auto g = jit([](Tracer a) {
    return pl::pallas_call(
        [](pl::Ref in, pl::Ref out) {
          out.store({pl::ds(pl::program_id(0) * 3, 2)}, in.load({pl::ds(0, 2)}));
        },
        {.out_shapes = {{DType::kF32, {4}}},
         .grid = {2},
         .in_specs = {pl::BlockSpec::Any()},
         .out_specs = {pl::BlockSpec({4}, [](pl::Idx) { return pl::Blocks{0}; })},
         .name = "spill"})(a)[0];
  }, {.backend = GetParam()});
  got = g(x);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(),
              HasSubstr("ref_store: kernel spill at grid index (1): the window at (3) of sizes "
                        "(2) leaves the out_specs[0] block of shape f32[4]"));
  auto h = jit([](Tracer a) {
    return pl::pallas_call(
        [](pl::Ref in, pl::Ref out, pl::Ref sem) {
          pl::AsyncCopy copy = pl::make_async_copy(in.at({pl::ds(0, 4)}),
                                                   out.at({pl::ds(pl::program_id(0) * 6, 4)}), sem);
          copy.start();
          copy.wait();
        },
        {.out_shapes = {{DType::kF32, {8}}},
         .grid = {2},
         .in_specs = {pl::BlockSpec::Any()},
         .out_specs = {pl::BlockSpec::Any()},
         .scratch_shapes = {pl::DmaSemaphores()},
         .name = "far_copy"})(a)[0];
  }, {.backend = GetParam()});
  got = h(x);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("kernel far_copy at grid index (1)"));
  EXPECT_THAT(got.status().message(), HasSubstr("the window at (6) of sizes (4) leaves"));
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
                return pl::pallas_call(
                    [](pl::Ref in, pl::Ref out) {
                      out.store(lax::convert_element_type(in.load(), DType::kS32));
                    },
                    {.out_shapes = {{DType::kF32, {8}}}})(a)[0];
              }),
              HasSubstr("ref_store: stores s32[8] into a window of f32[8]"));
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

// Seed 002's form: mpmd_map of (positions, kernel) pairs. On {x:2,y:2}, row x=0 scales its block
// by a kernel of 2-row blocks, row x=1 adds its position's row index by a kernel of squeezed
// rows; both under shard_map-style specs, on both backends.
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

INSTANTIATE_TEST_SUITE_P(Backends, PallasTest,
                         ::testing::Values(Backend::kReference, Backend::kX86),
                         [](const auto& info) {
                           return info.param == Backend::kX86 ? "x86" : "reference";
                         });

}  // namespace
}  // namespace shardjit
