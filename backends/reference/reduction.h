// The reductions of the reference kernels (reduce_*, cumulative scans): their identities and
// in-order combine steps. Accumulators C are the compute types (dtype_dispatch.h): f32 for the
// 16-bit floats, the storage type otherwise (bool for pred).
#ifndef SHARDJIT_BACKENDS_REFERENCE_REDUCTION_H_
#define SHARDJIT_BACKENDS_REFERENCE_REDUCTION_H_

#include <cstdint>
#include <type_traits>

#include "backends/reduce_kind.h"
#include "backends/reference/dtype_dispatch.h"

namespace shardjit::backends::reference {

// The reductions: sum, max and min as backends/reduce_kind.h defines them; prod (integers wrap),
// and/or (bitwise on pred and integers; floats are refused by the shape rule).
enum class Reduction { kSum, kMax, kMin, kProd, kAnd, kOr };

template <Reduction kR, typename C>
C Identity() {
  if constexpr (kR == Reduction::kSum) return ReduceIdentity<ReduceKind::kSum, C>();
  if constexpr (kR == Reduction::kMax) return ReduceIdentity<ReduceKind::kMax, C>();
  if constexpr (kR == Reduction::kMin) return ReduceIdentity<ReduceKind::kMin, C>();
  if constexpr (kR == Reduction::kProd) return C(1);
  if constexpr (kR == Reduction::kAnd) {
    if constexpr (kIsInt<C>) return static_cast<C>(~C{0});  // all ones
    return C(1);
  }
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
  } else if constexpr (kR == Reduction::kProd && kIsInt<C>) {
    return static_cast<C>(static_cast<WrapType<C>>(acc) * static_cast<WrapType<C>>(x));
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
