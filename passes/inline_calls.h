// inline-calls: replaces each custom_jvp_call and custom_vjp_call by the ops of its `fun` region
// and each checkpoint by the ops of its body, in every region, and drops pvary (a cast of a
// shard_map body's types) and name (a label for checkpoint policies). The transformations (ir/autodiff.h, ir/batching.h) have used the other
// regions and the types by then; what runs is the function itself.
#ifndef SHARDJIT_PASSES_INLINE_CALLS_H_
#define SHARDJIT_PASSES_INLINE_CALLS_H_

#include "passes/pass.h"

namespace shardjit::passes {

class InlineCalls final : public Pass {
 public:
  std::string name() const override { return "inline-calls"; }
  absl::StatusOr<bool> Run(ir::Module& module) override;
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_INLINE_CALLS_H_
