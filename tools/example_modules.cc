#include "tools/example_modules.h"

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "examples/seed_variants.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"

namespace shardjit::tools {
namespace {

constexpr int64_t kRows = 2048;
constexpr int64_t kContracting = 2048;
constexpr int64_t kCols = 1024;

}  // namespace

std::vector<std::string> ExampleNames() {
  return {"seed_a", "seed_b", "seed_c", "seed_d", "seed_e"};
}

absl::StatusOr<ir::Module> TracedExample(std::string_view name, int64_t size_x, int64_t size_y) {
  Runtime rt({.num_devices = static_cast<int>(size_x * size_y), .num_threads = 1});
  absl::StatusOr<Mesh> mesh = Mesh::Create(rt, {{"x", size_x}, {"y", size_y}});
  if (!mesh.ok()) return mesh.status();
  for (const examples::SeedVariant& v : examples::SeedVariants(*mesh, kContracting)) {
    if (name != "seed_" + v.name) continue;
    absl::StatusOr<Lowered> lowered = v.program.LowerFor(
        {{DType::kBF16, {kRows, kContracting}}, {DType::kBF16, {kContracting, kCols}}},
        {NamedSharding(*mesh, P("x", "y")), NamedSharding(*mesh, P("x", None))});
    if (!lowered.ok()) return lowered.status();
    return lowered->traced_module();
  }
  return absl::NotFoundError(fmt::format("no example \"{}\" (examples: {})", name,
                                         absl::StrJoin(ExampleNames(), ", ")));
}

}  // namespace shardjit::tools
