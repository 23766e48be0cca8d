#include "examples/seed_variants.h"

#include <algorithm>

#include "examples/kernels/blocked_matmul.h"
#include "examples/kernels/ring_all_gather.h"

namespace shardjit::examples {
namespace {

const std::vector<PartitionSpec>& InSpecs() {
  static const auto* specs = new std::vector<PartitionSpec>{P("x", "y"), P("x", None)};
  return *specs;
}

// The rows of the gathered w this device multiplies: its block of x's columns.
Tracer LocalMatmulAndPsum(Tracer x_shard, Tracer w_full, int64_t k_per_y, DType preferred) {
  Tracer w_slice =
      lax::dynamic_slice(w_full, {lax::axis_index("y") * k_per_y, 0},
                         {k_per_y, w_full.shape()[1]});
  return lax::psum(lax::dot_general(x_shard, w_slice, DotDims{{1}, {0}}, preferred), "y");
}

// The notebook's to-do done by hand on a 2-D mesh: device (i, j) fetches the block of w its
// columns of x meet (w[j*k_per_y:...], held by every device with x index j: on a square mesh
// device (j, i) sends it, started at once and awaited when first needed), then sums its partial
// products over y with a ring that scatters the result's columns over y: at step s it computes
// its product for column block (j - 1 - s) mod ny while the running sum of the previous block
// travels to the right neighbour, then adds what it received. After ny - 1 hops it holds its
// rows' column block j, summed over y, in f32.
Tracer InterleavedReduceScatterMatmul(Tracer x, Tracer w, int64_t size_x, int64_t size_y) {
  const int64_t k_per_y = x.shape()[1];
  const int64_t n = w.shape()[1];
  Tracer w_block;
  if (size_x == size_y && w.shape()[0] == k_per_y) {
    // Over (x, y), index x * size_y + y: (j, i) holds the block (i, j) needs.
    std::vector<std::pair<int64_t, int64_t>> transpose;
    for (int64_t i = 0; i < size_x; ++i) {
      for (int64_t j = 0; j < size_y; ++j) transpose.push_back({j * size_y + i, i * size_y + j});
    }
    w_block = lax::ppermute_done(lax::ppermute_start(w, {"x", "y"}, transpose));
  } else {
    w_block =
        lax::dynamic_slice(lax::all_gather(w, "x", 0, true),
                           {lax::axis_index("y") * k_per_y, 0}, {k_per_y, n});
  }
  if (size_y == 1) return lax::dot_general(x, w_block, DotDims{{1}, {0}}, DType::kF32);
  const int64_t cols = n / size_y;
  std::vector<std::pair<int64_t, int64_t>> right;
  for (int64_t j = 0; j < size_y; ++j) right.push_back({j, (j + 1) % size_y});
  Tracer me = lax::axis_index("y");
  // My product for the column block the running sum meets at `step`: (me - 1 - step) mod ny.
  auto partial = [&](Tracer step) {
    Tracer block = (me - step + 2 * size_y - 1) % size_y;
    return lax::dot_general(
        x, lax::dynamic_slice(w_block, {0, block * cols}, {k_per_y, cols}),
        DotDims{{1}, {0}}, DType::kF32);
  };
  Tracer in_flight = lax::ppermute_start(partial(lax::full({}, 0, DType::kS32)), "y", right);
  std::vector<Tracer> carry =
      lax::fori_loop(1, size_y - 1,
                     [&](Tracer step, std::vector<Tracer> c) {
                       Tracer mine = partial(step);  // while the running sum travels
                       return std::vector<Tracer>{
                           lax::ppermute_start(lax::ppermute_done(c[0]) + mine, "y", right)};
                     },
                     {in_flight});
  Tracer mine = partial(lax::full({}, static_cast<double>(size_y - 1), DType::kS32));
  return lax::ppermute_done(carry[0]) + mine;
}

}  // namespace

std::vector<SeedVariant> SeedVariants(const Mesh& mesh, int64_t k, Backend backend,
                                      const std::set<std::string>& disabled_passes) {
  auto options = [&](const char* name) {
    JitOptions o{.name = name, .backend = backend};
    o.pipeline.disabled = disabled_passes;
    return o;
  };
  const int64_t size_x = mesh.axis_size("x");
  const int64_t k_per_y = k / mesh.axis_size("y");
  const int64_t k_per_x = k / size_x;
  std::vector<SeedVariant> variants;

  variants.push_back(
      {"a", "jit(matmul) on sharded inputs (global view, SPMD-partitioned)",
       jit([](Tracer x, Tracer w) { return jnp::matmul(x, w); }, options("basic_matmul"))});

  variants.push_back(
      {"b", "shard_map: all_gather x over y and w over x, local matmul",
       jit(shard_map(
               [](Tracer x, Tracer w) {
                 NamedScope scope("all_gather(s)");
                 Tracer x_full = lax::all_gather(x, "y", /*axis=*/1, /*tiled=*/true);
                 Tracer w_full = lax::all_gather(w, "x", /*axis=*/0, /*tiled=*/true);
                 NamedScope dot("dot");
                 return jnp::matmul(x_full, w_full);
               },
               mesh, InSpecs(), {P("x", None)}, /*check_vma=*/false),
           options("xla_matmul"))});

  variants.push_back({"c", "all_gather w, dynamic_slice by axis_index(y), matmul, psum over y",
                      jit(shard_map(
                              [k_per_y](Tracer x, Tracer w) {
                                Tracer w_full = lax::all_gather(w, "x", 0, true);
                                return LocalMatmulAndPsum(x, w_full, k_per_y, DType::kInvalid);
                              },
                              mesh, InSpecs(), {P("x", None)}, /*check_vma=*/false),
                          options("xla_matmul2"))});

  variants.push_back({"d", "(c) with preferred_element_type=f32",
                      jit(shard_map(
                              [k_per_y](Tracer x, Tracer w) {
                                Tracer w_full = lax::all_gather(w, "x", 0, true);
                                return LocalMatmulAndPsum(x, w_full, k_per_y, DType::kF32);
                              },
                              mesh, InSpecs(), {P("x", None)}, /*check_vma=*/false),
                          options("xla_matmul3"))});

  variants.push_back(
      {"e", "ring all_gather of w (ppermute in fori_loop), matmul f32, psum over y",
       jit(shard_map(
               [size_x, k_per_x, k_per_y, k](Tracer x, Tracer w) {
                 std::vector<std::pair<int64_t, int64_t>> right;
                 for (int64_t i = 0; i < size_x; ++i) right.push_back({i, (i + 1) % size_x});
                 Tracer me = lax::axis_index("x");
                 Tracer buffer =
                     lax::dynamic_update_slice(lax::full({k, w.shape()[1]}, 0, w.dtype()), w,
                                               {me * k_per_x, 0});
                 std::vector<Tracer> carry = lax::fori_loop(
                     0, size_x - 1,
                     [&](Tracer i, std::vector<Tracer> c) {
                       Tracer received = lax::ppermute(c[1], "x", right);
                       // After i+1 hops the block came from device (me - i - 1) mod size_x.
                       Tracer source = (me - (i + 1) + size_x) %
                                       size_x;
                       Tracer filled = lax::dynamic_update_slice(
                           c[0], received, {source * k_per_x, 0});
                       return std::vector<Tracer>{filled, received};
                     },
                     {buffer, w});
                 return LocalMatmulAndPsum(x, carry[0], k_per_y, DType::kF32);
               },
               mesh, InSpecs(), {P("x", None)}, /*check_vma=*/false),
           options("ring_allgather_matmul"))});
  variants.push_back(
      {"f", "by hand: fetch w's block (ppermute_start), psum over y as a reduce-scatter ring "
            "interleaved with the matmul (futures carried through fori_loop), out P(x,y)",
       jit(shard_map(
               [size_x, size_y = mesh.axis_size("y")](Tracer x, Tracer w) {
                 return InterleavedReduceScatterMatmul(x, w, size_x, size_y);
               },
               mesh, InSpecs(), {P("x", "y")}, /*check_vma=*/false),
           options("interleaved_matmul"))});
  variants.push_back(
      {"g", "all_gather w, dynamic_slice by axis_index(y), the blocked Pallas matmul (128^3 "
            "blocks, f32 out), psum over y",
       jit(shard_map(
               [k_per_y](Tracer x, Tracer w) {
                 Tracer w_full = lax::all_gather(w, "x", 0, true);
                 const int64_t m = x.shape()[0], n = w.shape()[1];
                 Tracer w_slice = lax::dynamic_slice(w_full, {lax::axis_index("y") * k_per_y, 0},
                                                     {k_per_y, n});
                 const MatmulBlocks blocks{std::min<int64_t>(128, m),
                                           std::min<int64_t>(128, k_per_y),
                                           std::min<int64_t>(128, n)};
                 return lax::psum(BlockedMatmul(m, k_per_y, n, blocks)(x, w_slice)[0], "y");
               },
               mesh, InSpecs(), {P("x", None)}, /*check_vma=*/false),
           options("pallas_matmul"))});
  variants.push_back(
      {"h", "the notebook's ring all-gather of w by remote DMA, a user kernel (the cell JAX "
            "cannot run on a 2-D mesh), dynamic_slice by axis_index(y), matmul f32, psum over y",
       jit(shard_map(
               [size_x, k_per_y](Tracer x, Tracer w) {
                 Tracer w_full = RingAllGather(w.type(), "x", size_x)(w)[0];
                 return LocalMatmulAndPsum(x, w_full, k_per_y, DType::kF32);
               },
               mesh, InSpecs(), {P("x", None)}, /*check_vma=*/false),
           options("ring_dma_matmul"))});
  return variants;
}

}  // namespace shardjit::examples
