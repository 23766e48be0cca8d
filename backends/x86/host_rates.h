// This host's machine model for plans on the x86 backend (passes/machine_model.h): how fast one
// thread multiplies bf16 matrices at the ISA level Gemm uses, and how fast it copies a block
// between buffers, as collectives do. Measured once per host and kept in a file, so that the same
// program lowers to the same plan in every process on this host; rates move 20-40% between runs
// on a shared host, which would otherwise change plans from one run to the next.
//
// $SHARDJIT_MACHINE_MODEL chooses where the model comes from:
//   unset         the file $XDG_CACHE_HOME/shardjit/machine-model-<cpu>-<isa>.txt
//                 (~/.cache/... without XDG_CACHE_HOME), measured and written on first use;
//   a path        that file, likewise (measured and written there if it does not exist);
//   "defaults"    the model's defaults, nothing measured.
// The file is one line, `flops_per_second=<hex float> bytes_per_second=<hex float>
// seconds_per_collective=<hex float>`, and may be edited or copied to other hosts.
#ifndef SHARDJIT_BACKENDS_X86_HOST_RATES_H_
#define SHARDJIT_BACKENDS_X86_HOST_RATES_H_

#include <string>

#include "absl/status/statusor.h"
#include "passes/machine_model.h"

namespace shardjit::backends::x86 {

// Rates measured now: the best of a few runs of a 256x256x256 bf16 GEMM and of a 4 MiB copy on
// the calling thread (about a millisecond), each rounded down to a class of 2^(1/4) steps.
passes::MachineModel MeasureHostModel();

// The model in `path`, or measured and written there (under a lock, so that processes starting
// together measure once) when the file does not exist. Errors name the file.
absl::StatusOr<passes::MachineModel> LoadOrMeasureHostModel(const std::string& path);

// The model chosen by $SHARDJIT_MACHINE_MODEL as above, on first use; the same afterwards. If the
// file can be neither read nor written, the rates measured now (its source says why).
const passes::MachineModel& HostMachineModel();

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_HOST_RATES_H_
