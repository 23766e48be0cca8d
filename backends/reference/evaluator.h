// The reference backend: evaluates a function op by op with the reference kernels, handling
// fori_loop itself and handing collectives and shard_map to the device context. Intermediate
// values are released after their last use so the runtime's peak-memory figure is meaningful.
#ifndef SHARDJIT_BACKENDS_REFERENCE_EVALUATOR_H_
#define SHARDJIT_BACKENDS_REFERENCE_EVALUATOR_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/executable.h"
#include "backends/reference/kernel.h"
#include "ir/ir.pb.h"

namespace shardjit::backends::reference {

// Kernels of a faster backend that replace reference kernels by primitive name. A replacement
// that returns UnimplementedError for some operands falls back to the reference kernel.
using KernelOverrides = std::map<std::string, Kernel, std::less<>>;

// Compiles `function` (verified): the reference kernels, or `overrides` where given; `backend`
// names the result. Fails when a local primitive has no kernel.
absl::StatusOr<std::unique_ptr<Executable>> Compile(const ir::Function& function,
                                                    KernelOverrides overrides = {},
                                                    std::string backend = "reference");

}  // namespace shardjit::backends::reference

#endif  // SHARDJIT_BACKENDS_REFERENCE_EVALUATOR_H_
