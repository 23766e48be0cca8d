// Typed storage and oracles shared by the dtype tests (dtypes_test.cc: elementwise ops and
// converts; dtypes_structure_test.cc: reductions, the dot, sorting, scans, indexing, data
// movement): tensors of a C++ element type, values as long double, rounding to a float dtype,
// ulp distances, edge-case operands, two's complement wrapping.
#ifndef SHARDJIT_BACKENDS_REFERENCE_DTYPES_TEST_UTIL_H_
#define SHARDJIT_BACKENDS_REFERENCE_DTYPES_TEST_UTIL_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/reference/kernel_test_util.h"
#include "gtest/gtest.h"
#include "ir/dtype.h"
#include "ir/dtype_dispatch.h"

namespace shardjit::backends::reference::dtype_test_util {

using ir::bf16;
using ir::DType;
using ir::f16;
using ir::Tensor;
using test_util::Eval;
using test_util::MakeOp;
using Int = __int128;

template <typename T>
constexpr bool kInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T>
constexpr bool kHalf = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

template <typename T>
Tensor MakeTensor(const std::vector<T>& v) {
  Tensor t = Tensor::Empty({ir::kDTypeOf<T>, {static_cast<int64_t>(v.size())}});
  for (size_t i = 0; i < v.size(); ++i) t.data_as<T>()[i] = v[i];
  return t;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  EXPECT_EQ(t.dtype(), ir::kDTypeOf<T>);
  std::vector<T> v(t.num_elements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.data_as<T>()[i];
  return v;
}

// A value of T as long double (exact for every dtype but the 64-bit integers past 2^64).
template <typename T>
long double Wide(T x) {
  if constexpr (kHalf<T>) {
    return static_cast<float>(x);
  } else {
    return static_cast<long double>(x);
  }
}

// Storage value of a floating T nearest to v, rounding as the kernels define it: the 16-bit
// floats through f32.
template <typename T>
T RoundFloat(long double v) {
  if constexpr (kHalf<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// The bit pattern of a float value as an integer whose order is the values' order, for ulp
// distances.
template <typename T>
int64_t OrderedBits(T x) {
  uint64_t bits;
  int width;
  if constexpr (kHalf<T>) {
    bits = x.bits;
    width = 16;
  } else if constexpr (std::is_same_v<T, float>) {
    bits = std::bit_cast<uint32_t>(x);
    width = 32;
  } else {
    bits = std::bit_cast<uint64_t>(x);
    width = 64;
  }
  const uint64_t sign = uint64_t{1} << (width - 1);
  const uint64_t magnitude = bits & (sign - 1);
  return (bits & sign) ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
}

template <typename T>
bool IsNaN(T x) {
  return std::isnan(Wide(x));
}

// Expects got within `ulps` of want (NaN matches NaN).
template <typename T>
void ExpectNear(T got, T want, int64_t ulps, const std::string& what) {
  if (IsNaN(want)) {
    EXPECT_TRUE(IsNaN(got)) << what << ": got " << static_cast<double>(Wide(got));
    return;
  }
  const int64_t distance = std::abs(OrderedBits(got) - OrderedBits(want));
  EXPECT_LE(distance, ulps) << what << ": got " << static_cast<double>(Wide(got)) << " want "
                            << static_cast<double>(Wide(want));
}

// Operands: the type's edge values paired with each other, then random values (integers over
// their whole range, floats from random bit patterns for the 16-bit types and random
// magnitudes for f32/f64).
template <typename T>
std::vector<T> Edges() {
  if constexpr (kInt<T>) {
    using L = std::numeric_limits<T>;
    return {T(0), T(1), T(2), T(3), static_cast<T>(-1), static_cast<T>(-7), L::min(), L::max(),
            static_cast<T>(L::max() - 1), static_cast<T>(L::min() + 1), T(sizeof(T) * 8 - 1),
            T(sizeof(T) * 8)};
  } else {
    std::vector<T> out;
    for (long double v : {0.0L, -0.0L, 1.0L, -1.0L, 0.5L, 2.5L, -3.75L, 1e-3L, 100.0L, 65504.0L,
                          static_cast<long double>(INFINITY), -static_cast<long double>(INFINITY),
                          static_cast<long double>(NAN)}) {
      out.push_back(RoundFloat<T>(v));
    }
    return out;
  }
}

template <typename T>
std::pair<std::vector<T>, std::vector<T>> Operands(uint32_t seed) {
  std::vector<T> a, b;
  const std::vector<T> edges = Edges<T>();
  for (T x : edges) {
    for (T y : edges) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 300; ++i) {
    for (std::vector<T>* v : {&a, &b}) {
      if constexpr (kInt<T>) {
        v->push_back(static_cast<T>(rng()));
      } else if constexpr (kHalf<T>) {
        T x;
        x.bits = static_cast<uint16_t>(rng());
        v->push_back(x);
      } else {
        std::uniform_real_distribution<double> mag(-30, 30);
        const double x = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                                    static_cast<int>(mag(rng)));
        v->push_back(static_cast<T>(x));
      }
    }
  }
  return {a, b};
}

template <typename T>
Tensor Binary(const std::string& opcode, const std::vector<T>& a, const std::vector<T>& b) {
  return Eval(MakeOp(opcode), {MakeTensor(a), MakeTensor(b)});
}

// v modulo 2^bits, as T (two's complement).
template <typename T>
T WrapTo(Int v) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<unsigned __int128>(v)));
}

}  // namespace shardjit::backends::reference::dtype_test_util

#endif  // SHARDJIT_BACKENDS_REFERENCE_DTYPES_TEST_UTIL_H_
