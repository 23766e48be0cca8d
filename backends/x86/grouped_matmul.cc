#include "backends/x86/grouped_matmul.h"

#include <algorithm>
#include <mutex>

#include "absl/status/status.h"
#include "backends/grouped_rows.h"
#include "backends/reference/kernel.h"
#include "backends/x86/gemm.h"
#include "backends/x86/zero_fill.h"
#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "ir/dtype.h"
#include "ir/prim.h"

namespace shardjit::backends::x86 {
namespace {

using ir::DType;
using ir::Tensor;

// Blocks narrower than this re-pack too much of the other operand per flop.
constexpr int64_t kMinBlock = 128;
// Blocks per thread: enough for the largest-first order to even out unequal groups.
constexpr int64_t kBlocksPerThread = 4;
// A block below this many flops is not split further (~10 us of work).
constexpr int64_t kMinBlockFlops = int64_t{1} << 21;

// One GEMM of a group: rows [i0, i0 + m) and columns [j0, j0 + n) of the group's product.
struct Block {
  int64_t group = 0;
  int64_t i0 = 0, m = 0, j0 = 0, n = 0;
  int64_t flops = 0;
};

// One group's product: rows x cols at depth `depth`.
struct Product {
  int64_t rows = 0, cols = 0, depth = 0;
};

// Splits each group's product into blocks, columns first (the rhs is packed once either way; the
// lhs rows are re-packed per column block), then rows, until the blocks are small enough to
// spread over `threads`; largest first. A product with no output element gives no block; one of
// depth 0 gives one block, whose GEMM zeroes it.
std::vector<Block> MakeBlocks(const std::vector<Product>& products, int threads) {
  int64_t total = 0;
  for (const Product& p : products) total += 2 * p.rows * p.cols * p.depth;
  const int64_t target =
      std::max(kMinBlockFlops, total / (kBlocksPerThread * std::max(threads, 1)));
  std::vector<Block> blocks;
  for (size_t g = 0; g < products.size(); ++g) {
    const Product& p = products[g];
    if (p.rows == 0 || p.cols == 0) continue;
    const int64_t flops = 2 * p.rows * p.cols * p.depth;
    const int64_t pieces = threads <= 1 ? 1 : std::max<int64_t>(1, (flops + target - 1) / target);
    const int64_t col_pieces =
        std::clamp<int64_t>(pieces, 1, std::max<int64_t>(1, p.cols / kMinBlock));
    const int64_t row_pieces = std::clamp<int64_t>((pieces + col_pieces - 1) / col_pieces, 1,
                                                   std::max<int64_t>(1, p.rows / kMinBlock));
    for (int64_t ci = 0; ci < col_pieces; ++ci) {
      // Inner column edges on multiples of 16 (a vector of f32 lanes at most).
      const int64_t j0 = p.cols * ci / col_pieces / 16 * 16;
      const int64_t j1 = ci + 1 == col_pieces ? p.cols : p.cols * (ci + 1) / col_pieces / 16 * 16;
      for (int64_t ri = 0; ri < row_pieces; ++ri) {
        const int64_t i0 = p.rows * ri / row_pieces, i1 = p.rows * (ri + 1) / row_pieces;
        if (j1 > j0 && i1 > i0) {
          blocks.push_back({static_cast<int64_t>(g), i0, i1 - i0, j0, j1 - j0,
                            2 * (i1 - i0) * (j1 - j0) * p.depth});
        }
      }
    }
  }
  std::stable_sort(blocks.begin(), blocks.end(),
                   [](const Block& a, const Block& b) { return a.flops > b.flops; });
  return blocks;
}

// Runs `blocks` over the device's threads; `args_of(block)` gives each block's GEMM.
template <typename ArgsOf>
absl::Status RunBlocks(const std::vector<Block>& blocks, ArgsOf args_of) {
  std::mutex mu;
  absl::Status status;
  const base::Parallelism parallel = base::CurrentParallelism();
  parallel.ParallelFor(static_cast<int>(blocks.size()), [&](int i) {
    GemmArgs args = args_of(blocks[i]);
    args.parallel.stop = parallel.stop;  // one thread per block; it polls the program's signal
    absl::Status s = Gemm(args);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (status.ok()) status = s;
    }
  });
  return status;
}

const char* At(const Tensor& t, int64_t elements) {
  return static_cast<const char*>(t.data()) + elements * ir::DTypeSize(t.dtype());
}
char* At(Tensor& t, int64_t elements) {
  return static_cast<char*>(t.data()) + elements * ir::DTypeSize(t.dtype());
}

GemmArgs BaseArgs(const Tensor& lhs, const Tensor& out) {
  GemmArgs args;
  args.type = lhs.dtype() == DType::kBF16 ? GemmType::kBf16Bf16F32 : GemmType::kF32F32F32;
  args.out_bf16 = out.dtype() == DType::kBF16;
  return args;
}

absl::StatusOr<std::vector<Tensor>> Gmm(const ir::Op& op, const std::vector<Tensor>& in,
                                        ir::Allocator* allocator) {
  const Tensor& lhs = in[0];
  const Tensor& rhs = in[1];
  const int64_t m = lhs.dims()[0], k = lhs.dims()[1];
  const bool transposed = op.grouped_matmul().transpose_rhs();
  const int64_t n = rhs.dims()[transposed ? 1 : 2];
  ASSIGN_OR_RETURN(GroupedRows groups, ReadGroupedRows(op, in, m, rhs.dims()[0]));
  Tensor out = Tensor::Empty(reference::ResultType(op), allocator);
  // Rows outside the local groups are zeros; every row inside is written by its group's GEMM.
  const int64_t out_elem = ir::DTypeSize(out.dtype());
  ZeroRows(out.data(), groups.starts.front(), n * out_elem, n * out_elem);
  ZeroRows(At(out, groups.starts.back() * n), m - groups.starts.back(), n * out_elem, n * out_elem);
  std::vector<Product> products;
  for (int64_t g = 0; g < groups.local_groups(); ++g) products.push_back({groups.rows(g), n, k});
  const std::vector<Block> blocks = MakeBlocks(products, base::CurrentParallelism().available());
  const GemmArgs base = BaseArgs(lhs, out);
  RETURN_IF_ERROR(RunBlocks(blocks, [&](const Block& b) {
    const int64_t row = groups.starts[b.group] + b.i0;
    GemmArgs args = base;
    args.shape = {b.m, b.n, k};
    args.a = At(lhs, row * k);
    args.a_row_stride = k;
    // rhs[g] is [k, n], or [n, k] read transposed.
    args.b = At(rhs, b.group * k * n + b.j0 * (transposed ? k : 1));
    args.b_row_stride = transposed ? 1 : n;
    args.b_col_stride = transposed ? k : 1;
    args.c = At(out, row * n + b.j0);
    args.ldc = n;
    return args;
  }));
  return std::vector<Tensor>{out};
}

absl::StatusOr<std::vector<Tensor>> Tgmm(const ir::Op& op, const std::vector<Tensor>& in,
                                         ir::Allocator* allocator) {
  const Tensor& lhs = in[0];
  const Tensor& rhs = in[1];
  const int64_t k = lhs.dims()[0], m = lhs.dims()[1], n = rhs.dims()[1];
  ASSIGN_OR_RETURN(GroupedRows groups,
                   ReadGroupedRows(op, in, m, op.grouped_matmul().num_actual_groups()));
  Tensor out = Tensor::Empty(reference::ResultType(op), allocator);
  // out[g] = lhs[:, group g's rows] @ rhs[those rows, :]: a k x n product of depth rows(g) (an
  // empty group's GEMM, of depth 0, zeroes its block); the blocks split k and n, never the depth.
  std::vector<Product> products;
  for (int64_t g = 0; g < groups.local_groups(); ++g) products.push_back({k, n, groups.rows(g)});
  const std::vector<Block> blocks = MakeBlocks(products, base::CurrentParallelism().available());
  const GemmArgs base = BaseArgs(lhs, out);
  RETURN_IF_ERROR(RunBlocks(blocks, [&](const Block& b) {
    const int64_t start = groups.starts[b.group];
    GemmArgs args = base;
    args.shape = {b.m, b.n, groups.rows(b.group)};
    args.a = At(lhs, b.i0 * m + start);
    args.a_row_stride = m;
    args.b = At(rhs, start * n + b.j0);
    args.b_row_stride = n;
    args.c = At(out, (b.group * k + b.i0) * n + b.j0);
    args.ldc = n;
    return args;
  }));
  return std::vector<Tensor>{out};
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> GroupedMatmul(const ir::Op& op,
                                                  const std::vector<Tensor>& operands,
                                                  ir::Allocator* allocator) {
  RETURN_IF_ERROR(reference::CheckOperandTypes(op, operands));
  return ir::PrimOf(op) == ir::Prim::kGmm ? Gmm(op, operands, allocator)
                                          : Tgmm(op, operands, allocator);
}

}  // namespace shardjit::backends::x86
