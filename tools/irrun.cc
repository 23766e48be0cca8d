// irrun: runs a module file on the in-process runtime with inputs from .npy files and writes its
// outputs as .npy files.
//
//   irrun MODULE_FILE --inputs=a.npy,b.npy --outputs=out0.npy[,out1.npy] [--devices=N]
//
// Inputs and outputs are whole (global) arrays; a per-device module gets its inputs split by its
// param shardings and its outputs assembled by its result shardings (tools/run_module.h). The
// .npy dtypes are float32 ('<f4'), int32 ('<i4'), bool ('|b1') and bfloat16 ('<V2' as np.save
// writes ml_dtypes.bfloat16 arrays). bf16 OUTPUTS ARE WRITTEN AS float32 '<f4' files (exactly),
// since numpy has no bfloat16 of its own. --devices defaults to what the module's mesh needs.
//
// Exit status: 0 ok, 1 bad input or failed run, 2 bad flags.
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/io.h"
#include "tools/npy.h"
#include "tools/run_module.h"

namespace shardjit::tools {
namespace {

constexpr char kUsage[] =
    "usage: irrun MODULE_FILE --inputs=a.npy,b.npy --outputs=out0.npy[,out1.npy] "
    "[--devices=N] [--timeout=SECONDS]\n"
    "  MODULE_FILE      .pb/.binpb binary, .pbtxt text proto, anything else IR text\n"
    "  --inputs=FILES   one .npy per entry parameter, whole (global) arrays; dtypes <f4, <i4,\n"
    "                   |b1 and bfloat16 as <V2 (np.save of an ml_dtypes.bfloat16 array)\n"
    "  --outputs=FILES  one .npy per entry result (bf16 results are written as float32)\n"
    "  --devices=N      virtual devices (default: as many as the module's mesh needs)\n"
    "  --timeout=S      stop the run after S seconds (fractions allowed) with an error\n"
    "exit status: 0 ok, 1 bad input or failed run, 2 bad flags\n";

struct Flags {
  std::string module;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  bool has_outputs = false;
  int devices = 0;
  double timeout_seconds = 0;  // 0: none
};

int UsageError(const std::string& message) {
  fmt::print(stderr, "irrun: {}\n{}", message, kUsage);
  return 2;
}

int Error(const std::string& message) {
  fmt::print(stderr, "irrun: error: {}\n", message);
  return 1;
}

std::vector<std::string> SplitList(const std::string& list) {
  if (list.empty()) return {};
  return absl::StrSplit(list, ',');
}

std::optional<std::string> ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!absl::StartsWith(arg, "--")) {
      if (!flags.module.empty()) return fmt::format("more than one module file: {}", arg);
      flags.module = arg;
    } else if (absl::StartsWith(arg, "--inputs=")) {
      flags.inputs = SplitList(arg.substr(9));
    } else if (absl::StartsWith(arg, "--outputs=")) {
      flags.outputs = SplitList(arg.substr(10));
      flags.has_outputs = true;
    } else if (absl::StartsWith(arg, "--timeout=")) {
      if (!absl::SimpleAtod(arg.substr(10), &flags.timeout_seconds) ||
          !(flags.timeout_seconds > 0) || !std::isfinite(flags.timeout_seconds)) {
        return fmt::format("--timeout must be a positive number of seconds, got \"{}\"",
                           arg.substr(10));
      }
    } else if (absl::StartsWith(arg, "--devices=")) {
      if (!absl::SimpleAtoi(arg.substr(10), &flags.devices) || flags.devices < 1) {
        return fmt::format("--devices must be a positive integer, got \"{}\"", arg.substr(10));
      }
    } else {
      return fmt::format("unknown flag {}", arg);
    }
  }
  if (flags.module.empty()) return std::string("no MODULE_FILE");
  if (!flags.has_outputs) return std::string("no --outputs");
  for (const std::string& f : flags.inputs) {
    if (f.empty()) return std::string("--inputs has an empty file name");
  }
  for (const std::string& f : flags.outputs) {
    if (f.empty()) return std::string("--outputs has an empty file name");
  }
  return std::nullopt;
}

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      fmt::print("{}", kUsage);
      return 0;
    }
  }
  Flags flags;
  if (std::optional<std::string> error = ParseFlags(argc, argv, flags)) return UsageError(*error);

  absl::StatusOr<ir::Module> module = ir::ReadModuleFile(flags.module);
  if (!module.ok()) return Error(std::string(module.status().message()));
  absl::StatusOr<GlobalSignature> sig = ModuleGlobalSignature(*module);
  if (!sig.ok()) return Error(fmt::format("{}: {}", flags.module, sig.status().message()));
  if (flags.inputs.size() != sig->params.size()) {
    return Error(fmt::format("{}: the entry takes {} inputs, --inputs gives {}", flags.module,
                             sig->params.size(), flags.inputs.size()));
  }
  if (flags.outputs.size() != sig->results.size()) {
    return Error(fmt::format("{}: the entry returns {} outputs, --outputs gives {}",
                             flags.module, sig->results.size(), flags.outputs.size()));
  }
  std::vector<ir::Tensor> inputs;
  for (const std::string& path : flags.inputs) {
    absl::StatusOr<ir::Tensor> t = ReadNpy(path);
    if (!t.ok()) return Error(std::string(t.status().message()));
    inputs.push_back(std::move(*t));
  }
  runtime::RunOptions options;
  if (flags.timeout_seconds > 0) {
    options = runtime::RunOptions::WithTimeout(absl::Seconds(flags.timeout_seconds));
  }
  absl::StatusOr<std::vector<ir::Tensor>> outputs =
      RunModule(*module, inputs, flags.devices, flags.inputs, options);
  if (!outputs.ok()) return Error(fmt::format("{}: {}", flags.module, outputs.status().message()));
  for (size_t i = 0; i < outputs->size(); ++i) {
    if (absl::Status s = WriteNpy((*outputs)[i], flags.outputs[i]); !s.ok()) {
      return Error(std::string(s.message()));
    }
  }
  return 0;
}

}  // namespace
}  // namespace shardjit::tools

int main(int argc, char** argv) { return shardjit::tools::Main(argc, argv); }
