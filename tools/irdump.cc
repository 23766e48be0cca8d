// irdump: prints the IR of a module file or of a built-in example program.
//
//   irdump MODULE_FILE | --example=seed_a..seed_e
//          [--format=text|pbtxt|binary] [--verify=true|false] [--locations]
//          [--lower] [--stages] [--cost] [--dump_to=DIR] [--out=FILE]
//
// A module file is binary (.pb/.binpb), text proto (.pbtxt) or IR text (anything else). An
// example is lowered by the default pipeline (jit's); a file is printed as loaded unless --lower,
// --stages or --dump_to ask for the pipeline (passes::DefaultPipeline) to run on it. The module
// printed, and written by --out (format by extension), is the final one. --cost prints the
// final module's cost report (passes/cost_analysis.h) instead of the module.
//
// Exit status: 0 ok, 1 bad input (unreadable or unparsable file, failed verification or pass),
// 2 bad flags.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "backends/reference/kernel.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/io.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/cost_analysis.h"
#include "passes/pipeline.h"
#include "tools/example_modules.h"

namespace shardjit::tools {
namespace {

constexpr char kUsage[] =
    "usage: irdump MODULE_FILE | --example=NAME [options]\n"
    "  MODULE_FILE        .pb/.binpb binary, .pbtxt text proto, anything else IR text\n"
    "  --example=NAME     a built-in program: {examples}\n"
    "                     (bf16 x[2048,2048] P(x,y), w[2048,1024] P(x,None))\n"
    "  --mesh=XxY         the example's mesh (default 2x2)\n"
    "  --format=FMT       what to print: text (default), pbtxt, or binary (not to a terminal)\n"
    "  --verify[=BOOL]    verify the module and after each pass (default true; --noverify)\n"
    "  --locations        print source locations in IR text\n"
    "  --lower            run the lowering pipeline on a module file (examples always are)\n"
    "  --stages           print the module after every pipeline stage (IR text), with timings\n"
    "  --cost             print the final module's flops and bytes communicated per device\n"
    "  --dump_to=DIR      write the module after every stage to DIR as .txt and .pbtxt\n"
    "  --out=FILE         write the final module to FILE (format by extension); with --out the\n"
    "                     module is printed only when --format is given\n"
    "exit status: 0 ok, 1 bad input, 2 bad flags\n";

struct Flags {
  std::string file;
  std::string example;
  int64_t mesh_x = 2, mesh_y = 2;
  std::optional<ir::ModuleFormat> format;
  bool verify = true;
  bool locations = false;
  bool lower = false;
  bool stages = false;
  bool cost = false;
  std::string dump_to;
  std::string out;
};

void PrintUsage(std::FILE* to) {
  fmt::print(to, kUsage, fmt::arg("examples", absl::StrJoin(ExampleNames(), ", ")));
}

int UsageError(const std::string& message) {
  fmt::print(stderr, "irdump: {}\n", message);
  PrintUsage(stderr);
  return 2;
}

int InputError(const std::string& message) {
  fmt::print(stderr, "irdump: error: {}\n", message);
  return 1;
}

std::optional<bool> ParseBool(const std::string& v) {
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  return std::nullopt;
}

// Parses argv into `flags`; returns an error message for bad flags.
std::optional<std::string> ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!absl::StartsWith(arg, "--")) {
      if (!flags.file.empty()) return fmt::format("more than one module file: {}", arg);
      flags.file = arg;
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::optional<std::string> value;
    if (eq != std::string::npos) value = arg.substr(eq + 1);
    auto need_value = [&]() -> std::optional<std::string> {
      if (!value || value->empty()) return fmt::format("--{} needs a value", name);
      return std::nullopt;
    };
    auto bool_flag = [&](bool& target) -> std::optional<std::string> {
      if (!value) {
        target = true;
        return std::nullopt;
      }
      std::optional<bool> b = ParseBool(*value);
      if (!b) return fmt::format("--{}: expected true or false, got \"{}\"", name, *value);
      target = *b;
      return std::nullopt;
    };
    std::optional<std::string> error;
    if (name == "example") {
      if (!(error = need_value())) flags.example = *value;
    } else if (name == "mesh") {
      if (!(error = need_value())) {
        std::vector<std::string> xy = absl::StrSplit(*value, 'x');
        if (xy.size() != 2 || !absl::SimpleAtoi(xy[0], &flags.mesh_x) ||
            !absl::SimpleAtoi(xy[1], &flags.mesh_y) || flags.mesh_x < 1 || flags.mesh_y < 1) {
          error = fmt::format("--mesh must be XxY (e.g. 4x4), got \"{}\"", *value);
        }
      }
    } else if (name == "format") {
      if (!(error = need_value())) {
        if (*value == "text") {
          flags.format = ir::ModuleFormat::kText;
        } else if (*value == "pbtxt") {
          flags.format = ir::ModuleFormat::kPbtxt;
        } else if (*value == "binary") {
          flags.format = ir::ModuleFormat::kBinary;
        } else {
          error = fmt::format("--format must be text, pbtxt or binary, got \"{}\"", *value);
        }
      }
    } else if (name == "verify") {
      error = bool_flag(flags.verify);
    } else if (name == "noverify" && !value) {
      flags.verify = false;
    } else if (name == "locations") {
      error = bool_flag(flags.locations);
    } else if (name == "lower") {
      error = bool_flag(flags.lower);
    } else if (name == "stages") {
      error = bool_flag(flags.stages);
    } else if (name == "cost") {
      error = bool_flag(flags.cost);
    } else if (name == "dump_to") {
      if (!(error = need_value())) flags.dump_to = *value;
    } else if (name == "out") {
      if (!(error = need_value())) flags.out = *value;
    } else {
      error = fmt::format("unknown flag {}", arg);
    }
    if (error) return error;
  }
  if (flags.file.empty() == flags.example.empty()) {
    return std::string("give exactly one of MODULE_FILE and --example=NAME");
  }
  if (!flags.example.empty()) {
    std::vector<std::string> names = ExampleNames();
    if (std::find(names.begin(), names.end(), flags.example) == names.end()) {
      return fmt::format("unknown example \"{}\"", flags.example);
    }
  }
  if (flags.stages && flags.format && *flags.format != ir::ModuleFormat::kText) {
    return std::string("--stages prints IR text; it takes no other --format");
  }
  if (flags.cost && (flags.stages || flags.format)) {
    return std::string("--cost prints a report; it takes no --stages or --format");
  }
  if (flags.format == ir::ModuleFormat::kBinary && flags.out.empty() && isatty(STDOUT_FILENO)) {
    return std::string(
        "--format=binary goes to a file: redirect stdout or use --out=FILE.pb");
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
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      PrintUsage(stdout);
      return 0;
    }
  }
  Flags flags;
  if (std::optional<std::string> error = ParseFlags(argc, argv, flags)) return UsageError(*error);

  // The input module: a file as loaded, or an example as traced.
  absl::StatusOr<ir::Module> module =
      flags.example.empty() ? ir::ReadModuleFile(flags.file)
                            : TracedExample(flags.example, flags.mesh_x, flags.mesh_y);
  if (!module.ok()) return InputError(std::string(module.status().message()));
  const std::string source = flags.example.empty() ? flags.file : flags.example;
  if (flags.verify) {
    if (absl::Status s = ir::VerifyModule(*module); !s.ok()) {
      return InputError(fmt::format("{}: verification failed: {}", source, s.message()));
    }
  }

  std::vector<passes::StageRecord> stages;
  if (!flags.example.empty() || flags.lower || flags.stages || !flags.dump_to.empty()) {
    passes::PipelineOptions options;
    options.verify_each = flags.verify;
    options.dump_dir = flags.dump_to;
    if (absl::Status s = passes::DefaultPipeline(options, {.evaluate = backends::reference::EvaluateLocalOp}).Run(*module, &stages); !s.ok()) {
      return InputError(fmt::format("{}: {}", source, s.message()));
    }
  }

  if (!flags.out.empty()) {
    if (absl::Status s = ir::WriteModuleFile(*module, flags.out); !s.ok()) {
      return InputError(std::string(s.message()));
    }
  }
  if (flags.cost) {
    absl::StatusOr<passes::CostReport> report = passes::AnalyzeCost(*module);
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
