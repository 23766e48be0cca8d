// constant, iota, reductions and dot_general against double-precision oracles, and the
// completeness of the kernel registry.
#include "backends/reference/kernel_test_util.h"

namespace shardjit::backends::reference {
namespace {

using namespace test_util;  // NOLINT


TEST(Compute, Iota) {
  for (DType dtype : {kF32, kBF16, kS32}) {
    for (int64_t dim : {0, 1, 2}) {
      for (const Dims& dims : {Dims{3, 300, 2}, Dims{2, 0, 3}, Dims{1, 1, 5}, Dims{4, 5, 1}}) {
        ir::Op op = MakeOp("iota");
        op.mutable_iota()->set_dtype(ir::ToProto(dtype));
        SetDims(op.mutable_iota()->mutable_shape(), dims);
        op.mutable_iota()->set_dimension(dim);
        Values want;
        for (int64_t i = 0; i < NumElements(dims); ++i) {
          want.push_back(RoundTo(dtype, Unravel(i, dims)[dim]));
        }
        ExpectValues(Eval(op, {}), {dtype, dims}, want);
      }
    }
  }
}

ir::Op ConstantOp(DType dtype, const Dims& shape, const Values& values) {
  ir::Op op = MakeOp("constant");
  op.mutable_constant()->set_dtype(ir::ToProto(dtype));
  SetDims(op.mutable_constant()->mutable_shape(), shape);
  for (double v : values) op.mutable_constant()->add_value(v);
  return op;
}

TEST(Compute, Constant) {
  ExpectValues(Eval(ConstantOp(kF32, {2, 3}, {1.5}), {}), {kF32, {2, 3}}, Values(6, 1.5));
  ExpectValues(Eval(ConstantOp(kBF16, {3}, {1.00390625}), {}), {kBF16, {3}}, {1, 1, 1});
  ExpectValues(Eval(ConstantOp(kS32, {2, 2}, {1, -2, 3, kIntMin}), {}), {kS32, {2, 2}},
               {1, -2, 3, kIntMin});
  ExpectValues(Eval(ConstantOp(kPred, {3}, {0, 2, 1}), {}), {kPred, {3}}, {0, 1, 1});
  ExpectValues(Eval(ConstantOp(kF32, {}, {-kInf}), {}), {kF32, {}}, {-kInf});
  ExpectValues(Eval(ConstantOp(kS32, {0, 4}, {7}), {}), {kS32, {0, 4}}, {});
  // Splats of every size up to a few doublings, odd ones included.
  for (int64_t n : {1, 2, 3, 5, 8, 13, 64, 1000, 4097}) {
    ExpectValues(Eval(ConstantOp(kBF16, {n}, {-2.5}), {}), {kBF16, {n}}, Values(n, -2.5));
    ExpectValues(Eval(ConstantOp(kS32, {n, 1}, {-7}), {}), {kS32, {n, 1}}, Values(n, -7));
  }
}

// Naive reduction in double; `kind` is "sum", "max" or "min".
Values ReduceOracle(const Values& x, const Dims& dims, const Dims& axes, const std::string& kind,
                    DType dtype, Dims* out_dims) {
  out_dims->clear();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) out_dims->push_back(dims[i]);
  }
  double init = kind == "sum" ? 0 : dtype == kPred ? kind == "min" : kind == "max" ? -kInf : kInf;
  if (dtype == kS32 && kind != "sum") init = kind == "max" ? kIntMin : kIntMax;
  Values out(NumElements(*out_dims), init);
  for (int64_t i = 0; i < NumElements(dims); ++i) {
    Dims idx = Unravel(i, dims), kept;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(idx[d]);
    }
    double& acc = out[Ravel(kept, *out_dims)];
    if (kind == "sum") {
      acc += x[i];
    } else if (std::isnan(acc) || std::isnan(x[i])) {
      acc = kNaN;
    } else {
      acc = kind == "max" ? std::max(acc, x[i]) : std::min(acc, x[i]);
    }
  }
  for (double& v : out) v = RoundTo(dtype, v);
  return out;
}

TEST(Compute, Reduce) {
  const Dims dims = {3, 4, 5};
  const Dims axes_list[] = {{}, {0}, {1}, {2}, {0, 2}, {2, 0}, {0, 1}, {1, 2}, {0, 1, 2}};
  for (const char* kind : {"sum", "max", "min"}) {
    for (DType dtype : {kF32, kBF16, kS32, kPred}) {
      if (dtype == kPred && std::string(kind) == "sum") continue;
      for (const Dims& axes : axes_list) {
        // Integer-valued inputs make f32 sums exact, so results must match exactly.
        Values x = RandomValues(NumElements(dims), dtype == kPred ? kPred : kS32, 10, 50);
        Dims out_dims;
        Values want = ReduceOracle(x, dims, axes, kind, dtype, &out_dims);
        ir::Op op = MakeOp(std::string("reduce_") + kind);
        SetDims(op.mutable_reduce()->mutable_axes(), axes);
        SCOPED_TRACE(std::string(kind) + " " + std::string(ir::DTypeName(dtype)));
        ExpectValues(Eval(op, {Make(dtype, dims, x)}), {dtype, out_dims}, want);
      }
    }
  }
}

TEST(Compute, ReduceFloatsAndEdgeCases) {
  Values x = RandomValues(7 * 9, kF32, 11);
  Dims out_dims;
  Values want = ReduceOracle(x, {7, 9}, {1}, "sum", kF32, &out_dims);
  ir::Op sum = MakeOp("reduce_sum");
  sum.mutable_reduce()->add_axes(1);
  ExpectValues(Eval(sum, {Make(kF32, {7, 9}, x)}), {kF32, {7}}, want, 1e-5);

  for (DType dtype : {kF32, kBF16, kS32, kPred}) {
    for (const char* kind : {"sum", "max", "min"}) {
      if (dtype == kPred && std::string(kind) == "sum") continue;
      ir::Op op = MakeOp(std::string("reduce_") + kind);
      op.mutable_reduce()->add_axes(0);
      Values want = ReduceOracle({}, {0, 2}, {0}, kind, dtype, &out_dims);
      ExpectValues(Eval(op, {Make(dtype, {0, 2}, {})}), {dtype, {2}}, want);
    }
  }
  ir::Op max = MakeOp("reduce_max");
  max.mutable_reduce()->add_axes(1);
  ExpectValues(Eval(max, {Make(kF32, {2, 3}, {1, kNaN, 3, 4, 5, 6})}), {kF32, {2}}, {kNaN, 6});
}

struct DotCase {
  Dims lhs, rhs, lc, rc, lb, rb;
};

ir::Op DotOp(const DotCase& c, DType preferred) {
  ir::Op op = MakeOp("dot_general");
  auto* a = op.mutable_dot_general();
  SetDims(a->mutable_lhs_contracting_dims(), c.lc);
  SetDims(a->mutable_rhs_contracting_dims(), c.rc);
  SetDims(a->mutable_lhs_batch_dims(), c.lb);
  SetDims(a->mutable_rhs_batch_dims(), c.rb);
  a->set_preferred_element_type(ir::ToProto(preferred));
  return op;
}

// Naive dot_general in double. `abs_sum` receives sum |l*r| per element (the error scale).
Values DotOracle(const DotCase& c, const Values& l, const Values& r, Dims* out_dims,
                 Values* abs_sum) {
  auto free_dims = [](const Dims& dims, const Dims& b, const Dims& k) {
    Dims f;
    for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
      if (std::find(b.begin(), b.end(), i) == b.end() &&
          std::find(k.begin(), k.end(), i) == k.end()) {
        f.push_back(i);
      }
    }
    return f;
  };
  Dims lf = free_dims(c.lhs, c.lb, c.lc), rf = free_dims(c.rhs, c.rb, c.rc);
  Dims k_dims;
  out_dims->clear();
  for (int64_t d : c.lb) out_dims->push_back(c.lhs[d]);
  for (int64_t d : lf) out_dims->push_back(c.lhs[d]);
  for (int64_t d : rf) out_dims->push_back(c.rhs[d]);
  for (int64_t d : c.lc) k_dims.push_back(c.lhs[d]);
  Values out(NumElements(*out_dims));
  abs_sum->assign(out.size(), 0);
  for (size_t o = 0; o < out.size(); ++o) {
    Dims idx = Unravel(o, *out_dims);
    Dims li(c.lhs.size()), ri(c.rhs.size());
    size_t p = 0;
    for (size_t i = 0; i < c.lb.size(); ++i, ++p) li[c.lb[i]] = ri[c.rb[i]] = idx[p];
    for (int64_t d : lf) li[d] = idx[p++];
    for (int64_t d : rf) ri[d] = idx[p++];
    for (int64_t k = 0; k < NumElements(k_dims); ++k) {
      Dims ki = Unravel(k, k_dims);
      for (size_t i = 0; i < ki.size(); ++i) li[c.lc[i]] = ri[c.rc[i]] = ki[i];
      double prod = l[Ravel(li, c.lhs)] * r[Ravel(ri, c.rhs)];
      out[o] += prod;
      (*abs_sum)[o] += std::abs(prod);
    }
  }
  return out;
}

void CheckDot(const DotCase& c, DType in, DType preferred) {
  DType out_dtype = preferred == DType::kInvalid ? in : preferred;
  SCOPED_TRACE(ShapedType({in, c.lhs}).ToString() + " x " + ShapedType({in, c.rhs}).ToString() +
               " -> " + std::string(ir::DTypeName(out_dtype)));
  Values l = RandomValues(NumElements(c.lhs), in, 12, 3);
  Values r = RandomValues(NumElements(c.rhs), in, 13, 3);
  Dims out_dims;
  Values abs_sum;
  Values want = DotOracle(c, l, r, &out_dims, &abs_sum);
  Tensor got = Eval(DotOp(c, preferred), {Make(in, c.lhs, l), Make(in, c.rhs, r)});
  ASSERT_EQ(got.type(), (ShapedType{out_dtype, out_dims}));
  double rounding = out_dtype == kBF16 ? 1.0 / 256 : out_dtype == kF32 ? 1e-7 : 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (out_dtype == kS32) {
      EXPECT_EQ(got.GetDouble(i), RoundTo(kS32, want[i])) << "element " << i;
      continue;
    }
    double tol = 1e-6 * abs_sum[i] + rounding * std::abs(want[i]);
    EXPECT_NEAR(got.GetDouble(i), want[i], tol) << "element " << i;
  }
}

TEST(Compute, DotGeneral) {
  const DotCase cases[] = {
      {{7, 13}, {13, 5}, {1}, {0}, {}, {}},                    // plain matmul
      {{13, 7}, {13, 5}, {0}, {0}, {}, {}},                    // transposed lhs
      {{7, 13}, {5, 13}, {1}, {1}, {}, {}},                    // transposed rhs
      {{1, 1}, {1, 1}, {1}, {0}, {}, {}},                      // 1x1x1
      {{33, 65}, {65, 17}, {1}, {0}, {}, {}},                  // odd sizes
      {{200, 600}, {600, 40}, {1}, {0}, {}, {}},               // several M and K blocks
      {{4, 3, 5}, {5, 3, 6}, {2}, {0}, {1}, {1}},              // batch dims not leading
      {{2, 3, 4, 5}, {5, 7, 3}, {1, 3}, {2, 0}, {}, {}},       // two contracting dims
      {{3, 2, 4, 5}, {4, 5, 6, 3}, {3}, {1}, {0, 2}, {3, 0}},  // two batch dims, permuted
      {{6}, {6}, {0}, {0}, {}, {}},                            // vector dot: rank-0 result
      {{3, 4}, {5, 6}, {}, {}, {}, {}},                        // outer product
      {{3, 0}, {0, 4}, {1}, {0}, {}, {}},                      // empty contraction
      {{0, 4}, {4, 3}, {1}, {0}, {}, {}},                      // empty result
  };
  for (const DotCase& c : cases) {
    CheckDot(c, kF32, DType::kInvalid);
    CheckDot(c, kBF16, DType::kInvalid);
    CheckDot(c, kBF16, kF32);
    CheckDot(c, kS32, DType::kInvalid);
    CheckDot(c, kS32, kF32);
  }
}

TEST(Compute, DotGeneralBf16RoundsOnce) {
  // 1 + 3 * 2^-8 accumulated in f32 is exact; a single rounding to bf16 gives 1.015625, whereas
  // rounding after each step would stay at 1.0.
  DotCase c = {{1, 4}, {4, 1}, {1}, {0}, {}, {}};
  Tensor l = Make(kBF16, {1, 4}, {1, 0.00390625, 0.00390625, 0.00390625});
  Tensor r = Make(kBF16, {4, 1}, {1, 1, 1, 1});
  ExpectValues(Eval(DotOp(c, DType::kInvalid), {l, r}), {kBF16, {1, 1}}, {1.015625});
}

TEST(Registry, EveryLocalPrimitiveHasAKernel) {
  int count = 0;
  for (const ir::Primitive* p : ir::AllPrimitives()) {
    if (p->kind != ir::PrimitiveKind::kElementwise && p->kind != ir::PrimitiveKind::kStructural) {
      continue;
    }
    ++count;
    EXPECT_NE(FindKernel(p->name), nullptr) << p->name;
  }
  EXPECT_GT(count, 30);
}

}  // namespace
}  // namespace shardjit::backends::reference
