// The x86 backend's compiled pallas_call kernels (no interpreter) against the interpreter and
// values computed here: bitwise for data movement and elementwise code, to rounding for GEMMs;
// accumulation across arbitrary axes, scalar arithmetic, loops, cond, while_loop and scan inside
// kernels, kernels writing their inputs, masks read symbolically (dots over a mask's depth,
// masked stores, folded constant masks), batched and integer dots, and the interpreter fallback.
// The deferred writes behind the GEMMs are pallas_deferred_test.cc.
#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backends/x86/pallas_call.h"
#include "frontend/pallas_test_util.h"
#include "frontend/shardjit.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using namespace pallas_test;  // NOLINT: this test's helpers

// Bitwise the interpreter's results for data movement and elementwise code, to rounding for
// GEMMs.
class PallasCompiledTest : public CompiledKernelTest {};

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

// Index maps and kernel scalars computed with clamp, abs, sign, shifts and comparisons of
// predicates compile (no interpreter): each output block (i, j) is x's block (row(i, j),
// col(i, j)), with 100 row + col in its first element and shifts by 32 or more in its second.
TEST_F(PallasCompiledTest, ScalarArithmeticInIndexMapsAndKernels) {
  const int64_t b = 8, rows = 4 * b, cols = 3 * b;
  std::vector<double> xv = Ramp(rows * cols, 0.41, 3);
  Array x = Put(DType::kF32, {rows, cols}, xv);
  auto s32 = [](int64_t v) { return lax::scalar(v, DType::kS32); };
  auto row = [&](Tracer i, Tracer j) {
    return lax::select(lax::eq(lax::ge(i, s32(2)), lax::ge(j, s32(2))),
                       lax::clamp(s32(0), i - s32(1), s32(3)), s32(0));
  };
  auto col = [&](Tracer i, Tracer j) {
    Tracer shifted = lax::shift_right_arithmetic(-lax::shift_left(j, s32(1)), s32(1));
    return lax::rem(lax::abs(shifted) + lax::sign(i - s32(2)) + s32(1), s32(3));
  };
  auto [ref, x86] = Both(
      [&](const std::vector<Tracer>& a) {
        return pl::pallas_call(
            [&](pl::Ref in, pl::Ref out) {
              Tracer i = pl::program_id(0), j = pl::program_id(1);
              out.store(in.load());
              out.store({s32(0), s32(0)},
                        lax::convert_element_type(row(i, j) * s32(100) + col(i, j), DType::kF32));
              // Shifts by 32 or more: 0, or the sign (-1 here).
              Tracer wide = lax::shift_right_arithmetic(s32(1 << 30), s32(40) + i) +
                            lax::shift_left(j + s32(1), s32(32)) +
                            lax::shift_right_logical(s32(-1), s32(33)) +
                            lax::shift_right_arithmetic(s32(-7), s32(-1));
              out.store({s32(0), s32(1)}, lax::convert_element_type(wide, DType::kF32));
            },
            {.out_shapes = {{DType::kF32, {5 * b, 4 * b}}},
             .grid = {5, 4},
             .in_specs = {pl::BlockSpec({b, b},
                                        [&](pl::Idx g) {
                                          return pl::Blocks{row(g[0], g[1]), col(g[0], g[1])};
                                        })},
             .out_specs = {pl::BlockSpec({b, b},
                                         [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; })}})(
            a[0])[0];
      },
      {x});
  ASSERT_EQ(x86.size(), static_cast<size_t>(5 * b * 4 * b));
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      const int64_t r = (i >= 2) == (j >= 2) ? std::clamp<int64_t>(i - 1, 0, 3) : 0;
      const int64_t c = (std::abs(-(j << 1) >> 1) + (i > 2) - (i < 2) + 1) % 3;
      for (int64_t u = 0; u < b; ++u) {
        for (int64_t v = 0; v < b; ++v) {
          const double got = x86[(i * b + u) * 4 * b + j * b + v];
          const double block = static_cast<float>(xv[(r * b + u) * cols + c * b + v]);
          const double want = u == 0 && v == 0   ? static_cast<double>(r * 100 + c)
                              : u == 0 && v == 1 ? -1.0
                                                 : block;
          ASSERT_EQ(got, want) << "block " << i << "," << j << " element " << u << "," << v;
        }
      }
    }
  }
  EXPECT_EQ(ref, x86);
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

// Dots GEMMs do not take run on the backend's dot_general kernel, compiled (no interpreter): a
// batched dot accumulated into a scratch ref across an arbitrary axis, and an s8 dot to s32.
TEST_F(PallasCompiledTest, BatchedAndIntegerDotsInsideKernels) {
  const int64_t b = 3, m = 5, k = 12, n = 7, tk = 4;
  std::vector<double> xv = Ramp(b * m * k, 0.37, 3), yv = Ramp(b * k * n, 0.53, 3);
  Array x = Put(DType::kF32, {b, m, k}, xv), y = Put(DType::kF32, {b, k, n}, yv);
  auto batched = pl::pallas_call(
      [&](const std::vector<pl::Ref>& r) {
        const pl::Ref &xb = r[0], &yb = r[1], &out = r[2], &acc = r[3];
        Tracer kk = pl::program_id(0);
        pl::when(lax::eq(kk, lax::scalar(0, DType::kS32)),
                 [&] { acc.store(lax::full({b, m, n}, 0, DType::kF32)); });
        acc.store(acc.load() + lax::dot_general(xb.load(), yb.load(),
                                                {.lhs_contracting = {2}, .rhs_contracting = {1},
                                                 .lhs_batch = {0}, .rhs_batch = {0}}));
        pl::when(lax::eq(kk, lax::scalar(k / tk - 1, DType::kS32)),
                 [&] { out.store(acc.load()); });
      },
      {.out_shapes = {{DType::kF32, {b, m, n}}},
       .grid = {k / tk},
       .in_specs = {pl::BlockSpec({b, m, tk}, [](pl::Idx g) { return pl::Blocks{0, 0, g[0]}; }),
                    pl::BlockSpec({b, tk, n}, [](pl::Idx g) { return pl::Blocks{0, g[0], 0}; })},
       .out_specs = {pl::BlockSpec({b, m, n}, [](pl::Idx) { return pl::Blocks{0, 0, 0}; })},
       .scratch_shapes = {{DType::kF32, {b, m, n}}},
       .dimension_semantics = {pl::kArbitrary}});
  auto [ref, x86] =
      Both([&](const std::vector<Tracer>& a) { return batched(a[0], a[1])[0]; }, {x, y});
  ASSERT_EQ(x86.size(), static_cast<size_t>(b * m * n));
  ExpectNear(ref, x86, 1e-5);
  for (int64_t e = 0; e < b; ++e) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t p = 0; p < k; ++p) want += xv[(e * m + i) * k + p] * yv[(e * k + p) * n + j];
        EXPECT_NEAR(x86[(e * m + i) * n + j], want, 1e-5 * (1 + std::abs(want)));
      }
    }
  }
  // s8 x s8 -> s32: exact.
  std::vector<double> av, bv;
  for (int64_t i = 0; i < m * k; ++i) av.push_back(static_cast<double>((i * 37) % 255 - 127));
  for (int64_t i = 0; i < k * n; ++i) bv.push_back(static_cast<double>((i * 53) % 255 - 127));
  Array a8 = Put(DType::kS8, {m, k}, av), b8 = Put(DType::kS8, {k, n}, bv);
  auto [iref, ix86] = Both(
      [&](const std::vector<Tracer>& a) {
        return pl::pallas_call(
            [&](pl::Ref l, pl::Ref r, pl::Ref o) {
              o.store(pl::dot(l.load(), r.load(), DType::kS32));
            },
            {.out_shapes = {{DType::kS32, {m, n}}}})(a[0], a[1])[0];
      },
      {a8, b8});
  ASSERT_EQ(ix86.size(), static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m * n; ++i) {
    double want = 0;
    for (int64_t p = 0; p < k; ++p) want += av[(i / n) * k + p] * bv[p * n + i % n];
    EXPECT_EQ(ix86[i], want) << i;
    EXPECT_EQ(iref[i], want) << i;
  }
}

// lax::scan inside a kernel (a fori_loop slicing its xs and writing its ys) compiles: a running
// sum down the rows of each block, forward and reversed, against sums computed here.
TEST_F(PallasCompiledTest, ScanInsideTheKernel) {
  const int64_t rows = 12, cols = 5, b = 6;
  std::vector<double> xv = Ramp(rows * cols, 0.41, 3);
  Array x = Put(DType::kF32, {rows, cols}, xv);
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "reverse" : "forward");
    auto [ref, x86] = Both(
        [&](const std::vector<Tracer>& a) {
          return pl::pallas_call(
              [&](pl::Ref in, pl::Ref out) {
                lax::ScanResult r = lax::scan(
                    [](std::vector<Tracer> carry, std::vector<Tracer> row) {
                      Tracer sum = carry[0] + row[0];
                      return std::pair{std::vector<Tracer>{sum}, std::vector<Tracer>{sum}};
                    },
                    {lax::full({cols}, 0, DType::kF32)}, {in.load()}, -1, reverse);
                out.store(r.ys[0]);
              },
              {.out_shapes = {{DType::kF32, {rows, cols}}},
               .grid = {rows / b},
               .in_specs = {pl::BlockSpec({b, cols},
                                          [](pl::Idx g) { return pl::Blocks{g[0], 0}; })},
               .out_specs = {pl::BlockSpec({b, cols},
                                           [](pl::Idx g) { return pl::Blocks{g[0], 0}; })}})(
              a[0])[0];
        },
        {x});
    ASSERT_EQ(x86.size(), static_cast<size_t>(rows * cols));
    EXPECT_EQ(ref, x86);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        // The block's rows from its first (or, reversed, its last) up to r, in that order.
        const int64_t block = r / b * b;
        double want = 0;
        if (reverse) {
          for (int64_t k = block + b - 1; k >= r; --k) want += xv[k * cols + c];
        } else {
          for (int64_t k = block; k <= r; ++k) want += xv[k * cols + c];
        }
        EXPECT_NEAR(x86[r * cols + c], want, 1e-5 * (1 + std::abs(want))) << r << "," << c;
      }
    }
  }
}

// A kernel the x86 backend does not compile (here an index map computing on an array) runs on
// the interpreter, counted as such, with the interpreter's results.
TEST_F(PallasCompiledTest, KernelsItCannotCompileRunInterpreted) {
  const int64_t rows = 16, cols = 8, b = 8;
  std::vector<double> xv = Ramp(rows * cols, 0.41, 3);
  Array x = Put(DType::kF32, {rows, cols}, xv);
  auto call = [&](const std::vector<Tracer>& a) {
    return pl::pallas_call(
        [&](pl::Ref in, pl::Ref out) { out.store(in.load() * lax::scalar(2, DType::kF32)); },
        {.out_shapes = {{DType::kF32, {rows, cols}}},
         .grid = {rows / b},
         .in_specs = {pl::BlockSpec({b, cols},
                                    [](pl::Idx g) {
                                      // The last block row first: max over [1 - g, g].
                                      Tracer v = lax::concatenate(
                                          {lax::reshape(lax::scalar(1, DType::kS32) - g[0], {1}),
                                           lax::reshape(g[0], {1})},
                                          0);
                                      return pl::Blocks{lax::reduce_max(v, {0}), 0};
                                    })},
         .out_specs = {pl::BlockSpec({b, cols}, [](pl::Idx g) { return pl::Blocks{g[0], 0}; })}})(
        a[0])[0];
  };
  const backends::x86::PallasCallStats before = backends::x86::GetPallasCallStats();
  absl::StatusOr<std::vector<Array>> got =
      jit([&](const std::vector<Tracer>& a) { return std::vector<Tracer>{call(a)}; },
          {.backend = Backend::kX86})(std::vector<Array>{x});
  ASSERT_TRUE(got.ok()) << got.status();
  const backends::x86::PallasCallStats after = backends::x86::GetPallasCallStats();
  EXPECT_EQ(after.compiled, before.compiled);
  EXPECT_EQ(after.interpreted, before.interpreted + 1);
  std::vector<double> out = (*got)[0].to_host()->ToDoubles();
  ASSERT_EQ(out.size(), static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) {
    // Both output block rows hold x's block row 1.
    const int64_t r = b + (i / cols) % b;
    EXPECT_EQ(out[i], 2 * static_cast<float>(xv[r * cols + i % cols])) << i;
  }
}

// Masks the tracer folds into constants (comparisons of iotas with constants) are read as masks
// when they are boxes: a box inside the block, the last columns, the first row; a triangle is
// not a box and runs as an elementwise select. Bitwise the interpreter's values.
TEST_F(PallasCompiledTest, FoldedConstantMasks) {
  const int64_t rows = 8, cols = 6;
  Array x = Put(DType::kF32, {rows, cols}, Ramp(rows * cols, 0.41, 3));
  const int64_t selects_before = backends::x86::GetPallasCallStats().masked_selects;
  for (int shape = 0; shape < 4; ++shape) {
    SCOPED_TRACE(::testing::Message() << "mask " << shape);
    auto [ref, x86] = Both(
        [&](const std::vector<Tracer>& a) {
          return pl::pallas_call(
              [&](pl::Ref in, pl::Ref out) {
                auto s32 = [](int64_t v) { return lax::scalar(v, DType::kS32); };
                Tracer r = lax::broadcasted_iota(DType::kS32, {rows, cols}, 0);
                Tracer c = lax::broadcasted_iota(DType::kS32, {rows, cols}, 1);
                Tracer mask =
                    shape == 0   ? lax::bitwise_and(lax::bitwise_and(r >= s32(2), r < s32(5)),
                                                    lax::bitwise_and(c >= s32(1), c < s32(4)))
                    : shape == 1 ? c >= s32(3)
                    : shape == 2 ? r < s32(1)
                                 : r <= c;
                out.store(lax::full({rows, cols}, -1, DType::kF32));
                out.store(lax::select(mask, in.load(), out.load()));
              },
              {.out_shapes = {{DType::kF32, {rows, cols}}}})(a[0])[0];
        },
        {x});
    ASSERT_EQ(x86.size(), static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows * cols; ++i) EXPECT_EQ(ref[i], x86[i]) << i;
  }
  // The three boxes' selects are read through their masks; the triangle's is computed.
  EXPECT_EQ(backends::x86::GetPallasCallStats().masked_selects - selects_before, 3);
}


}  // namespace
}  // namespace shardjit
