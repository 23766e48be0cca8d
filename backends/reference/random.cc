// Reference kernel of threefry2x32: the Threefry-2x32 block cipher with 20 rounds (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11), as jax.random's threefry2x32 primitive
// computes it, on s32 arrays that hold uint32 words.
#include <cstdint>
#include <vector>

#include "backends/reference/kernel.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference {
namespace {

using ir::Tensor;

uint32_t RotateLeft(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

// One block: (k0, k1) the key, (x0, x1) the counter.
void Threefry2x32Block(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  constexpr int kRotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  x0 += ks[0];
  x1 += ks[1];
  for (uint32_t injection = 1; injection <= 5; ++injection) {
    for (int r : kRotations[(injection - 1) % 2]) {
      x0 += x1;
      x1 = RotateLeft(x1, r);
      x1 ^= x0;
    }
    x0 += ks[injection % 3];
    x1 += ks[(injection + 1) % 3] + injection;
  }
}

absl::StatusOr<std::vector<Tensor>> Threefry2x32(const ir::Op& op,
                                                 const std::vector<Tensor>& in,
                                                 ir::Allocator* allocator) {
  Tensor y0 = Tensor::Empty(ResultType(op, 0), allocator);
  Tensor y1 = Tensor::Empty(ResultType(op, 1), allocator);
  const auto* k0 = in[0].data_as<uint32_t>();
  const auto* k1 = in[1].data_as<uint32_t>();
  const auto* x0 = in[2].data_as<uint32_t>();
  const auto* x1 = in[3].data_as<uint32_t>();
  auto* o0 = y0.data_as<uint32_t>();
  auto* o1 = y1.data_as<uint32_t>();
  for (int64_t i = 0; i < y0.num_elements(); ++i) {
    uint32_t a = x0[i], b = x1[i];
    Threefry2x32Block(k0[i], k1[i], a, b);
    o0[i] = a;
    o1[i] = b;
  }
  return std::vector<Tensor>{y0, y1};
}

const bool registered = [] {
  RegisterKernel("threefry2x32", Threefry2x32);
  return true;
}();

}  // namespace
}  // namespace shardjit::backends::reference
