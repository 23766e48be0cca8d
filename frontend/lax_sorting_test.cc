// sort, top_k, argmax/argmin, the cumulative scans, jnp::argsort, pad, rev, clamp and
// reduce_prod/and/or through jit on both backends: a global-view program over an array sharded
// on a 2x2 mesh (partitioned, the ordered dimension gathered), the same ops inside shard_map,
// against per-row oracles computed here; tracer errors.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Rows = std::vector<std::vector<double>>;

constexpr int64_t kRows = 6, kCols = 10;

// Values with ties and a NaN, row-major [kRows, kCols].
std::vector<double> Input() {
  std::vector<double> v(kRows * kCols);
  for (int64_t i = 0; i < kRows * kCols; ++i) v[i] = static_cast<double>((i * 7) % 11) - 5;
  v[13] = NAN;
  v[40] = -0.0;
  return v;
}

Rows RowsOf(const std::vector<double>& flat, int64_t cols) {
  Rows rows;
  for (size_t i = 0; i < flat.size(); i += cols) rows.emplace_back(&flat[i], &flat[i] + cols);
  return rows;
}

// Whether a is ordered before b by sort (-0 == +0, NaN last).
bool SortLess(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
  return a < b;
}

// The stable ascending order of a row's indices, or descending with ties in index order.
std::vector<int64_t> Order(const std::vector<double>& row, bool descending) {
  std::vector<int64_t> idx(row.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    return descending ? SortLess(row[b], row[a]) : SortLess(row[a], row[b]);
  });
  return idx;
}

void ExpectRows(const Array& out, const Rows& want) {
  std::vector<double> got = out.to_host()->ToDoubles();
  ASSERT_EQ(got.size(), want.size() * (want.empty() ? 0 : want[0].size()));
  for (size_t r = 0, i = 0; r < want.size(); ++r) {
    for (size_t c = 0; c < want[r].size(); ++c, ++i) {
      if (std::isnan(want[r][c])) {
        EXPECT_TRUE(std::isnan(got[i])) << "row " << r << " col " << c;
      } else {
        EXPECT_EQ(got[i], want[r][c]) << "row " << r << " col " << c;
      }
    }
  }
}

class LaxSortingTest : public ::testing::TestWithParam<Backend> {};

TEST_P(LaxSortingTest, GlobalViewOnAShardedArray) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  const std::vector<double> host = Input();
  Array x = *device_put(HostTensor(DType::kF32, {kRows, kCols}, host),
                        NamedSharding(mesh, P("x", "y")));
  auto f = jit(
      [](Tracer x) {
        auto [values, indices] = lax::top_k(x, 3);
        return std::vector<Tracer>{values,
                                   indices,
                                   lax::sort(x),
                                   jnp::argsort(x, -1, true, /*descending=*/true),
                                   lax::argmax(x, 1),
                                   lax::argmin(x, -1),
                                   lax::cumsum(x, 1),
                                   lax::cummax(x, 1, /*reverse=*/true),
                                   lax::rev(x, {1}),
                                   lax::pad(x, 9.0, {{0, 0, 0}, {1, -2, 1}}),
                                   lax::clamp(-1.0, x, 2.0),
                                   lax::reduce_prod(lax::clamp(-1.0, x, 1.5), {1})};
      },
      {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> out = f(x);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 12u);
  EXPECT_THAT(f.lower(x)->as_text(), Not(HasSubstr("unpartitioned")));
  // The rows stay split over x; each device orders whole rows.
  for (int i : {0, 2, 4, 8}) {
    EXPECT_THAT((*out)[i].sharding().spec().to_string(), ::testing::StartsWith("P(x")) << i;
  }

  Rows top_values, top_indices, sorted, argsort, argmax, argmin, cumsum, cummax, rev, pad, clamp,
      prod;
  for (const std::vector<double>& row : RowsOf(host, kCols)) {
    // top_k: NaN first (total order), ties by index.
    std::vector<int64_t> desc = Order(row, true);
    std::vector<double> tv, ti;
    for (int k = 0; k < 3; ++k) tv.push_back(row[desc[k]]), ti.push_back(desc[k]);
    top_values.push_back(tv);
    top_indices.push_back(ti);
    std::vector<double> s, a;
    for (int64_t j : Order(row, false)) s.push_back(row[j]);
    for (int64_t j : desc) a.push_back(static_cast<double>(j));
    sorted.push_back(s);
    argsort.push_back(a);
    int64_t mx = 0, mn = 0;
    for (int64_t j = 0; j < kCols; ++j) {
      if (std::isnan(row[j])) {
        mx = mn = j;
        break;
      }
      if (row[j] > row[mx]) mx = j;
      if (row[j] < row[mn]) mn = j;
    }
    argmax.push_back({static_cast<double>(mx)});
    argmin.push_back({static_cast<double>(mn)});
    std::vector<double> cs(kCols), cm(kCols), r(kCols), cl(kCols);
    double p = 1;
    for (int64_t j = 0; j < kCols; ++j) {
      cs[j] = (j == 0 ? 0 : cs[j - 1]) + row[j];
      r[j] = row[kCols - 1 - j];
      cl[j] = std::isnan(row[j]) ? NAN : std::clamp(row[j], -1.0, 2.0);
      p *= std::isnan(row[j]) ? NAN : std::clamp(row[j], -1.0, 1.5);
    }
    for (int64_t j = kCols - 1; j >= 0; --j) {
      cm[j] = j == kCols - 1 ? row[j]
              : std::isnan(cm[j + 1]) || std::isnan(row[j]) ? NAN
                                                             : std::max(cm[j + 1], row[j]);
    }
    // pad (1, -2, 1) on 10 columns: 9 then x0 9 x1 ... 9 x8 (x9 and its gap cut).
    std::vector<double> pd = {9};
    for (int64_t j = 0; j < kCols - 1; ++j) {
      pd.push_back(row[j]);
      if (j < kCols - 2) pd.push_back(9);
    }
    cumsum.push_back(cs);
    cummax.push_back(cm);
    rev.push_back(r);
    pad.push_back(pd);
    clamp.push_back(cl);
    prod.push_back({p});
  }
  ExpectRows((*out)[0], top_values);
  ExpectRows((*out)[1], top_indices);
  ExpectRows((*out)[2], sorted);
  ExpectRows((*out)[3], argsort);
  ExpectRows((*out)[4], argmax);
  ExpectRows((*out)[5], argmin);
  ExpectRows((*out)[6], cumsum);
  ExpectRows((*out)[7], cummax);
  ExpectRows((*out)[8], rev);
  ExpectRows((*out)[9], pad);
  ExpectRows((*out)[10], clamp);
  ExpectRows((*out)[11], prod);
}

TEST_P(LaxSortingTest, InsideShardMapOnLocalBlocks) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  const std::vector<double> host = Input();
  Array x = *device_put(HostTensor(DType::kF32, {kRows, kCols}, host),
                        NamedSharding(mesh, P("x", "y")));
  // Each device sorts its [3, 5] block's rows and keeps the top 2 of each, then the blocks are
  // gathered along the columns: [6, 4] per mesh row.
  auto f = jit(shard_map(
                   [](Tracer b) {
                     Tracer top = lax::top_k(b, 2).first;
                     return lax::all_gather(top, "y", /*axis=*/1, /*tiled=*/true);
                   },
                   mesh, {P("x", "y")}, {P("x", None)}, /*check_vma=*/false),
               {.backend = GetParam()});
  absl::StatusOr<Array> out = f(x);
  ASSERT_TRUE(out.ok()) << out.status();
  Rows want;
  for (const std::vector<double>& row : RowsOf(host, kCols)) {
    std::vector<double> w;
    for (int half = 0; half < 2; ++half) {
      std::vector<double> block(row.begin() + half * 5, row.begin() + half * 5 + 5);
      std::vector<int64_t> desc = Order(block, true);
      w.push_back(block[desc[0]]);
      w.push_back(block[desc[1]]);
    }
    want.push_back(w);
  }
  ExpectRows(*out, want);
}

TEST_P(LaxSortingTest, IntegerAndPredOperands) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  Array i = *device_put(HostTensor(DType::kS32, {4, 3}, {3, -1, 2, 7, 7, 0, -5, 4, 4, 1, 1, 1}),
                        NamedSharding(mesh, P("x")));
  auto f = jit(
      [](Tracer i) {
        Tracer positive = i > lax::full(i.shape(), 0, DType::kS32);
        return std::vector<Tracer>{lax::sort_key_val(i, lax::neg(i), 0).second,
                                   lax::cumprod(i, 1), lax::reduce_and(positive, {1}),
                                   lax::reduce_or(positive, {0}), lax::argmax(positive, 1)};
      },
      {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> out = f(i);
  ASSERT_TRUE(out.ok()) << out.status();
  // Columns sorted: (3,7,-5,1) -> (-5,1,3,7); (-1,7,4,1) -> (-1,1,4,7); (2,0,4,1) -> (0,1,2,4).
  EXPECT_EQ((*out)[0].to_host()->ToDoubles(),
            (std::vector<double>{5, 1, 0, -1, -1, -1, -3, -4, -2, -7, -7, -4}));
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(),
            (std::vector<double>{3, -3, -6, 7, 49, 0, -5, -20, -80, 1, 1, 1}));
  EXPECT_EQ((*out)[2].to_host()->ToDoubles(), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ((*out)[3].to_host()->ToDoubles(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ((*out)[4].to_host()->ToDoubles(), (std::vector<double>{0, 0, 1, 0}));
}

// jnp.argsort ascending, hand-derived: -0 and +0 tie (kept in order), NaN last, ties in index
// order; along axis 0 of a matrix too.
TEST_P(LaxSortingTest, ArgsortAscendingKeepsTiesInOrderAndNaNsLast) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array v = *device_put(
      HostTensor(DType::kF32, {7}, {3, -0.0, std::nan(""), 0.0, 1, 3, -INFINITY}),
      NamedSharding(mesh, P()));
  Array m = *device_put(HostTensor(DType::kF32, {3, 2}, {2, 1, 1, 1, 0, 3}),
                        NamedSharding(mesh, P()));
  auto f = jit(
      [](Tracer v, Tracer m) {
        return std::vector<Tracer>{jnp::argsort(v), jnp::argsort(m, 0)};
      },
      {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> out = f(v, m);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].to_host()->ToDoubles(), (std::vector<double>{6, 1, 3, 4, 0, 5, 2}));
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(), (std::vector<double>{2, 0, 1, 1, 0, 2}));
}

INSTANTIATE_TEST_SUITE_P(Backends, LaxSortingTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

TEST(LaxSortingErrors, NameTheOpAndTheAttribute) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                        NamedSharding(mesh, P()));
  auto message = [&](auto fn) { return std::string(jit(fn)(x).status().message()); };
  EXPECT_THAT(message([](Tracer x) { return lax::top_k(x, 4).first; }),
              HasSubstr("top_k: k=4 is larger than dimension 1 (size 3); operands f32[2,3]"));
  EXPECT_THAT(message([](Tracer x) { return lax::sort(x, 2); }),
              HasSubstr("sort: dimension=2 is out of range for rank 2"));
  EXPECT_THAT(message([](Tracer x) { return lax::argmax(x, -3); }),
              HasSubstr("argmax: axis=-3 is out of range for rank 2"));
  EXPECT_THAT(message([](Tracer x) { return lax::argmin(lax::slice(x, {0, 0}, {0, 3}), 0); }),
              HasSubstr("argmin: the reduced dimension 0 is empty"));
  EXPECT_THAT(message([](Tracer x) { return lax::cumsum(x > x, 0); }),
              HasSubstr("cumsum: the operand must be numeric, got pred"));
  EXPECT_THAT(message([](Tracer x) { return lax::pad(x, 0.0, {{0, 0, 0}}); }),
              HasSubstr("pad: padding_config has 1 entries for rank 2"));
  EXPECT_THAT(message([](Tracer x) { return jnp::argsort(x, 5); }),
              HasSubstr("sort: dimension=5 is out of range for rank 2"));
}

}  // namespace
}  // namespace shardjit
