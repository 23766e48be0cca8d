// The traced jax.random functions against values jax 0.10.2 computes (jax.random.PRNGKey, split,
// fold_in, bits, uniform, normal with the default jax_threefry_partitionable), on both backends,
// unpartitioned and sharded over a 2x2 mesh; the threefry2x32 kernel against the known-answer
// vectors of the Random123 reference (as JAX's tests use them); errors.
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;
using Words = std::vector<uint32_t>;

Words AsWords(const Array& a) {
  Words out;
  for (double v : a.to_host()->ToDoubles()) out.push_back(static_cast<uint32_t>(v));
  return out;
}

// Expects f32 bit patterns within `max_ulps` of each other (same sign).
void ExpectWithinUlps(const Words& got, const Words& want, int64_t max_ulps) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const int64_t ulps = std::abs(static_cast<int64_t>(static_cast<int32_t>(got[i])) -
                                  static_cast<int64_t>(static_cast<int32_t>(want[i])));
    EXPECT_LE(ulps, max_ulps) << "element " << i;
  }
}

Words FloatBits(const Array& a) {
  Words out;
  for (double v : a.to_host()->ToDoubles()) out.push_back(std::bit_cast<uint32_t>(static_cast<float>(v)));
  return out;
}

struct Expected {
  uint32_t seed;
  Words split2, fold_in7, bits23, uniform6, uniform_m, normal6;
  std::vector<double> bernoulli8, categorical, categorical_axis0;
  Words gumbel6;
};

// jax.random with jax 0.10.2 (float results as their f32 bits).
const Expected kJax[] = {
    {0,
     {1797259609, 2579123966, 928981903, 3453687069},
     {2716826189, 292468403},
     {4070199207, 4202968722, 1427181096, 2012915765, 2447653815, 710830403},
     {1064475214, 1064993846, 1051337244, 1055913296, 1058137146, 1042905504},
     {1076838626, 1077486916, 3199030644, 1051708048},
     {1070576317, 1073847792, 3202220055, 3181445666, 1043616044, 3212368599},
     {0, 0, 0, 0, 0, 1, 0, 0},
     {1, 3, 0},
     {2, 0, 1, 1, 2},
     {1077614729, 1081428380, 3183898615, 1049490596, 1058234552, 3205909564}},
    {42,
     {1832780943, 270669613, 64467757, 2916123636},
     {2547012911, 1371500959},
     {2098992034, 2919706841, 2646866425, 2409546199, 1935504149, 2516274904},
     {1056585764, 1059981104, 1058915320, 1057988288, 1055308516, 1058405198},
     {1055070388, 1068700152, 1066035692, 1062083008},
     {3169312533, 1055861736, 1050109537, 1042103076, 3187541227, 1046356250},
     {0, 0, 0, 0, 0, 0, 1, 0},
     {3, 0, 2},
     {1, 2, 2, 2, 1},
     {1051397706, 1064548236, 1060748383, 1057772792, 1047019407, 1059080482}},
};

class RandomTest : public ::testing::TestWithParam<Backend> {};

TEST_P(RandomTest, MatchesJaxRandom) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array dummy = *device_put(HostTensor(DType::kF32, {1}, {0}), NamedSharding(mesh, P()));
  Array logits = *device_put(
      HostTensor(DType::kF32, {3, 5}, {0.1, 0.5, -0.2, 1.0, 0.0, 2.0, -1.0, 0.3, 0.3, 0.7, 0, 0, 0, 0, 0}),
      NamedSharding(mesh, P()));
  for (const Expected& e : kJax) {
    SCOPED_TRACE("seed " + std::to_string(e.seed));
    const uint32_t seed = e.seed;
    auto f = jit(
        [seed](Tracer, Tracer logits) {
          Tracer key = random::prng_key(seed);
          return std::vector<Tracer>{key,
                                     random::split(key),
                                     random::fold_in(key, 7),
                                     random::bits(key, {2, 3}),
                                     random::uniform(key, {6}),
                                     random::uniform(key, {4}, -2.0, 3.0),
                                     random::normal(key, {6}),
                                     random::bernoulli(key, 0.3, {8}),
                                     random::categorical(key, logits),
                                     random::categorical(key, logits, 0),
                                     random::gumbel(key, {6})};
        },
        {.backend = GetParam()});
    absl::StatusOr<std::vector<Array>> out = f(dummy, logits);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(AsWords((*out)[0]), (Words{0, seed}));
    EXPECT_EQ(AsWords((*out)[1]), e.split2);
    EXPECT_EQ(AsWords((*out)[2]), e.fold_in7);
    EXPECT_EQ(AsWords((*out)[3]), e.bits23);
    EXPECT_EQ(FloatBits((*out)[4]), e.uniform6);
    // Scaled to [-2, 3): XLA contracts u * 5 + -2 into one FMA, shardjit rounds twice; the
    // difference shows where the sum cancels (seed 42, element 0: 4 ulp).
    ExpectWithinUlps(FloatBits((*out)[5]), e.uniform_m, 4);
    // normal: shardjit's erf_inv is correctly rounded, XLA's an f32 approximation.
    ExpectWithinUlps(FloatBits((*out)[6]), e.normal6, 4);
    EXPECT_EQ((*out)[7].to_host()->ToDoubles(), e.bernoulli8);
    EXPECT_EQ((*out)[8].to_host()->ToDoubles(), e.categorical);
    EXPECT_EQ((*out)[9].to_host()->ToDoubles(), e.categorical_axis0);
    // gumbel: -log(-log(u)); XLA's f32 log is an approximation, shardjit's correctly rounded.
    ExpectWithinUlps(FloatBits((*out)[10]), e.gumbel6, 4);
  }
}

// The raw element bits of a 2- or 8-byte array, widened to u64.
std::vector<uint64_t> RawBits(const Array& a) {
  absl::StatusOr<Tensor> t = a.to_host();
  std::vector<uint64_t> out;
  if (!t.ok()) return out;
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    out.push_back(t->byte_size() / t->num_elements() == 2 ? t->data_as<uint16_t>()[i]
                                                          : t->data_as<uint64_t>()[i]);
  }
  return out;
}

// Expects bit patterns of one sign within `max_ulps` of each other.
void ExpectRawWithinUlps(const std::vector<uint64_t>& got, const std::vector<uint64_t>& want,
                         uint64_t max_ulps) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(got[i] > want[i] ? got[i] - want[i] : want[i] - got[i], max_ulps)
        << "element " << i;
  }
}

// bits of u8, u16 and u64, and uniform, normal, gumbel and categorical in bf16, f16 and f64 (seed
// 42), against jax 0.10.2 on CPU (with jax_enable_x64 for the 64-bit ones): bits, [0, 1) uniforms
// and categorical draws exactly, the scaled uniforms, normals and gumbels within a few ulps (the
// rounding of the scale; erf_inv and log).
TEST_P(RandomTest, OtherDTypesMatchJax) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array dummy = *device_put(HostTensor(DType::kF32, {1}, {0}), NamedSharding(mesh, P()));
  const std::vector<uint64_t> u16 = {5026, 12505, 63993, 49623, 29461, 20184};
  const std::vector<uint64_t> u64 = {7871734211187709741u,  276886910877598708u,
                                     10591095138341673235u, 13462782411356743825u,
                                     12687676868490354166u, 11878554724538143822u};
  struct Draws {
    DType dtype;
    std::vector<uint64_t> uniform, scaled, normal, gumbel;
    std::vector<double> categorical, categorical_axis0;
  };
  const std::vector<Draws> draws = {
      {DType::kBF16,
       {0x3f22, 0x3f58, 0x3f78, 0x3f56, 0x3da0, 0x3f58},
       {0x4004, 0x4070, 0x4098, 0x406c, 0xc018, 0x4070},
       {0x3eb0, 0x3f82, 0x3ff2, 0x3f7c, 0xbfb4, 0x3f82},
       {0x3f48, 0x3fe3, 0x405d, 0x3fdc, 0xbf6f, 0x3fe3},
       {2, 0, 4},
       {1, 0, 0, 0, 2}},
      {DType::kF16,
       {0x2ce0, 0x3218, 0x3bce, 0x3a0e, 0x3730, 0x34ec},
       {0xc0c8, 0xbde8, 0x44ce, 0x421c, 0x38c0, 0xb850},
       {0xbdb8, 0xbb01, 0x3fe6, 0x3993, 0xb011, 0xb804},
       {0xbb90, 0xb80c, 0x4366, 0x3d1d, 0x3321, 0xb143},
       {2, 3, 4},
       {1, 1, 0, 1, 1}},
      {DType::kF64,
       {0x3fdb4f8123c40884, 0x3f8ebd996d6e8400, 0x3fe25f641d41e71a, 0x3fe75aad28c6a974,
        0x3fe60275dc7869da, 0x3fe49b2352c6244a},
       {0x3fda7c091e204420, 0xc0070a1334948be0, 0x3ff97d9075079c68, 0x4006b55a518d52e8,
        0x400404ebb8f0d3b4, 0x40013646a58c4894},
       {0xbfc7a4a26c962159, 0xc0015bccfaa7ba3a, 0x3fc7ed8110b50460, 0x3fe397ad84a04356,
        0x3fdf5603e3665211, 0x3fd79dc43b3389fb},
       {0x3fc48f6eaaf61cee, 0xbff6f529fdd24e87, 0x3fe2d9332776f2e1, 0x3ff27c29bdd6aedd,
        0x3fef7335130f98c7, 0x3fea429ecb086fa4},
       {3, 0, 3},
       {1, 1, 2, 0, 0}}};
  const std::vector<double> logit_values = {0.1, 0.5, -0.2, 1.0, 0.0, 2.0, -1.0, 0.3,
                                            0.3, 0.7, 0,   0,   0,    0,   0};
  std::vector<Array> logits;
  for (const Draws& d : draws) {
    logits.push_back(
        *device_put(HostTensor(d.dtype, {3, 5}, logit_values), NamedSharding(mesh, P())));
  }
  auto f = jit(
      [&draws](const std::vector<Tracer>& logits) {
        Tracer key = random::prng_key(42);
        std::vector<Tracer> out = {random::bits(key, {6}, DType::kU8),
                                   random::bits(key, {6}, DType::kU16),
                                   random::bits(key, {6}, DType::kU64)};
        for (size_t i = 0; i < draws.size(); ++i) {
          const DType dtype = draws[i].dtype;
          out.push_back(random::uniform(key, {6}, 0.0, 1.0, dtype));
          out.push_back(random::uniform(key, {6}, -3.0, 5.0, dtype));
          out.push_back(random::normal(key, {6}, dtype));
          out.push_back(random::gumbel(key, {6}, dtype));
          out.push_back(random::categorical(key, logits[i]));
          out.push_back(random::categorical(key, logits[i], 0));
        }
        return out;
      },
      {.backend = GetParam()});
  absl::StatusOr<std::vector<Array>> out = f.call(logits);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> u8;
  for (uint64_t v : u16) u8.push_back(static_cast<double>(v & 0xff));  // the same words' low bits
  EXPECT_EQ((*out)[0].to_host()->ToDoubles(), u8);
  EXPECT_EQ(RawBits((*out)[1]), u16);
  EXPECT_EQ(RawBits((*out)[2]), u64);
  for (size_t i = 0; i < draws.size(); ++i) {
    SCOPED_TRACE(std::string(ir::DTypeName(draws[i].dtype)));
    const size_t at = 3 + 6 * i;
    EXPECT_EQ((*out)[at].dtype(), draws[i].dtype);
    EXPECT_EQ(RawBits((*out)[at]), draws[i].uniform);
    ExpectRawWithinUlps(RawBits((*out)[at + 1]), draws[i].scaled, 2);
    ExpectRawWithinUlps(RawBits((*out)[at + 2]), draws[i].normal, 4);
    // gumbel: -log(-log(u)); XLA's logs are approximations, shardjit's correctly rounded.
    ExpectRawWithinUlps(RawBits((*out)[at + 3]), draws[i].gumbel, 4);
    EXPECT_EQ((*out)[at + 4].to_host()->ToDoubles(), draws[i].categorical);
    EXPECT_EQ((*out)[at + 5].to_host()->ToDoubles(), draws[i].categorical_axis0);
  }
  // Integer samples and other bit widths are JAX's errors too.
  auto error = [&](const std::function<Tracer(Tracer)>& draw) {
    absl::StatusOr<Array> r = jit(draw)(dummy);
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_THAT(error([](Tracer) {
                return random::uniform(random::prng_key(1), {2}, 0, 1, DType::kS32);
              }),
              HasSubstr("random::uniform: dtype must be f32, bf16, f16 or f64, got s32"));
  EXPECT_THAT(
      error([](Tracer) { return random::bits(random::prng_key(1), {2}, DType::kS32); }),
      HasSubstr("random::bits: dtype must be u8, u16, u32 or u64, got s32"));
  EXPECT_THAT(error([](Tracer) {
                return random::categorical(random::prng_key(1),
                                           lax::full({2, 3}, 1, DType::kS32));
              }),
              HasSubstr("random::categorical: logits must be floats, got s32[2,3]"));
}

TEST_P(RandomTest, ShardedSamplesAreTheUnshardedOnes) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  Array dummy = *device_put(HostTensor(DType::kF32, {1}, {0}), NamedSharding(mesh, P()));
  auto draw = [](Tracer) { return random::uniform(random::fold_in(random::prng_key(3), 11), {8, 6}); };
  absl::StatusOr<Array> whole =
      jit(draw, {.pipeline = {.disabled = {"spmd-partition"}}, .backend = GetParam()})(dummy);
  ASSERT_TRUE(whole.ok()) << whole.status();
  absl::StatusOr<Array> sharded =
      jit(draw, {.out_shardings = std::vector<PartitionSpec>{P("x", "y")}, .backend = GetParam()})(
          dummy);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ(sharded->sharding().spec(), P("x", "y"));
  EXPECT_EQ(FloatBits(*sharded), FloatBits(*whole));
}

INSTANTIATE_TEST_SUITE_P(Backends, RandomTest,
                         ::testing::Values(Backend::kX86, Backend::kReference),
                         [](const auto& info) { return AbslUnparseFlag(info.param); });

TEST(Threefry2x32, KnownAnswers) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  auto word = [](uint32_t w) { return static_cast<double>(w); };
  // (k0, k1, x0, x1) -> (y0, y1), three cases side by side.
  Array k0 = *device_put(HostTensor(DType::kU32, {3}, {0, word(0xffffffff), word(0x13198a2e)}),
                         NamedSharding(mesh, P()));
  Array k1 = *device_put(HostTensor(DType::kU32, {3}, {0, word(0xffffffff), word(0x03707344)}),
                         NamedSharding(mesh, P()));
  Array x0 = *device_put(HostTensor(DType::kU32, {3}, {0, word(0xffffffff), word(0x243f6a88)}),
                         NamedSharding(mesh, P()));
  Array x1 = *device_put(HostTensor(DType::kU32, {3}, {0, word(0xffffffff), word(0x85a308d3)}),
                         NamedSharding(mesh, P()));
  absl::StatusOr<std::vector<Array>> out = jit([](Tracer a, Tracer b, Tracer c, Tracer d) {
    auto [y0, y1] = lax::threefry2x32(a, b, c, d);
    return std::vector<Tracer>{y0, y1};
  })(k0, k1, x0, x1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(AsWords((*out)[0]), (Words{0x6b200159, 0x1cb996fc, 0xc4923a9c}));
  EXPECT_EQ(AsWords((*out)[1]), (Words{0x99ba4efe, 0xbb002be7, 0x483df7a0}));
}

TEST(RandomErrors, NameTheFunctionAndTheKey) {
  Runtime rt({.num_devices = 1});
  Mesh mesh = *make_mesh(rt, {{"x", 1}});
  Array x = *device_put(HostTensor(DType::kF32, {2}, {1, 2}), NamedSharding(mesh, P()));
  absl::StatusOr<Array> bad = jit([](Tracer x) { return random::uniform(x, {3}); })(x);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("random::uniform: a key is u32[2] (jax.random.PRNGKey), got f32[2]"));
  absl::StatusOr<Array> width = jit([](Tracer x) {
    return lax::bitcast_convert_type(lax::convert_element_type(x, DType::kBF16), DType::kS32);
  })(x);
  EXPECT_THAT(width.status().message(),
              HasSubstr("bitcast_convert_type: new_dtype=s32 is not a non-pred dtype of the "
                        "operand's width"));
}

}  // namespace
}  // namespace shardjit
