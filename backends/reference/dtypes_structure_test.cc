// The reductions, the dot, sort and top_k, the scans, argmax/argmin, pad, rev and the scatters,
// data movement, constants and iota on every dtype, against oracles computed here in wider
// arithmetic (dtypes_test_util.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/reference/dtypes_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit::backends::reference {
namespace {

using namespace dtype_test_util;  // NOLINT: the helpers of both dtype tests


template <typename T>
void CheckReductions() {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<T>)));
  std::vector<T> v = Operands<T>(3).first;
  if constexpr (!kInt<T>) {  // values whose sum has a finite oracle in every float type
    std::mt19937 rng(3);
    for (T& e : v) e = RoundFloat<T>(std::uniform_real_distribution<double>(-2, 2)(rng));
  }
  const Tensor x = MakeTensor(v);
  auto reduce = [&](const char* opcode) {
    ir::Op op = MakeOp(opcode);
    op.mutable_reduce()->add_axes(0);
    return Values<T>(Eval(op, {x}))[0];
  };
  if constexpr (kInt<T>) {
    Int sum = 0;
    unsigned __int128 prod = 1;
    for (T e : v) {
      sum += e;
      prod *= static_cast<unsigned __int128>(static_cast<Int>(e));
    }
    EXPECT_EQ(+reduce("reduce_sum"), +WrapTo<T>(sum));
    EXPECT_EQ(+reduce("reduce_prod"), +WrapTo<T>(static_cast<Int>(prod)));
    EXPECT_EQ(+reduce("reduce_max"), +*std::max_element(v.begin(), v.end()));
    EXPECT_EQ(+reduce("reduce_min"), +*std::min_element(v.begin(), v.end()));
  } else {
    long double sum = 0, magnitude = 0;
    for (T e : v) {
      sum += Wide(e);
      magnitude += std::fabs(Wide(e));
    }
    // Summed in the type's compute precision (f32 for the 16-bit floats), rounded once.
    const long double tol = std::is_same_v<T, double> ? 1e-13L * magnitude
                            : kHalf<T> ? 1e-5L * magnitude + std::fabs(sum) * 0x1p-7L
                                       : 1e-5L * magnitude;
    EXPECT_NEAR(static_cast<double>(Wide(reduce("reduce_sum"))), static_cast<double>(sum),
                static_cast<double>(tol));
    long double max = -INFINITY;
    for (T e : v) max = std::max(max, Wide(e));
    EXPECT_EQ(Wide(reduce("reduce_max")), max);
  }
}

TEST(DTypes, ReductionsOfEveryNumericDType) {
  CheckReductions<int8_t>();
  CheckReductions<uint8_t>();
  CheckReductions<int16_t>();
  CheckReductions<uint16_t>();
  CheckReductions<uint32_t>();
  CheckReductions<int64_t>();
  CheckReductions<uint64_t>();
  CheckReductions<f16>();
  CheckReductions<double>();
}

// [m, k] x [k, n] -> Out, against a triple loop in __int128 / long double.
template <typename In, typename Out>
void CheckDot(int64_t m, int64_t k, int64_t n) {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<In>)) + " -> " +
               std::string(ir::DTypeName(ir::kDTypeOf<Out>)));
  std::mt19937_64 rng(m * 100 + k * 10 + n);
  auto random = [&](int64_t count) {
    std::vector<In> v(count);
    for (In& e : v) {
      if constexpr (kInt<In>) {
        e = static_cast<In>(rng());
      } else {
        e = RoundFloat<In>(std::uniform_real_distribution<double>(-2, 2)(rng));
      }
    }
    return v;
  };
  const std::vector<In> a = random(m * k), b = random(k * n);
  Tensor lhs = MakeTensor(a), rhs = MakeTensor(b);
  lhs = lhs.Reshaped({m, k});
  rhs = rhs.Reshaped({k, n});
  ir::Op op = MakeOp("dot_general");
  op.mutable_dot_general()->add_lhs_contracting_dims(1);
  op.mutable_dot_general()->add_rhs_contracting_dims(0);
  op.mutable_dot_general()->set_preferred_element_type(
      static_cast<ir::DTypeProto>(ir::kDTypeOf<Out>));
  const std::vector<Out> got = Values<Out>(Eval(op, {lhs, rhs}));
  ASSERT_EQ(static_cast<int64_t>(got.size()), m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (kInt<Out>) {
        unsigned __int128 acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += static_cast<unsigned __int128>(static_cast<Int>(WrapTo<Out>(a[i * k + p]))) *
                 static_cast<unsigned __int128>(static_cast<Int>(WrapTo<Out>(b[p * n + j])));
        }
        EXPECT_EQ(+got[i * n + j], +WrapTo<Out>(static_cast<Int>(acc))) << i << "," << j;
      } else {
        long double acc = 0, magnitude = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += Wide(a[i * k + p]) * Wide(b[p * n + j]);
          magnitude += std::fabs(Wide(a[i * k + p]) * Wide(b[p * n + j]));
        }
        const long double eps = std::is_same_v<Out, double> ? 0x1p-50L
                                : std::is_same_v<Out, float> ? 0x1p-21L
                                : std::is_same_v<Out, f16> ? 0x1p-10L
                                                           : 0x1p-7L;
        EXPECT_NEAR(static_cast<double>(Wide(got[i * n + j])), static_cast<double>(acc),
                    static_cast<double>(eps * (magnitude + 1)))
            << i << "," << j;
      }
    }
  }
}

TEST(DTypes, DotOfEveryNumericDType) {
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {7, 13, 5}, {3, 64, 17}}) {
    CheckDot<int8_t, int32_t>(m, k, n);
    CheckDot<uint8_t, int32_t>(m, k, n);
    CheckDot<uint8_t, uint32_t>(m, k, n);
    CheckDot<int8_t, int8_t>(m, k, n);
    CheckDot<int16_t, int64_t>(m, k, n);
    CheckDot<int16_t, int16_t>(m, k, n);
    CheckDot<uint16_t, uint32_t>(m, k, n);
    CheckDot<uint32_t, uint32_t>(m, k, n);
    CheckDot<uint64_t, uint64_t>(m, k, n);
    CheckDot<int64_t, int64_t>(m, k, n);
    CheckDot<int8_t, float>(m, k, n);
    CheckDot<f16, f16>(m, k, n);
    CheckDot<f16, float>(m, k, n);
    CheckDot<bf16, float>(m, k, n);
    CheckDot<float, double>(m, k, n);
    CheckDot<double, double>(m, k, n);
  }
}

TEST(DTypes, DotRefusesJaxsInvalidPreferredTypes) {
  auto error = [](DType in, DType out) {
    ir::Op op = MakeOp("dot_general");
    op.mutable_dot_general()->add_lhs_contracting_dims(1);
    op.mutable_dot_general()->add_rhs_contracting_dims(0);
    op.mutable_dot_general()->set_preferred_element_type(static_cast<ir::DTypeProto>(out));
    auto r = ir::InferResultTypes({}, {{in, {2, 3}}, {in, {3, 4}}}, op);
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_THAT(error(DType::kF32, DType::kS32), ::testing::HasSubstr("is incompatible"));
  EXPECT_THAT(error(DType::kS8, DType::kU32), ::testing::HasSubstr("same signedness"));
  EXPECT_THAT(error(DType::kS32, DType::kS16), ::testing::HasSubstr("must not be narrower"));
  EXPECT_THAT(error(DType::kF64, DType::kF32), ::testing::HasSubstr("must not be narrower"));
  EXPECT_EQ(error(DType::kU8, DType::kS32), "");
  EXPECT_EQ(error(DType::kS8, DType::kF32), "");
}

template <typename T>
void CheckSortAndTopK() {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<T>)));
  for (int64_t n : {int64_t{17}, int64_t{3000}}) {  // the short and the radix path
    std::vector<T> v = Operands<T>(5).first;
    v.resize(n, v[0]);
    if constexpr (!kInt<T>) {  // NaN sorts last; -0 and +0 compare equal (kept in order)
      std::erase_if(v, [](T x) { return IsNaN(x); });
    }
    std::vector<T> want = v;
    std::stable_sort(want.begin(), want.end(), [](T x, T y) { return Wide(x) < Wide(y); });
    ir::Op sort = MakeOp("sort");
    sort.mutable_sort()->set_dimension(0);
    sort.mutable_sort()->set_num_keys(1);
    sort.mutable_sort()->set_is_stable(true);
    const std::vector<T> got = Values<T>(Eval(sort, {MakeTensor(v)}));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0)
          << i << ": " << static_cast<double>(Wide(got[i])) << " vs "
          << static_cast<double>(Wide(want[i]));
    }
    ir::Op top = MakeOp("top_k");
    top.mutable_top_k()->set_k(3);
    const std::vector<Tensor> top_out = test_util::EvalAll(top, {MakeTensor(v)});
    const std::vector<T> top_values = Values<T>(top_out[0]);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(Wide(top_values[i]), Wide(want[want.size() - 1 - i])) << i;
      EXPECT_EQ(Wide(v[top_out[1].data_as<int32_t>()[i]]), Wide(top_values[i])) << i;
    }
  }
}

TEST(DTypes, SortAndTopKOfEveryDType) {
  CheckSortAndTopK<int8_t>();
  CheckSortAndTopK<uint8_t>();
  CheckSortAndTopK<int16_t>();
  CheckSortAndTopK<uint16_t>();
  CheckSortAndTopK<uint32_t>();
  CheckSortAndTopK<int64_t>();
  CheckSortAndTopK<uint64_t>();
  CheckSortAndTopK<f16>();
  CheckSortAndTopK<double>();
}

// The scans, argmax/argmin, pad, rev, scatter and scatter_add on small integer values every dtype
// holds exactly, against loops here: forward and reverse, ties, negative and interior padding,
// repeated scatter indices; argmax/argmin take the first of equal extremes and the first NaN.
template <typename T>
void CheckScansSelectionAndIndexing() {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<T>)));
  auto of = [](int v) {
    if constexpr (kInt<T>) {
      return static_cast<T>(v);
    } else {
      return RoundFloat<T>(v);
    }
  };
  const bool is_signed = !std::is_unsigned_v<T>;
  std::vector<int> ints = {3, 1, 4, 1, 5, 0, 2, 6, 5, 3, 5};
  if (is_signed) ints[5] = -2;
  std::vector<T> v;
  for (int i : ints) v.push_back(of(i));
  const int64_t n = static_cast<int64_t>(v.size());
  for (const char* name : {"cumsum", "cumprod", "cummax", "cummin"}) {
    for (bool reverse : {false, true}) {
      ir::Op op = MakeOp(name);
      op.mutable_cumulative()->set_axis(0);
      op.mutable_cumulative()->set_reverse(reverse);
      // cumprod of the first five only (their products stay small).
      const std::vector<T> in = std::string(name) == "cumprod"
                                    ? std::vector<T>(v.begin(), v.begin() + 5)
                                    : v;
      const std::vector<T> got = Values<T>(Eval(op, {MakeTensor(in)}));
      const int64_t m = static_cast<int64_t>(in.size());
      long double acc = 0;
      for (int64_t s = 0; s < m; ++s) {
        const int64_t i = reverse ? m - 1 - s : s;
        const long double e = Wide(in[i]);
        const std::string kind = name;
        acc = s == 0                 ? e
              : kind == "cumsum"     ? acc + e
              : kind == "cumprod"    ? acc * e
              : kind == "cummax"     ? std::max(acc, e)
                                     : std::min(acc, e);
        EXPECT_EQ(Wide(got[i]), acc) << name << (reverse ? " reverse " : " ") << i;
      }
    }
  }
  for (const char* name : {"argmax", "argmin"}) {
    ir::Op op = MakeOp(name);
    op.mutable_arg_min_max()->set_axis(0);
    op.mutable_arg_min_max()->set_index_dtype(ir::ToProto(DType::kS32));
    const bool max = std::string(name) == "argmax";
    const Tensor index = Eval(op, {MakeTensor(v)});
    // 6 at 7; the minimum (-2, or 0 unsigned) at 5.
    EXPECT_EQ(index.data_as<int32_t>()[0], max ? 7 : 5) << name;
    if constexpr (!kInt<T>) {
      std::vector<T> with_nan = v;
      with_nan[4] = with_nan[9] = RoundFloat<T>(NAN);
      const Tensor nan_index = Eval(op, {MakeTensor(with_nan)});
      EXPECT_EQ(nan_index.data_as<int32_t>()[0], 4) << name << " NaN";
    }
  }
  // Ties: the first of the equal extremes (5 at 4, 8, 10 once 6 is gone).
  std::vector<T> tied = v;
  tied[7] = of(1);
  ir::Op argmax = MakeOp("argmax");
  argmax.mutable_arg_min_max()->set_axis(0);
  argmax.mutable_arg_min_max()->set_index_dtype(ir::ToProto(DType::kS32));
  const Tensor tie = Eval(argmax, {MakeTensor(tied)});
  EXPECT_EQ(tie.data_as<int32_t>()[0], 4);
  // pad: low -1 (drops element 0), interior 1, high 2, with 9.
  ir::Op pad = MakeOp("pad");
  ir::PaddingConfigDim* d = pad.mutable_pad()->add_padding_config();
  d->set_low(-1);
  d->set_interior(1);
  d->set_high(2);
  std::vector<long double> want_pad;
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) want_pad.push_back(9);
    want_pad.push_back(Wide(v[i]));
  }
  want_pad.erase(want_pad.begin());
  want_pad.push_back(9);
  want_pad.push_back(9);
  const std::vector<T> padded = Values<T>(Eval(pad, {MakeTensor(v), MakeTensor(std::vector<T>{
                                                                       of(9)}).Reshaped({})}));
  ASSERT_EQ(padded.size(), want_pad.size());
  for (size_t i = 0; i < padded.size(); ++i) EXPECT_EQ(Wide(padded[i]), want_pad[i]) << i;
  ir::Op rev = MakeOp("rev");
  rev.mutable_rev()->add_dimensions(0);
  const std::vector<T> reversed = Values<T>(Eval(rev, {MakeTensor(v)}));
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(Wide(reversed[i]), Wide(v[n - 1 - i])) << i;
  // scatter / scatter_add of rows 1, 3, 1 of a [4, 2] table: the last write wins; adds sum.
  const Tensor table = MakeTensor(std::vector<T>(v.begin(), v.begin() + 8)).Reshaped({4, 2});
  const Tensor ids = Tensor::FromDoubles({DType::kS32, {3, 1}}, {1, 3, 1});
  const Tensor updates =
      MakeTensor(std::vector<T>{of(1), of(2), of(3), of(4), of(5), of(6)}).Reshaped({3, 2});
  for (const char* name : {"scatter", "scatter_add"}) {
    ir::Op op = MakeOp(name);
    ir::ScatterAttrs* a = op.mutable_scatter();
    a->add_update_window_dims(1);
    a->add_inserted_window_dims(0);
    a->add_scatter_dims_to_operand_dims(0);
    const std::vector<T> got = Values<T>(Eval(op, {table, ids, updates}));
    const bool add = std::string(name) == "scatter_add";
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t c = 0; c < 2; ++c) {
        long double want = Wide(v[r * 2 + c]);
        if (r == 1) want = add ? want + 1 + c + 5 + c : 5 + c;
        if (r == 3) want = add ? want + 3 + c : 3 + c;
        EXPECT_EQ(Wide(got[r * 2 + c]), want) << name << " " << r << "," << c;
      }
    }
  }
}

TEST(DTypes, ScansSelectionAndIndexingOfEveryDType) {
  CheckScansSelectionAndIndexing<int32_t>();
  CheckScansSelectionAndIndexing<float>();
  CheckScansSelectionAndIndexing<bf16>();
  CheckScansSelectionAndIndexing<int8_t>();
  CheckScansSelectionAndIndexing<uint8_t>();
  CheckScansSelectionAndIndexing<int16_t>();
  CheckScansSelectionAndIndexing<uint16_t>();
  CheckScansSelectionAndIndexing<uint32_t>();
  CheckScansSelectionAndIndexing<int64_t>();
  CheckScansSelectionAndIndexing<uint64_t>();
  CheckScansSelectionAndIndexing<f16>();
  CheckScansSelectionAndIndexing<double>();
}

// Data movement copies every element width (1, 2, 4 and 8 bytes) exactly.
template <typename T>
void CheckTransposeAndStridedSlice() {
  SCOPED_TRACE(std::string(ir::DTypeName(ir::kDTypeOf<T>)));
  std::vector<T> v(3 * 5);
  for (size_t i = 0; i < v.size(); ++i) {
    std::memset(static_cast<void*>(&v[i]), static_cast<int>(0x11 * (i % 15 + 1)), sizeof(T));
  }
  const Tensor x = MakeTensor(v).Reshaped({3, 5});
  ir::Op transpose = MakeOp("transpose");
  transpose.mutable_transpose()->add_permutation(1);
  transpose.mutable_transpose()->add_permutation(0);
  const std::vector<T> t = Values<T>(Eval(transpose, {x}));
  ir::Op slice = MakeOp("slice");
  for (int64_t d : {0, 1}) slice.mutable_slice()->add_start_indices(d);
  for (int64_t d : {3, 5}) slice.mutable_slice()->add_limit_indices(d);
  for (int64_t d : {2, 2}) slice.mutable_slice()->add_strides(d);
  const std::vector<T> sl = Values<T>(Eval(slice, {x}));
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(std::memcmp(&t[j * 3 + i], &v[i * 5 + j], sizeof(T)), 0) << i << "," << j;
    }
  }
  ASSERT_EQ(sl.size(), 4u);  // rows 0, 2; columns 1, 3
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < 2; ++c) {
      EXPECT_EQ(std::memcmp(&sl[r * 2 + c], &v[(2 * r) * 5 + 1 + 2 * c], sizeof(T)), 0);
    }
  }
}

TEST(DTypes, DataMovementOfEveryWidth) {
  CheckTransposeAndStridedSlice<uint8_t>();
  CheckTransposeAndStridedSlice<int16_t>();
  CheckTransposeAndStridedSlice<f16>();
  CheckTransposeAndStridedSlice<uint32_t>();
  CheckTransposeAndStridedSlice<double>();
  CheckTransposeAndStridedSlice<uint64_t>();
}

TEST(DTypes, ConstantsAndIotaOfEveryDType) {
  for (DType d : ir::kAllDTypes) {
    if (d == DType::kPred) continue;
    ir::Op iota = MakeOp("iota");
    iota.mutable_iota()->set_dtype(static_cast<ir::DTypeProto>(d));
    iota.mutable_iota()->add_shape(100);
    const Tensor t = Eval(iota, {});
    for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(t.GetDouble(i), i) << ir::DTypeName(d);
  }
  ir::Op c = MakeOp("constant");
  c.mutable_constant()->set_dtype(ir::U8);
  c.mutable_constant()->add_value(256);
  auto r = ir::InferResultTypes({}, {}, c);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("value[0]=256 does not fit u8 (range [0, 255])"));
  c.mutable_constant()->set_dtype(ir::F16);
  c.mutable_constant()->set_value(0, 1e5);
  r = ir::InferResultTypes({}, {}, c);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("does not fit f16"));
  ir::Op iota = MakeOp("iota");
  iota.mutable_iota()->set_dtype(ir::S8);
  iota.mutable_iota()->add_shape(200);
  r = ir::InferResultTypes({}, {}, iota);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("do not fit s8"));
}

}  // namespace
}  // namespace shardjit::backends::reference
