// The gather and scatter reference kernels against oracles that follow XLA's definitions one
// result (update) element at a time, and hand-derived values: embedding lookups, offset dims
// between batch dims, windows wider than one element, batching dims, every mode with indices
// out of bounds on either side, empty index sets, duplicates.
#include <string>

#include "backends/reference/kernel_test_util.h"
#include "fmt/format.h"

namespace shardjit::backends::reference {
namespace {

using namespace test_util;  // NOLINT

bool Contains(const Dims& dims, int64_t d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

Dims Window(int64_t rank, const Dims& collapsed, const Dims& batching) {
  Dims w;
  for (int64_t d = 0; d < rank; ++d) {
    if (!Contains(collapsed, d) && !Contains(batching, d)) w.push_back(d);
  }
  return w;
}

struct GatherCase {
  Dims offset, collapsed, index_map, operand_batching, indices_batching, sizes;
  ir::GatherScatterMode mode = ir::FILL_OR_DROP;
  double fill = -7;
};

ir::Op GatherOp(const GatherCase& c) {
  ir::Op op = MakeOp("gather");
  ir::GatherAttrs* a = op.mutable_gather();
  SetDims(a->mutable_offset_dims(), c.offset);
  SetDims(a->mutable_collapsed_slice_dims(), c.collapsed);
  SetDims(a->mutable_start_index_map(), c.index_map);
  SetDims(a->mutable_operand_batching_dims(), c.operand_batching);
  SetDims(a->mutable_start_indices_batching_dims(), c.indices_batching);
  SetDims(a->mutable_slice_sizes(), c.sizes);
  a->set_mode(c.mode);
  a->set_fill_value(c.fill);
  return op;
}

// XLA's gather, one result element at a time.
Values GatherOracle(const GatherCase& c, const Tensor& x, const Tensor& indices,
                    const Dims& out_dims) {
  const Values xv = x.ToDoubles(), iv = indices.ToDoubles();
  const Dims& xd = x.dims();
  const Dims batch_dims(indices.dims().begin(), indices.dims().end() - 1);
  const int64_t k = indices.dims().back();
  const Dims window = Window(xd.size(), c.collapsed, c.operand_batching);
  Values out(NumElements(out_dims));
  for (size_t i = 0; i < out.size(); ++i) {
    const Dims o = Unravel(static_cast<int64_t>(i), out_dims);
    Dims batch, offsets;
    for (size_t d = 0; d < o.size(); ++d) (Contains(c.offset, d) ? offsets : batch).push_back(o[d]);
    const int64_t g = Ravel(batch, batch_dims);
    Dims start(xd.size(), 0);
    for (int64_t j = 0; j < k; ++j) start[c.index_map[j]] = static_cast<int64_t>(iv[g * k + j]);
    for (size_t j = 0; j < c.operand_batching.size(); ++j) {
      start[c.operand_batching[j]] = batch[c.indices_batching[j]];
    }
    bool inside = true;
    for (int64_t d : c.index_map) {
      const int64_t hi = xd[d] - c.sizes[d];
      inside = inside && start[d] >= 0 && start[d] <= hi;
      start[d] = std::clamp<int64_t>(start[d], 0, hi);
    }
    if (!inside && c.mode == ir::FILL_OR_DROP) {
      out[i] = c.fill;
      continue;
    }
    Dims at = start;
    for (size_t j = 0; j < window.size(); ++j) at[window[j]] += offsets[j];
    out[i] = xv[Ravel(at, xd)];
  }
  return out;
}

void CheckGather(const GatherCase& c, DType dtype, const Dims& x_dims, const Dims& index_dims,
                 const Values& index_values) {
  const Tensor x = Make(dtype, x_dims, RandomValues(NumElements(x_dims), dtype, 3));
  const Tensor indices = Make(kS32, index_dims, index_values);
  std::vector<ShapedType> types = {x.type(), indices.type()};
  absl::StatusOr<std::vector<ShapedType>> out_type = ir::InferResultTypes({}, types, GatherOp(c));
  ASSERT_TRUE(out_type.ok()) << out_type.status();
  const ShapedType& out = (*out_type)[0];
  Values want = GatherOracle(c, x, indices, out.dims);
  for (double& v : want) v = RoundTo(dtype, v);
  ExpectValues(Eval(GatherOp(c), {x, indices}), out, want);
}

TEST(Gather, EmbeddingLookupInEveryMode) {
  // table[7, 5], ids[3, 2] -> [3, 2, 5]; -1 and 7 are out of bounds.
  GatherCase c{.offset = {2}, .collapsed = {0}, .index_map = {0}, .sizes = {1, 5}};
  for (ir::GatherScatterMode mode : {ir::CLIP, ir::FILL_OR_DROP, ir::PROMISE_IN_BOUNDS}) {
    c.mode = mode;
    for (DType dtype : {kF32, kBF16, kS32, kPred}) {
      SCOPED_TRACE(fmt::format("mode={} {}", static_cast<int>(mode), ir::DTypeName(dtype)));
      CheckGather(c, dtype, {7, 5}, {3, 2, 1}, {0, 6, -1, 7, 3, 3});
    }
  }
  // Hand-derived: rows 2 and 0 of a 3x2 table; row -1 is filled.
  const Tensor table = Make(kF32, {3, 2}, {1, 2, 3, 4, 5, 6});
  c.mode = ir::FILL_OR_DROP;
  c.offset = {1};
  c.sizes = {1, 2};
  c.fill = kNaN;
  ExpectValues(Eval(GatherOp(c), {table, Make(kS32, {3, 1}, {2, 0, -1})}), {kF32, {3, 2}},
               {5, 6, 1, 2, kNaN, kNaN});
}

TEST(Gather, GeneralDimensionNumbers) {
  // Windows of 2x3 from x[5, 6, 4] at (i, j) pairs, offset dims around the batch dim.
  GatherCase windows{.offset = {0, 2},
                     .collapsed = {2},
                     .index_map = {0, 1},
                     .sizes = {2, 3, 1},
                     .mode = ir::CLIP};
  // The third index of x is never mapped: it always starts at 0 (size-1 slice, collapsed).
  CheckGather(windows, kF32, {5, 6, 4}, {4, 2}, {0, 0, 3, 3, 4, 5, -2, 9});
  windows.mode = ir::FILL_OR_DROP;
  CheckGather(windows, kF32, {5, 6, 4}, {4, 2}, {0, 0, 3, 3, 4, 5, -2, 9});
  // Batching dims (take_along_axis): x[3, 4], indices [3, 2, 1] batched on dim 0.
  GatherCase along{.collapsed = {1},
                   .index_map = {1},
                   .operand_batching = {0},
                   .indices_batching = {0},
                   .sizes = {1, 1}};
  CheckGather(along, kS32, {3, 4}, {3, 2, 1}, {3, 0, 1, 1, 4, -1});
  // Empty index sets and an index vector of length 0 (a whole-array slice per position).
  CheckGather(GatherCase{.offset = {1}, .collapsed = {0}, .index_map = {0}, .sizes = {1, 5}},
              kF32, {7, 5}, {0, 1}, {});
  CheckGather(GatherCase{.offset = {1, 2}, .sizes = {2, 3}}, kBF16, {2, 3}, {4, 0}, {});
}

struct ScatterCase {
  Dims update_window, inserted, index_map, operand_batching, indices_batching;
  ir::GatherScatterMode mode = ir::FILL_OR_DROP;
};

ir::Op ScatterOp(const char* name, const ScatterCase& c) {
  ir::Op op = MakeOp(name);
  ir::ScatterAttrs* a = op.mutable_scatter();
  SetDims(a->mutable_update_window_dims(), c.update_window);
  SetDims(a->mutable_inserted_window_dims(), c.inserted);
  SetDims(a->mutable_scatter_dims_to_operand_dims(), c.index_map);
  SetDims(a->mutable_operand_batching_dims(), c.operand_batching);
  SetDims(a->mutable_scatter_indices_batching_dims(), c.indices_batching);
  a->set_mode(c.mode);
  return op;
}

// XLA's scatter, one update element at a time (a window out of bounds is dropped whole).
// Each combination is rounded to the dtype, as the kernel rounds each update.
Values ScatterOracle(const std::string& name, const ScatterCase& c, const Tensor& x,
                     const Tensor& indices, const Tensor& updates) {
  const DType dtype = x.dtype();
  Values out = x.ToDoubles();
  const Values iv = indices.ToDoubles(), uv = updates.ToDoubles();
  const Dims& xd = x.dims();
  const Dims batch_dims(indices.dims().begin(), indices.dims().end() - 1);
  const int64_t k = indices.dims().back();
  const Dims window = Window(xd.size(), c.inserted, c.operand_batching);
  Dims size(xd.size(), 1);
  for (size_t j = 0; j < window.size(); ++j) size[window[j]] = updates.dims()[c.update_window[j]];
  for (size_t i = 0; i < uv.size(); ++i) {
    const Dims u = Unravel(static_cast<int64_t>(i), updates.dims());
    Dims batch, offsets;
    for (size_t d = 0; d < u.size(); ++d) {
      (Contains(c.update_window, d) ? offsets : batch).push_back(u[d]);
    }
    const int64_t g = Ravel(batch, batch_dims);
    Dims start(xd.size(), 0);
    for (int64_t j = 0; j < k; ++j) start[c.index_map[j]] = static_cast<int64_t>(iv[g * k + j]);
    for (size_t j = 0; j < c.operand_batching.size(); ++j) {
      start[c.operand_batching[j]] = batch[c.indices_batching[j]];
    }
    bool inside = true;
    for (int64_t d : c.index_map) {
      const int64_t hi = xd[d] - size[d];
      inside = inside && start[d] >= 0 && start[d] <= hi;
      if (c.mode == ir::CLIP) start[d] = std::clamp<int64_t>(start[d], 0, hi);
    }
    if (!inside && c.mode != ir::CLIP) continue;
    Dims at = start;
    for (size_t j = 0; j < window.size(); ++j) at[window[j]] += offsets[j];
    double& target = out[Ravel(at, xd)];
    const double v = uv[i];
    if (name == "scatter") target = v;
    if (name == "scatter_add") target += v;
    if (name == "scatter_mul") target *= v;
    if (name == "scatter_max") target = std::max(target, v);
    if (name == "scatter_min") target = std::min(target, v);
    target = RoundTo(dtype, target);
  }
  return out;
}

void CheckScatter(const ScatterCase& c, DType dtype, const Dims& x_dims, const Dims& index_dims,
                  const Values& index_values, const Dims& update_dims) {
  for (const char* name :
       {"scatter", "scatter_add", "scatter_mul", "scatter_max", "scatter_min"}) {
    SCOPED_TRACE(fmt::format("{} {} mode={}", name, ir::DTypeName(dtype),
                             static_cast<int>(c.mode)));
    const Tensor x = Make(dtype, x_dims, RandomValues(NumElements(x_dims), dtype, 5, 3));
    const Tensor indices = Make(kS32, index_dims, index_values);
    const Tensor updates =
        Make(dtype, update_dims, RandomValues(NumElements(update_dims), dtype, 8, 3));
    Values want = ScatterOracle(name, c, x, indices, updates);
    for (double& v : want) v = RoundTo(dtype, v);
    ExpectValues(Eval(ScatterOp(name, c), {x, indices, updates}), x.type(), want);
  }
}

TEST(Scatter, EmbeddingGradientAndModes) {
  // Rows of updates[4, 3] added into table[5, 3] at ids (with a repeat and out-of-bounds ids).
  const ScatterCase rows{.update_window = {1}, .inserted = {0}, .index_map = {0}};
  for (ir::GatherScatterMode mode : {ir::CLIP, ir::FILL_OR_DROP, ir::PROMISE_IN_BOUNDS}) {
    ScatterCase c = rows;
    c.mode = mode;
    CheckScatter(c, kS32, {5, 3}, {4, 1}, {4, 1, 1, 9}, {4, 3});
    CheckScatter(c, kF32, {5, 3}, {4, 1}, {-1, 2, 0, 3}, {4, 3});
  }
  // Hand-derived scatter_add with a repeated id; id 5 is dropped.
  const Tensor table = Make(kF32, {3, 2}, {0, 0, 0, 0, 0, 0});
  ExpectValues(Eval(ScatterOp("scatter_add", rows),
                    {table, Make(kS32, {3, 1}, {2, 2, 5}), Make(kF32, {3, 2}, {1, 2, 3, 4, 5, 6})}),
               {kF32, {3, 2}}, {0, 0, 0, 0, 4, 6});
}

TEST(Scatter, WindowsAndBatchingDims) {
  // 2x2 windows into x[4, 5] (window dims first in the updates), partly out of bounds.
  for (ir::GatherScatterMode mode : {ir::CLIP, ir::FILL_OR_DROP}) {
    CheckScatter({.update_window = {0, 1}, .index_map = {0, 1}, .mode = mode}, kF32, {4, 5},
                 {3, 2}, {0, 0, 3, 1, 2, 4}, {2, 2, 3});
  }
  // put_along_axis-like: x[3, 4] batched on dim 0, two updates per row.
  CheckScatter({.inserted = {1},
                .index_map = {1},
                .operand_batching = {0},
                .indices_batching = {0}},
               kBF16, {3, 4}, {3, 2, 1}, {0, 3, 2, 1, 1, 2}, {3, 2});
  // No updates at all.
  CheckScatter({.update_window = {1}, .inserted = {0}, .index_map = {0}}, kF32, {5, 3}, {0, 1},
               {}, {0, 3});
}

// No window fits an empty dimension, whatever the mode: the update is dropped.
TEST(Scatter, IntoAnEmptyDimensionDropsEveryWindow) {
  for (ir::GatherScatterMode mode : {ir::CLIP, ir::FILL_OR_DROP, ir::PROMISE_IN_BOUNDS}) {
    const ScatterCase c{.inserted = {0}, .index_map = {0}, .mode = mode};
    std::vector<Tensor> out = EvalAll(ScatterOp("scatter_add", c),
                                      {Make(kF32, {0}, {}), Make(kS32, {1, 1}, {0}),
                                       Make(kF32, {1}, {5})});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].num_elements(), 0);
  }
}

TEST(GatherScatter, ShapeRulesNameTheAttribute) {
  auto error = [](ir::Op op, std::vector<ShapedType> operands) {
    absl::StatusOr<std::vector<ShapedType>> r = ir::InferResultTypes({}, operands, op);
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  const GatherCase take{.offset = {1}, .collapsed = {0}, .index_map = {0}, .sizes = {1, 5}};
  EXPECT_EQ(error(GatherOp(take), {{kF32, {7, 5}}, {kF32, {3, 1}}}),
            "gather: indices must have an integer dtype, got f32; operands f32[7,5], f32[3,1]");
  EXPECT_EQ(error(GatherOp(take), {{kF32, {7, 5}}, {kS32, {3, 2}}}),
            "gather: the last dimension of the indices must have size 1 (one index per mapped "
            "operand dimension); operands f32[7,5], s32[3,2]");
  GatherCase wide = take;
  wide.sizes = {2, 5};
  EXPECT_EQ(error(GatherOp(wide), {{kF32, {7, 5}}, {kS32, {3, 1}}}),
            "gather: collapsed_slice_dims has dimension 0, whose slice size 2 is not 1; operands "
            "f32[7,5], s32[3,1]");
  GatherCase none = take;
  none.sizes = {0, 5};
  EXPECT_EQ(error(GatherOp(none), {{kF32, {7, 5}}, {kS32, {3, 1}}}),
            "gather: collapsed_slice_dims has dimension 0, whose slice size 0 is not 1; operands "
            "f32[7,5], s32[3,1]");
  GatherCase big = take;
  big.sizes = {1, 6};
  EXPECT_EQ(error(GatherOp(big), {{kF32, {7, 5}}, {kS32, {3, 1}}}),
            "gather: slice_sizes[1]=6 is not in [0, 5]; operands f32[7,5], s32[3,1]");
  GatherCase offsets = take;
  offsets.offset = {0, 1};
  EXPECT_EQ(error(GatherOp(offsets), {{kF32, {7, 5}}, {kS32, {3, 1}}}),
            "gather: offset_dims has 2 entries; the slice keeps 1 dimensions; operands f32[7,5], "
            "s32[3,1]");
  GatherCase fill = take;
  fill.fill = 1e40;
  EXPECT_EQ(error(GatherOp(fill), {{kBF16, {7, 5}}, {kS32, {3, 1}}}).substr(0, 19),
            "gather: fill_value=");
  const ScatterCase rows{.update_window = {1}, .inserted = {0}, .index_map = {0}};
  EXPECT_EQ(error(ScatterOp("scatter_add", rows), {{kF32, {5, 3}}, {kS32, {4, 1}}, {kF32, {4, 4}}}),
            "scatter_add: update window dimension 1 (size 4) is larger than operand dimension 1 "
            "(size 3); operands f32[5,3], s32[4,1], f32[4,4]");
  EXPECT_EQ(error(ScatterOp("scatter", rows), {{kF32, {5, 3}}, {kS32, {4, 1}}, {kF32, {2, 3}}}),
            "scatter: update scatter dimension 0 (size 2) differs from the indices' dimension 0 "
            "(size 4); operands f32[5,3], s32[4,1], f32[2,3]");
  EXPECT_EQ(error(ScatterOp("scatter_mul", rows), {{kPred, {5, 3}}, {kS32, {4, 1}}, {kPred, {4, 3}}}),
            "scatter_mul: the operand must be numeric, got pred; operands pred[5,3], s32[4,1], "
            "pred[4,3]");
  EXPECT_EQ(error(ScatterOp("scatter", rows), {{kF32, {5, 3}}, {kS32, {4, 1}}, {kS32, {4, 3}}}),
            "scatter: updates must have the operand's dtype; operands f32[5,3], s32[4,1], "
            "s32[4,3]");
}

}  // namespace
}  // namespace shardjit::backends::reference
