// canonicalize: common-subexpression elimination, constant folding and simple algebraic
// identities (x*1, x+0 for integers, x-0, x/1, converts/reshapes/transposes/broadcasts/slices
// that change nothing, collectives over size-1 axes, select of a constant predicate),
// comparisons of s32 values decided by their ranges (passes/int_range.h), then dead-code
// elimination.
#ifndef SHARDJIT_PASSES_CANONICALIZE_H_
#define SHARDJIT_PASSES_CANONICALIZE_H_

#include <functional>
#include <vector>

#include "ir/tensor.h"
#include "passes/pass.h"

namespace shardjit::passes {

// Evaluates one local op on constant operands (the reference backend supplies this).
using ConstantEvaluator = std::function<absl::StatusOr<std::vector<ir::Tensor>>(
    const ir::Op& op, const std::vector<ir::Tensor>& operands)>;

struct CanonicalizeOptions {
  // Folds local ops whose operands are all constants; no folding when unset.
  ConstantEvaluator evaluate;
  // Largest result (in elements) that constant folding writes into the IR.
  int64_t max_folded_elements = 1024;
};

class Canonicalize final : public Pass {
 public:
  explicit Canonicalize(CanonicalizeOptions options = {}) : options_(std::move(options)) {}
  std::string name() const override { return "canonicalize"; }
  absl::StatusOr<bool> Run(ir::Module& module) override;

 private:
  CanonicalizeOptions options_;
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_CANONICALIZE_H_
