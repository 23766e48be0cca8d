// The traced jax.random functions of frontend/random.h on the threefry2x32 primitive, as JAX
// computes them with jax_threefry_partitionable (its default): the counter of element i of a
// shape is the 64-bit row-major index i as (high, low) words.
#include <cmath>
#include <optional>

#include "fmt/format.h"
#include "frontend/random.h"
#include "frontend/sorting.h"
#include "frontend/trace_state.h"

namespace shardjit::random {
namespace {

// Word w of `key` ([2]) broadcast to `shape`.
Tracer KeyWord(Tracer key, int64_t w, const std::vector<int64_t>& shape, Loc loc) {
  Tracer word = lax::reshape(lax::slice(key, {w}, {w + 1}, {}, loc), {}, loc);
  return lax::broadcast_in_dim(word, shape, {}, loc);
}

// threefry2x32(key, counters of `shape`): the two hashed words.
std::pair<Tracer, Tracer> HashIndices(Tracer key, const std::vector<int64_t>& shape, Loc loc) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  // Below 2^32 elements the high words are 0 and the low ones a u32 iota.
  Tracer low = lax::reshape(lax::broadcasted_iota(DType::kU32, {n}, 0, loc), shape, loc);
  return lax::threefry2x32(KeyWord(key, 0, shape, loc), KeyWord(key, 1, shape, loc),
                           lax::full(shape, 0, DType::kU32, loc), low, loc);
}

// A float dtype's mantissa bits, the exponent of its smallest normal value and the unsigned word
// of its width; none for other dtypes.
struct FloatFormat {
  int mantissa_bits;
  int min_exponent;
  DType word;
};
std::optional<FloatFormat> FormatOf(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return FloatFormat{23, -126, DType::kU32};
    case DType::kBF16:
      return FloatFormat{7, -126, DType::kU16};
    case DType::kF16:
      return FloatFormat{10, -14, DType::kU16};
    case DType::kF64:
      return FloatFormat{52, -1022, DType::kU64};
    default:
      return std::nullopt;
  }
}

// An error when `key` is not a traced u32[2] key.
bool CheckKey(const Tracer& key, const char* op, Loc loc) {
  if (!key.valid()) return false;
  if (key.type() == ShapedType{DType::kU32, {2}}) return true;
  key.state()->RecordError(absl::InvalidArgumentError(fmt::format(
                               "random::{}: a key is u32[2] (jax.random.PRNGKey), got {}", op,
                               key.type().ToString())),
                           loc);
  return false;
}

}  // namespace

Tracer prng_key(uint32_t seed, Loc loc) {
  return lax::concatenate({lax::full({1}, 0, DType::kU32, loc),
                           lax::full({1}, static_cast<double>(seed), DType::kU32, loc)},
                          0, loc);
}

Tracer split(Tracer key, int64_t num, Loc loc) {
  if (!CheckKey(key, "split", loc)) return Tracer();
  auto [a, b] = HashIndices(key, {num}, loc);
  return lax::concatenate({lax::reshape(a, {num, 1}, loc), lax::reshape(b, {num, 1}, loc)}, 1,
                          loc);
}

Tracer fold_in(Tracer key, uint32_t data, Loc loc) {
  if (!CheckKey(key, "fold_in", loc)) return Tracer();
  auto [a, b] = lax::threefry2x32(KeyWord(key, 0, {1}, loc), KeyWord(key, 1, {1}, loc),
                                  lax::full({1}, 0, DType::kU32, loc),
                                  lax::full({1}, static_cast<double>(data), DType::kU32, loc),
                                  loc);
  return lax::concatenate({a, b}, 0, loc);
}

Tracer bits(Tracer key, std::vector<int64_t> shape, DType dtype, Loc loc) {
  if (!CheckKey(key, "bits", loc)) return Tracer();
  if (dtype != DType::kU8 && dtype != DType::kU16 && dtype != DType::kU32 &&
      dtype != DType::kU64) {
    key.state()->RecordError(
        absl::InvalidArgumentError(fmt::format(
            "random::bits: dtype must be u8, u16, u32 or u64, got {}", ir::DTypeName(dtype))),
        loc);
    return Tracer();
  }
  auto [a, b] = HashIndices(key, shape, loc);
  if (dtype == DType::kU64) {  // the two words, the first high
    Tracer high = lax::convert_element_type(a, DType::kU64, loc);
    return lax::bitwise_or(lax::shift_left(high, lax::scalar(32, DType::kU64, loc), loc),
                           lax::convert_element_type(b, DType::kU64, loc), loc);
  }
  // Narrower words keep the low bits of the 32-bit ones.
  return lax::convert_element_type(lax::bitwise_xor(a, b, loc), dtype, loc);
}

Tracer uniform(Tracer key, std::vector<int64_t> shape, double minval, double maxval, DType dtype,
               Loc loc) {
  if (!CheckKey(key, "uniform", loc)) return Tracer();
  const std::optional<FloatFormat> format = FormatOf(dtype);
  if (!format) {
    key.state()->RecordError(
        absl::InvalidArgumentError(
            fmt::format("random::uniform: dtype must be f32, bf16, f16 or f64, got {}",
                        ir::DTypeName(dtype))),
        loc);
    return Tracer();
  }
  const int mantissa_bits = format->mantissa_bits;
  const DType word = format->word;
  // Random mantissa bits under the exponent of 1: a float in [1, 2), less 1. As JAX draws them:
  // the top bits of a word as wide as the float, but bf16 (under 8 mantissa bits) takes its
  // 7 from 8 random bits. Scalars are broadcast by the binary ops.
  const int random_bits = mantissa_bits < 8 ? 8 : 8 * ir::DTypeSize(word);
  Tracer drawn = bits(key, shape, random_bits == 8 ? DType::kU8 : word, loc);
  if (random_bits == 8) drawn = lax::convert_element_type(drawn, word, loc);
  auto in_word = [&](double v) { return lax::scalar(v, word, loc); };
  auto in_dtype = [&](double v) { return lax::scalar(v, dtype, loc); };
  Tracer one = lax::bitcast_convert_type(in_dtype(1.0), word, loc);
  Tracer mantissa = lax::shift_right_logical(drawn, in_word(random_bits - mantissa_bits), loc);
  Tracer one_to_two = lax::bitcast_convert_type(lax::bitwise_or(mantissa, one, loc), dtype, loc);
  // The bounds and their difference in the dtype, as JAX computes them.
  Tracer lo = in_dtype(minval), hi = in_dtype(maxval);
  Tracer unit = lax::sub(one_to_two, in_dtype(1.0), loc);
  Tracer scaled = lax::add(lax::mul(unit, lax::sub(hi, lo, loc), loc), lo, loc);
  return lax::max(lo, scaled, loc);
}

Tracer normal(Tracer key, std::vector<int64_t> shape, DType dtype, Loc loc) {
  if (!CheckKey(key, "normal", loc)) return Tracer();
  // The float next to -1 towards 0 in the dtype: below 1 the floats are 2^-(mantissa + 1) apart.
  const std::optional<FloatFormat> format = FormatOf(dtype);
  const double lo = -1.0 + std::ldexp(1.0, -((format ? format->mantissa_bits : 23) + 1));
  Tracer u = uniform(key, shape, lo, 1.0, dtype, loc);
  if (!u.valid()) return u;
  return lax::mul(lax::scalar(std::sqrt(2.0), dtype, loc), lax::erf_inv(u, loc), loc);
}

Tracer bernoulli(Tracer key, double p, std::vector<int64_t> shape, Loc loc) {
  if (!CheckKey(key, "bernoulli", loc)) return Tracer();
  Tracer u = uniform(key, shape, 0.0, 1.0, DType::kF32, loc);
  return lax::lt(u, lax::full(shape, static_cast<float>(p), DType::kF32, loc), loc);
}

Tracer gumbel(Tracer key, std::vector<int64_t> shape, DType dtype, Loc loc) {
  if (!CheckKey(key, "gumbel", loc)) return Tracer();
  // From the smallest normal float of the dtype (uniform reports a dtype that is no float).
  const std::optional<FloatFormat> format = FormatOf(dtype);
  const double tiny = std::ldexp(1.0, format ? format->min_exponent : -126);
  Tracer u = uniform(key, shape, tiny, 1.0, dtype, loc);
  if (!u.valid()) return u;
  return lax::neg(lax::log(lax::neg(lax::log(u, loc), loc), loc), loc);
}

Tracer categorical(Tracer key, Tracer logits, int64_t axis, Loc loc) {
  if (!CheckKey(key, "categorical", loc) || !logits.valid()) return Tracer();
  if (!ir::IsFloating(logits.dtype())) {
    logits.state()->RecordError(
        absl::InvalidArgumentError(fmt::format(
            "random::categorical: logits must be floats, got {}", logits.type().ToString())),
        loc);
    return Tracer();
  }
  Tracer noise = gumbel(key, logits.shape(), logits.dtype(), loc);
  if (!noise.valid()) return noise;
  return lax::argmax(lax::add(noise, logits, loc), axis, DType::kS32, loc);
}

}  // namespace shardjit::random
