// lower-shard-map: a global-view module whose entry only passes its parameters to one shard_map
// and returns its results becomes the per-device module of the shard_map body: parameter and
// result shardings are the in_specs and out_specs, so each device runs the body on its own
// blocks with no data movement. Other modules are left unchanged.
#ifndef SHARDJIT_PASSES_LOWER_SHARD_MAP_H_
#define SHARDJIT_PASSES_LOWER_SHARD_MAP_H_

#include "passes/pass.h"

namespace shardjit::passes {

class LowerShardMap final : public Pass {
 public:
  std::string name() const override { return "lower-shard-map"; }
  absl::StatusOr<bool> Run(ir::Module& module) override;
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_LOWER_SHARD_MAP_H_
