// Checks that a module is well formed: SSA (every operand defined before use and visible, no id
// defined twice), every op's declared result types equal its primitive's shape rule, collectives
// only where an axis is mapped, and a consistent module header (mesh, entry, shardings).
#ifndef SHARDJIT_IR_VERIFIER_H_
#define SHARDJIT_IR_VERIFIER_H_

#include "absl/status/status.h"
#include "ir/ir.pb.h"

namespace shardjit::ir {

absl::Status VerifyModule(const Module& module);

// Verifies one region as a function body of `module`'s view and mesh.
absl::Status VerifyFunction(const Module& module, const Function& function);

// Renumbers value ids in print order (region params, then each op's regions, then its results)
// so that printing and parsing round-trips to the same proto.
void CanonicalizeValueIds(Function& function);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_VERIFIER_H_
