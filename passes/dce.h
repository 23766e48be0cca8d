// dce: removes ops none of whose results are used (transitively), in every region. Collectives
// are removed like any other op: every device of an SPMD program removes the same ones.
#ifndef SHARDJIT_PASSES_DCE_H_
#define SHARDJIT_PASSES_DCE_H_

#include "passes/pass.h"

namespace shardjit::passes {

class DeadCodeElimination final : public Pass {
 public:
  std::string name() const override { return "dce"; }
  absl::StatusOr<bool> Run(ir::Module& module) override;
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_DCE_H_
