// The data-movement reference kernels against index-mapping oracles.
#include "backends/reference/kernel_test_util.h"

namespace shardjit::backends::reference {
namespace {

using namespace test_util;  // NOLINT


// out[idx] = x[source(idx)] for every index of `out_dims`.
Values Gather(const Tensor& x, const Dims& out_dims,
              const std::function<Dims(const Dims&)>& source) {
  Values v = x.ToDoubles(), out;
  for (int64_t i = 0; i < NumElements(out_dims); ++i) {
    out.push_back(v[Ravel(source(Unravel(i, out_dims)), x.dims())]);
  }
  return out;
}

ir::Op BroadcastOp(const Dims& shape, const Dims& bdims) {
  ir::Op op = MakeOp("broadcast_in_dim");
  SetDims(op.mutable_broadcast_in_dim()->mutable_shape(), shape);
  SetDims(op.mutable_broadcast_in_dim()->mutable_broadcast_dimensions(), bdims);
  return op;
}

TEST(ShapeOps, BroadcastInDim) {
  struct Case {
    Dims in, shape, bdims;
  };
  const Case cases[] = {{{3, 1}, {2, 3, 4}, {1, 2}}, {{}, {2, 3}, {}},         {{3}, {3, 2}, {0}},
                        {{1, 5}, {4, 5}, {0, 1}},    {{2, 3}, {2, 3}, {0, 1}}, {{3}, {0, 3}, {1}}};
  for (DType dtype : {kF32, kBF16, kS32, kPred}) {
    for (const Case& c : cases) {
      Tensor x = Make(dtype, c.in, RandomValues(NumElements(c.in), dtype, 4));
      Values want = Gather(x, c.shape, [&](const Dims& idx) {
        Dims src;
        for (size_t i = 0; i < c.bdims.size(); ++i) {
          src.push_back(c.in[i] == 1 ? 0 : idx[c.bdims[i]]);
        }
        return src;
      });
      ExpectValues(Eval(BroadcastOp(c.shape, c.bdims), {x}), {dtype, c.shape}, want);
    }
  }
}

TEST(ShapeOps, Reshape) {
  Tensor x = Make(kS32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ir::Op op = MakeOp("reshape");
  SetDims(op.mutable_reshape()->mutable_new_sizes(), {3, 1, 2});
  ExpectValues(Eval(op, {x}), {kS32, {3, 1, 2}}, {1, 2, 3, 4, 5, 6});
}

TEST(ShapeOps, Transpose) {
  const std::pair<Dims, Dims> cases[] = {{{2, 3, 4}, {2, 0, 1}},
                                         {{2, 3, 4}, {1, 2, 0}},
                                         {{5, 1, 3}, {0, 2, 1}},
                                         {{33, 17}, {1, 0}},
                                         {{}, {}},
                                         {{0, 3}, {1, 0}}};
  for (DType dtype : {kF32, kBF16, kS32, kPred}) {
    for (const auto& [dims, perm] : cases) {
      Tensor x = Make(dtype, dims, RandomValues(NumElements(dims), dtype, 5));
      Dims out_dims;
      for (int64_t p : perm) out_dims.push_back(dims[p]);
      Values want = Gather(x, out_dims, [&](const Dims& idx) {
        Dims src(dims.size());
        for (size_t i = 0; i < perm.size(); ++i) src[perm[i]] = idx[i];
        return src;
      });
      ir::Op op = MakeOp("transpose");
      SetDims(op.mutable_transpose()->mutable_permutation(), perm);
      ExpectValues(Eval(op, {x}), {dtype, out_dims}, want);
    }
  }
}

TEST(ShapeOps, Slice) {
  struct Case {
    Dims dims, start, limit, strides;
  };
  const Case cases[] = {{{5, 7}, {1, 2}, {5, 7}, {2, 3}},
                        {{5, 7}, {1, 0}, {4, 7}, {}},
                        {{4, 6, 3}, {0, 2, 0}, {4, 5, 3}, {1, 1, 1}},
                        {{4, 6}, {2, 3}, {2, 6}, {1, 2}},
                        {{9}, {0}, {9}, {4}}};
  for (DType dtype : {kF32, kBF16, kPred}) {
    for (const Case& c : cases) {
      Tensor x = Make(dtype, c.dims, RandomValues(NumElements(c.dims), dtype, 6));
      Dims steps = c.strides.empty() ? Dims(c.dims.size(), 1) : c.strides;
      Dims out_dims;
      for (size_t i = 0; i < c.dims.size(); ++i) {
        out_dims.push_back((c.limit[i] - c.start[i] + steps[i] - 1) / steps[i]);
      }
      Values want = Gather(x, out_dims, [&](const Dims& idx) {
        Dims src;
        for (size_t i = 0; i < idx.size(); ++i) src.push_back(c.start[i] + idx[i] * steps[i]);
        return src;
      });
      ir::Op op = MakeOp("slice");
      SetDims(op.mutable_slice()->mutable_start_indices(), c.start);
      SetDims(op.mutable_slice()->mutable_limit_indices(), c.limit);
      SetDims(op.mutable_slice()->mutable_strides(), c.strides);
      ExpectValues(Eval(op, {x}), {dtype, out_dims}, want);
    }
  }
}

TEST(ShapeOps, DynamicSliceClampsStarts) {
  struct Case {
    Dims dims, sizes, starts, clamped;
  };
  const Case cases[] = {{{6, 5}, {3, 2}, {-2, 4}, {0, 3}},
                        {{6, 5}, {3, 2}, {5, 1}, {3, 1}},
                        {{6, 5}, {2, 5}, {1, 0}, {1, 0}},
                        {{6, 5}, {0, 5}, {9, 0}, {6, 0}},
                        {{7}, {7}, {3}, {0}},
                        {{}, {}, {}, {}}};
  for (DType dtype : {kF32, kBF16, kS32}) {
    for (const Case& c : cases) {
      Tensor x = Make(dtype, c.dims, RandomValues(NumElements(c.dims), dtype, 7));
      std::vector<Tensor> operands = {x};
      for (int64_t s : c.starts) operands.push_back(Scalar(s));
      Values want = Gather(x, c.sizes, [&](const Dims& idx) {
        Dims src;
        for (size_t i = 0; i < idx.size(); ++i) src.push_back(c.clamped[i] + idx[i]);
        return src;
      });
      ir::Op op = MakeOp("dynamic_slice");
      SetDims(op.mutable_dynamic_slice()->mutable_slice_sizes(), c.sizes);
      ExpectValues(Eval(op, operands), {dtype, c.sizes}, want);
    }
  }
}

TEST(ShapeOps, DynamicUpdateSliceClampsStarts) {
  struct Case {
    Dims dims, update, starts, clamped;
  };
  const Case cases[] = {{{6, 5}, {3, 2}, {-2, 4}, {0, 3}},
                        {{6, 5}, {3, 2}, {5, 1}, {3, 1}},
                        {{6, 5}, {2, 5}, {1, 0}, {1, 0}},
                        {{6, 5}, {0, 2}, {1, 1}, {1, 1}},
                        {{3, 4, 5}, {1, 4, 2}, {2, 7, 1}, {2, 0, 1}}};
  for (DType dtype : {kF32, kBF16, kS32, kPred}) {
    for (const Case& c : cases) {
      Tensor x = Make(dtype, c.dims, RandomValues(NumElements(c.dims), dtype, 8));
      Tensor u = Make(dtype, c.update, RandomValues(NumElements(c.update), dtype, 9));
      std::vector<Tensor> operands = {x, u};
      for (int64_t s : c.starts) operands.push_back(Scalar(s));
      Values want = x.ToDoubles(), uv = u.ToDoubles();
      for (int64_t i = 0; i < NumElements(c.update); ++i) {
        Dims idx = Unravel(i, c.update);
        for (size_t d = 0; d < idx.size(); ++d) idx[d] += c.clamped[d];
        want[Ravel(idx, c.dims)] = uv[i];
      }
      Values before = x.ToDoubles();
      ExpectValues(Eval(MakeOp("dynamic_update_slice"), operands), {dtype, c.dims}, want);
      EXPECT_EQ(x.ToDoubles(), before);
    }
  }
}

TEST(ShapeOps, Concatenate) {
  for (DType dtype : {kF32, kBF16, kS32, kPred}) {
    for (int64_t dim : {0, 1, 2}) {
      std::vector<Dims> shapes = {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
      shapes[0][dim] = 1;
      shapes[1][dim] = 3;
      shapes[2][dim] = 0;
      std::vector<Tensor> operands;
      Values parts;
      Dims out_dims = {2, 3, 4};
      out_dims[dim] = 4;
      for (size_t i = 0; i < shapes.size(); ++i) {
        operands.push_back(Make(dtype, shapes[i], RandomValues(NumElements(shapes[i]), dtype, i)));
      }
      Values want;
      for (int64_t i = 0; i < NumElements(out_dims); ++i) {
        Dims idx = Unravel(i, out_dims);
        const Tensor& src = idx[dim] < 1 ? operands[0] : operands[1];
        if (idx[dim] >= 1) idx[dim] -= 1;
        want.push_back(src.GetDouble(Ravel(idx, src.dims())));
      }
      ir::Op op = MakeOp("concatenate");
      op.mutable_concatenate()->set_dimension(dim);
      ExpectValues(Eval(op, operands), {dtype, out_dims}, want);
    }
  }
}

}  // namespace
}  // namespace shardjit::backends::reference
