// Reference kernels of sort, top_k, argmax/argmin and the cumulative reductions. Each works on
// the lanes of its operand along one dimension: lane (o, i) holds the elements at
// o * n * inner + j * inner + i for j in [0, n).
//
// Orders (jax.lax on XLA:CPU): sort compares keys with -0 equal to +0 and every NaN equal to and
// above +inf; top_k uses the total order -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN, the
// lower index first among equals; argmax/argmin pick the first NaN, else the first extreme.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/reduce_kind.h"
#include "backends/reference/dtype_dispatch.h"
#include "backends/reference/kernel.h"
#include "backends/reference/reduction.h"
#include "ir/dtype.h"
#include "ir/dtype_dispatch.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference {
namespace {

using ir::bf16;
using ir::Tensor;
using Results = absl::StatusOr<std::vector<Tensor>>;

// The lanes of `dims` along `axis`.
struct Lanes {
  int64_t outer = 1, n = 1, inner = 1;
  Lanes(const std::vector<int64_t>& dims, int64_t axis) {
    for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
    n = dims[axis];
    for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  }
  // Offset of element 0 of lane (o, i) in an array whose `axis` has size `size`.
  int64_t Base(int64_t o, int64_t i, int64_t size) const { return o * size * inner + i; }
  template <typename F>
  void ForEach(F&& f) const {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) f(o, i);
    }
  }
};

// An unsigned key whose order is the total order of T's values (floats: -NaN < -inf < ... <
// -0 < +0 < ... < +inf < +NaN). With `canonical`, -0 maps to +0 and every NaN to +NaN first.
// Key is uint64_t for the 8-byte dtypes, uint32_t (or wider) for the others.
template <typename Key, typename T>
Key OrderKey(T v, bool canonical) {
  static_assert(sizeof(Key) >= sizeof(T));
  if constexpr (kIsFloat<T>) {
    using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
    using U = std::conditional_t<std::is_same_v<T, double>, uint64_t, uint32_t>;
    F f = static_cast<F>(v);  // the 16-bit floats widen exactly
    if (canonical) {
      if (f == 0) f = 0;
      if (std::isnan(f)) f = std::numeric_limits<F>::quiet_NaN();
    }
    const U bits = std::bit_cast<U>(f);
    constexpr U kSign = U{1} << (8 * sizeof(U) - 1);
    return (bits & kSign) ? static_cast<U>(~bits) : (bits | kSign);
  } else if constexpr (std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<U>(static_cast<U>(v) ^ (U{1} << (8 * sizeof(U) - 1)));
  } else {
    return static_cast<Key>(v);
  }
}

// Whether a dtype's order keys need 64 bits.
bool WideKeys(ir::DType dtype) { return ir::DTypeSize(dtype) == 8; }

// The sort keys of lane (o, i) of `t` (lane size n, stride inner).
template <typename Key>
void LaneKeys(const Tensor& t, int64_t base, const Lanes& lanes, bool canonical,
              std::vector<Key>& keys) {
  keys.resize(lanes.n);
  Dispatch(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) <= sizeof(Key)) {
      const T* p = t.data_as<T>() + base;
      for (int64_t j = 0; j < lanes.n; ++j) {
        keys[j] = OrderKey<Key, T>(p[j * lanes.inner], canonical);
      }
    }
  });
}

// Copies element src_base + perm[j] * inner of `in` to dst_base + j * inner of `out`, j < count.
void GatherLane(const Tensor& in, int64_t src_base, Tensor& out, int64_t dst_base,
                const std::vector<uint32_t>& perm, int64_t count, int64_t inner) {
  const int64_t size = ir::DTypeSize(in.dtype());
  const char* src = in.data_as<char>();
  char* dst = out.data_as<char>();
  for (int64_t j = 0; j < count; ++j) {
    std::memcpy(dst + (dst_base + j * inner) * size, src + (src_base + perm[j] * inner) * size,
                size);
  }
}

// The order of one key lane, stably. Short lanes of 32-bit keys pack (key, index) into 64 bits
// so that one std::sort of integers orders by key, then by index (64-bit keys use a stable sort
// of the indices); long ones use a least-significant-digit radix sort of (key, index) pairs,
// byte by byte, skipping bytes every key shares.
template <typename Key>
struct OrderScratch {
  std::vector<uint64_t> packed;
  std::vector<Key> keys, other_keys;
  std::vector<uint32_t> other_perm;
};

template <typename Key>
void StableOrder(const std::vector<Key>& keys, OrderScratch<Key>& scratch,
                 std::vector<uint32_t>& perm) {
  const int64_t n = static_cast<int64_t>(keys.size());
  perm.resize(n);
  if (n < 2048) {
    if constexpr (sizeof(Key) == 4) {
      std::vector<uint64_t>& packed = scratch.packed;
      packed.resize(n);
      for (int64_t j = 0; j < n; ++j) {
        packed[j] = (uint64_t{keys[j]} << 32) | static_cast<uint32_t>(j);
      }
      std::sort(packed.begin(), packed.end());
      for (int64_t j = 0; j < n; ++j) perm[j] = static_cast<uint32_t>(packed[j]);
    } else {
      for (int64_t j = 0; j < n; ++j) perm[j] = static_cast<uint32_t>(j);
      std::stable_sort(perm.begin(), perm.end(),
                       [&](uint32_t x, uint32_t y) { return keys[x] < keys[y]; });
    }
    return;
  }
  constexpr int kBytes = sizeof(Key);
  int64_t counts[kBytes][256] = {};
  for (Key k : keys) {
    for (int b = 0; b < kBytes; ++b) ++counts[b][(k >> (8 * b)) & 0xff];
  }
  std::vector<Key>& key_in = scratch.keys;
  key_in = keys;
  for (int64_t j = 0; j < n; ++j) perm[j] = static_cast<uint32_t>(j);
  scratch.other_keys.resize(n);
  scratch.other_perm.resize(n);
  for (int b = 0; b < kBytes; ++b) {
    int64_t* count = counts[b];
    if (count[(key_in[0] >> (8 * b)) & 0xff] == n) continue;  // every key has this byte
    int64_t offset[256];
    for (int64_t v = 0, sum = 0; v < 256; ++v) {
      offset[v] = sum;
      sum += count[v];
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = offset[(key_in[j] >> (8 * b)) & 0xff]++;
      scratch.other_keys[at] = key_in[j];
      scratch.other_perm[at] = perm[j];
    }
    key_in.swap(scratch.other_keys);
    perm.swap(scratch.other_perm);
  }
}

// Sorts every lane of `in` by its first num_keys operands into `out`, with Key-sized order keys.
template <typename Key>
void SortLanes(const std::vector<Tensor>& in, int num_keys, const Lanes& lanes,
               std::vector<Tensor>& out) {
  std::vector<std::vector<Key>> keys(num_keys);
  OrderScratch<Key> scratch;
  std::vector<uint32_t> perm;
  lanes.ForEach([&](int64_t o, int64_t i) {
    const int64_t base = lanes.Base(o, i, lanes.n);
    for (int k = 0; k < num_keys; ++k) LaneKeys(in[k], base, lanes, true, keys[k]);
    if (num_keys == 1) {
      StableOrder(keys[0], scratch, perm);
    } else {
      perm.resize(lanes.n);
      for (int64_t j = 0; j < lanes.n; ++j) perm[j] = static_cast<uint32_t>(j);
      std::stable_sort(perm.begin(), perm.end(), [&](uint32_t x, uint32_t y) {
        for (int k = 0; k < num_keys; ++k) {
          if (keys[k][x] != keys[k][y]) return keys[k][x] < keys[k][y];
        }
        return false;
      });
    }
    for (size_t t = 0; t < in.size(); ++t) {
      GatherLane(in[t], base, out[t], base, perm, lanes.n, lanes.inner);
    }
  });
}

// sort: a stable sort (which also serves is_stable=false) by the first num_keys operands.
Results Sort(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const ir::SortAttrs& a = op.sort();
  const Lanes lanes(in[0].dims(), a.dimension());
  if (lanes.n > int64_t{0xffffffff}) {
    return absl::UnimplementedError("sort: a dimension of more than 2^32 elements");
  }
  std::vector<Tensor> out;
  for (int i = 0; i < op.result_types_size(); ++i) {
    out.push_back(Tensor::Empty(ResultType(op, i), allocator));
  }
  if (in[0].num_elements() == 0) return out;
  const int num_keys = static_cast<int>(a.num_keys());
  bool wide = false;
  for (int k = 0; k < num_keys; ++k) wide = wide || WideKeys(in[k].dtype());
  if (wide) {
    SortLanes<uint64_t>(in, num_keys, lanes, out);
  } else {
    SortLanes<uint32_t>(in, num_keys, lanes, out);
  }
  return out;
}

// The k first of each lane of x by descending total order, lower index first among equals: 32-bit
// keys packed with their index into one integer, 64-bit ones as (key, index) pairs.
template <typename Key>
void TopKLanes(const Tensor& x, int64_t k, const Lanes& lanes, Tensor& values, Tensor& indices) {
  using Packed = std::conditional_t<sizeof(Key) == 4, uint64_t, std::pair<Key, uint32_t>>;
  std::vector<Key> keys;
  std::vector<uint32_t> perm(k);
  std::vector<Packed> packed;
  int32_t* index_out = indices.data_as<int32_t>();
  lanes.ForEach([&](int64_t o, int64_t i) {
    const int64_t base = lanes.Base(o, i, lanes.n);
    LaneKeys(x, base, lanes, false, keys);
    packed.resize(lanes.n);
    for (int64_t j = 0; j < lanes.n; ++j) {
      const Key descending = static_cast<Key>(~keys[j]);
      if constexpr (sizeof(Key) == 4) {
        packed[j] = (uint64_t{descending} << 32) | static_cast<uint32_t>(j);
      } else {
        packed[j] = {descending, static_cast<uint32_t>(j)};
      }
    }
    std::partial_sort(packed.begin(), packed.begin() + k, packed.end());
    const int64_t out_base = lanes.Base(o, i, k);
    for (int64_t j = 0; j < k; ++j) {
      if constexpr (sizeof(Key) == 4) {
        perm[j] = static_cast<uint32_t>(packed[j]);
      } else {
        perm[j] = packed[j].second;
      }
      index_out[out_base + j * lanes.inner] = static_cast<int32_t>(perm[j]);
    }
    GatherLane(x, base, values, out_base, perm, k, lanes.inner);
  });
}

// top_k: the k first of each lane by descending total order, lower index first among equals.
Results TopK(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const ir::TopKAttrs& a = op.top_k();
  const Tensor& x = in[0];
  const Lanes lanes(x.dims(), a.axis());
  const int64_t k = a.k();
  Tensor values = Tensor::Empty(ResultType(op, 0), allocator);
  Tensor indices = Tensor::Empty(ResultType(op, 1), allocator);
  if (values.num_elements() == 0) return std::vector<Tensor>{values, indices};
  if (WideKeys(x.dtype())) {
    TopKLanes<uint64_t>(x, k, lanes, values, indices);
  } else {
    TopKLanes<uint32_t>(x, k, lanes, values, indices);
  }
  return std::vector<Tensor>{values, indices};
}

// argmax (kMax) / argmin: the first NaN of each lane, else the first largest (smallest) value.
template <ReduceKind kKind>
Results ArgMinMax(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& x = in[0];
  const Lanes lanes(x.dims(), op.arg_min_max().axis());
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  std::vector<int64_t> best_index(out.num_elements());
  Dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    const T* p = x.data_as<T>();
    lanes.ForEach([&](int64_t o, int64_t i) {
      const T* lane = p + lanes.Base(o, i, lanes.n);
      C best = C(lane[0]);
      int64_t best_j = 0;
      for (int64_t j = 1; j < lanes.n; ++j) {
        if constexpr (kIsFloat<T>) {
          if (std::isnan(best)) break;
        }
        const C v = C(lane[j * lanes.inner]);
        bool better = kKind == ReduceKind::kMax ? v > best : v < best;
        if constexpr (kIsFloat<T>) better = better || std::isnan(v);
        if (better) {
          best = v;
          best_j = j;
        }
      }
      best_index[o * lanes.inner + i] = best_j;
    });
  });
  // In index_dtype (the shape rule checked that every index fits).
  ir::VisitDType(out.dtype(), [&](auto tag) {
    using I = decltype(tag);
    if constexpr (std::is_integral_v<I>) {
      I* o_ptr = out.data_as<I>();
      for (size_t j = 0; j < best_index.size(); ++j) o_ptr[j] = static_cast<I>(best_index[j]);
    }
  });
  return std::vector<Tensor>{out};
}

// cumsum / cumprod / cummax / cummin: inclusive scans of each lane, from its end with `reverse`.
// Floats accumulate in f32 and round each output; s32 wraps.
template <Reduction kR>
Results Cumulative(const ir::Op& op, const std::vector<Tensor>& in, ir::Allocator* allocator) {
  const Tensor& x = in[0];
  const Lanes lanes(x.dims(), op.cumulative().axis());
  const bool reverse = op.cumulative().reverse();
  Tensor out = Tensor::Empty(ResultType(op), allocator);
  if (out.num_elements() == 0) return std::vector<Tensor>{out};
  Dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    const T* p = x.data_as<T>();
    T* q = out.data_as<T>();
    lanes.ForEach([&](int64_t o, int64_t i) {
      const int64_t base = lanes.Base(o, i, lanes.n);
      C acc{};
      for (int64_t step = 0; step < lanes.n; ++step) {
        const int64_t at = base + (reverse ? lanes.n - 1 - step : step) * lanes.inner;
        acc = step == 0 ? C(p[at]) : Combine<kR>(acc, C(p[at]));
        q[at] = T(acc);
      }
    });
  });
  return std::vector<Tensor>{out};
}

const bool registered = [] {
  RegisterKernel("sort", Sort);
  RegisterKernel("top_k", TopK);
  RegisterKernel("argmax", ArgMinMax<ReduceKind::kMax>);
  RegisterKernel("argmin", ArgMinMax<ReduceKind::kMin>);
  RegisterKernel("cumsum", Cumulative<Reduction::kSum>);
  RegisterKernel("cumprod", Cumulative<Reduction::kProd>);
  RegisterKernel("cummax", Cumulative<Reduction::kMax>);
  RegisterKernel("cummin", Cumulative<Reduction::kMin>);
  return true;
}();

}  // namespace
}  // namespace shardjit::backends::reference
