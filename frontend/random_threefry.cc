// The traced jax.random functions of frontend/random.h on the threefry2x32 primitive, as JAX
// computes them with jax_threefry_partitionable (its default): the counter of element i of a
// shape is the 64-bit row-major index i as (high, low) words.
#include <cmath>
#include <limits>

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

Tracer bits(Tracer key, std::vector<int64_t> shape, Loc loc) {
  if (!CheckKey(key, "bits", loc)) return Tracer();
  auto [a, b] = HashIndices(key, shape, loc);
  return lax::bitwise_xor(a, b, loc);
}

Tracer uniform(Tracer key, std::vector<int64_t> shape, double minval, double maxval, Loc loc) {
  if (!CheckKey(key, "uniform", loc)) return Tracer();
  // 23 random mantissa bits under the exponent of 1: a float in [1, 2), less 1. Scalars are
  // broadcast by the binary ops.
  auto u32 = [&](double v) { return lax::scalar(v, DType::kU32, loc); };
  auto f32 = [&](double v) { return lax::scalar(v, DType::kF32, loc); };
  Tracer mantissa = lax::shift_right_logical(bits(key, shape, loc), u32(9), loc);
  Tracer one_to_two =
      lax::bitcast_convert_type(lax::bitwise_or(mantissa, u32(0x3F800000), loc), DType::kF32, loc);
  // The bounds and their difference in f32, as JAX computes them.
  const float lo = static_cast<float>(minval), hi = static_cast<float>(maxval);
  Tracer unit = lax::sub(one_to_two, f32(1.0), loc);
  Tracer scaled = lax::add(lax::mul(unit, f32(hi - lo), loc), f32(lo), loc);
  return lax::max(f32(lo), scaled, loc);
}

Tracer normal(Tracer key, std::vector<int64_t> shape, Loc loc) {
  if (!CheckKey(key, "normal", loc)) return Tracer();
  const float lo = std::nextafter(-1.0f, 0.0f);
  Tracer u = uniform(key, shape, lo, 1.0, loc);
  return lax::mul(lax::full(shape, static_cast<float>(std::sqrt(2.0)), DType::kF32, loc),
                  lax::erf_inv(u, loc), loc);
}

Tracer bernoulli(Tracer key, double p, std::vector<int64_t> shape, Loc loc) {
  if (!CheckKey(key, "bernoulli", loc)) return Tracer();
  Tracer u = uniform(key, shape, 0.0, 1.0, loc);
  return lax::lt(u, lax::full(shape, static_cast<float>(p), DType::kF32, loc), loc);
}

Tracer gumbel(Tracer key, std::vector<int64_t> shape, Loc loc) {
  if (!CheckKey(key, "gumbel", loc)) return Tracer();
  Tracer u = uniform(key, shape, std::numeric_limits<float>::min(), 1.0, loc);
  return lax::neg(lax::log(lax::neg(lax::log(u, loc), loc), loc), loc);
}

Tracer categorical(Tracer key, Tracer logits, int64_t axis, Loc loc) {
  if (!CheckKey(key, "categorical", loc) || !logits.valid()) return Tracer();
  if (logits.dtype() != DType::kF32) {
    logits.state()->RecordError(
        absl::InvalidArgumentError(fmt::format(
            "random::categorical: logits must be f32, got {}", logits.type().ToString())),
        loc);
    return Tracer();
  }
  return lax::argmax(lax::add(gumbel(key, logits.shape(), loc), logits, loc), axis,
                     DType::kS32, loc);
}

}  // namespace shardjit::random
