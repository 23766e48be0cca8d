// What reduce_sum/max/min mean, for every backend and the collectives: the kinds, their
// identities, the in-order combine step of the reference and the output strides of a reduce.
#ifndef SHARDJIT_BACKENDS_REDUCE_KIND_H_
#define SHARDJIT_BACKENDS_REDUCE_KIND_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"
#include "ir/dtype_dispatch.h"

namespace shardjit::backends {

// reduce_sum, reduce_max and reduce_min; also the step of psum, pmax and pmin.
enum class ReduceKind { kSum, kMax, kMin };

// The identity of kKind over accumulators of type C (f32 or f64 for floats, the integer type, bool
// for pred): 0 for sums; -inf/+inf, the integer extremes, or false/true for max/min.
template <ReduceKind kKind, typename C>
constexpr C ReduceIdentity() {
  if constexpr (kKind == ReduceKind::kSum) {
    return C{0};
  } else if constexpr (std::is_floating_point_v<C>) {
    constexpr C kInf = std::numeric_limits<C>::infinity();
    return kKind == ReduceKind::kMax ? -kInf : kInf;
  } else {
    return kKind == ReduceKind::kMax ? std::numeric_limits<C>::min()
                                     : std::numeric_limits<C>::max();
  }
}

// ReduceIdentity for a kind known at run time.
template <typename C>
constexpr C ReduceIdentity(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::kSum:
      return ReduceIdentity<ReduceKind::kSum, C>();
    case ReduceKind::kMax:
      return ReduceIdentity<ReduceKind::kMax, C>();
    case ReduceKind::kMin:
      return ReduceIdentity<ReduceKind::kMin, C>();
  }
  return C{0};
}

// One step of the reference's in-order reduction, acc <kKind> x. Floating max/min return the first
// NaN (acc's, else x's) and keep acc on ties; integer sums wrap.
template <ReduceKind kKind, typename C>
C CombineInOrder(C acc, C x) {
  if constexpr (kKind == ReduceKind::kSum) {
    if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
      return static_cast<C>(static_cast<ir::WrapType<C>>(acc) + static_cast<ir::WrapType<C>>(x));
    } else {
      return static_cast<C>(acc + x);
    }
  } else {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(acc)) return acc;
      if (std::isnan(x)) return x;
    }
    if constexpr (kKind == ReduceKind::kMax) {
      return x > acc ? x : acc;
    } else {
      return x < acc ? x : acc;
    }
  }
}

// CombineInOrder for a kind known at run time.
template <typename C>
C CombineInOrder(ReduceKind kind, C acc, C x) {
  switch (kind) {
    case ReduceKind::kSum:
      return CombineInOrder<ReduceKind::kSum>(acc, x);
    case ReduceKind::kMax:
      return CombineInOrder<ReduceKind::kMax>(acc, x);
    case ReduceKind::kMin:
      return CombineInOrder<ReduceKind::kMin>(acc, x);
  }
  return acc;
}

// For each dim of an operand of `dims` reduced over `axes`: the row-major stride of the result
// index it moves, 0 on the reduced dims.
inline std::vector<int64_t> ReducedOutputStrides(absl::Span<const int64_t> dims,
                                                 absl::Span<const int64_t> axes) {
  std::vector<int64_t> strides(dims.size(), 0);
  int64_t stride = 1;
  for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 0; --i) {
    if (std::find(axes.begin(), axes.end(), i) != axes.end()) continue;
    strides[i] = stride;
    stride *= dims[i];
  }
  return strides;
}

}  // namespace shardjit::backends

#endif  // SHARDJIT_BACKENDS_REDUCE_KIND_H_
