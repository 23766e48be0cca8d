// while_loop, cond, switch and scan through jit on both backends, against loops written here:
// data-dependent trip counts, branches reading values of the enclosing function, clamped switch
// indices, scans forward and in reverse with several carries and stacked outputs, nesting with
// fori_loop and shard_map (collectives inside loop conditions and branches), a deadline
// stopping a loop that never ends; tracer and verifier errors.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;

class LaxControlFlowTest : public ::testing::TestWithParam<Backend> {};

TEST_P(LaxControlFlowTest, WhileLoopRunsADataDependentNumberOfTimes) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  // Collatz: the number of steps from each start to 1.
  const std::vector<double> starts = {1, 6, 7, 27, 97};
  auto steps = jit(
      [](Tracer n) {
        std::vector<Tracer> out = lax::while_loop(
            [](std::vector<Tracer> c) { return lax::gt(c[0], lax::scalar(1, DType::kS32)); },
            [](std::vector<Tracer> c) {
              Tracer two = lax::scalar(2, DType::kS32);
              Tracer even = lax::eq(lax::rem(c[0], two), lax::scalar(0, DType::kS32));
              Tracer next = lax::select(even, lax::div(c[0], two), c[0] * 3 + 1);
              return std::vector<Tracer>{next, c[1] + 1};
            },
            {n, lax::scalar(0, DType::kS32)});
        return out[1];
      },
      {.backend = GetParam()});
  for (double s : starts) {
    Array n = *device_put(HostTensor(DType::kS32, {}, {s}), NamedSharding(mesh, P()));
    absl::StatusOr<Array> got = steps(n);
    ASSERT_TRUE(got.ok()) << got.status();
    int64_t want = 0;
    for (int64_t v = static_cast<int64_t>(s); v > 1; ++want) v = v % 2 ? 3 * v + 1 : v / 2;
    EXPECT_EQ(got->to_host()->ToDoubles(), std::vector<double>{static_cast<double>(want)}) << s;
  }
}

TEST_P(LaxControlFlowTest, CondAndSwitchReadOuterValuesAndClampTheIndex) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(DType::kF32, {3}, {1, -2, 4}), NamedSharding(mesh, P()));
  for (int index : {-3, 0, 1, 2, 7}) {
    auto f = jit(
        [index](Tracer x) {
          Tracer outer = x * 10.0;  // read by the branches
          Tracer i = lax::scalar(index, DType::kS32);
          std::vector<lax::Branch> branches = {
              [&](std::vector<Tracer> a) { return std::vector<Tracer>{a[0] + outer}; },
              [&](std::vector<Tracer> a) { return std::vector<Tracer>{a[0] * a[0]}; },
              [&](std::vector<Tracer> a) { return std::vector<Tracer>{lax::neg(outer)}; }};
          Tracer switched = lax::switch_(i, branches, {x})[0];
          Tracer positive = lax::reduce_sum(x, {0}) > lax::scalar(0, DType::kF32);
          Tracer chosen = lax::cond(
              positive, [](Tracer a) { return a + 1.0; }, [](Tracer a) { return a - 1.0; }, x);
          return std::vector<Tracer>{switched, chosen};
        },
        {.backend = GetParam()});
    absl::StatusOr<std::vector<Array>> out = f(x);
    ASSERT_TRUE(out.ok()) << out.status();
    const int branch = std::clamp(index, 0, 2);
    const std::vector<std::vector<double>> want = {{11, -22, 44}, {1, 4, 16}, {-10, 20, -40}};
    EXPECT_EQ((*out)[0].to_host()->ToDoubles(), want[branch]) << index;
    EXPECT_EQ((*out)[1].to_host()->ToDoubles(), (std::vector<double>{2, -1, 5}));
  }
}

TEST_P(LaxControlFlowTest, ScanForwardAndReverse) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  const int64_t steps = 5, width = 4;
  std::vector<double> xs(steps * width);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<double>((i * 3) % 7) - 2;
  Array x = *device_put(HostTensor(DType::kF32, {steps, width}, xs),
                        NamedSharding(mesh, P(None, "x")));
  for (bool reverse : {false, true}) {
    auto f = jit(
        [reverse](Tracer x) {
          // carry: (running sum, step count); ys: (running sum, running sum doubled).
          lax::ScanResult r = lax::scan(
              [](std::vector<Tracer> c, std::vector<Tracer> xi) {
                Tracer s = c[0] + xi[0];
                return std::make_pair(std::vector<Tracer>{s, c[1] + 1},
                                      std::vector<Tracer>{s, s * 2.0});
              },
              {lax::full({width}, 0, DType::kF32), lax::scalar(0, DType::kS32)}, {x}, -1,
              reverse);
          if (r.ys.size() != 2) return std::vector<Tracer>{};  // the trace holds the error
          return std::vector<Tracer>{r.carry[0], r.carry[1], r.ys[0], r.ys[1],
                                     lax::cumsum(x, 0, reverse)};
        },
        {.backend = GetParam()});
    absl::StatusOr<std::vector<Array>> out = f(x);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> ys(steps * width), sum(width, 0);
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t at = reverse ? steps - 1 - s : s;
      for (int64_t j = 0; j < width; ++j) {
        sum[j] += xs[at * width + j];
        ys[at * width + j] = sum[j];
      }
    }
    std::vector<double> doubled = ys;
    for (double& v : doubled) v *= 2;
    EXPECT_EQ((*out)[0].to_host()->ToDoubles(), sum);
    EXPECT_EQ((*out)[1].to_host()->ToDoubles(), std::vector<double>{steps});
    EXPECT_EQ((*out)[2].to_host()->ToDoubles(), ys);
    EXPECT_EQ((*out)[3].to_host()->ToDoubles(), doubled);
    EXPECT_EQ((*out)[4].to_host()->ToDoubles(), ys);  // the scan is a cumsum
  }
  // No xs: length given; zero steps leave the carry and give empty ys.
  auto counter = jit(
      [](Tracer x) {
        lax::ScanResult r = lax::scan(
            [](std::vector<Tracer> c, std::vector<Tracer>) {
              return std::make_pair(std::vector<Tracer>{c[0] * 2.0}, std::vector<Tracer>{c[0]});
            },
            {x}, {}, 4);
        lax::ScanResult none = lax::scan(
            [](std::vector<Tracer> c, std::vector<Tracer>) {
              return std::make_pair(c, std::vector<Tracer>{c[0]});
            },
            {x}, {}, 0);
        if (r.ys.empty() || none.ys.empty()) return std::vector<Tracer>{};
        return std::vector<Tracer>{r.carry[0], r.ys[0], none.carry[0], none.ys[0]};
      },
      {.backend = GetParam()});
  Array one = *device_put(HostTensor(DType::kF32, {2}, {1, -3}), NamedSharding(mesh, P()));
  absl::StatusOr<std::vector<Array>> out = counter(one);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].to_host()->ToDoubles(), (std::vector<double>{16, -48}));
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(), (std::vector<double>{1, -3, 2, -6, 4, -12, 8, -24}));
  EXPECT_EQ((*out)[2].to_host()->ToDoubles(), (std::vector<double>{1, -3}));
  EXPECT_EQ((*out)[3].dtype(), DType::kF32);
  EXPECT_EQ((*out)[3].to_host()->num_elements(), 0);
}

// scan nested in a scan, in a fori_loop and, with a psum in its body and in reverse, in a
// shard_map; values against the same loops run here in f64 (exact: small integers).
TEST_P(LaxControlFlowTest, ScanNestsInScansLoopsAndShardMaps) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  const std::vector<double> xv = {1, -2, 3, 0, 4, 5, -1, 2, -3, 1, 2, 6};  // [3, 4]
  Array x = *device_put(HostTensor(DType::kF32, {3, 4}, xv), NamedSharding(mesh, P()));
  auto add = [](std::vector<Tracer> c, std::vector<Tracer> e) {
    Tracer s = c[0] + e[0];
    return std::make_pair(std::vector<Tracer>{s}, std::vector<Tracer>{s});
  };
  auto f = jit(
      [add](Tracer x) {
        // Outer scan over rows, inner over a row's elements: ys the rows' running sums, the
        // carry the total.
        lax::ScanResult rows = lax::scan(
            [add](std::vector<Tracer> c, std::vector<Tracer> row) {
              lax::ScanResult in_row =
                  lax::scan(add, {lax::scalar(0, DType::kF32)}, {row[0]});
              return std::make_pair(std::vector<Tracer>{c[0] + in_row.carry[0]}, in_row.ys);
            },
            {lax::scalar(0, DType::kF32)}, {x});
        // Three times: acc + the last running sum of row 0 read backwards (its sum).
        Tracer looped = lax::fori_loop(0, 3, [&](Tracer, Tracer acc) {
          Tracer row0 = lax::reshape(lax::slice(x, {0, 0}, {1, 4}), {4});
          return acc + lax::scan(add, {lax::scalar(0, DType::kF32)}, {row0}, -1, true).carry[0];
        }, lax::scalar(1, DType::kF32));
        return std::vector<Tracer>{rows.carry[0], rows.ys[0], looped};
      },
      {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> out = f(x);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> running(12);
  double total = 0;
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int k = 0; k < 4; ++k) running[r * 4 + k] = s += xv[r * 4 + k];
    total += s;
  }
  EXPECT_EQ((*out)[0].to_host()->ToDoubles(), std::vector<double>{total});
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(), running);
  EXPECT_EQ((*out)[2].to_host()->ToDoubles(), std::vector<double>{1 + 3 * running[3]});
  // In a shard_map: each device scans its [2, 4] block's rows in reverse, adding the psum of the
  // two devices' rows: ys[k] = the sum of both blocks' rows k.. end.
  Array y = *device_put(HostTensor(DType::kF32, {4, 4}, {1, 2, 3, 4, -1, 0, 2, 5, 3, 3, -2, 1,
                                                        0, 4, 1, -1}),
                        NamedSharding(mesh, P("x")));
  absl::StatusOr<Array> summed = jit(
      shard_map(
          [](Tracer block) {
            lax::ScanResult r = lax::scan(
                [](std::vector<Tracer> c, std::vector<Tracer> row) {
                  Tracer s = c[0] + lax::psum(row[0], "x");
                  return std::make_pair(std::vector<Tracer>{s}, std::vector<Tracer>{s});
                },
                {lax::full({4}, 0, DType::kF32)}, {block}, -1, /*reverse=*/true);
            return r.ys[0];
          },
          mesh, {P("x")}, {P()}),
      {.backend = GetParam()})(y);
  ASSERT_TRUE(summed.ok()) << summed.status();
  // Rows k of the blocks: (1,2,3,4)+(3,3,-2,1) = (4,5,1,5); (-1,0,2,5)+(0,4,1,-1) = (-1,4,3,4).
  EXPECT_EQ(summed->to_host()->ToDoubles(), (std::vector<double>{3, 9, 4, 9, -1, 4, 3, 4}));
}

TEST_P(LaxControlFlowTest, CollectivesInsideLoopsAndBranchesOfAShardMap) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  Array x = *device_put(HostTensor(DType::kF32, {4}, {1, 2, 3, 4}), NamedSharding(mesh, P(Axes{"x", "y"})));
  // Every device doubles its value until the sum over the mesh reaches 100 (all devices agree
  // on the condition, computed by a psum inside it); then, on the first trip of a fori_loop, a
  // branch adds the y-neighbour's value (ppermute; every device takes it); then a branch chosen
  // per device by axis_index adds or subtracts 1 (no collective in it: devices may differ).
  auto f = jit(shard_map(
                   [](Tracer b) {
                     return lax::fori_loop(0, 2, [](Tracer i, Tracer v) {
                       Tracer grown = lax::while_loop(
                           [](Tracer c) {
                             return lax::psum(lax::reduce_sum(c, {0}), {"x", "y"}) <
                                    lax::scalar(100, DType::kF32);
                           },
                           [](Tracer c) { return c * 2.0; }, v);
                       Tracer swapped = lax::cond(
                           lax::eq(i, lax::scalar(0, DType::kS32)),
                           [](Tracer a) { return a + lax::ppermute(a, "y", {{0, 1}, {1, 0}}); },
                           [](Tracer a) { return a; }, grown);
                       return lax::cond(
                           lax::eq(lax::axis_index("x"), lax::scalar(0, DType::kS32)),
                           [](Tracer a) { return a + 1.0; }, [](Tracer a) { return a - 1.0; },
                           swapped);
                     }, b);
                   },
                   mesh, {P(Axes{"x", "y"})}, {P(Axes{"x", "y"})}),
               {.backend = GetParam()});
  absl::StatusOr<Array> out = f(x);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> v = {1, 2, 3, 4};  // device (x, y) holds v[2 * x + y]
  for (int round = 0; round < 2; ++round) {
    while (v[0] + v[1] + v[2] + v[3] < 100) {
      for (double& e : v) e *= 2;
    }
    if (round == 0) {
      for (int row : {0, 2}) v[row] = v[row + 1] = v[row] + v[row + 1];
    }
    v[0] += 1, v[1] += 1, v[2] -= 1, v[3] -= 1;
  }
  EXPECT_EQ(out->to_host()->ToDoubles(), v);
}

TEST_P(LaxControlFlowTest, GlobalViewLoopsAndBranchesArePartitioned) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  const int64_t rows = 8, cols = 6;
  std::vector<double> host(rows * cols);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<double>((i * 5) % 9) - 3.5;
  Array x = *device_put(HostTensor(DType::kF32, {rows, cols}, host),
                        NamedSharding(mesh, P("x", "y")));
  auto f = jit(
      [](Tracer x) {
        Tracer step = x * 0.0 + 0.5;  // read inside the loop body
        Tracer grown = lax::while_loop(
            [](Tracer c) {
              return lax::reduce_max(lax::abs(c), {0, 1}) < lax::scalar(50, DType::kF32);
            },
            [&](Tracer c) { return c * 2.0 + step; }, x);
        return lax::cond(
            lax::reduce_sum(grown, {0, 1}) > lax::scalar(0, DType::kF32),
            [](Tracer a) { return lax::cumsum(a, 1); }, [](Tracer a) { return -a; }, grown);
      },
      {.backend = GetParam()});
  absl::StatusOr<Array> out = f(x);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::string text = f.lower(x)->as_text();
  EXPECT_THAT(text, ::testing::Not(HasSubstr("unpartitioned"))) << text;
  EXPECT_THAT(text, HasSubstr("while_loop"));
  std::vector<double> v = host;
  auto max_abs = [&] {
    double m = 0;
    for (double e : v) m = std::max(m, std::abs(e));
    return m;
  };
  while (max_abs() < 50) {
    for (double& e : v) e = e * 2 + 0.5;
  }
  double sum = 0;
  for (double e : v) sum += e;
  std::vector<double> want = v;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      want[r * cols + c] = sum > 0 ? (c == 0 ? v[r * cols] : want[r * cols + c - 1] + v[r * cols + c])
                                   : -v[r * cols + c];
    }
  }
  EXPECT_EQ(out->to_host()->ToDoubles(), want);
}

// A gathered value read both by a slice of this device's own block (which collective-fusion
// turns into a ppermute of that block) and inside a while_loop: the gather stays for the loop.
TEST_P(LaxControlFlowTest, CollectiveRewritesKeepValuesReadInsideLoops) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  std::vector<double> host(4 * 3);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<double>(i) * 0.25;
  Array w = *device_put(HostTensor(DType::kF32, {4, 3}, host), NamedSharding(mesh, P("x", None)));
  auto f = jit(shard_map(
                   [](Tracer w) {
                     Tracer full = lax::all_gather(w, "x", 0, /*tiled=*/true);  // [4, 3]
                     Tracer block = lax::dynamic_slice(
                         full, {lax::axis_index("y") * 2, 0}, {2, 3});  // rows of block y
                     return lax::while_loop(
                         [](Tracer c) {
                           return lax::reduce_max(c, {0, 1}) < lax::scalar(50, DType::kF32);
                         },
                         [&](Tracer c) {
                           // + 1, from the gathered value (its elements sum to 16.5).
                           return c + lax::broadcast_in_dim(
                                          lax::reduce_sum(full, {0, 1}) - 15.5, c.shape(), {});
                         },
                         block);
                   },
                   mesh, {P("x", None)}, {P(Axes{"x", "y"}, None)}),
               {.backend = GetParam()});
  absl::StatusOr<Array> out = f(w);
  ASSERT_TRUE(out.ok()) << out.status();
  // Device (x, y) holds rows 2y..2y+1 of the whole w, each element raised by 1 per trip until the
  // largest (w's last row, 2.75 at most) reaches 50.
  std::vector<double> want;
  for (int x = 0; x < 2; ++x) {
    for (int y = 0; y < 2; ++y) {
      std::vector<double> rows(host.begin() + 6 * y, host.begin() + 6 * y + 6);
      while (*std::max_element(rows.begin(), rows.end()) < 50) {
        for (double& v : rows) v += 1;
      }
      want.insert(want.end(), rows.begin(), rows.end());
    }
  }
  EXPECT_EQ(out->to_host()->ToDoubles(), want);
}

INSTANTIATE_TEST_SUITE_P(Backends, LaxControlFlowTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

TEST(LaxControlFlow, ADeadlineStopsALoopThatNeverEnds) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  Array x = *device_put(HostTensor(DType::kF32, {2}, {1, 2}), NamedSharding(mesh, P("x")));
  // A loop with no op in it checks the deadline between trips.
  auto forever = jit(shard_map(
      [](Tracer b) {
        return lax::while_loop([](Tracer) { return lax::scalar(1, DType::kPred); },
                               [](Tracer c) { return c; }, b);
      },
      mesh, {P("x")}, {P("x")}));
  absl::StatusOr<Array> out =
      forever.call({x}, RunOptions::WithTimeout(absl::Milliseconds(100)));
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(out.status())) << out.status();
}

TEST(LaxControlFlow, ErrorsNameTheOpAndTheRegion) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                        NamedSharding(mesh, P()));
  auto message = [&](auto fn) { return std::string(jit(fn)(x).status().message()); };
  EXPECT_THAT(message([](Tracer x) {
                return lax::while_loop([](Tracer c) { return lax::reduce_sum(c, {0, 1}) < lax::scalar(9, DType::kF32); },
                                       [](Tracer c) { return lax::convert_element_type(c, DType::kBF16); },
                                       x);
              }),
              HasSubstr("while_loop: body returns (bf16[2,3]), which differs from the carry types"));
  // A weakly typed float scalar makes an s32 carry f32 (jnp's promotion), so the loop is refused.
  EXPECT_THAT(message([](Tracer x) {
                std::vector<Tracer> out = lax::while_loop(
                    [](std::vector<Tracer> c) { return c[0] < lax::scalar(5, DType::kS32); },
                    [](std::vector<Tracer> c) {
                      Tracer even = lax::eq(lax::rem(c[0], lax::scalar(2, DType::kS32)),
                                            lax::scalar(0, DType::kS32));
                      return std::vector<Tracer>{lax::select(even, c[0], c[0] * 3.0 + 1.0),
                                                 c[1] + 1.0};
                    },
                    {lax::scalar(1, DType::kS32), lax::scalar(0, DType::kS32)});
                return x + lax::convert_element_type(out[1], DType::kF32);
              }),
              HasSubstr("select"));
  EXPECT_THAT(message([](Tracer x) {
                return lax::while_loop([](Tracer c) { return c; }, [](Tracer c) { return c; }, x);
              }),
              HasSubstr("while_loop: cond returns (f32[2,3]); expected one pred[]"));
  EXPECT_THAT(message([](Tracer x) {
                return lax::cond(
                    lax::scalar(1, DType::kPred), [](Tracer a) { return a; },
                    [](Tracer a) { return lax::reduce_sum(a, {0}); }, x);
              }),
              HasSubstr("cond: branch 1 returns (f32[2,3]), but branch 0 returns (f32[3])"));
  EXPECT_THAT(message([](Tracer x) {
                return lax::cond(x > x, [](Tracer a) { return a; }, [](Tracer a) { return a; }, x);
              }),
              HasSubstr("cond: pred must be a scalar, got pred[2,3]"));
  EXPECT_THAT(message([](Tracer x) {
                lax::ScanResult r = lax::scan(
                    [](std::vector<Tracer> c, std::vector<Tracer> xi) {
                      return std::make_pair(c, xi);
                    },
                    {}, {x, lax::reshape(x, {3, 2})});
                EXPECT_TRUE(r.ys.empty());
                return lax::neg(x);
              }),
              HasSubstr("scan: every xs needs the leading dimension 2 (length), got f32[3,2]"));
  EXPECT_THAT(message([](Tracer x) {
                lax::ScanResult r = lax::scan(
                    [](std::vector<Tracer> c, std::vector<Tracer>) {
                      return std::make_pair(std::vector<Tracer>{lax::reduce_sum(c[0], {0})},
                                            std::vector<Tracer>{});
                    },
                    {x}, {}, 3);
                return r.carry[0];
              }),
              HasSubstr("scan: f returns carry 0 as f32[3], but init has f32[2,3]"));
}

}  // namespace
}  // namespace shardjit
