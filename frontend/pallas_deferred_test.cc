// The x86 backend's deferred writes in compiled pallas_call kernels
// (backends/x86/pallas_deferred.h, pallas_padding.h) against the interpreter and f64 values:
// masked stores of accumulators moving only their rows (megablox's shared tiles, bf16 results),
// accumulator stores merging output tiles into one product, stores over a moved product, the
// same bits on one grid thread or two, and a fresh output's padding only where the kernel leaves
// it; exact counts of products, skipped rows and padded blocks.
#include <cmath>
#include <string>
#include <vector>

#include "backends/x86/pallas_call.h"
#include "frontend/pallas_test_util.h"
#include "frontend/shardjit.h"
#include "gtest/gtest.h"
#include "ir/dtype.h"

namespace shardjit {
namespace {

using namespace pallas_test;  // NOLINT: this test's helpers

class PallasDeferredTest : public CompiledKernelTest {};

// A masked store of an accumulator (megablox's gmm: the group's rows of a tile) moves the rows
// it stores of the accumulator's GEMM into the output, where consecutive tiles' rows merge into
// one product; the other rows are skipped when the next tile's fill overwrites the accumulator,
// or when the grid ends (scratch), and run if the kernel reads them later (a second output of
// the whole accumulator). Row ranges: a suffix of tile 0 through a prefix of tile 2, rows in the
// middle of tile 1 alone, a suffix of tile 1 through a prefix of tile 2 (one product), and
// empty.
TEST_F(PallasDeferredTest, MaskedStoresOfAnAccumulatorRunOnlyTheirRows) {
  const int64_t m = 24, k = 32, n = 8, tm = 8, tk = 8;
  std::vector<double> xv = Ramp(m * k, 0.37, 3), yv = Ramp(k * n, 0.53, 3);
  Array x = Put(DType::kF32, {m, k}, xv), y = Put(DType::kF32, {k, n}, yv);
  const std::vector<double> product = MatmulF64(xv, yv, m, k, n);
  struct Case {
    int64_t lo, hi;
    bool read_all;
    int64_t skipped;   // rows outside [lo, hi) of each tile, none when read_all
    int64_t products;  // per run: the stored rows' GEMMs move into the output and merge there
                       // (one product per grid thread holding some; -1: not checked)
  };
  for (const Case& c : {Case{3, 19, false, 3 + 5, 2}, Case{10, 13, false, 8 + 5 + 8, 1},
                        Case{12, 19, false, 8 + 4 + 5, 1}, Case{3, 19, true, 0, -1},
                        Case{10, 10, false, 24, 0}}) {
    SCOPED_TRACE(::testing::Message() << c.lo << ".." << c.hi << (c.read_all ? " read_all" : ""));
    Array bounds = Put(DType::kS32, {2}, {static_cast<double>(c.lo), static_cast<double>(c.hi)});
    const int64_t before = backends::x86::GetPallasCallStats().gemm_rows_skipped;
    const int64_t products_before = backends::x86::GetPallasCallStats().deferred_gemms_run;
    auto call = pl::pallas_call(
        [&](const std::vector<pl::Ref>& r) {
          const pl::Ref &bs = r[0], &xb = r[1], &yb = r[2], &out = r[3], &all = r[4], &acc = r[5];
          Tracer kk = pl::program_id(1);
          pl::when(lax::eq(kk, lax::scalar(0, DType::kS32)), [&] {
            acc.store(lax::full({tm, n}, 0, DType::kF32));
            out.store(lax::full({tm, n}, -1, DType::kF32));
            all.store(lax::full({tm, n}, -2, DType::kF32));
          });
          acc.store(acc.load() + pl::dot(xb.load(), yb.load(), DType::kF32));
          pl::when(lax::eq(kk, lax::scalar(k / tk - 1, DType::kS32)), [&] {
            Tracer row = lax::broadcasted_iota(DType::kS32, {tm, n}, 0) + pl::program_id(0) * tm;
            Tracer lo = bs.load({lax::scalar(0, DType::kS32)});
            Tracer hi = bs.load({lax::scalar(1, DType::kS32)});
            out.store(lax::select(lax::bitwise_and(row >= lo, row < hi), acc.load(), out.load()));
            if (c.read_all) all.store(acc.load());
          });
        },
        {.out_shapes = {{DType::kF32, {m, n}}, {DType::kF32, {m, n}}},
         .grid = {m / tm, k / tk},
         .in_specs = {pl::BlockSpec({tm, tk}, [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; }),
                      pl::BlockSpec({tk, n}, [](pl::Idx g) { return pl::Blocks{g[1], 0}; })},
         .out_specs = {pl::BlockSpec({tm, n}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; }),
                       pl::BlockSpec({tm, n}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; })},
         .scratch_shapes = {{DType::kF32, {tm, n}}},
         .num_scalar_prefetch = 1,
         .dimension_semantics = {pl::kParallel, pl::kArbitrary}});
    for (int result = 0; result < 2; ++result) {
      auto [ref, x86] = Both(
          [&](const std::vector<Tracer>& a) { return call(a[0], a[1], a[2])[result]; },
          {bounds, x, y});
      ASSERT_EQ(x86.size(), static_cast<size_t>(m * n));
      ExpectNear(ref, x86, 1e-5);
      for (int64_t i = 0; i < m * n; ++i) {
        const int64_t row = i / n;
        const double want = result == 1 ? (c.read_all ? product[i] : -2.0)
                            : row >= c.lo && row < c.hi ? product[i]
                                                        : -1.0;
        EXPECT_NEAR(x86[i], want, 1e-5 * (1 + std::abs(want))) << "result " << result << " " << i;
      }
    }
    // Two runs (one per result); each skips the same rows. The grid's two threads take tile 0
    // and tiles 1-2.
    EXPECT_EQ(backends::x86::GetPallasCallStats().gemm_rows_skipped - before, 2 * c.skipped);
    if (c.products >= 0) {
      EXPECT_EQ(backends::x86::GetPallasCallStats().deferred_gemms_run - products_before,
                2 * c.products);
    }
  }
}

// megablox's form over two groups (rows [0, 11) and [11, 16) of two 8-row tiles, each group its
// own rhs) and two column blocks, every axis arbitrary (one grid thread): the tile the groups
// share is stored twice, each time with its group's rows alone. The second store leaves the
// first group's GEMM deferred, so each group's column blocks merge into one product. With a bf16
// output (megablox's astype: convert(select(mask, acc, convert(old)))) the moved GEMMs round into
// the bf16 rows and still merge; the accumulator keeps its own f32 GEMM, which a later read of it
// (twice the accumulator into a second output) gets.
TEST_F(PallasDeferredTest, MaskedStoresOfASharedTileLeaveTheOtherRowsDeferred) {
  const int64_t m = 16, k = 16, n = 16, tm = 8, tk = 8, tn = 8, split = 11;
  std::vector<double> xv = Ramp(m * k, 0.37, 3), yv = Ramp(2 * k * n, 0.53, 3);
  Array x = Put(DType::kF32, {m, k}, xv), y = Put(DType::kF32, {2, k, n}, yv);
  // Per grid step along m: the group, its m tile; then the groups' row offsets.
  Array meta = Put(DType::kS32, {9}, {0, 0, 1, 0, 1, 1, 0, split, m});
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (bool read_back : {false, true}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << (read_back ? " read back" : ""));
      auto call = pl::pallas_call(
          [&](const std::vector<pl::Ref>& r) {
            const pl::Ref &md = r[0], &xb = r[1], &yb = r[2], &out = r[3], &twice = r[4],
                          &acc = r[5];
            auto s32 = [](int64_t v) { return lax::scalar(v, DType::kS32); };
            Tracer step = pl::program_id(1), kk = pl::program_id(2);
            pl::when(lax::eq(kk, s32(0)),
                     [&] { acc.store(lax::full({tm, tn}, 0, DType::kF32)); });
            acc.store(acc.load() + pl::dot(xb.load(), yb.load(), DType::kF32));
            pl::when(lax::eq(kk, s32(k / tk - 1)), [&] {
              Tracer group = md.load({step});
              Tracer row =
                  lax::broadcasted_iota(DType::kS32, {tm, tn}, 0) + md.load({step + 3}) * tm;
              Tracer mine =
                  lax::bitwise_and(row >= md.load({group + 6}), row < md.load({group + 7}));
              out.store(lax::convert_element_type(
                  lax::select(mine, acc.load(),
                              lax::convert_element_type(out.load(), DType::kF32)),
                  dtype));
              if (read_back) {
                twice.store(lax::select(mine, acc.load() * lax::scalar(2, DType::kF32),
                                        twice.load()));
              }
            });
          },
          {.out_shapes = {{dtype, {m, n}}, {DType::kF32, {m, n}}},
           .grid = {n / tn, 3, k / tk},
           .in_specs = {pl::BlockSpec({tm, tk},
                                      [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                        return pl::Blocks{p[0].load({g[1] + 3}), g[2]};
                                      }),
                        pl::BlockSpec({pl::kSqueezed, tk, tn},
                                      [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                        return pl::Blocks{p[0].load({g[1]}), g[2], g[0]};
                                      })},
           .out_specs = {pl::BlockSpec({tm, tn},
                                       [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                         return pl::Blocks{p[0].load({g[1] + 3}), g[0]};
                                       }),
                         pl::BlockSpec({tm, tn},
                                       [](pl::Idx g, const std::vector<pl::Ref>& p) {
                                         return pl::Blocks{p[0].load({g[1] + 3}), g[0]};
                                       })},
           .scratch_shapes = {{DType::kF32, {tm, tn}}},
           .num_scalar_prefetch = 1,
           .dimension_semantics = {pl::kArbitrary, pl::kArbitrary, pl::kArbitrary}});
      const backends::x86::PallasCallStats before = backends::x86::GetPallasCallStats();
      for (int result = 0; result < (read_back ? 2 : 1); ++result) {
        auto [ref, x86] = Both(
            [&](const std::vector<Tracer>& a) { return call(a[0], a[1], a[2])[result]; },
            {meta, x, y});
        ASSERT_EQ(x86.size(), static_cast<size_t>(m * n));
        // bf16: one rounding of sums that may differ in their last f32 bits.
        const double tol = result == 0 && dtype == DType::kBF16 ? 1.0 / 128 : 1e-5;
        ExpectNear(ref, x86, tol);
        for (int64_t i = 0; i < m * n; ++i) {
          const int64_t row = i / n, col = i % n, group = row < split ? 0 : 1;
          double want = 0;
          for (int64_t p = 0; p < k; ++p) want += xv[row * k + p] * yv[(group * k + p) * n + col];
          if (result == 1) want *= 2;
          ASSERT_NEAR(x86[i], want, tol * (1 + std::abs(want))) << "result " << result << " " << i;
        }
      }
      if (read_back) continue;
      const backends::x86::PallasCallStats after = backends::x86::GetPallasCallStats();
      EXPECT_EQ(after.deferred_gemms_run - before.deferred_gemms_run, 2);  // one per group
      // The shared tile's rows of the other group, in each column block; with bf16, the whole
      // accumulator's GEMM of each of the three steps, which nothing read.
      EXPECT_EQ(after.gemm_rows_skipped - before.gemm_rows_skipped,
                dtype == DType::kF32 ? 2 * tm : 2 * 3 * tm);
    }
  }
}

// A masked store that narrows f32 values into a bf16 ref (convert(select(mask, v, convert(old)))
// with v an input block, no GEMM to move) copies the box rounded to nearest even, bitwise as the
// interpreter, the rest of the block kept; counted as a select read through its mask.
TEST_F(PallasDeferredTest, MaskedStoresNarrowingIntoBf16) {
  const int64_t rows = 8, cols = 6;
  std::vector<double> xv = Ramp(rows * cols, 0.4137, 3);
  Array x = Put(DType::kF32, {rows, cols}, xv);
  const int64_t selects_before = backends::x86::GetPallasCallStats().masked_selects;
  auto [ref, x86] = Both(
      [&](const std::vector<Tracer>& a) {
        return pl::pallas_call(
            [&](pl::Ref in, pl::Ref out) {
              Tracer r = lax::broadcasted_iota(DType::kS32, {rows, cols}, 0);
              Tracer lo = pl::program_id(0) + lax::scalar(2, DType::kS32);
              out.store(lax::full({rows, cols}, -1, DType::kBF16));
              out.store(lax::convert_element_type(
                  lax::select(r >= lo, in.load(),
                              lax::convert_element_type(out.load(), DType::kF32)),
                  DType::kBF16));
            },
            {.out_shapes = {{DType::kBF16, {rows, cols}}}, .grid = {1}})(a[0])[0];
      },
      {x});
  ASSERT_EQ(x86.size(), static_cast<size_t>(rows * cols));
  EXPECT_EQ(ref, x86);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double want = i / cols >= 2 ? static_cast<float>(ir::bf16(static_cast<float>(xv[i])))
                                      : -1.0;
    EXPECT_EQ(x86[i], want) << i;
  }
  EXPECT_EQ(backends::x86::GetPallasCallStats().masked_selects - selects_before, 1);
}

// A masked store of x's block over rows of an output block whose accumulator's GEMM was just
// moved into it (still deferred): the GEMM's rows there run before the store, not after it.
TEST_F(PallasDeferredTest, MaskedStoreAfterAnAccumulatorStoreWritesLast) {
  const int64_t m = 16, k = 16, n = 8, b = 8;
  std::vector<double> xv = Ramp(m * k, 0.37, 3), yv = Ramp(k * n, 0.53, 3);
  Array x = Put(DType::kF32, {m, k}, xv), y = Put(DType::kF32, {k, n}, yv);
  const std::vector<double> product = MatmulF64(xv, yv, m, k, n);
  auto call = pl::pallas_call(
      [&](const std::vector<pl::Ref>& r) {
        const pl::Ref &xb = r[0], &yb = r[1], &out = r[2], &acc = r[3];
        Tracer kk = pl::program_id(1);
        pl::when(lax::eq(kk, lax::scalar(0, DType::kS32)),
                 [&] { acc.store(lax::full({b, n}, 0, DType::kF32)); });
        acc.store(acc.load() + pl::dot(xb.load(), yb.load(), DType::kF32));
        pl::when(lax::eq(kk, lax::scalar(k / b - 1, DType::kS32)), [&] {
          out.store(acc.load());
          Tracer row = lax::broadcasted_iota(DType::kS32, {b, n}, 0);
          out.store(lax::select(row < pl::program_id(0) + lax::scalar(2, DType::kS32),
                                xb.load(), out.load()));
        });
      },
      {.out_shapes = {{DType::kF32, {m, n}}},
       .grid = {m / b, k / b},
       .in_specs = {pl::BlockSpec({b, b}, [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; }),
                    pl::BlockSpec({b, n}, [](pl::Idx g) { return pl::Blocks{g[1], 0}; })},
       .out_specs = {pl::BlockSpec({b, n}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; })},
       .scratch_shapes = {{DType::kF32, {b, n}}},
       .dimension_semantics = {pl::kParallel, pl::kArbitrary}});
  auto [ref, x86] =
      Both([&](const std::vector<Tracer>& a) { return call(a[0], a[1])[0]; }, {x, y});
  ASSERT_EQ(x86.size(), static_cast<size_t>(m * n));
  ExpectNear(ref, x86, 1e-5);
  for (int64_t i = 0; i < m * n; ++i) {
    // Block row r's first r + 2 rows hold x's block of the last k step.
    const int64_t row = i / n;
    const double want = row % b < row / b + 2 ? xv[row * k + (k - b) + i % n] : product[i];
    ASSERT_NEAR(x86[i], want, 1e-5 * (1 + std::abs(want))) << i;
  }
}

// Seed 000's form: an f32 scratch accumulator zeroed at k = 0, the dots added into it and the
// block stored at the last k step; the second output is zero, or twice the accumulator read
// again after the store.
enum class AccumulatorUse {
  kStore,             // stored once
  kReadBack,          // stored, then read into the second output
  kStoreEveryStep,    // stored at every k step
  kOverwriteOutput,   // stored, the output block overwritten with x's block, then read back
};

pl::PallasCall ScratchMatmul(int64_t m, int64_t k, int64_t n, int64_t b, AccumulatorUse use,
                             pl::GridSemantics outer = pl::kParallel) {
  return pl::pallas_call(
      [=](const std::vector<pl::Ref>& r) {
        const pl::Ref &x = r[0], &y = r[1], &o = r[2], &twice = r[3], &acc = r[4];
        Tracer kk = pl::program_id(2);
        pl::when(lax::eq(kk, lax::scalar(0, DType::kS32)),
                 [&] { acc.store(lax::full({b, b}, 0, DType::kF32)); });
        acc.store(acc.load() + pl::dot(x.load(), y.load(), DType::kF32));
        auto last = lax::eq(kk, pl::num_programs(2) - 1);
        if (use == AccumulatorUse::kStoreEveryStep) o.store(acc.load());
        pl::when(last, [&] {
          if (use != AccumulatorUse::kStoreEveryStep) o.store(acc.load());
          if (use == AccumulatorUse::kOverwriteOutput) o.store(x.load());
          const bool read = use == AccumulatorUse::kReadBack ||
                            use == AccumulatorUse::kOverwriteOutput;
          twice.store(read ? acc.load() * lax::scalar(2, DType::kF32)
                           : lax::full({b, b}, 0, DType::kF32));
        });
      },
      {.out_shapes = {{DType::kF32, {m, n}}, {DType::kF32, {m, n}}},
       .grid = {m / b, n / b, k / b},
       .in_specs = {pl::BlockSpec({b, b}, [](pl::Idx g) { return pl::Blocks{g[0], g[2]}; }),
                    pl::BlockSpec({b, b}, [](pl::Idx g) { return pl::Blocks{g[2], g[1]}; })},
       .out_specs = {pl::BlockSpec({b, b}, [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; }),
                     pl::BlockSpec({b, b}, [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; })},
       .scratch_shapes = {{DType::kF32, {b, b}}},
       .dimension_semantics = {outer, outer, pl::kArbitrary}});
}

// The store of a scratch accumulator moves its GEMM into the output block, and the output tiles'
// GEMMs merge: each of the two grid threads runs its tiles as one product. Reading the
// accumulator after the store gets the copy the move left deferred (made before the output
// block is overwritten); a block stored at every k step (each store moving a product the next
// step must add to) gives the same values.
TEST_F(PallasDeferredTest, AccumulatorStoresMergeOutputTilesIntoOneProduct) {
  const int64_t m = 64, k = 48, n = 32, b = 16;
  std::vector<double> xv = Ramp(m * k, 0.37, 3), yv = Ramp(k * n, 0.53, 3);
  Array x = Put(DType::kF32, {m, k}, xv), y = Put(DType::kF32, {k, n}, yv);
  const std::vector<double> product = MatmulF64(xv, yv, m, k, n);
  const int64_t tiles = (m / b) * (n / b);
  struct Case {
    AccumulatorUse use;
    int64_t products;  // deferred GEMMs run, over both results' runs; -1: at least one a step
  };
  for (const Case& c : {Case{AccumulatorUse::kStore, 2 + 2},
                        Case{AccumulatorUse::kReadBack, 2 * tiles},
                        Case{AccumulatorUse::kStoreEveryStep, -1},
                        Case{AccumulatorUse::kOverwriteOutput, 2 * tiles}}) {
    SCOPED_TRACE(::testing::Message() << "use " << static_cast<int>(c.use));
    const int64_t before = backends::x86::GetPallasCallStats().deferred_gemms_run;
    auto call = ScratchMatmul(m, k, n, b, c.use);
    for (int result = 0; result < 2; ++result) {
      auto [ref, x86] = Both(
          [&](const std::vector<Tracer>& a) { return call(a[0], a[1])[result]; }, {x, y});
      ASSERT_EQ(x86.size(), static_cast<size_t>(m * n));
      ExpectNear(ref, x86, 1e-5);
      for (int64_t i = 0; i < m * n; ++i) {
        const int64_t row = i / n, col = i % n;
        // The overwritten block holds x's block of the last k step.
        const double x_block = xv[row * k + (k - b) + col % b];
        const double want =
            result == 1 ? (c.use == AccumulatorUse::kReadBack ||
                                   c.use == AccumulatorUse::kOverwriteOutput
                               ? 2 * product[i]
                               : 0.0)
            : c.use == AccumulatorUse::kOverwriteOutput ? static_cast<float>(x_block)
                                                        : product[i];
        ASSERT_NEAR(x86[i], want, 1e-5 * (1 + std::abs(want))) << "result " << result << " " << i;
      }
    }
    // One product per grid thread and run (the runtime has two threads; each takes two rows
    // of tiles); reading the accumulator back runs each tile's product there; storing at every
    // step runs a product per tile and step.
    const int64_t run = backends::x86::GetPallasCallStats().deferred_gemms_run - before;
    if (c.products >= 0) {
      EXPECT_EQ(run, c.products);
    } else {
      EXPECT_GE(run, 2 * tiles * (k / b));
    }
  }
}

// Parallel and arbitrary outer axes give the same results bitwise (the grid split over two
// threads, or run on one: products of other row counts, which may not choose other depth
// blocks): seed 000's matmul over a depth of several blocks, f32 and bf16 inputs.
TEST_F(PallasDeferredTest, ParallelAndArbitraryAxesAgreeBitwise) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int64_t m : {64, 96}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " m=" << m);
      const int64_t k = 1040, n = 48, b = 16;
      Array x = Put(dtype, {m, k}, Ramp(m * k, 0.37, 3));
      Array y = Put(dtype, {k, n}, Ramp(k * n, 0.53, 3));
      std::vector<double> got[2];
      for (int parallel = 0; parallel < 2; ++parallel) {
        auto call = ScratchMatmul(m, k, n, b, AccumulatorUse::kStore,
                                  parallel ? pl::kParallel : pl::kArbitrary);
        auto [ref, x86] =
            Both([&](const std::vector<Tracer>& a) { return call(a[0], a[1])[0]; }, {x, y});
        ExpectNear(ref, x86, 1e-4);  // sums of 1040 terms in another order
        got[parallel] = x86;
      }
      ASSERT_EQ(got[0].size(), static_cast<size_t>(m * n));
      EXPECT_EQ(got[0], got[1]);
    }
  }
}

// A fresh output's padding (NaN, as the interpreter gives) is written only where the kernel
// reads a block or writes part of it first, and into the rows and blocks no step writes: an
// output of 5x3 blocks of 8x8 where block row 0 is stored whole, block row 1 is read and added
// to (NaN), block row 2 gets rows 0..3 only, block row 3 rows 0..4 and 5..7 by two masked
// stores, and block row 4 is never visited (the grid has 4 rows).
TEST_F(PallasDeferredTest, FreshOutputsGetPaddingOnlyWhereTheKernelLeavesIt) {
  const int64_t rows = 40, cols = 24, b = 8;
  std::vector<double> xv = Ramp(rows * cols, 0.41, 3);
  Array x = Put(DType::kF32, {rows, cols}, xv);
  const int64_t before = backends::x86::GetPallasCallStats().padded_output_blocks;
  auto [ref, x86] = Both(
      [&](const std::vector<Tracer>& a) {
        return pl::pallas_call(
            [&](pl::Ref in, pl::Ref out) {
              Tracer i = pl::program_id(0);
              auto at = [&](int64_t v) { return lax::eq(i, lax::scalar(v, DType::kS32)); };
              pl::when(at(0), [&] { out.store(in.load()); });
              pl::when(at(1), [&] { out.store(out.load() + in.load()); });
              pl::when(at(2), [&] {
                out.store({pl::ds(0, 4), pl::ds(0, b)}, in.load({pl::ds(0, 4), pl::ds(0, b)}));
              });
              pl::when(at(3), [&] {
                Tracer row = lax::broadcasted_iota(DType::kS32, {b, b}, 0);
                Tracer five = lax::scalar(5, DType::kS32);
                out.store(lax::select(row < five, in.load(), out.load()));
                out.store(lax::select(row >= five, in.load(), out.load()));
              });
            },
            {.out_shapes = {{DType::kF32, {rows, cols}}},
             .grid = {4, cols / b},
             .in_specs = {pl::BlockSpec({b, b}, [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; })},
             .out_specs = {pl::BlockSpec({b, b},
                                         [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; })}})(
            a[0])[0];
      },
      {x});
  ASSERT_EQ(x86.size(), static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) {
    const int64_t r = i / cols;
    const bool stored = r < b || (r >= 2 * b && r < 2 * b + 4) || (r >= 3 * b && r < 4 * b);
    if (stored) {
      EXPECT_EQ(x86[i], static_cast<float>(xv[i])) << i;
    } else {
      EXPECT_TRUE(std::isnan(x86[i])) << i << " is " << x86[i];
    }
    EXPECT_EQ(std::isnan(ref[i]), std::isnan(x86[i])) << i;
  }
  // Block rows 1 (read first), 2 (rows 4..7 never written) and 4 (never visited), 3 blocks
  // each; block row 3's rows are all written by its two masked stores.
  EXPECT_EQ(backends::x86::GetPallasCallStats().padded_output_blocks - before, 9);
}

}  // namespace
}  // namespace shardjit
