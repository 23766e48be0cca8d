// Seed 002's MPMD as a two-stage pipeline on a mesh {"stage": 2, "x": n}: the devices of stage 0
// and of stage 1 run different programs (mpmd_map). Each stage computes tanh(h @ W_stage) on its
// share of the batch; stage 0 psends every microbatch's activations to the stage-1 device with
// the same "x" index and moves on to the next microbatch (its sends queue), while stage 1
// precvs them in order, so the stages work on different microbatches at once.
#ifndef SHARDJIT_EXAMPLES_PIPELINE_H_
#define SHARDJIT_EXAMPLES_PIPELINE_H_

#include <cstdint>

#include "frontend/shardjit.h"

namespace shardjit::examples {

// Arguments: x [microbatches, batch, hidden] laid out P(None, "x", None) and the stacked weights
// [2, hidden, hidden] laid out P("stage"). Result: [2 * microbatches, batch, hidden] laid out
// P("stage", "x"): rows [0, microbatches) are stage 0's activations, the rest the pipeline's
// output.
MpmdMapped TwoStagePipeline(const Mesh& mesh, int64_t microbatches);

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_PIPELINE_H_
