// jnp's type promotion (against JAX's own table), weakly typed scalars in the Tracer operators,
// and programs over every dtype through jit on both backends, sharded, against hand-derived and
// wider-precision oracles.
#include "frontend/dtypes.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;

// jnp.promote_types(row, column) as JAX 0.10 gives it (jax_enable_x64), in ir::kAllDTypes order:
// f32 bf16 s32 pred f16 f64 s8 u8 s16 u16 s64 u32 u64.
constexpr const char* kJaxTable[] = {
    "f32 f32 f32 f32 f32 f64 f32 f32 f32 f32 f32 f32 f32",
    "f32 bf16 bf16 bf16 f32 f64 bf16 bf16 bf16 bf16 bf16 bf16 bf16",
    "f32 bf16 s32 s32 f16 f64 s32 s32 s32 s32 s64 s64 f64",
    "f32 bf16 s32 pred f16 f64 s8 u8 s16 u16 s64 u32 u64",
    "f32 f32 f16 f16 f16 f64 f16 f16 f16 f16 f16 f16 f16",
    "f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64",
    "f32 bf16 s32 s8 f16 f64 s8 s16 s16 s32 s64 s64 f64",
    "f32 bf16 s32 u8 f16 f64 s16 u8 s16 u16 s64 u32 u64",
    "f32 bf16 s32 s16 f16 f64 s16 s16 s16 s32 s64 s64 f64",
    "f32 bf16 s32 u16 f16 f64 s32 u16 s32 u16 s64 u32 u64",
    "f32 bf16 s64 s64 f16 f64 s64 s64 s64 s64 s64 s64 f64",
    "f32 bf16 s64 u32 f16 f64 s64 u32 s64 u32 s64 u32 u64",
    "f32 bf16 f64 u64 f16 f64 f64 u64 f64 u64 f64 u64 u64",
};

TEST(PromoteTypes, MatchesJaxsTable) {
  for (size_t i = 0; i < ir::kAllDTypes.size(); ++i) {
    std::istringstream row(kJaxTable[i]);
    for (DType b : ir::kAllDTypes) {
      std::string want;
      row >> want;
      const DType a = ir::kAllDTypes[i];
      EXPECT_EQ(ir::DTypeName(jnp::promote_types(a, b)), want)
          << ir::DTypeName(a) << ", " << ir::DTypeName(b);
    }
  }
}

// Commutative and idempotent. (Not associative: u64 with s8 is f64, so (u64, s8), f32 gives f64
// but u64, (s8, f32) gives f32, in JAX as here.)
TEST(PromoteTypes, IsCommutativeAndIdempotent) {
  for (DType a : ir::kAllDTypes) {
    EXPECT_EQ(jnp::promote_types(a, a), a);
    for (DType b : ir::kAllDTypes) {
      EXPECT_EQ(jnp::promote_types(a, b), jnp::promote_types(b, a));
    }
  }
  EXPECT_EQ(jnp::promote_types(jnp::promote_types(DType::kU64, DType::kS8), DType::kF32),
            DType::kF64);
  EXPECT_EQ(jnp::promote_types(DType::kU64, jnp::promote_types(DType::kS8, DType::kF32)),
            DType::kF32);
}

TEST(PromoteTypes, WeakScalarsTakeTheArraysTypeOrTheDefaults) {
  EXPECT_EQ(jnp::promote_weak(DType::kU8, jnp::WeakKind::kInt), DType::kU8);
  EXPECT_EQ(jnp::promote_weak(DType::kBF16, jnp::WeakKind::kInt), DType::kBF16);
  EXPECT_EQ(jnp::promote_weak(DType::kPred, jnp::WeakKind::kInt), DType::kS32);
  EXPECT_EQ(jnp::promote_weak(DType::kS64, jnp::WeakKind::kFloat), DType::kF32);
  EXPECT_EQ(jnp::promote_weak(DType::kF16, jnp::WeakKind::kFloat), DType::kF16);
}

// The result type of f on a value of `in`, through jit on one device.
template <typename F>
absl::StatusOr<ShapedType> ResultType(DType in, F f) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(in, {2}, {1, 0}), NamedSharding(mesh, P()));
  absl::StatusOr<Array> out = jit(f)(x);
  if (!out.ok()) return out.status();
  return out->type();
}

TEST(Operators, PromoteLikeJaxNumpy) {
  auto dtype = [](DType in, auto f) {
    absl::StatusOr<ShapedType> t = ResultType(in, f);
    return t.ok() ? std::string(ir::DTypeName(t->dtype)) : std::string(t.status().message());
  };
  EXPECT_EQ(dtype(DType::kS32, [](Tracer x) { return x * 0.5; }), "f32");
  EXPECT_EQ(dtype(DType::kU8, [](Tracer x) { return x + 1; }), "u8");
  EXPECT_EQ(dtype(DType::kPred, [](Tracer x) { return x + 1; }), "s32");
  EXPECT_EQ(dtype(DType::kS8, [](Tracer x) { return x + lax::convert_element_type(x, DType::kU8); }),
            "s16");
  EXPECT_EQ(dtype(DType::kF16, [](Tracer x) { return x * lax::convert_element_type(x, DType::kBF16); }),
            "f32");
  EXPECT_EQ(dtype(DType::kU64, [](Tracer x) { return x - lax::convert_element_type(x, DType::kS64); }),
            "f64");
  EXPECT_EQ(dtype(DType::kU16, [](Tracer x) { return x < 3; }), "pred");
  EXPECT_THAT(dtype(DType::kU8, [](Tracer x) { return x + 300; }),
              HasSubstr("value[0]=300 does not fit u8 (range [0, 255])"));
  EXPECT_THAT(dtype(DType::kS64, [](Tracer x) { return x + (int64_t{1} << 60); }),
              HasSubstr("beyond 2^53"));
}

class DTypesTest : public ::testing::TestWithParam<Backend> {
 protected:
  DTypesTest() : rt_({.num_devices = 4}), mesh_(*make_mesh(rt_, {{"x", 2}, {"y", 2}})) {}

  // A [4, 6] array of `dtype` sharded over both axes, element i = values[i].
  Array Put(DType dtype, const std::vector<double>& values) {
    return *device_put(HostTensor(dtype, {4, 6}, values), NamedSharding(mesh_, P("x", "y")));
  }

  Runtime rt_;
  Mesh mesh_;
};

template <typename T>
std::vector<T> HostValues(const Array& a) {
  absl::StatusOr<Tensor> t = a.to_host();
  EXPECT_TRUE(t.ok()) << t.status();
  std::vector<T> v(t->num_elements());
  std::memcpy(v.data(), t->data(), t->byte_size());
  return v;
}

TEST_P(DTypesTest, IntegerArithmeticWrapsAndPsumsExactly) {
  std::vector<double> host(24);
  for (int i = 0; i < 24; ++i) host[i] = (i * 37) % 256;
  Array x = Put(DType::kU8, host);
  // u8: x * 3 + 250 wraps modulo 256; the s64 psum of a value past 2^53 stays exact.
  auto f = jit(shard_map(
      [](Tracer x) {
        Tracer wrapped = x * 3 + 250;
        Tracer wide = lax::convert_element_type(x, DType::kS64) + ((int64_t{1} << 53) - 255);
        return std::vector<Tracer>{wrapped, lax::psum(wide, {"x", "y"})};
      },
      mesh_, {P("x", "y")}, {P("x", "y"), P("x", "y")}), {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> out = f(x);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<uint8_t> wrapped = HostValues<uint8_t>((*out)[0]);
  const std::vector<int64_t> summed = HostValues<int64_t>((*out)[1]);
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(wrapped[i], static_cast<uint8_t>(host[i] * 3 + 250)) << i;
  }
  // Block (r, c) of the 2x2 mesh: the psum adds the four devices' elements at one local index.
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      int64_t want = 0;
      for (int bx = 0; bx < 2; ++bx) {
        for (int by = 0; by < 2; ++by) {
          want += static_cast<int64_t>(host[(bx * 2 + r) * 6 + by * 3 + c]) + (int64_t{1} << 53) - 255;
        }
      }
      EXPECT_EQ(summed[r * 6 + c], want) << r << "," << c;
    }
  }
}

TEST_P(DTypesTest, HalfAndDoubleFloatsThroughJit) {
  std::vector<double> host(24);
  for (int i = 0; i < 24; ++i) host[i] = (i - 11) * 0.375;
  auto f = jit([](Tracer x) { return lax::exp(x) * x + 1; }, {.backend = GetParam()});
  for (DType dtype : {DType::kF16, DType::kF64}) {
    absl::StatusOr<Array> out = f(Put(dtype, host));
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<Tensor> t = out->to_host();
    ASSERT_EQ(t->dtype(), dtype);
    for (int i = 0; i < 24; ++i) {
      const double want = std::exp(host[i]) * host[i] + 1;
      // f16: three roundings of 2^-11; f64: a few ulps of the C library.
      const double tol = dtype == DType::kF16 ? 3 * 0x1p-11 * (std::fabs(want) + 1) : 1e-14;
      EXPECT_NEAR(t->GetDouble(i), want, tol) << ir::DTypeName(dtype) << " " << i;
    }
  }
}

TEST_P(DTypesTest, Int8DotAccumulatesInInt32) {
  // [4, 6] x [6, 4] of s8 at the extremes: each product is up to 2^14, the sum 6 * 2^14 (past s8
  // and s16).
  std::vector<double> a(24), b(24);
  for (int i = 0; i < 24; ++i) {
    a[i] = i % 2 ? -128 : 127;
    b[i] = i % 3 ? -128 : 127;
  }
  Array x = Put(DType::kS8, a);
  Array w = *device_put(HostTensor(DType::kS8, {6, 4}, b), NamedSharding(mesh_, P("y", "x")));
  auto f = jit([](Tracer x, Tracer w) {
    return lax::dot_general(x, w, DotDims{{1}, {0}}, DType::kS32);
  }, {.backend = GetParam()});
  absl::StatusOr<Array> out = f(x, w);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<int32_t> got = HostValues<int32_t>(*out);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      int32_t want = 0;
      for (int k = 0; k < 6; ++k) want += static_cast<int32_t>(a[i * 6 + k] * b[k * 4 + j]);
      EXPECT_EQ(got[i * 4 + j], want) << i << "," << j;
    }
  }
}

TEST_P(DTypesTest, GatherFillsOutOfBoundsRowsWithJaxsDefaults) {
  // jnp.take of rows 1 and 7 of a [4] vector: row 7 is out of bounds, filled with JAX's default
  // (the smallest signed, the largest unsigned integer, NaN).
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array ids = *device_put(HostTensor(DType::kS32, {2}, {1, 7}), NamedSharding(mesh, P()));
  auto take = jit([](Tracer a, Tracer i) { return jnp::take(a, i, 0); }, {.backend = GetParam()});
  for (const auto& [dtype, fill] : std::vector<std::pair<DType, double>>{
           {DType::kS8, -128}, {DType::kU8, 255}, {DType::kU32, 4294967295.0},
           {DType::kS64, -0x1p63}, {DType::kF16, NAN}}) {
    Array a = *device_put(HostTensor(dtype, {4}, {5, 6, 7, 8}), NamedSharding(mesh, P()));
    absl::StatusOr<Array> out = take(a, ids);
    ASSERT_TRUE(out.ok()) << ir::DTypeName(dtype) << ": " << out.status();
    absl::StatusOr<Tensor> t = out->to_host();
    EXPECT_EQ(t->GetDouble(0), 6) << ir::DTypeName(dtype);
    if (std::isnan(fill)) {
      EXPECT_TRUE(std::isnan(t->GetDouble(1))) << ir::DTypeName(dtype);
    } else {
      EXPECT_EQ(t->GetDouble(1), fill) << ir::DTypeName(dtype);
    }
  }
  // u64's fill, 2^64 - 1, has no double: it travels as fill_bits.
  Array a = *device_put(HostTensor(DType::kU64, {4}, {5, 6, 7, 8}), NamedSharding(mesh, P()));
  absl::StatusOr<Array> out = take(a, ids);
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<Tensor> t = out->to_host();
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data_as<uint64_t>()[0], 6u);
  EXPECT_EQ(t->data_as<uint64_t>()[1], ~uint64_t{0});
}

INSTANTIATE_TEST_SUITE_P(Backends, DTypesTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

}  // namespace
}  // namespace shardjit
