// fuse-elementwise: groups maximal DAGs of elementwise ops (and broadcasts of scalars) whose
// intermediate results are used only inside the group into one `fusion` op, so a backend can run
// each group as a single loop over memory. Runs on every region except fusion bodies; values a
// nested region reads count as used outside.
#ifndef SHARDJIT_PASSES_FUSE_ELEMENTWISE_H_
#define SHARDJIT_PASSES_FUSE_ELEMENTWISE_H_

#include "passes/pass.h"

namespace shardjit::passes {

struct FuseElementwiseOptions {
  // Smallest number of ops worth fusing (broadcasts count); a lone exp, log, tanh, logistic,
  // erf, sin, cos, sqrt or rsqrt is fused all the same (its own kernel calls libm per element).
  int min_group_size = 2;
};

class FuseElementwise final : public Pass {
 public:
  explicit FuseElementwise(FuseElementwiseOptions options = {}) : options_(options) {}
  std::string name() const override { return "fuse-elementwise"; }
  absl::StatusOr<bool> Run(ir::Module& module) override;

 private:
  FuseElementwiseOptions options_;
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_FUSE_ELEMENTWISE_H_
