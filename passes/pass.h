// A pass rewrites a module in place and says whether it changed anything.
#ifndef SHARDJIT_PASSES_PASS_H_
#define SHARDJIT_PASSES_PASS_H_

#include <string>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"

namespace shardjit::passes {

class Pass {
 public:
  virtual ~Pass() = default;
  // Kebab-case id used in dumps, timings and to disable the pass.
  virtual std::string name() const = 0;
  virtual absl::StatusOr<bool> Run(ir::Module& module) = 0;
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_PASS_H_
