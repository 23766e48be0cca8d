// The options and reports of the lowering pipeline that users set and read (through
// JitOptions and Lowered): plain structs with no protobuf types, so that the public API
// (frontend/shardjit.h) can include them. The passes that use them include this header.
#ifndef SHARDJIT_PASSES_OPTIONS_H_
#define SHARDJIT_PASSES_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "passes/machine_model.h"

namespace shardjit::passes {

// What collective-fusion may do (passes/collective_fusion.h).
struct CollectiveFusionOptions {
  // all_gather + dot_general -> ring (free and contracting dims).
  bool all_gather_matmul = true;
  // dot_general + psum_scatter -> reduce-scatter ring.
  bool matmul_reduce_scatter = true;
  // dynamic_slice of one shard of an all_gather -> a direct fetch of that shard.
  bool fold_gather_slice = true;
  // Bidirectional rings for groups of more than 2.
  bool bidirectional = true;
  // bf16 dot_general + psum or psum_scatter: partial sums in f32, rounded once.
  bool f32_partial_sums = true;
  // Build every ring the patterns allow, whatever the time model says (tests, benchmarks).
  bool ignore_time_model = false;
};

// Options of the lowering pipeline (passes/pipeline.h).
struct PipelineOptions {
  // Verify the module after every pass (an error names the pass).
  bool verify_each = true;
  // When set, write the module before the first pass and after each pass to this folder as
  // NN-<module>-<pass>.txt (IR text) and .pbtxt (<module>.<k> for the k-th module of that name
  // this process dumps into the folder). Defaults to $SHARDJIT_DUMP_TO.
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

// Flops, bytes communicated and estimated time of a program (passes/cost_analysis.h).
// One collective op of the program.
struct CollectiveCost {
  std::string op;       // the opcode, e.g. "psum"
  std::string axes;     // as in IR text, e.g. "(x)" or "(x,y)"
  std::string operand;  // the operand type, e.g. "bf16[1024,1024]"
  int64_t group_size = 0;
  // How many times it runs (fori_loop trip counts multiplied).
  int64_t count = 1;
  // Bytes the device sends, over all `count` runs.
  int64_t bytes_sent = 0;
};

struct CostReport {
  int64_t flops = 0;
  int64_t bytes_communicated = 0;
  double estimated_seconds = 0;
  // In program order (loop bodies where their loop is).
  std::vector<CollectiveCost> collectives;
  // "flops: N\nbytes communicated: N\nestimated time: T us\n" and one line per collective.
  std::string ToString() const;
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_OPTIONS_H_
