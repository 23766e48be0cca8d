// Runs passes in order. The pipeline, not the passes, owns verification, dumps, timing and
// disabling passes by name.
#ifndef SHARDJIT_PASSES_PIPELINE_H_
#define SHARDJIT_PASSES_PIPELINE_H_

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "passes/canonicalize.h"
#include "passes/collective_fusion.h"
#include "passes/machine_model.h"
#include "passes/options.h"
#include "passes/pass.h"

namespace shardjit::passes {


class Pipeline {
 public:
  explicit Pipeline(PipelineOptions options = {});
  Pipeline& Add(std::unique_ptr<Pass> pass);

  // Runs every pass on `module`; `stages` (optional) receives one record per pass plus the
  // input as stage "input".
  absl::Status Run(ir::Module& module, std::vector<StageRecord>* stages = nullptr) const;

 private:
  PipelineOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
};

// The default lowering pipeline of jit: inline-calls, canonicalize, sharding-propagation,
// spmd-partition (which leaves modules it has no rules for unchanged: they run unpartitioned),
// lower-shard-map, collective-simplify, collective-fusion, fuse-elementwise (on the per-device
// code).
Pipeline DefaultPipeline(PipelineOptions options = {}, CanonicalizeOptions canonicalize = {},
                         CollectiveFusionOptions fusion = {});

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_PIPELINE_H_
