// irrun: runs a module file on the in-process runtime with inputs from .npy files and writes its
// outputs as .npy files.
//
//   irrun MODULE_FILE --inputs=a.npy,b.npy --outputs=out0.npy[,out1.npy] [--devices=N]
//         [--transform=jvp|vjp]
//
// --transform runs the entry's JVP (inputs: the primals, then their tangents; outputs: the
// results, then their tangents) or VJP (inputs: the primals, then the results' cotangents;
// outputs: the results, then the inputs' cotangents) instead (ir/autodiff.h).
//
// Inputs and outputs are whole (global) arrays; a per-device module gets its inputs split by its
// param shardings and its outputs assembled by its result shardings (tools/run_module.h). The
// .npy dtypes are float32 ('<f4'), int32 ('<i4'), bool ('|b1') and bfloat16 ('<V2' as np.save
// writes ml_dtypes.bfloat16 arrays). bf16 OUTPUTS ARE WRITTEN AS float32 '<f4' files (exactly),
// since numpy has no bfloat16 of its own. --devices defaults to what the module's mesh needs.
// Under `bazel run`, relative paths are taken from the directory it was started in.
//
// Exit status: 0 ok, 1 bad input or failed run, 2 bad flags.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "fmt/format.h"
#include "frontend/lowering.h"
#include "ir/autodiff.h"
#include "ir/fmt_absl.h"
#include "ir/io.h"
#include "tools/flags.h"
#include "tools/npy.h"
#include "tools/run_module.h"

ABSL_FLAG(std::vector<std::string>, inputs, {},
          "one .npy file per entry parameter, comma-separated: whole (global) arrays");
ABSL_FLAG(std::optional<std::vector<std::string>>, outputs, std::nullopt,
          "one .npy file per entry result, comma-separated (bf16 results are written as float32)");
ABSL_FLAG(std::optional<int>, devices, std::nullopt,
          "virtual devices (default: as many as the module's mesh needs)");
ABSL_FLAG(std::optional<double>, timeout, std::nullopt,
          "stop the run after this many seconds (fractions allowed) with an error");
ABSL_FLAG(std::string, transform, "",
          "run the entry's jvp (inputs: primals then tangents) or vjp (inputs: primals then "
          "result cotangents; outputs: results then input cotangents)");
ABSL_FLAG(shardjit::Backend, backend, shardjit::DefaultBackend(),
          "the backend whose machine model prices the plan and whose kernels run it: x86 or "
          "reference (default: $SHARDJIT_BACKEND, else x86)");

namespace shardjit::tools {
namespace {

constexpr char kUsage[] =
    "usage: irrun MODULE_FILE --inputs=a.npy,b.npy --outputs=out0.npy[,out1.npy] "
    "[--devices=N] [--timeout=SECONDS] [--backend=x86|reference] [--transform=jvp|vjp]\n"
    "  MODULE_FILE      .pb/.binpb binary, .pbtxt text proto, anything else IR text\n"
    "  --inputs=FILES   one .npy per entry parameter, whole (global) arrays; dtypes <f4, <i4,\n"
    "                   |b1 and bfloat16 as <V2 (np.save of an ml_dtypes.bfloat16 array)\n"
    "  --outputs=FILES  one .npy per entry result (bf16 results are written as float32)\n"
    "  --devices=N      virtual devices (default: as many as the module's mesh needs)\n"
    "  --timeout=S      stop the run after S seconds (fractions allowed) with an error\n"
    "  --transform=T    jvp: inputs are the primals then their tangents, outputs the results\n"
    "                   then their tangents; vjp: inputs are the primals then the results'\n"
    "                   cotangents, outputs the results then the inputs' cotangents\n"
    "  --backend=NAME   x86 or reference (the oracle); default $SHARDJIT_BACKEND, else x86.\n"
    "                   The module is lowered as jit lowers it for that backend, then run\n"
    "exit status: 0 ok, 1 bad input or failed run, 2 bad flags\n";

constexpr int kBadFlags = 2;

struct Flags {
  std::string module;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  int devices = 0;             // 0: what the module's mesh needs
  double timeout_seconds = 0;  // 0: none
  Backend backend = Backend::kX86;
  std::optional<ir::AdTransform> transform;
};

int UsageError(const std::string& message) {
  fmt::print(stderr, "irrun: {}\n{}", message, kUsage);
  return kBadFlags;
}

int Error(const std::string& message) {
  fmt::print(stderr, "irrun: error: {}\n", message);
  return 1;
}

// The parsed flags and positional arguments (`args`, argv[0] first) into `flags`; returns an
// error message for bad flags.
std::optional<std::string> ReadFlags(const std::vector<char*>& args, Flags& flags) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (!flags.module.empty()) return fmt::format("more than one module file: {}", args[i]);
    flags.module = args[i];
  }
  if (flags.module.empty()) return std::string("no MODULE_FILE");
  const std::optional<std::vector<std::string>> outputs = absl::GetFlag(FLAGS_outputs);
  if (!outputs) return std::string("no --outputs");
  flags.inputs = absl::GetFlag(FLAGS_inputs);
  flags.outputs = *outputs;
  if (const std::optional<double> timeout = absl::GetFlag(FLAGS_timeout)) {
    if (!(*timeout > 0) || !std::isfinite(*timeout)) {
      return fmt::format("--timeout must be a positive number of seconds, got \"{}\"", *timeout);
    }
    flags.timeout_seconds = *timeout;
  }
  if (const std::optional<int> devices = absl::GetFlag(FLAGS_devices)) {
    if (*devices < 1) {
      return fmt::format("--devices must be a positive integer, got \"{}\"", *devices);
    }
    flags.devices = *devices;
  }
  flags.backend = absl::GetFlag(FLAGS_backend);
  if (const std::string t = absl::GetFlag(FLAGS_transform); !t.empty()) {
    flags.transform = ir::ParseAdTransform(t);
    if (!flags.transform) return fmt::format("--transform must be jvp or vjp, got \"{}\"", t);
  }
  for (const std::string& f : flags.inputs) {
    if (f.empty()) return std::string("--inputs has an empty file name");
  }
  for (const std::string& f : flags.outputs) {
    if (f.empty()) return std::string("--outputs has an empty file name");
  }
  return std::nullopt;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<char*> args = ParseCommandLine(argc, argv, kBadFlags);
  // `bazel run` starts the program in its runfiles: relative paths are the user's directory's.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir && chdir(dir) != 0) {
    return Error(fmt::format("cannot enter {}", dir));
  }
  Flags flags;
  if (std::optional<std::string> error = ReadFlags(args, flags)) return UsageError(*error);

  absl::StatusOr<ir::Module> module = ir::ReadModuleFile(flags.module);
  if (!module.ok()) return Error(std::string(module.status().message()));
  if (flags.transform) {
    module = ir::TransformModule(*module, *flags.transform);
    if (!module.ok()) {
      return Error(fmt::format("{}: {}", flags.module, module.status().message()));
    }
  }
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
      RunModule(*module, inputs, flags.devices, flags.inputs, options, flags.backend);
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
