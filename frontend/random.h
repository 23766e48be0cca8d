// Random numbers. Host-side arrays from a seed (Key: counter-based SplitMix64, reproducible on
// every machine, for test and benchmark data), and traced ones on JAX's threefry2x32 PRNG with
// raw keys (jax.random.PRNGKey): the same bits as jax.random (jax_threefry_partitionable, the
// default), keys (u32[2]) and bits (u32 by default) as JAX's.
#ifndef SHARDJIT_FRONTEND_RANDOM_H_
#define SHARDJIT_FRONTEND_RANDOM_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/array.h"
#include "frontend/ops.h"

namespace shardjit::random {

// A seed (jax.random.key).
struct Key {
  explicit Key(uint64_t seed) : seed(seed) {}
  uint64_t seed;
};
// jax.random.key: the key of `seed`.
inline Key key(uint64_t seed) { return Key(seed); }

// jax.random.normal: standard normal samples (Box-Muller over a SplitMix64 stream) in a floating
// dtype.
absl::StatusOr<Tensor> normal(Key key, std::vector<int64_t> shape, DType dtype = DType::kF32);
// jax.random.uniform: uniform samples in [minval, maxval).
absl::StatusOr<Tensor> uniform(Key key, std::vector<int64_t> shape, DType dtype = DType::kF32,
                               double minval = 0.0, double maxval = 1.0);

// jax.random.PRNGKey(seed): the key [0, seed] as u32[2].
Tracer prng_key(uint32_t seed, Loc loc = Loc::current());
// jax.random.split(key, num): num keys, [num, 2].
Tracer split(Tracer key, int64_t num = 2, Loc loc = Loc::current());
// jax.random.fold_in(key, data): a key from `key` and `data`.
Tracer fold_in(Tracer key, uint32_t data, Loc loc = Loc::current());
// jax.random.bits(key, shape, dtype): u8, u16, u32 (the default) or u64, JAX's bits.
Tracer bits(Tracer key, std::vector<int64_t> shape, DType dtype = DType::kU32,
            Loc loc = Loc::current());
// jax.random.uniform(key, shape, dtype, minval, maxval) for f32 (the default), bf16, f16 and
// f64: bit for bit on [0, 1); scaled to other ranges within a few ulp where u * (maxval - minval)
// + minval cancels (XLA may compute it with one FMA, shardjit rounds the product and the sum).
Tracer uniform(Tracer key, std::vector<int64_t> shape, double minval = 0.0, double maxval = 1.0,
               DType dtype = DType::kF32, Loc loc = Loc::current());
// jax.random.normal(key, shape, dtype): sqrt(2) erf_inv(u) for u uniform in (-1, 1), as JAX;
// erf_inv is shardjit's (correctly rounded), XLA's an approximation: values agree to a few ulp,
// not always bit for bit.
Tracer normal(Tracer key, std::vector<int64_t> shape, DType dtype = DType::kF32,
              Loc loc = Loc::current());
// jax.random.bernoulli(key, p, shape): pred, true with probability p (uniform < p).
Tracer bernoulli(Tracer key, double p, std::vector<int64_t> shape, Loc loc = Loc::current());
// jax.random.gumbel(key, shape, dtype): -log(-log(u)), u uniform in [tiny, 1) (the dtype's
// smallest normal), in f32 (the default), bf16, f16 or f64.
Tracer gumbel(Tracer key, std::vector<int64_t> shape, DType dtype = DType::kF32,
              Loc loc = Loc::current());
// jax.random.categorical(key, logits, axis): s32 indices along `axis` (removed from the shape),
// drawn by the Gumbel-max trick: argmax(gumbel + logits), the noise in the logits' dtype.
Tracer categorical(Tracer key, Tracer logits, int64_t axis = -1, Loc loc = Loc::current());

}  // namespace shardjit::random

#endif  // SHARDJIT_FRONTEND_RANDOM_H_
