// The reference backend: evaluates a function op by op with the reference kernels, handling
// fori_loop itself and handing collectives and shard_map to the device context. Intermediate
// values are released after their last use so the runtime's peak-memory figure is meaningful; at
// its last use a value is moved into the op's operands, so a kernel handed a unique() buffer (no
// caller argument, view or live value shares it) may update it in place, e.g. a
// dynamic_update_slice into a loop carry.
#ifndef SHARDJIT_BACKENDS_REFERENCE_EVALUATOR_H_
#define SHARDJIT_BACKENDS_REFERENCE_EVALUATOR_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/executable.h"
#include "backends/reference/kernel.h"
#include "ir/ir.pb.h"

namespace shardjit::backends::reference {

// Kernels of a faster backend that replace reference kernels by primitive name. A replacement
// that returns UnimplementedError for some operands falls back to the reference kernel.
using KernelOverrides = std::map<std::string, Kernel, std::less<>>;

// The reference backend: Compile below, reductions in order, the machine model's defaults.
const Backend& ReferenceBackend();

// Compiles `function` (verified): the reference kernels, or `overrides` where given; the result
// belongs to `backend`. Fails when a local primitive has no kernel.
absl::StatusOr<std::unique_ptr<Executable>> Compile(const ir::Function& function,
                                                    KernelOverrides overrides = {},
                                                    const Backend& backend = ReferenceBackend());

}  // namespace shardjit::backends::reference

#endif  // SHARDJIT_BACKENDS_REFERENCE_EVALUATOR_H_
