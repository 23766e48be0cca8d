// Tracing errors come back from jit as statuses that name the op, the shapes or the attribute at
// fault and where it was traced; nothing crashes or hangs.
#include <cstdint>
#include <limits>

#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;

class TracerErrorTest : public ::testing::Test {
 protected:
  TracerErrorTest() : rt_({.num_devices = 4}), mesh_(*make_mesh(rt_, {{"x", 2}, {"y", 2}})) {
    a_ = *device_put(HostTensor(DType::kF32, {4, 6}, {1}), NamedSharding(mesh_, P("x", "y")));
  }

  template <typename F>
  std::string ErrorOf(F f, std::vector<PartitionSpec> in = {P("x", "y")},
                      std::vector<PartitionSpec> out = {P("x", "y")}) {
    absl::StatusOr<Array> r = jit(shard_map(f, mesh_, in, out))(a_);
    EXPECT_FALSE(r.ok());
    return std::string(r.status().message());
  }

  Runtime rt_;
  Mesh mesh_;
  Array a_ = *device_put(HostTensor(DType::kF32, {1}, {0}), NamedSharding(mesh_, P()));
};

TEST_F(TracerErrorTest, ShapeMismatch) {
  std::string e = ErrorOf([](Tracer b) { return lax::add(b, lax::full({3, 2}, 1, DType::kF32)); });
  EXPECT_THAT(e, HasSubstr("add: shapes f32[2,3] and f32[3,2] do not broadcast"));
  EXPECT_THAT(e, HasSubstr("tracer_errors_test.cc"));
}

// An array past the size limit (ir/types.h) is an error where it is traced, not an allocation
// that fails or overflows later.
TEST_F(TracerErrorTest, ArrayTooLarge) {
  std::string e = ErrorOf([](Tracer b) {
    return lax::reduce_sum(lax::full({int64_t{1} << 40, int64_t{1} << 22}, 1, DType::kF32),
                           {0, 1}) +
           b;
  });
  EXPECT_THAT(e, HasSubstr("more than 281474976710656 bytes"));
  EXPECT_THAT(e, HasSubstr("tracer_errors_test.cc"));
}

TEST_F(TracerErrorTest, DtypeMismatch) {
  // lax's arithmetic takes one dtype, as jax.lax's does (the operators promote).
  EXPECT_THAT(ErrorOf([](Tracer b) {
                return lax::mul(b, lax::convert_element_type(b, DType::kBF16));
              }),
              HasSubstr("mul: operand types differ (f32[2,3] vs bf16[2,3])"));
}

TEST_F(TracerErrorTest, UnknownAxis) {
  EXPECT_THAT(ErrorOf([](Tracer b) { return lax::psum(b, "z"); }),
              HasSubstr("psum: axis \"z\" is not in mesh {x:2, y:2}; operands f32[2,3]"));
}

TEST_F(TracerErrorTest, AxisUsedOutsideShardMap) {
  absl::StatusOr<Array> r = jit([](Tracer b) { return lax::psum(b, "x"); })(a_);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("psum: collectives need a mapped axis: use inside shard_map"));
  absl::StatusOr<Array> r2 = jit([](Tracer b) { return b + lax::axis_index("x"); })(a_);
  EXPECT_THAT(std::string(r2.status().message()), HasSubstr("axis_index: collectives need"));
}

TEST_F(TracerErrorTest, SpecDoesNotDivide) {
  EXPECT_THAT(ErrorOf([](Tracer b) { return b; }, {P(None, Axes{"x", "y"})}, {P("x")}),
              HasSubstr("shard_map in_specs[0] for argument f32[4,6]: spec P(None, (x,y)) "
                        "splits dim 1 (size 6) into 4 blocks"));
}

TEST_F(TracerErrorTest, SpecWithUnknownAxis) {
  EXPECT_THAT(ErrorOf([](Tracer b) { return b; }, {P("q")}, {P("q")}),
              HasSubstr("axis \"q\" of spec P(q) is not in mesh"));
}

TEST_F(TracerErrorTest, PpermutePairs) {
  EXPECT_THAT(ErrorOf([](Tracer b) {
                return lax::ppermute(b, "x", {{0, 1}, {0, 0}});
              }),
              HasSubstr("ppermute: perm has source 0 twice"));
  EXPECT_THAT(ErrorOf([](Tracer b) {
                return lax::ppermute(b, "x", {{0, 1}, {1, 1}});
              }),
              HasSubstr("ppermute: perm has target 1 twice"));
  EXPECT_THAT(ErrorOf([](Tracer b) {
                return lax::ppermute(b, "x", {{0, 5}});
              }),
              HasSubstr("ppermute: perm pair (0,5) is out of range for axis size 2"));
}

TEST_F(TracerErrorTest, BadAllGatherAxis) {
  EXPECT_THAT(ErrorOf([](Tracer b) { return lax::all_gather(b, "x", 2, /*tiled=*/true); }),
              HasSubstr("all_gather: axis 2 is out of range [0, 1] (tiled=True); operands "
                        "f32[2,3]"));
}

// The loop index is s32: bounds past its range are an error where the loop is traced (JAX
// refuses such a Python int too), not a loop that wraps its index or runs forever.
TEST_F(TracerErrorTest, LoopBoundsPastTheIndexType) {
  auto loop = [](int64_t lower, int64_t upper) {
    return jit([lower, upper](Tracer b) {
      return lax::fori_loop(
          lower, upper, [](Tracer i, Tracer c) { return c * 2.0; }, b);
    });
  };
  absl::StatusOr<Array> r = loop(0, std::numeric_limits<int64_t>::max())(a_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("fori_loop: upper=9223372036854775807 does not fit the loop index type "
                        "s32"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("tracer_errors_test.cc"));
  r = loop(-2147483649, 2)(a_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("fori_loop: lower=-2147483649 does not fit the loop index type s32"));
  // At the edge: lowered (not run: 2^31 - 1 trips).
  auto lowered = loop(0, 2147483647).lower(a_);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
}

TEST_F(TracerErrorTest, WrongArity) {
  EXPECT_THAT(ErrorOf([](Tracer b, Tracer c) { return b; }),
              HasSubstr("shard_map: called with 1 arguments, but has 1 in_specs and a body of 2"));
}

TEST_F(TracerErrorTest, OutSpecsCount) {
  EXPECT_THAT(ErrorOf([](Tracer b) { return b; }, {P("x", "y")}, {P("x"), P("y")}),
              HasSubstr("shard_map: 2 out_specs for 1 body results"));
}

TEST_F(TracerErrorTest, FirstErrorWinsAndLaterOpsAreSkipped) {
  std::string e = ErrorOf([](Tracer b) {
    Tracer bad = lax::reshape(b, {7});
    return lax::exp(bad) + b;
  });
  EXPECT_THAT(e, HasSubstr("reshape: new_sizes (7) has 7 elements, operand has 6"));
}

TEST_F(TracerErrorTest, MismatchedArgumentTypesAtRunTime) {
  auto f = jit([](Tracer b) { return b; });
  auto lowered = f.lower(a_);
  ASSERT_TRUE(lowered.ok());
  auto compiled = lowered->compile();
  ASSERT_TRUE(compiled.ok());
  Array other = *device_put(HostTensor(DType::kF32, {2}, {1}), NamedSharding(mesh_, P()));
  EXPECT_THAT(std::string((*compiled)(other).status().message()),
              HasSubstr("argument 0 is f32[2], compiled for f32[4,6]"));
}

}  // namespace
}  // namespace shardjit
