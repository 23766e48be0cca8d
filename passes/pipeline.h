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
#include "passes/pass.h"

namespace shardjit::passes {

struct PipelineOptions {
  // Verify the module after every pass (an error names the pass).
  bool verify_each = true;
  // When set, write the module before the first pass and after each pass to this folder as
  // NN-<module>-<pass>.txt (IR text) and .pbtxt. Defaults to $SHARDJIT_DUMP_TO.
  std::string dump_dir;
  // Passes to skip, by name.
  std::set<std::string> disabled;
  // The machine the partitioner and collective-fusion price plans for (passes/machine_model.h);
  // when set, Run records it in the module. Unset: jit takes its backend's model
  // (backends/backend.h); DefaultPipeline the model's defaults.
  std::optional<MachineModel> machine;
};

// What happened in one stage.
struct StageRecord {
  std::string pass;
  bool changed = false;
  bool skipped = false;
  absl::Duration time;
  // The module text after the stage, or "(unchanged)".
  std::string text;
};

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

// The default lowering pipeline of jit: canonicalize, sharding-propagation, spmd-partition (which
// leaves modules it has no rules for unchanged: they run unpartitioned), lower-shard-map,
// collective-simplify, collective-fusion, fuse-elementwise (on the per-device code).
Pipeline DefaultPipeline(PipelineOptions options = {}, CanonicalizeOptions canonicalize = {},
                         CollectiveFusionOptions fusion = {});

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_PIPELINE_H_
