#include "frontend/random.h"

#include <cmath>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"

namespace shardjit::random {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1) from the i-th draw of `seed`.
double UnitOpen(uint64_t seed, uint64_t i) {
  uint64_t bits = SplitMix64(SplitMix64(seed) ^ (i * 0xd1b54a32d192ed03ull));
  return (static_cast<double>(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

absl::Status CheckShape(const char* what, const std::vector<int64_t>& shape, DType dtype) {
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(fmt::format("{}: negative dimension", what));
  }
  if (!ir::IsFloating(dtype)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: dtype must be floating (f16, bf16, f32, f64), got {}", what,
                    ir::DTypeName(dtype)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> normal(Key key, std::vector<int64_t> shape, DType dtype) {
  RETURN_IF_ERROR(CheckShape("random::normal", shape, dtype));
  Tensor t = Tensor::Empty({dtype, std::move(shape)});
  int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = UnitOpen(key.seed, i), u2 = UnitOpen(key.seed, i + 1);
    double r = std::sqrt(-2.0 * std::log(u1));
    t.SetDouble(i, r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) t.SetDouble(i + 1, r * std::sin(2 * M_PI * u2));
  }
  return t;
}

absl::StatusOr<Tensor> uniform(Key key, std::vector<int64_t> shape, DType dtype, double minval,
                               double maxval) {
  RETURN_IF_ERROR(CheckShape("random::uniform", shape, dtype));
  Tensor t = Tensor::Empty({dtype, std::move(shape)});
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.SetDouble(i, minval + (maxval - minval) * UnitOpen(key.seed, i));
  }
  return t;
}

}  // namespace shardjit::random
