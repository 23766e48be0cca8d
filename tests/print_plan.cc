// Prints the lowered plan of every seed variant at the seed's full size on a 2x2 mesh (lowered
// only, nothing runs): the output of one process for tests/plan_determinism_test.cc.
#include <cstdio>

#include "examples/seed_variants.h"
#include "frontend/shardjit.h"

int main() {
  using namespace shardjit;  // NOLINT: a test program
  Runtime rt({.num_devices = 4});
  absl::StatusOr<Mesh> mesh = make_mesh(rt, {{"x", 2}, {"y", 2}});
  if (!mesh.ok()) {
    std::fprintf(stderr, "%s\n", std::string(mesh.status().message()).c_str());
    return 1;
  }
  const std::vector<ShapedType> types = {{DType::kBF16, {2048, 2048}},
                                         {DType::kBF16, {2048, 1024}}};
  const std::vector<NamedSharding> shardings = {NamedSharding(*mesh, P("x", "y")),
                                                NamedSharding(*mesh, P("x", None))};
  for (examples::SeedVariant& v : examples::SeedVariants(*mesh, 2048)) {
    auto lowered = v.program.lower(types, shardings);
    if (!lowered.ok()) {
      std::fprintf(stderr, "variant %s: %s\n", v.name.c_str(),
                   std::string(lowered.status().message()).c_str());
      return 1;
    }
    std::printf("# variant %s\n%s", v.name.c_str(), lowered->as_text().c_str());
  }
  return 0;
}
