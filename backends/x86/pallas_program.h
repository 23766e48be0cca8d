// The compiled form of a pallas_call on x86 (backends/x86/pallas_call.h): the strided views
// blocks are read through, the per-thread state of a running grid, the step programs the kernel
// and its index maps compile to (backends/x86/pallas_compiler.h) and the grid loop that runs them
// (backends/x86/pallas_program.cc). Internal to the backend.
#ifndef SHARDJIT_BACKENDS_X86_PALLAS_PROGRAM_H_
#define SHARDJIT_BACKENDS_X86_PALLAS_PROGRAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "backends/kernel_peers.h"
#include "backends/reference/evaluator.h"
#include "backends/x86/gemm.h"
#include "backends/x86/pallas_deferred.h"
#include "backends/x86/pallas_padding.h"
#include "backends/x86/pallas_view.h"
#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86::pallas {

// Over every grid so far: rows of deferred GEMMs dropped, and the products deferred GEMMs ran
// as (PallasCallStats::gemm_rows_skipped, deferred_gemms_run).
int64_t GemmRowsSkipped();
int64_t DeferredGemmsRun();

// How a step's access to a window of a fresh output's block counts for the block's padding
// (LazyPadding).
enum class OutputAccess {
  kRead,   // a read, or a write of part of the window: the block gets its padding first
  kStore,  // a store of the whole window
  kNone,   // the step records what it writes itself (a masked store), or reads only the values
           // it writes back unchanged (a masked store's old contents)
};

// The state of one thread running the grid.
struct Frame {
  std::vector<int64_t> scalars;
  std::vector<ir::Tensor> tiles;
  std::vector<View> views;
  std::vector<View> refs;  // per kernel param
  std::vector<int64_t> grid;
  std::vector<int64_t> index;
  ir::Allocator* allocator = nullptr;
  base::Parallelism gemm_parallel;
  std::vector<View> arrays;          // per spec: the whole array it blocks
  std::vector<ir::Tensor> padded;    // per spec: the copy of a block that overhangs
  std::vector<View> inside;          // per spec: the part of the current block in the array
  std::vector<int> writebacks;       // specs whose padded copy goes back after this step
  std::vector<ir::Tensor> scratch;   // per scratch ref
  // The kernel's instances on the other devices (kernels with semaphores, axis_index).
  KernelPeers* peers = nullptr;
  // The inputs' memory, which no step writes: GEMMs keep their packed blocks of it in
  // `pack_cache` (products on this thread alone).
  std::vector<std::pair<const char*, const char*>> immutable;
  std::unique_ptr<GemmPackCache> pack_cache;

  // Writes not made yet (GEMMs, zero fills, copies), so that steps combine.
  DeferredWrites deferred;
  // Per ref: the block of a fresh output it is this step, when that output's padding is written
  // lazily (backends/x86/pallas_padding.h).
  std::vector<std::optional<LazyPadding::Block>> output_blocks;
  std::vector<LazyPadding*> lazy;  // per spec (null: padding written up front)
  void TouchOutput(int ref, const View& window, OutputAccess access) {
    const auto& b = output_blocks[ref];
    if (!b || access == OutputAccess::kNone) return;
    if (access == OutputAccess::kStore) {
      b->owner->Store(*b, window);
    } else {
      b->owner->Touch(*b);
    }
  }
  // A masked store writes rows [lo, hi) of `window` (every element of them).
  void StoreOutputRows(int ref, const View& window, int64_t lo, int64_t hi) {
    if (const auto& b = output_blocks[ref]) b->owner->StoreRows(*b, window, lo, hi);
  }

  bool Immutable(const View& v) const {
    for (const auto& [begin, end] : immutable) {
      if (v.data >= begin && v.data < end) return true;
    }
    return false;
  }
};
using Step = std::function<absl::Status(Frame&)>;
using Program = std::vector<Step>;

inline absl::Status RunProgram(const Program& program, Frame& frame) {
  for (const Step& step : program) RETURN_IF_ERROR(step(frame));
  return absl::OkStatus();
}
// One blocked operand or result: which array, how its index map runs.
struct SpecPlan {
  std::string name;  // "in_specs[0]"
  const ir::BlockSpec* spec = nullptr;
  bool output = false;
  int array = 0;        // operand index after the scalar-prefetch ones, or output index
  int ref = 0;          // kernel param index
  bool copy = false;    // always copied (an input the kernel stores into)
  Program index_map;
  std::vector<int> index_results;  // scalar slots of the block indices
  Dims padded_strides;  // of a padded copy seen with the array's rank (squeezed dims of 1)
};

class CompiledCall {
 public:
  const ir::Op* op = nullptr;
  int num_scalars = 0, num_tiles = 0, num_views = 0;
  std::vector<int> grid_slots;  // per index map param: the scalar slot of each grid index
  std::vector<SpecPlan> specs;
  Program kernel;
  int num_refs = 0;
  int leading_parallel = 0;
  // The kernel has semaphores: each run is an instance its peers signal and copy into.
  bool has_semaphores = false;
  // Selects whose every use reads them through their masks (no step computes them).
  int masked_selects = 0;

  absl::StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>& operands,
                                              ir::Allocator* allocator) const;

 private:
  absl::Status RunStep(Frame& frame) const;
};

// The program of pallas_call `op`; Unimplemented for kernels outside the compiled form.
absl::StatusOr<std::unique_ptr<CompiledCall>> CompileCall(const ir::Op& op,
                                                         const reference::KernelOverrides& kernels);

}  // namespace shardjit::backends::x86::pallas

#endif  // SHARDJIT_BACKENDS_X86_PALLAS_PROGRAM_H_
