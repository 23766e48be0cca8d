// The reference backend: evaluates a function op by op with the reference kernels, handling
// fori_loop itself and handing collectives and shard_map to the device context. Intermediate
// values are released after their last use so the runtime's peak-memory figure is meaningful.
#ifndef SHARDJIT_BACKENDS_REFERENCE_EVALUATOR_H_
#define SHARDJIT_BACKENDS_REFERENCE_EVALUATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/executable.h"
#include "ir/ir.pb.h"

namespace shardjit::backends::reference {

// Compiles `function` (verified) for the reference backend. Fails when a local primitive has no
// reference kernel.
absl::StatusOr<std::unique_ptr<Executable>> Compile(const ir::Function& function);

}  // namespace shardjit::backends::reference

#endif  // SHARDJIT_BACKENDS_REFERENCE_EVALUATOR_H_
