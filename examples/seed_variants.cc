#include "examples/seed_variants.h"

namespace shardjit::examples {
namespace {

const std::vector<PartitionSpec>& InSpecs() {
  static const auto* specs = new std::vector<PartitionSpec>{P("x", "y"), P("x", None)};
  return *specs;
}

// The rows of the gathered w this device multiplies: its block of x's columns.
Tracer LocalMatmulAndPsum(Tracer x_shard, Tracer w_full, int64_t k_per_y, DType preferred) {
  Tracer w_slice = dynamic_slice(w_full, {axis_index("y") * static_cast<double>(k_per_y), 0},
                                 {k_per_y, w_full.shape()[1]});
  return psum(dot_general(x_shard, w_slice, DotDims{{1}, {0}}, preferred), "y");
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

  variants.push_back({"a", "jit(matmul) on sharded inputs (global view, SPMD-partitioned)",
                      jit([](Tracer x, Tracer w) { return matmul(x, w); },
                          options("basic_matmul"))});

  variants.push_back(
      {"b", "shard_map: all_gather x over y and w over x, local matmul",
       jit(shard_map(
               [](Tracer x, Tracer w) {
                 NamedScope scope("all_gather(s)");
                 Tracer x_full = all_gather(x, "y", /*axis=*/1, /*tiled=*/true);
                 Tracer w_full = all_gather(w, "x", /*axis=*/0, /*tiled=*/true);
                 NamedScope dot("dot");
                 return matmul(x_full, w_full);
               },
               mesh, InSpecs(), {P("x", None)}),
           options("xla_matmul"))});

  variants.push_back(
      {"c", "all_gather w, dynamic_slice by axis_index(y), matmul, psum over y",
       jit(shard_map(
               [k_per_y](Tracer x, Tracer w) {
                 Tracer w_full = all_gather(w, "x", 0, true);
                 return LocalMatmulAndPsum(x, w_full, k_per_y, DType::kInvalid);
               },
               mesh, InSpecs(), {P("x", None)}),
           options("xla_matmul2"))});

  variants.push_back(
      {"d", "(c) with preferred_element_type=f32",
       jit(shard_map(
               [k_per_y](Tracer x, Tracer w) {
                 Tracer w_full = all_gather(w, "x", 0, true);
                 return LocalMatmulAndPsum(x, w_full, k_per_y, DType::kF32);
               },
               mesh, InSpecs(), {P("x", None)}),
           options("xla_matmul3"))});

  variants.push_back(
      {"e", "ring all_gather of w (ppermute in fori_loop), matmul f32, psum over y",
       jit(shard_map(
               [size_x, k_per_x, k_per_y, k](Tracer x, Tracer w) {
                 std::vector<std::pair<int64_t, int64_t>> right;
                 for (int64_t i = 0; i < size_x; ++i) right.push_back({i, (i + 1) % size_x});
                 Tracer me = axis_index("x");
                 Tracer buffer = dynamic_update_slice(full({k, w.shape()[1]}, 0, w.dtype()), w,
                                                      {me * static_cast<double>(k_per_x), 0});
                 std::vector<Tracer> carry = fori_loop(
                     0, size_x - 1,
                     [&](Tracer i, std::vector<Tracer> c) {
                       Tracer received = ppermute(c[1], "x", right);
                       // After i+1 hops the block came from device (me - i - 1) mod size_x.
                       Tracer source = (me - (i + 1.0) + static_cast<double>(size_x)) %
                                       static_cast<double>(size_x);
                       Tracer filled = dynamic_update_slice(
                           c[0], received, {source * static_cast<double>(k_per_x), 0});
                       return std::vector<Tracer>{filled, received};
                     },
                     {buffer, w});
                 return LocalMatmulAndPsum(x, carry[0], k_per_y, DType::kF32);
               },
               mesh, InSpecs(), {P("x", None)}),
           options("ring_allgather_matmul"))});
  return variants;
}

}  // namespace shardjit::examples
