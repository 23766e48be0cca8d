// The reference kernels of sort, top_k, argmax/argmin, the cumulative scans, pad, rev, clamp and
// reduce_prod/and/or against brute-force oracles written independently (comparisons on doubles,
// index arithmetic per output element) and hand-derived values: NaN, +-0, +-inf, ties, empty
// and odd-sized arrays, every dimension.
#include <algorithm>
#include <array>
#include <numeric>
#include <string>

#include "backends/reference/kernel_test_util.h"
#include "fmt/format.h"

namespace shardjit::backends::reference {
namespace {

using namespace test_util;  // NOLINT

const std::vector<Dims> kShapes = {{9}, {0}, {1}, {7, 13}, {3, 1, 5}, {0, 4}, {4, 6, 3}};

Values Floats(int64_t n, DType dtype, uint32_t seed) {
  // Few distinct values, so that ties are common.
  Values v = RandomValues(n, dtype, seed, 3);
  for (double& x : v) x = RoundTo(dtype, std::round(x * 2) / 2);
  return v;
}

// Calls f(base, stride, n) for every lane of `dims` along `axis` (none when n is 0).
template <typename F>
void ForEachLane(const Dims& dims, int64_t axis, F&& f) {
  const int64_t n = dims[axis];
  if (n == 0) return;
  int64_t inner = 1, outer = 1;
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) f(o * n * inner + i, inner, n);
  }
}

// JAX's sort order: -0 == +0, NaN equal to NaN and above everything.
bool SortLess(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
  return a < b;
}

// The total order of XLA's TopK: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
bool TotalLess(double a, double b) {
  auto cls = [](double v) { return std::isnan(v) ? (std::signbit(v) ? 0 : 2) : 1; };
  if (cls(a) != cls(b)) return cls(a) < cls(b);
  if (cls(a) != 1) return false;
  if (a == 0 && b == 0) return std::signbit(a) && !std::signbit(b);
  return a < b;
}

ir::Op SortOp(int64_t dimension, int64_t num_keys) {
  ir::Op op = MakeOp("sort");
  op.mutable_sort()->set_dimension(dimension);
  op.mutable_sort()->set_is_stable(true);
  op.mutable_sort()->set_num_keys(num_keys);
  return op;
}

TEST(Sort, SpecialFloatsAndStability) {
  // Keys with -0/+0 and NaNs of both signs; the payload records where each came from.
  const Values keys = {kNaN, 1.0, -0.0, -kInf, 0.0, -kNaN, -2.0, kInf, 0.0};
  Values payload(keys.size());
  std::iota(payload.begin(), payload.end(), 0);
  for (DType dtype : {kF32, kBF16}) {
    std::vector<Tensor> out =
        EvalAll(SortOp(0, 1), {Make(dtype, {9}, keys), Make(kS32, {9}, payload)});
    ASSERT_EQ(out.size(), 2u);
    // -0, 0, 0 tie and keep their order; both NaNs go last in their order.
    EXPECT_EQ(out[1].ToDoubles(), (Values{3, 6, 2, 4, 8, 1, 7, 0, 5}));
    EXPECT_TRUE(std::signbit(out[0].GetDouble(2)));
    EXPECT_FALSE(std::signbit(out[0].GetDouble(3)));
    EXPECT_TRUE(std::isnan(out[0].GetDouble(7)) && std::isnan(out[0].GetDouble(8)));
  }
}

TEST(Sort, MatchesAStableSortOfEveryLane) {
  for (const Dims& dims : kShapes) {
    for (int64_t dim = 0; dim < static_cast<int64_t>(dims.size()); ++dim) {
      for (DType dtype : {kF32, kBF16, kS32, kPred}) {
        for (int64_t num_keys : {1, 2}) {
          SCOPED_TRACE(fmt::format("{} dim={} num_keys={}", ShapedType{dtype, dims}.ToString(),
                                   dim, num_keys));
          const int64_t n = NumElements(dims);
          const Values a = Floats(n, dtype, 3 + dim);
          const Values b = Floats(n, kF32, 11 + dim);
          Values c(n);
          std::iota(c.begin(), c.end(), 0);
          std::vector<Tensor> out = EvalAll(
              SortOp(dim, num_keys), {Make(dtype, dims, a), Make(kF32, dims, b),
                                      Make(kS32, dims, c)});
          ASSERT_EQ(out.size(), 3u);
          Values wa(n), wb(n), wc(n);
          ForEachLane(dims, dim, [&](int64_t base, int64_t stride, int64_t len) {
            std::vector<int64_t> idx(len);
            for (int64_t j = 0; j < len; ++j) idx[j] = base + j * stride;
            std::stable_sort(idx.begin(), idx.end(), [&](int64_t x, int64_t y) {
              if (SortLess(a[x], a[y])) return true;
              if (SortLess(a[y], a[x]) || num_keys == 1) return false;
              return SortLess(b[x], b[y]);
            });
            for (int64_t j = 0; j < len; ++j) {
              wa[base + j * stride] = a[idx[j]];
              wb[base + j * stride] = b[idx[j]];
              wc[base + j * stride] = c[idx[j]];
            }
          });
          ExpectValues(out[0], {dtype, dims}, wa);
          ExpectValues(out[1], {kF32, dims}, wb);
          ExpectValues(out[2], {kS32, dims}, wc);
        }
      }
    }
  }
}

TEST(Sort, LongLanesTakeTheRadixPath) {
  // Lanes of 4099: keys over the whole s32 range, floats with ties, NaNs of both signs and zeros
  // of both signs; the payload shows the order is stable.
  for (DType dtype : {kS32, kF32, kBF16, kPred}) {
    for (const Dims& dims : {Dims{2, 4099}, Dims{4099, 3}}) {
      const int64_t dim = dims[0] == 4099 ? 0 : 1;
      SCOPED_TRACE(fmt::format("{} dim={}", ShapedType{dtype, dims}.ToString(), dim));
      const int64_t n = NumElements(dims);
      Values a = dtype == kS32 ? RandomValues(n, kS32, 31, 2147483647.0) : Floats(n, dtype, 31);
      if (dtype == kF32 || dtype == kBF16) {
        for (int64_t i = 0; i < n; i += 97) a[i] = (i / 97) % 2 ? kNaN : -kNaN;
        for (int64_t i = 5; i < n; i += 89) a[i] = (i / 89) % 2 ? 0.0 : -0.0;
      }
      const Tensor keys = Make(dtype, dims, a);
      const Values stored = keys.ToDoubles();
      Values payload(n);
      std::iota(payload.begin(), payload.end(), 0);
      std::vector<Tensor> out = EvalAll(SortOp(dim, 1), {keys, Make(kS32, dims, payload)});
      Values want_keys(n), want_payload(n);
      ForEachLane(dims, dim, [&](int64_t base, int64_t stride, int64_t len) {
        std::vector<int64_t> idx(len);
        for (int64_t j = 0; j < len; ++j) idx[j] = base + j * stride;
        std::stable_sort(idx.begin(), idx.end(),
                         [&](int64_t x, int64_t y) { return SortLess(stored[x], stored[y]); });
        for (int64_t j = 0; j < len; ++j) {
          want_keys[base + j * stride] = stored[idx[j]];
          want_payload[base + j * stride] = payload[idx[j]];
        }
      });
      ExpectValues(out[0], {dtype, dims}, want_keys);
      ExpectValues(out[1], {kS32, dims}, want_payload);
    }
  }
}

ir::Op TopKOp(int64_t k, int64_t axis) {
  ir::Op op = MakeOp("top_k");
  op.mutable_top_k()->set_k(k);
  op.mutable_top_k()->set_axis(axis);
  return op;
}

TEST(TopK, TotalOrderAndTies) {
  // As XLA:CPU: NaN first, then +inf, ... ; -0 below +0; ties by lower index.
  std::vector<Tensor> out =
      EvalAll(TopKOp(3, 0), {Make(kF32, {4}, {kNaN, -kInf, kInf, 0.0})});
  ExpectValues(out[0], {kF32, {3}}, {kNaN, kInf, 0.0});
  EXPECT_EQ(out[1].ToDoubles(), (Values{0, 2, 3}));
  out = EvalAll(TopKOp(5, 0), {Make(kF32, {6}, {-0.0, 2, 0.0, 2, -kNaN, -kInf})});
  EXPECT_EQ(out[1].ToDoubles(), (Values{1, 3, 2, 0, 5}));
  out = EvalAll(TopKOp(0, 0), {Make(kS32, {3}, {1, 2, 3})});
  EXPECT_EQ(out[0].num_elements(), 0);
}

TEST(TopK, MatchesASortOfEveryLane) {
  for (const Dims& dims : kShapes) {
    for (int64_t axis = 0; axis < static_cast<int64_t>(dims.size()); ++axis) {
      for (DType dtype : {kF32, kBF16, kS32}) {
        for (int64_t k : {int64_t{0}, std::min<int64_t>(1, dims[axis]), dims[axis] / 2, dims[axis]}) {
          SCOPED_TRACE(fmt::format("{} axis={} k={}", ShapedType{dtype, dims}.ToString(), axis,
                                   k));
          Values values_in = Floats(NumElements(dims), dtype, 5 + axis);
          if (dtype != kS32 && values_in.size() > 4) {
            values_in[2] = kNaN, values_in[3] = -0.0, values_in[4] = -kNaN;
          }
          const Tensor input = Make(dtype, dims, values_in);
          const Values x = input.ToDoubles();  // as stored (the sign of a NaN included)
          std::vector<Tensor> out = EvalAll(TopKOp(k, axis), {input});
          Dims out_dims = dims;
          out_dims[axis] = k;
          Values values(NumElements(out_dims)), indices(values.size());
          ForEachLane(dims, axis, [&](int64_t base, int64_t stride, int64_t n) {
            // The output lane at the same outer and inner position.
            const int64_t obase = base / (n * stride) * k * stride + base % stride;
            const int64_t len = k;
            std::vector<int64_t> j(dims[axis]);
            std::iota(j.begin(), j.end(), 0);
            std::stable_sort(j.begin(), j.end(), [&](int64_t p, int64_t q) {
              return TotalLess(x[base + q * stride], x[base + p * stride]);
            });
            for (int64_t t = 0; t < len; ++t) {
              values[obase + t * stride] = x[base + j[t] * stride];
              indices[obase + t * stride] = static_cast<double>(j[t]);
            }
          });
          ExpectValues(out[0], {dtype, out_dims}, values);
          ExpectValues(out[1], {kS32, out_dims}, indices);
        }
      }
    }
  }
}

ir::Op ArgOp(const char* name, int64_t axis) {
  ir::Op op = MakeOp(name);
  op.mutable_arg_min_max()->set_axis(axis);
  op.mutable_arg_min_max()->set_index_dtype(ir::S32);
  return op;
}

TEST(ArgMinMax, FirstNaNElseFirstExtreme) {
  const Tensor x = Make(kF32, {2, 5}, {1, 3, 3, -1, -1, 2, kNaN, 7, kNaN, -7});
  EXPECT_EQ(Eval(ArgOp("argmax", 1), {x}).ToDoubles(), (Values{1, 1}));
  EXPECT_EQ(Eval(ArgOp("argmin", 1), {x}).ToDoubles(), (Values{3, 1}));
  EXPECT_EQ(Eval(ArgOp("argmax", 0), {x}).ToDoubles(), (Values{1, 1, 1, 1, 0}));
  EXPECT_EQ(Eval(ArgOp("argmin", 0), {Make(kF32, {2}, {0.0, -0.0})}).ToDoubles(), (Values{0}));
  EXPECT_EQ(Eval(ArgOp("argmax", 0), {Make(kPred, {3}, {0, 1, 1})}).ToDoubles(), (Values{1}));
  EXPECT_EQ(Eval(ArgOp("argmin", 0), {Make(kS32, {3}, {kIntMax, kIntMin, kIntMin})}).ToDoubles(),
            (Values{1}));
}

TEST(ArgMinMax, MatchesAScanOfEveryLane) {
  for (const Dims& dims : {Dims{9}, Dims{7, 13}, Dims{3, 1, 5}, Dims{4, 6, 3}}) {
    for (int64_t axis = 0; axis < static_cast<int64_t>(dims.size()); ++axis) {
      for (DType dtype : {kF32, kBF16, kS32}) {
        const Values x = Floats(NumElements(dims), dtype, 9 + axis);
        for (const char* name : {"argmax", "argmin"}) {
          SCOPED_TRACE(fmt::format("{} {} axis={}", name, ShapedType{dtype, dims}.ToString(),
                                   axis));
          Values want;
          ForEachLane(dims, axis, [&](int64_t base, int64_t stride, int64_t len) {
            int64_t best = 0;
            for (int64_t j = 1; j < len; ++j) {
              const double v = x[base + j * stride], b = x[base + best * stride];
              if (std::string(name) == "argmax" ? v > b : v < b) best = j;
            }
            want.push_back(static_cast<double>(best));
          });
          Dims out_dims = dims;
          out_dims.erase(out_dims.begin() + axis);
          // The lanes come out in row-major order of the remaining dims.
          ExpectValues(Eval(ArgOp(name, axis), {Make(dtype, dims, x)}), {kS32, out_dims}, want);
        }
      }
    }
  }
}

ir::Op CumOp(const char* name, int64_t axis, bool reverse) {
  ir::Op op = MakeOp(name);
  op.mutable_cumulative()->set_axis(axis);
  op.mutable_cumulative()->set_reverse(reverse);
  return op;
}

TEST(Cumulative, HandDerived) {
  const Tensor x = Make(kS32, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(Eval(CumOp("cumsum", 1, false), {x}).ToDoubles(), (Values{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(Eval(CumOp("cumsum", 0, true), {x}).ToDoubles(), (Values{5, 7, 9, 4, 5, 6}));
  EXPECT_EQ(Eval(CumOp("cumprod", 1, true), {x}).ToDoubles(), (Values{6, 6, 3, 120, 30, 6}));
  // s32 wraps; NaN sticks in cummax; bf16 rounds every partial sum.
  EXPECT_EQ(Eval(CumOp("cumsum", 0, false), {Make(kS32, {2}, {kIntMax, 1})}).ToDoubles(),
            (Values{kIntMax, kIntMin}));
  EXPECT_EQ(Eval(CumOp("cumprod", 0, false), {Make(kS32, {2}, {65536, 65536})}).ToDoubles(),
            (Values{65536, 0}));
  ExpectValues(Eval(CumOp("cummax", 0, false), {Make(kF32, {4}, {1, kNaN, 3, -1})}), {kF32, {4}},
               {1, kNaN, kNaN, kNaN});
  ExpectValues(Eval(CumOp("cummin", 0, false), {Make(kF32, {4}, {1, 0, 3, -1})}), {kF32, {4}},
               {1, 0, 0, -1});
  ExpectValues(Eval(CumOp("cumsum", 0, false), {Make(kBF16, {3}, {256, 1, 1})}), {kBF16, {3}},
               {256, 256, 258});
}

TEST(Cumulative, MatchesSequentialScans) {
  for (const Dims& dims : kShapes) {
    for (int64_t axis = 0; axis < static_cast<int64_t>(dims.size()); ++axis) {
      for (DType dtype : {kF32, kBF16, kS32}) {
        const Values x = Floats(NumElements(dims), dtype, 13 + axis);
        for (const char* name : {"cumsum", "cumprod", "cummax", "cummin"}) {
          for (bool reverse : {false, true}) {
            SCOPED_TRACE(fmt::format("{} {} axis={} reverse={}", name,
                                     ShapedType{dtype, dims}.ToString(), axis, reverse));
            Values want(x.size());
            const std::string op = name;
            ForEachLane(dims, axis, [&](int64_t base, int64_t stride, int64_t len) {
              double acc = 0;
              for (int64_t s = 0; s < len; ++s) {
                const int64_t at = base + (reverse ? len - 1 - s : s) * stride;
                const double v = x[at];
                if (s == 0) {
                  acc = v;
                } else if (op == "cumsum") {
                  acc = dtype == kS32 ? RoundTo(kS32, acc + v) : static_cast<float>(acc + v);
                } else if (op == "cumprod") {
                  acc = dtype == kS32 ? RoundTo(kS32, acc * v) : static_cast<float>(acc * v);
                } else if (op == "cummax") {
                  acc = std::max(acc, v);
                } else {
                  acc = std::min(acc, v);
                }
                want[at] = RoundTo(dtype, acc);
              }
            });
            ExpectValues(Eval(CumOp(name, axis, reverse), {Make(dtype, dims, x)}),
                         {dtype, dims}, want);
          }
        }
      }
    }
  }
}

ir::Op PadOp(const std::vector<std::array<int64_t, 3>>& config) {
  ir::Op op = MakeOp("pad");
  op.mutable_pad();
  for (const auto& [lo, hi, interior] : config) {
    ir::PaddingConfigDim* d = op.mutable_pad()->add_padding_config();
    d->set_low(lo);
    d->set_high(hi);
    d->set_interior(interior);
  }
  return op;
}

TEST(Pad, HandDerived) {
  const Tensor x = Make(kF32, {3}, {1, 2, 3});
  const Tensor zero = Make(kF32, {}, {0});
  ExpectValues(Eval(PadOp({{1, 2, 1}}), {x, zero}), {kF32, {8}}, {0, 1, 0, 2, 0, 3, 0, 0});
  ExpectValues(Eval(PadOp({{-2, -1, 1}}), {x, zero}), {kF32, {2}}, {2, 0});
  ExpectValues(Eval(PadOp({{-3, 0, 0}}), {x, zero}), {kF32, {0}}, {});
  ExpectValues(Eval(PadOp({{-4, 3, 0}}), {x, zero}), {kF32, {2}}, {0, 0});
  ExpectValues(Eval(PadOp({}), {Make(kS32, {}, {7}), Make(kS32, {}, {0})}), {kS32, {}}, {7});
}

TEST(Pad, MatchesAnIndexMapPerOutputElement) {
  const std::vector<std::vector<std::array<int64_t, 3>>> configs = {
      {{0, 0, 0}, {0, 0, 0}}, {{1, 2, 0}, {0, 3, 1}},  {{-1, 1, 2}, {2, -3, 0}},
      {{-3, -2, 1}, {1, 1, 3}}, {{2, -4, 0}, {-1, -1, 1}}};
  for (const Dims& dims : {Dims{4, 5}, Dims{1, 7}, Dims{0, 3}, Dims{3, 1}}) {
    for (const auto& config : configs) {
      for (DType dtype : {kF32, kBF16, kS32, kPred}) {
        Dims out_dims;
        bool valid = true;
        for (size_t d = 0; d < dims.size(); ++d) {
          const auto& [lo, hi, in] = config[d];
          out_dims.push_back(lo + hi + dims[d] + std::max<int64_t>(dims[d] - 1, 0) * in);
          valid = valid && out_dims.back() >= 0;
        }
        if (!valid) continue;
        SCOPED_TRACE(fmt::format("{} config=({},{},{}),({},{},{})",
                                 ShapedType{dtype, dims}.ToString(), config[0][0], config[0][1],
                                 config[0][2], config[1][0], config[1][1], config[1][2]));
        const Values x = RandomValues(NumElements(dims), dtype, 17);
        const double fill = RoundTo(dtype, -9);
        Values want(NumElements(out_dims));
        for (size_t i = 0; i < want.size(); ++i) {
          const Dims idx = Unravel(static_cast<int64_t>(i), out_dims);
          Dims src(dims.size());
          bool inside = true;
          for (size_t d = 0; d < dims.size() && inside; ++d) {
            const int64_t t = idx[d] - config[d][0], step = config[d][2] + 1;
            inside = t >= 0 && t % step == 0 && t / step < dims[d];
            src[d] = inside ? t / step : 0;
          }
          want[i] = inside ? x[Ravel(src, dims)] : fill;
        }
        ExpectValues(Eval(PadOp(config), {Make(dtype, dims, x), Make(dtype, {}, {fill})}),
                     {dtype, out_dims}, want);
      }
    }
  }
}

TEST(Rev, MatchesMirroredIndices) {
  for (const Dims& dims : kShapes) {
    const int64_t rank = static_cast<int64_t>(dims.size());
    for (int64_t mask = 0; mask < (int64_t{1} << rank); ++mask) {
      ir::Op op = MakeOp("rev");
      op.mutable_rev();
      for (int64_t d = 0; d < rank; ++d) {
        if (mask >> d & 1) op.mutable_rev()->add_dimensions(d);
      }
      for (DType dtype : {kBF16, kS32}) {
        const Values x = RandomValues(NumElements(dims), dtype, 23);
        Values want(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          Dims idx = Unravel(static_cast<int64_t>(i), dims);
          for (int64_t d = 0; d < rank; ++d) {
            if (mask >> d & 1) idx[d] = dims[d] - 1 - idx[d];
          }
          want[i] = x[Ravel(idx, dims)];
        }
        ExpectValues(Eval(op, {Make(dtype, dims, x)}), {dtype, dims}, want);
      }
    }
  }
}

TEST(Clamp, ScalarAndArrayBounds) {
  const Tensor x = Make(kF32, {5}, {-3, 0.5, 7, kNaN, 2});
  ExpectValues(Eval(MakeOp("clamp"), {Make(kF32, {}, {0}), x, Make(kF32, {}, {1})}),
               {kF32, {5}}, {0, 0.5, 1, kNaN, 1});
  ExpectValues(Eval(MakeOp("clamp"),
                    {Make(kF32, {5}, {-4, 1, 0, 0, 3}), x, Make(kF32, {5}, {-3.5, 2, 8, 1, 2})}),
               {kF32, {5}}, {-3.5, 1, 7, kNaN, 2});
  ExpectValues(Eval(MakeOp("clamp"), {Make(kS32, {}, {-1}), Make(kS32, {3}, {-5, 0, 5}),
                                      Make(kS32, {}, {2})}),
               {kS32, {3}}, {-1, 0, 2});
}

ir::Op ReduceOp(const char* name, Dims axes) {
  ir::Op op = MakeOp(name);
  SetDims(op.mutable_reduce()->mutable_axes(), axes);
  return op;
}

TEST(ReduceProdAndLogical, HandDerived) {
  const Tensor x = Make(kS32, {2, 3}, {1, 2, 3, 4, 5, -6});
  EXPECT_EQ(Eval(ReduceOp("reduce_prod", {1}), {x}).ToDoubles(), (Values{6, -120}));
  EXPECT_EQ(Eval(ReduceOp("reduce_prod", {0, 1}), {x}).ToDoubles(), (Values{-720}));
  EXPECT_EQ(Eval(ReduceOp("reduce_and", {0}), {x}).ToDoubles(), (Values{0, 0, 2}));
  EXPECT_EQ(Eval(ReduceOp("reduce_or", {0}), {x}).ToDoubles(), (Values{5, 7, -5}));
  const Tensor p = Make(kPred, {2, 2}, {1, 0, 1, 1});
  EXPECT_EQ(Eval(ReduceOp("reduce_and", {1}), {p}).ToDoubles(), (Values{0, 1}));
  EXPECT_EQ(Eval(ReduceOp("reduce_or", {0}), {p}).ToDoubles(), (Values{1, 1}));
  // Empty reductions give the identity.
  EXPECT_EQ(Eval(ReduceOp("reduce_and", {0}), {Make(kPred, {0, 2}, {})}).ToDoubles(),
            (Values{1, 1}));
  EXPECT_EQ(Eval(ReduceOp("reduce_prod", {0}), {Make(kBF16, {0}, {})}).ToDoubles(), (Values{1}));
  ExpectValues(Eval(ReduceOp("reduce_prod", {0}), {Make(kBF16, {3}, {3, 3, 3})}), {kBF16, {}},
               {27});
}

TEST(ShapeRules, NameTheOpAndTheAttribute) {
  auto error = [](ir::Op op, std::vector<ShapedType> operands) {
    absl::StatusOr<std::vector<ShapedType>> r = ir::InferResultTypes({}, operands, op);
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  const ShapedType f23{kF32, {2, 3}};
  EXPECT_EQ(error(TopKOp(4, 1), {f23}),
            "top_k: k=4 is larger than dimension 1 (size 3); operands f32[2,3]");
  EXPECT_EQ(error(TopKOp(-1, 1), {f23}), "top_k: k=-1 must be nonnegative; operands f32[2,3]");
  EXPECT_EQ(error(SortOp(2, 1), {f23}),
            "sort: dimension=2 is out of range for rank 2; operands f32[2,3]");
  EXPECT_EQ(error(SortOp(0, 3), {f23, f23}),
            "sort: num_keys=3 must be in [1, 2] (the number of operands); operands f32[2,3], "
            "f32[2,3]");
  EXPECT_EQ(error(SortOp(0, 1), {f23, {kS32, {3, 2}}}),
            "sort: operand shapes differ (f32[2,3] vs s32[3,2]); operands f32[2,3], s32[3,2]");
  EXPECT_EQ(error(ArgOp("argmax", 0), {{kF32, {0, 3}}}),
            "argmax: the reduced dimension 0 is empty (argmin and argmax need a non-empty "
            "dimension); operands f32[0,3]");
  ir::Op f32_index = ArgOp("argmin", 0);
  f32_index.mutable_arg_min_max()->set_index_dtype(ir::F32);
  EXPECT_EQ(error(f32_index, {f23}),
            "argmin: index_dtype=f32 must be an integer dtype; operands f32[2,3]");
  EXPECT_EQ(error(CumOp("cumsum", 0, false), {{kPred, {3}}}),
            "cumsum: the operand must be numeric, got pred; operands pred[3]");
  EXPECT_EQ(error(PadOp({{0, 0, -1}, {0, 0, 0}}), {f23, {kF32, {}}}),
            "pad: padding_config[0] has interior=-1, which must be nonnegative; operands "
            "f32[2,3], f32[]");
  EXPECT_EQ(error(PadOp({{-2, -1, 0}, {0, 0, 0}}), {f23, {kF32, {}}}),
            "pad: padding_config[0]=(-2, -1, 0) makes dimension 0 of size 2 negative or too "
            "large; operands f32[2,3], f32[]");
  EXPECT_EQ(error(PadOp({{0, 0, 0}, {0, 0, 0}}), {f23, {kS32, {}}}),
            "pad: padding_value must be a scalar of the operand's dtype; operands f32[2,3], "
            "s32[]");
  EXPECT_EQ(error(MakeOp("clamp"), {{kF32, {3}}, f23, {kF32, {}}}),
            "clamp: min must be a scalar or of the operand's shape, with its dtype; operands "
            "f32[3], f32[2,3], f32[]");
  EXPECT_EQ(error(ReduceOp("reduce_or", {0}), {f23}),
            "reduce_or: the operand must be pred or an integer, got f32; operands f32[2,3]");
  ir::Op rev = MakeOp("rev");
  rev.mutable_rev()->add_dimensions(1);
  rev.mutable_rev()->add_dimensions(1);
  EXPECT_NE(error(rev, {f23}).find("rev: "), std::string::npos);
}

}  // namespace
}  // namespace shardjit::backends::reference
