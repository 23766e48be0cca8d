// The reductions of the reference kernels (reduce_*, cumulative scans): their identities and
// in-order combine steps. Accumulators C are f32 for floats, int32_t for s32, uint8_t for pred.
#ifndef SHARDJIT_BACKENDS_REFERENCE_REDUCTION_H_
#define SHARDJIT_BACKENDS_REFERENCE_REDUCTION_H_

#include <cstdint>
#include <type_traits>

#include "backends/reduce_kind.h"

namespace shardjit::backends::reference {

// The reductions: sum, max and min as backends/reduce_kind.h defines them; prod (floats in f32,
// s32 wraps), and/or (bitwise on pred and s32; floats are refused by the shape rule).
enum class Reduction { kSum, kMax, kMin, kProd, kAnd, kOr };

template <Reduction kR, typename C>
C Identity() {
  if constexpr (kR == Reduction::kSum) return ReduceIdentity<ReduceKind::kSum, C>();
  if constexpr (kR == Reduction::kMax) return ReduceIdentity<ReduceKind::kMax, C>();
  if constexpr (kR == Reduction::kMin) return ReduceIdentity<ReduceKind::kMin, C>();
  if constexpr (kR == Reduction::kProd) return C(1);
  if constexpr (kR == Reduction::kAnd) return std::is_same_v<C, uint8_t> ? C(1) : C(-1);
  return C(0);
}

template <Reduction kR, typename C>
C Combine(C acc, C x) {
  if constexpr (kR == Reduction::kSum) {
    return CombineInOrder<ReduceKind::kSum>(acc, x);
  } else if constexpr (kR == Reduction::kMax) {
    return CombineInOrder<ReduceKind::kMax>(acc, x);
  } else if constexpr (kR == Reduction::kMin) {
    return CombineInOrder<ReduceKind::kMin>(acc, x);
  } else if constexpr (kR == Reduction::kProd && std::is_same_v<C, int32_t>) {
    return static_cast<int32_t>(static_cast<uint32_t>(acc) * static_cast<uint32_t>(x));
  } else if constexpr (kR == Reduction::kProd) {
    return static_cast<C>(acc * x);
  } else if constexpr (std::is_floating_point_v<C>) {
    return acc;
  } else if constexpr (kR == Reduction::kAnd) {
    return static_cast<C>(acc & x);
  } else {
    return static_cast<C>(acc | x);
  }
}

}  // namespace shardjit::backends::reference

#endif  // SHARDJIT_BACKENDS_REFERENCE_REDUCTION_H_
