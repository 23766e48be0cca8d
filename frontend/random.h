// Host-side random arrays from a seed (counter-based, reproducible on every machine).
#ifndef SHARDJIT_FRONTEND_RANDOM_H_
#define SHARDJIT_FRONTEND_RANDOM_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/array.h"

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

}  // namespace shardjit::random

#endif  // SHARDJIT_FRONTEND_RANDOM_H_
