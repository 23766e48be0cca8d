#include "frontend/dtypes.h"

#include <array>
#include <bit>
#include <cstdint>
#include <utility>

namespace shardjit::jnp {
namespace {

// The lattice's nodes: every dtype (by its enum value) and the weak kinds.
constexpr int kNumDTypes = 14;  // DType values 0..13
constexpr int kWeakInt = kNumDTypes;
constexpr int kWeakFloat = kNumDTypes + 1;
constexpr int kNumNodes = kNumDTypes + 2;

constexpr int Node(DType d) { return static_cast<int>(d); }

// Each node's direct successors, as in jax._src.dtypes' lattice (x64, no complex types).
constexpr std::pair<int, int> kEdges[] = {
    {Node(DType::kPred), kWeakInt},     {kWeakInt, Node(DType::kU8)},
    {kWeakInt, Node(DType::kS8)},       {Node(DType::kU8), Node(DType::kU16)},
    {Node(DType::kU16), Node(DType::kU32)}, {Node(DType::kU32), Node(DType::kU64)},
    {Node(DType::kU8), Node(DType::kS16)},  {Node(DType::kU16), Node(DType::kS32)},
    {Node(DType::kU32), Node(DType::kS64)}, {Node(DType::kS8), Node(DType::kS16)},
    {Node(DType::kS16), Node(DType::kS32)}, {Node(DType::kS32), Node(DType::kS64)},
    {Node(DType::kU64), kWeakFloat},    {Node(DType::kS64), kWeakFloat},
    {kWeakFloat, Node(DType::kBF16)},   {kWeakFloat, Node(DType::kF16)},
    {Node(DType::kBF16), Node(DType::kF32)}, {Node(DType::kF16), Node(DType::kF32)},
    {Node(DType::kF32), Node(DType::kF64)},
};

// Bit j of kUpper[i]: node j is reachable from node i (i itself included).
constexpr std::array<uint32_t, kNumNodes> UpperSets() {
  std::array<uint32_t, kNumNodes> upper{};
  for (int i = 0; i < kNumNodes; ++i) upper[i] = 1u << i;
  for (int round = 0; round < kNumNodes; ++round) {
    for (const auto& [from, to] : kEdges) upper[from] |= upper[to];
  }
  return upper;
}
constexpr std::array<uint32_t, kNumNodes> kUpper = UpperSets();

// The least upper bound of two nodes: the common upper bound whose own upper set is all of them.
int LeastUpperBound(int a, int b) {
  const uint32_t common = kUpper[a] & kUpper[b];
  for (int n = 0; n < kNumNodes; ++n) {
    if ((common >> n & 1u) && kUpper[n] == common) return n;
  }
  return Node(DType::kInvalid);
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == DType::kInvalid || b == DType::kInvalid) return DType::kInvalid;
  const int n = LeastUpperBound(Node(a), Node(b));
  // Two strong types meet at the weak float only past the 64-bit integers: f64.
  if (n == kWeakFloat) return DType::kF64;
  return static_cast<DType>(n);
}

DType promote_weak(DType x, WeakKind c) {
  if (x == DType::kInvalid) return DType::kInvalid;
  const int n = LeastUpperBound(Node(x), c == WeakKind::kInt ? kWeakInt : kWeakFloat);
  if (n == kWeakInt) return DType::kS32;
  if (n == kWeakFloat) return DType::kF32;
  return static_cast<DType>(n);
}

}  // namespace shardjit::jnp
