// gather and scatter through jit on both backends: an embedding lookup (jnp::take) with the
// table's feature dimension and the tokens sharded on a 2x2 mesh (partitioned: no gather of
// either), its gradient by scatter_add, take_along_axis of top_k's indices; negative and
// out-of-bounds indices in each mode; tracer errors.
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
using ::testing::Not;

constexpr int64_t kVocab = 9, kDim = 6, kTokens = 8;

std::vector<double> Table() {
  std::vector<double> t(kVocab * kDim);
  for (int64_t i = 0; i < kVocab * kDim; ++i) t[i] = 0.25 * static_cast<double>(i) - 3;
  return t;
}

// Token ids, with a negative one (counts from the end) and one past the vocabulary.
const std::vector<double> kIds = {3, 0, 8, -1, 4, 4, 11, 2};

class LaxIndexingTest : public ::testing::TestWithParam<Backend> {};

TEST_P(LaxIndexingTest, ShardedEmbeddingLookupAndGradient) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  const std::vector<double> table = Table();
  Array t = *device_put(HostTensor(DType::kF32, {kVocab, kDim}, table),
                        NamedSharding(mesh, P(None, "y")));
  Array ids = *device_put(HostTensor(DType::kS32, {kTokens}, kIds), NamedSharding(mesh, P("x")));
  auto f = jit(
      [](Tracer t, Tracer ids) {
        Tracer rows = jnp::take(t, ids, 0);  // [tokens, dim]; id 11 gives NaN rows
        Tracer clipped = jnp::take(t, ids, 0, lax::GatherScatterMode::kClip);
        // The gradient of sum(clipped * w) with respect to the table, for w = 1 + token index.
        Tracer w = lax::convert_element_type(
            lax::broadcasted_iota(DType::kS32, {kTokens, kDim}, 0), DType::kF32);
        Tracer ids2 = lax::reshape(ids, {kTokens, 1});
        Tracer grad = lax::scatter_add(lax::full({kVocab, kDim}, 0, DType::kF32), ids2, w + 1.0,
                                       {.update_window_dims = {1},
                                        .inserted_window_dims = {0},
                                        .scatter_dims_to_operand_dims = {0}});
        return std::vector<Tracer>{rows, clipped, grad};
      },
      {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> out = f(t, ids);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::string text = f.lower(t, ids)->as_text();
  EXPECT_THAT(text, Not(HasSubstr("unpartitioned")));
  // The lookup runs on blocks: no collective brings the table or the ids together for it.
  EXPECT_EQ((*out)[0].sharding().spec(), P("x", "y")) << text;

  std::vector<double> rows, clipped, grad(kVocab * kDim, 0);
  for (int64_t i = 0; i < kTokens; ++i) {
    const int64_t id = static_cast<int64_t>(kIds[i]);
    const int64_t wrapped = id < 0 ? id + kVocab : id;
    const bool inside = wrapped >= 0 && wrapped < kVocab;
    const int64_t clamped = std::min<int64_t>(std::max<int64_t>(id, 0), kVocab - 1);  // raw id
    for (int64_t j = 0; j < kDim; ++j) {
      rows.push_back(inside ? table[wrapped * kDim + j] : NAN);
      clipped.push_back(table[clamped * kDim + j]);
      // scatter_add takes the raw ids: -1 and 11 are dropped.
      if (id >= 0 && id < kVocab) grad[id * kDim + j] += static_cast<double>(i + 1);
    }
  }
  std::vector<double> got = (*out)[0].to_host()->ToDoubles();
  ASSERT_EQ(got.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (std::isnan(rows[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
    } else {
      EXPECT_EQ(got[i], rows[i]) << i;
    }
  }
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(), clipped);
  EXPECT_EQ((*out)[2].to_host()->ToDoubles(), grad);
}

TEST_P(LaxIndexingTest, TakeAlongAxisOfTopKIndices) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  std::vector<double> logits(4 * 7);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<double>((i * 5) % 7) - 2;
  Array x = *device_put(HostTensor(DType::kF32, {4, 7}, logits), NamedSharding(mesh, P("x")));
  auto f = jit(
      [](Tracer x) {
        auto [values, indices] = lax::top_k(x, 3);
        Tracer picked = jnp::take_along_axis(x, indices, 1);
        // Negative indices count from the end; a [4, 1] index broadcasts along nothing else.
        Tracer last = jnp::take_along_axis(x, lax::full({4, 1}, -1, DType::kS32), 1);
        return std::vector<Tracer>{values, picked, last};
      },
      {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> out = f(x);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].to_host()->ToDoubles(), (*out)[1].to_host()->ToDoubles());
  EXPECT_EQ((*out)[2].to_host()->ToDoubles(),
            (std::vector<double>{logits[6], logits[13], logits[20], logits[27]}));
}

TEST_P(LaxIndexingTest, GatherWindowsAndScatterModes) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  std::vector<double> grid(5 * 4);
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = static_cast<double>(i);
  Array x = *device_put(HostTensor(DType::kS32, {5, 4}, grid), NamedSharding(mesh, P()));
  auto f = jit(
      [](Tracer x) {
        // 2x2 windows at (1, 1) and (4, 3): the second is clamped to (3, 2).
        Tracer starts = lax::reshape(
            lax::concatenate({lax::full({1}, 1, DType::kS32), lax::full({1}, 1, DType::kS32),
                              lax::full({1}, 4, DType::kS32), lax::full({1}, 3, DType::kS32)},
                             0),
            {2, 2});
        Tracer windows = lax::gather(x, starts, {.offset_dims = {1, 2}, .start_index_map = {0, 1}},
                                     {2, 2}, lax::GatherScatterMode::kClip);
        Tracer filled = lax::gather(x, starts, {.offset_dims = {1, 2}, .start_index_map = {0, 1}},
                                    {2, 2}, lax::GatherScatterMode::kFillOrDrop, -1.0);
        Tracer ones = lax::full({2, 2, 2}, 100, DType::kS32);
        Tracer dropped = lax::scatter(x, starts, ones,
                                      {.update_window_dims = {1, 2},
                                       .scatter_dims_to_operand_dims = {0, 1}});
        return std::vector<Tracer>{windows, filled, dropped};
      },
      {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> out = f(x);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].to_host()->ToDoubles(),
            (std::vector<double>{5, 6, 9, 10, 14, 15, 18, 19}));
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(),
            (std::vector<double>{5, 6, 9, 10, -1, -1, -1, -1}));
  std::vector<double> want = grid;
  for (int64_t i : {5, 6, 9, 10}) want[i] = 100;  // the second window is dropped
  EXPECT_EQ((*out)[2].to_host()->ToDoubles(), want);
}

// The JVP of a gather fills its tangent's out-of-bounds slices with 0, whatever the primal's fill
// (jax's _gather_jvp_rule): the primal's row past the end is NaN (JAX's default float fill), its
// tangent 0.
TEST_P(LaxIndexingTest, GatherTangentsOfOutOfBoundsSlicesAreZero) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(DType::kF32, {3}, {1, 2, 3}), NamedSharding(mesh, P()));
  auto f = jit(
      [](Tracer x) {
        Tracer ids = lax::reshape(
            lax::concatenate({lax::full({1}, 2, DType::kS32), lax::full({1}, 7, DType::kS32)}, 0),
            {2, 1});
        JvpOut j = jvp(
            [ids](Tracer t) {
              return lax::gather(t, ids, {.collapsed_slice_dims = {0}, .start_index_map = {0}},
                                 {1});
            },
            {x}, {x * 10.0});
        return std::vector<Tracer>{j.primals_out[0], j.tangents_out[0]};
      },
      {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> out = f(x);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<double> primal = (*out)[0].to_host()->ToDoubles();
  EXPECT_EQ(primal[0], 3);
  EXPECT_TRUE(std::isnan(primal[1]));
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(), (std::vector<double>{30, 0}));
}

INSTANTIATE_TEST_SUITE_P(Backends, LaxIndexingTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

// Indices of every integer dtype, as jax.lax takes them: take (negative indices wrapped in
// their own dtype, or in s32 where the dimension does not fit it), scatter_add, dynamic_slice's
// starts and argmax's index_dtype, against the same ops on s32 indices and hand-derived values.
TEST_P(LaxIndexingTest, IndicesOfEveryIntegerDtype) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  const NamedSharding rep(mesh, P());
  constexpr int64_t kRows = 200;  // does not fit s8: its negative indices wrap in s32
  std::vector<double> table(kRows * 2);
  for (int64_t i = 0; i < kRows * 2; ++i) table[i] = static_cast<double>(i);
  Array t = *device_put(HostTensor(DType::kF32, {kRows, 2}, table), rep);
  for (DType dtype : {DType::kS8, DType::kU8, DType::kS16, DType::kU16, DType::kS32, DType::kU32,
                      DType::kS64, DType::kU64}) {
    SCOPED_TRACE(ir::DTypeName(dtype));
    const bool is_signed = ir::IsSignedInteger(dtype);
    // 5, 0, 127 and, for signed dtypes, -1 (the last row) and -3; unsigned: 130 and 250 (past the
    // end: NaN, or the last row when clipped).
    const std::vector<double> ids = is_signed ? std::vector<double>{5, 0, 127, -1, -3}
                                              : std::vector<double>{5, 0, 127, 130, 250};
    Array idx = *device_put(HostTensor(dtype, {5}, ids), rep);
    auto f = jit(
        [](Tracer t, Tracer idx) {
          Tracer rows = jnp::take(t, idx, 0);
          Tracer clipped = jnp::take(t, idx, 0, lax::GatherScatterMode::kClip);
          Tracer counts = lax::scatter_add(lax::full({kRows}, 0, DType::kF32),
                                           lax::reshape(idx, {5, 1}), lax::full({5}, 1, DType::kF32),
                                           {.inserted_window_dims = {0},
                                            .scatter_dims_to_operand_dims = {0}});
          Tracer window = lax::dynamic_slice(t, {lax::reshape(lax::slice(idx, {2}, {3}, {}), {}),
                                                 0},
                                             {2, 2});
          return std::vector<Tracer>{rows, clipped, counts, window};
        },
        {.backend = GetParam()});
    absl::StatusOr<std::vector<Array>> out = f(t, idx);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> rows, clipped, counts(kRows, 0);
    for (double id : ids) {
      const int64_t i = static_cast<int64_t>(id);
      const int64_t wrapped = i < 0 ? i + kRows : i;
      const int64_t clamped = std::clamp<int64_t>(i, 0, kRows - 1);
      for (int64_t j = 0; j < 2; ++j) {
        rows.push_back(wrapped < kRows ? table[wrapped * 2 + j] : NAN);
        clipped.push_back(table[clamped * 2 + j]);
      }
      if (i >= 0 && i < kRows) counts[i] += 1;  // scatter_add drops -1, -3 and 250
    }
    const std::vector<double> got_rows = (*out)[0].to_host()->ToDoubles();
    ASSERT_EQ(got_rows.size(), rows.size());
    for (size_t k = 0; k < rows.size(); ++k) {
      if (std::isnan(rows[k])) {
        EXPECT_TRUE(std::isnan(got_rows[k])) << k;
      } else {
        EXPECT_EQ(got_rows[k], rows[k]) << k;
      }
    }
    EXPECT_EQ((*out)[1].to_host()->ToDoubles(), clipped);
    EXPECT_EQ((*out)[2].to_host()->ToDoubles(), counts);
    // dynamic_slice from row 127 (ids[2]).
    EXPECT_EQ((*out)[3].to_host()->ToDoubles(), (std::vector<double>{254, 255, 256, 257}));
  }
  // A u64 index past the int64 range is out of bounds, not negative.
  Array huge = *device_put(HostTensor(DType::kU64, {1}, {1.8e19}), rep);
  absl::StatusOr<std::vector<Array>> out = jit(
      [](Tracer t, Tracer idx) {
        return std::vector<Tracer>{jnp::take(t, idx, 0),
                                   jnp::take(t, idx, 0, lax::GatherScatterMode::kClip)};
      },
      {.backend = GetParam()})(t, huge);
  ASSERT_TRUE(out.ok()) << out.status();
  for (double v : (*out)[0].to_host()->ToDoubles()) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ((*out)[1].to_host()->ToDoubles(), (std::vector<double>{398, 399}));
  // argmax in every index dtype that holds the index; u8 cannot index 300 elements.
  std::vector<double> values(300, 0.0);
  values[257] = 1.0;
  Array v = *device_put(HostTensor(DType::kF32, {300}, values), rep);
  for (DType dtype : {DType::kS16, DType::kU16, DType::kU32, DType::kS64, DType::kU64}) {
    absl::StatusOr<Array> at =
        jit([dtype](Tracer v) { return lax::argmax(v, 0, dtype); }, {.backend = GetParam()})(v);
    ASSERT_TRUE(at.ok()) << at.status();
    EXPECT_EQ(at->dtype(), dtype);
    EXPECT_EQ(at->to_host()->ToDoubles(), (std::vector<double>{257}));
  }
  absl::StatusOr<Array> narrow =
      jit([](Tracer v) { return lax::argmax(v, 0, DType::kU8); }, {.backend = GetParam()})(v);
  EXPECT_THAT(narrow.status().message(),
              HasSubstr("dimension 0 (size 300) has indices that do not fit u8 (range [0, 255])"));
}

TEST(LaxIndexingErrors, NameTheOpAndTheAttribute) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                        NamedSharding(mesh, P()));
  auto message = [&](auto fn) { return std::string(jit(fn)(x).status().message()); };
  EXPECT_THAT(message([](Tracer x) { return jnp::take(x, lax::full({2}, 0, DType::kS32), 2); }),
              HasSubstr("take: axis=2 is out of range for f32[2,3]"));
  EXPECT_THAT(message([](Tracer x) { return jnp::take(x, x, 0); }),
              HasSubstr("gather: indices must have an integer dtype, got f32"));
  EXPECT_THAT(message([](Tracer x) {
                return jnp::take_along_axis(x, lax::full({2}, 0, DType::kS32), 1);
              }),
              HasSubstr("take_along_axis: indices s32[2] must have the rank of the array f32[2,3]"));
  EXPECT_THAT(message([](Tracer x) {
                return jnp::take(lax::slice(x, {0, 0}, {2, 0}), lax::full({1}, 0, DType::kS32), 1);
              }),
              HasSubstr("take: cannot take a non-empty set of indices s32[1] from the empty axis 1"));
  EXPECT_THAT(message([](Tracer x) {
                return lax::gather(x, lax::full({1, 1}, 0, DType::kS32),
                                   {.offset_dims = {1}, .collapsed_slice_dims = {0},
                                    .start_index_map = {0}},
                                   {2, 3});
              }),
              HasSubstr("gather: collapsed_slice_dims has dimension 0, whose slice size 2 is not 1"));
}

}  // namespace
}  // namespace shardjit
