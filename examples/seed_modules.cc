// seed_modules: writes the seed variants (examples/seed_variants.h) as module files, traced
// (global view, not yet lowered) for bf16 x[M,K] sharded P('x','y') and w[K,N] sharded
// P('x',None) on an X-by-Y mesh: DIR/seed_a.txt, DIR/seed_b.txt, ... (IR text; .pbtxt or .pb
// with --format=pbtxt or binary). irdump reads them: `irdump DIR/seed_c.txt --lower` prints the
// program jit runs, `--stages` the module after every pass, `--lower --cost` its cost report.
//
//   bazel run //examples:seed_modules -- --out_dir=DIR [--mesh=2x2] [--variants=a,c]
//                                        [--m=2048 --k=2048 --n=1024] [--format=text]
//
// A relative DIR is taken from the directory `bazel run` was started in; it is created if
// missing. Prints the path of each file written. Exit status: 0 ok, 1 a variant that fails to
// trace or a file that cannot be written, 2 bad flag values (absl exits 1 on a flag it cannot
// parse).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "examples/seed_variants.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/io.h"

ABSL_FLAG(std::string, out_dir, "", "the directory to write the modules to (required)");
ABSL_FLAG(std::string, mesh, "2x2", "the mesh, XxY (axes x and y)");
ABSL_FLAG(std::vector<std::string>, variants, {},
          "the variants to write, comma-separated (e.g. a,c; default: all)");
ABSL_FLAG(int64_t, m, 2048, "rows of x");
ABSL_FLAG(int64_t, k, 2048, "columns of x, rows of w (the contracting size)");
ABSL_FLAG(int64_t, n, 1024, "columns of w");
ABSL_FLAG(std::string, format, "text",
          "the files' format: text (IR text, .txt), pbtxt (text proto, .pbtxt) or binary (.pb)");

namespace shardjit::examples {
namespace {

constexpr int kBadFlags = 2;

constexpr char kUsage[] =
    "usage: seed_modules --out_dir=DIR [--mesh=XxY] [--variants=a,c] [--m=M --k=K --n=N]\n"
    "                    [--format=text|pbtxt|binary]\n"
    "Writes the seed variants traced (global view) for bf16 x[M,K] P(x,y) @ w[K,N] P(x,None)\n"
    "as DIR/seed_<variant>.txt (.pbtxt, .pb), for irdump (e.g. irdump DIR/seed_c.txt --lower).\n"
    "  --out_dir=DIR      where to write (created if missing; relative to bazel run's directory)\n"
    "  --mesh=XxY         the mesh (default 2x2)\n"
    "  --variants=LIST    which variants, comma-separated (default: all)\n"
    "  --m, --k, --n      the product's sizes (default 2048, 2048, 1024)\n"
    "  --format=FMT       text (default, .txt), pbtxt (.pbtxt) or binary (.pb)\n";

int UsageError(const std::string& message) {
  fmt::print(stderr, "seed_modules: {}\n{}", message, kUsage);
  return kBadFlags;
}

int Error(const std::string& message) {
  fmt::print(stderr, "seed_modules: error: {}\n", message);
  return 1;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() > 1) return UsageError(fmt::format("unexpected argument {}", args[1]));
  const std::filesystem::path out_dir = absl::GetFlag(FLAGS_out_dir);
  if (out_dir.empty()) return UsageError("no --out_dir");
  // `bazel run` starts the program in its runfiles: a relative path is the user's directory's.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir && chdir(dir) != 0) {
    return Error(fmt::format("cannot enter {}", dir));
  }
  const std::string mesh_flag = absl::GetFlag(FLAGS_mesh);
  const std::vector<std::string> xy = absl::StrSplit(mesh_flag, 'x');
  int64_t size_x = 0, size_y = 0;
  if (xy.size() != 2 || !absl::SimpleAtoi(xy[0], &size_x) || !absl::SimpleAtoi(xy[1], &size_y) ||
      size_x < 1 || size_y < 1) {
    return UsageError(fmt::format("--mesh must be XxY (e.g. 4x4), got \"{}\"", mesh_flag));
  }
  const int64_t m = absl::GetFlag(FLAGS_m), k = absl::GetFlag(FLAGS_k), n = absl::GetFlag(FLAGS_n);
  if (m < 1 || k < 1 || n < 1) {
    return UsageError(fmt::format("--m, --k and --n must be positive, got {}, {}, {}", m, k, n));
  }
  const std::string format_name = absl::GetFlag(FLAGS_format);
  const std::optional<ir::ModuleFormat> format = ir::ParseModuleFormat(format_name);
  if (!format) {
    return UsageError(
        fmt::format("--format must be text, pbtxt or binary, got \"{}\"", format_name));
  }
  const std::string extension(ir::FormatExtension(*format));

  Runtime rt({.num_devices = static_cast<int>(size_x * size_y), .num_threads = 1});
  absl::StatusOr<Mesh> mesh = make_mesh(rt, {{"x", size_x}, {"y", size_y}});
  if (!mesh.ok()) return Error(std::string(mesh.status().message()));
  const std::vector<SeedVariant> variants = SeedVariants(*mesh, k);
  std::vector<std::string> names;
  for (const SeedVariant& v : variants) names.push_back(v.name);
  const std::vector<std::string> wanted_list = absl::GetFlag(FLAGS_variants);
  const std::set<std::string> wanted(wanted_list.begin(), wanted_list.end());
  for (const std::string& name : wanted) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return UsageError(
          fmt::format("no variant \"{}\" (variants: {})", name, absl::StrJoin(names, ",")));
    }
  }
  if (std::error_code error; !std::filesystem::create_directories(out_dir, error) && error) {
    return Error(fmt::format("cannot create {}: {}", out_dir.string(), error.message()));
  }
  for (const SeedVariant& v : variants) {
    if (!wanted.empty() && !wanted.contains(v.name)) continue;
    auto lowered =
        v.program.lower({{DType::kBF16, {m, k}}, {DType::kBF16, {k, n}}},
                        {NamedSharding(*mesh, P("x", "y")), NamedSharding(*mesh, P("x", None))});
    if (!lowered.ok()) {
      return Error(fmt::format("seed_{}: {}", v.name, lowered.status().message()));
    }
    const std::string path = (out_dir / ("seed_" + v.name + extension)).string();
    if (absl::Status s = ir::WriteModuleFile(lowered->traced_module(), path); !s.ok()) {
      return Error(std::string(s.message()));
    }
    fmt::print("{}\n", path);
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace
}  // namespace shardjit::examples

int main(int argc, char** argv) { return shardjit::examples::Main(argc, argv); }
