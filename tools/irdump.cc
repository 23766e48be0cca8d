// irdump: prints the IR of a module file, after the lowering pipeline on request.
//
//   irdump MODULE_FILE [--format=text|pbtxt|binary] [--verify=true|false] [--locations]
//          [--transform=jvp|vjp] [--lower] [--stages] [--cost] [--dump_to=DIR] [--out=FILE]
//
// A module file is binary (.pb/.binpb), text proto (.pbtxt) or IR text (anything else). It is
// printed as loaded unless --lower, --stages or --dump_to ask for the pipeline
// (passes::DefaultPipeline, jit's) to run on it; --transform first replaces its entry by the
// entry's JVP or VJP (ir/autodiff.h). The module printed, and written by --out (format
// by extension), is the final one. --cost prints the final module's cost report
// (passes/cost_analysis.h) instead of the module. The seed programs as module files to read:
// `bazel run //examples:seed_modules -- --out_dir=DIR`. Under `bazel run`, relative paths are
// taken from the directory it was started in.
//
// Exit status: 0 ok, 1 bad input (unreadable or unparsable file, failed verification or pass),
// 2 bad flags.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "frontend/lowering.h"
#include "fmt/format.h"
#include "ir/autodiff.h"
#include "ir/fmt_absl.h"
#include "ir/io.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/cost_analysis.h"
#include "passes/pipeline.h"
#include "tools/flags.h"

ABSL_FLAG(std::string, format, "",
          "what to print: text (the default), pbtxt, or binary (not to a terminal)");
ABSL_FLAG(bool, verify, true, "verify the module, and after each pass (--noverify: not)");
ABSL_FLAG(bool, locations, false, "print source locations in IR text");
ABSL_FLAG(std::string, transform, "",
          "replace the entry by its jvp ((primals, tangents) -> (results, tangents)) or vjp "
          "((primals, result cotangents) -> (results, input cotangents))");
ABSL_FLAG(bool, lower, false, "run the lowering pipeline on the module");
ABSL_FLAG(bool, stages, false,
          "print the module after every pipeline stage (IR text), with timings");
ABSL_FLAG(bool, cost, false, "print the final module's flops and bytes communicated per device");
ABSL_FLAG(shardjit::Backend, backend, shardjit::DefaultBackend(),
          "the backend whose machine model prices the plan and whose kernels run it: x86 or "
          "reference (default: $SHARDJIT_BACKEND, else x86)");
ABSL_FLAG(std::string, dump_to, "",
          "write the module after every pipeline stage to this directory as .txt and .pbtxt");
ABSL_FLAG(std::string, out, "",
          "write the final module to this file (format by extension); with --out the module is "
          "printed only when --format is given");

namespace shardjit::tools {
namespace {

constexpr int kBadInput = 1;
constexpr int kBadFlags = 2;

constexpr char kUsage[] =
    "usage: irdump MODULE_FILE [options]\n"
    "  MODULE_FILE        .pb/.binpb binary, .pbtxt text proto, anything else IR text (the seed\n"
    "                     programs: bazel run //examples:seed_modules -- --out_dir=DIR)\n"
    "  --format=FMT       what to print: text (default), pbtxt, or binary (not to a terminal)\n"
    "  --verify[=BOOL]    verify the module and after each pass (default true; --noverify)\n"
    "  --locations        print source locations in IR text\n"
    "  --transform=T      jvp or vjp: replace the entry by its JVP ((primals, tangents) ->\n"
    "                     (results, tangents)) or VJP ((primals, result cotangents) ->\n"
    "                     (results, input cotangents)) before anything else\n"
    "  --lower            run the lowering pipeline (jit's) on the module\n"
    "  --stages           print the module after every pipeline stage (IR text), with timings\n"
    "  --cost             print the final module's flops and bytes communicated per device\n"
    "  --backend=NAME     x86 or reference: the machine model the plan is priced by (default\n"
    "                     $SHARDJIT_BACKEND, else x86), as jit lowers for that backend\n"
    "  --dump_to=DIR      write the module after every stage to DIR as .txt and .pbtxt\n"
    "  --out=FILE         write the final module to FILE (format by extension); with --out the\n"
    "                     module is printed only when --format is given\n"
    "exit status: 0 ok, 1 bad input, 2 bad flags\n";

struct Flags {
  std::string file;
  std::optional<ir::ModuleFormat> format;
  bool verify = true;
  bool locations = false;
  std::optional<ir::AdTransform> transform;
  bool lower = false;
  bool stages = false;
  bool cost = false;
  std::string dump_to;
  std::string out;
  Backend backend = Backend::kX86;
};

int UsageError(const std::string& message) {
  fmt::print(stderr, "irdump: {}\n{}", message, kUsage);
  return kBadFlags;
}

int InputError(const std::string& message) {
  fmt::print(stderr, "irdump: error: {}\n", message);
  return kBadInput;
}

// The parsed flags and positional arguments (`args`, argv[0] first) into `flags`; returns an
// error message for bad flags.
std::optional<std::string> ReadFlags(const std::vector<char*>& args, Flags& flags) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (!flags.file.empty()) return fmt::format("more than one module file: {}", args[i]);
    flags.file = args[i];
  }
  if (flags.file.empty()) return std::string("no MODULE_FILE");
  if (const std::string format = absl::GetFlag(FLAGS_format); !format.empty()) {
    flags.format = ir::ParseModuleFormat(format);
    if (!flags.format) {
      return fmt::format("--format must be text, pbtxt or binary, got \"{}\"", format);
    }
  }
  flags.verify = absl::GetFlag(FLAGS_verify);
  flags.locations = absl::GetFlag(FLAGS_locations);
  if (const std::string t = absl::GetFlag(FLAGS_transform); !t.empty()) {
    flags.transform = ir::ParseAdTransform(t);
    if (!flags.transform) return fmt::format("--transform must be jvp or vjp, got \"{}\"", t);
  }
  flags.lower = absl::GetFlag(FLAGS_lower);
  flags.stages = absl::GetFlag(FLAGS_stages);
  flags.cost = absl::GetFlag(FLAGS_cost);
  flags.dump_to = absl::GetFlag(FLAGS_dump_to);
  flags.out = absl::GetFlag(FLAGS_out);
  flags.backend = absl::GetFlag(FLAGS_backend);
  if (flags.stages && flags.format && *flags.format != ir::ModuleFormat::kText) {
    return std::string("--stages prints IR text; it takes no other --format");
  }
  if (flags.cost && (flags.stages || flags.format)) {
    return std::string("--cost prints a report; it takes no --stages or --format");
  }
  if (flags.format == ir::ModuleFormat::kBinary && flags.out.empty() && isatty(STDOUT_FILENO)) {
    return std::string("--format=binary goes to a file: redirect stdout or use --out=FILE.pb");
  }
  return std::nullopt;
}

std::string StageHeader(int index, const passes::StageRecord& stage) {
  if (index == 0) return fmt::format("# --- stage 0: {} ---", stage.pass);
  std::string what = stage.skipped ? "disabled" : stage.changed ? "changed" : "unchanged";
  return fmt::format("# --- stage {}: {} ({}, {:.3f} ms) ---", index, stage.pass, what,
                     absl::ToDoubleMilliseconds(stage.time));
}

void PrintStages(const std::vector<passes::StageRecord>& stages) {
  absl::Duration total;
  for (size_t i = 0; i < stages.size(); ++i) {
    fmt::print("{}\n{}", StageHeader(static_cast<int>(i), stages[i]), stages[i].text);
    if (stages[i].text.empty() || stages[i].text.back() != '\n') fmt::print("\n");
    total += stages[i].time;
  }
  fmt::print("# --- pipeline total: {:.3f} ms ---\n", absl::ToDoubleMilliseconds(total));
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<char*> args = ParseCommandLine(argc, argv, kBadFlags);
  // `bazel run` starts the program in its runfiles: relative paths are the user's directory's.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir && chdir(dir) != 0) {
    return InputError(fmt::format("cannot enter {}", dir));
  }
  Flags flags;
  if (std::optional<std::string> error = ReadFlags(args, flags)) return UsageError(*error);

  // The input module, as loaded.
  absl::StatusOr<ir::Module> module = ir::ReadModuleFile(flags.file);
  if (!module.ok()) return InputError(std::string(module.status().message()));
  const std::string& source = flags.file;
  if (flags.verify) {
    if (absl::Status s = ir::VerifyModule(*module); !s.ok()) {
      return InputError(fmt::format("{}: verification failed: {}", source, s.message()));
    }
  }
  if (flags.transform) {
    absl::StatusOr<ir::Module> transformed = ir::TransformModule(*module, *flags.transform);
    if (!transformed.ok()) {
      return InputError(fmt::format("{}: {}", source, transformed.status().message()));
    }
    *module = *std::move(transformed);
    if (flags.verify) {
      if (absl::Status s = ir::VerifyModule(*module); !s.ok()) {
        return InputError(fmt::format("{}: the transformed module fails verification: {}",
                                      source, s.message()));
      }
    }
  }

  std::vector<passes::StageRecord> stages;
  if (flags.lower || flags.stages || !flags.dump_to.empty()) {
    // jit's lowering (frontend/lowering.h): the same passes, priced by the same machine model.
    LoweringOptions options{.backend = flags.backend};
    options.pipeline.verify_each = flags.verify;
    options.pipeline.dump_dir = flags.dump_to;
    if (absl::Status s = LowerModule(*module, options, &stages); !s.ok()) {
      return InputError(fmt::format("{}: {}", source, s.message()));
    }
  }

  if (!flags.out.empty()) {
    if (absl::Status s = ir::WriteModuleFile(*module, flags.out); !s.ok()) {
      return InputError(std::string(s.message()));
    }
  }
  if (flags.cost) {
    passes::CostOptions cost_options;
    if (module->has_machine_model()) {
      cost_options.machine = passes::MachineModel::FromProto(module->machine_model());
    }
    absl::StatusOr<passes::CostReport> report = passes::AnalyzeCost(*module, cost_options);
    if (!report.ok()) return InputError(fmt::format("{}: {}", source, report.status().message()));
    fmt::print("{}", report->ToString());
  } else if (flags.stages) {
    PrintStages(stages);
  } else if (flags.out.empty() || flags.format) {
    ir::ModuleFormat format = flags.format.value_or(ir::ModuleFormat::kText);
    std::string data;
    if (format == ir::ModuleFormat::kText) {
      data = ir::PrintModule(*module, {.locations = flags.locations});
    } else {
      absl::StatusOr<std::string> serialized = ir::SerializeModuleAs(*module, format);
      if (!serialized.ok()) return InputError(std::string(serialized.status().message()));
      data = std::move(*serialized);
    }
    std::fwrite(data.data(), 1, data.size(), stdout);
  }
  if (!flags.dump_to.empty()) {
    fmt::print(stderr, "irdump: wrote {} stages to {}\n", stages.size(), flags.dump_to);
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace
}  // namespace shardjit::tools

int main(int argc, char** argv) { return shardjit::tools::Main(argc, argv); }
