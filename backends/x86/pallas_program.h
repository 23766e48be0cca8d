// The compiled form of a pallas_call on x86 (backends/x86/pallas_call.h): the strided views
// blocks are read through, the per-thread state of a running grid, the step programs the kernel
// and its index maps compile to (backends/x86/pallas_compiler.h) and the grid loop that runs them
// (backends/x86/pallas_program.cc). Internal to the backend.
#ifndef SHARDJIT_BACKENDS_X86_PALLAS_PROGRAM_H_
#define SHARDJIT_BACKENDS_X86_PALLAS_PROGRAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "backends/kernel_peers.h"
#include "backends/reference/evaluator.h"
#include "backends/x86/gemm.h"
#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86::pallas {

// Small shapes without heap allocation: views are made at every grid step.
using Dims = absl::InlinedVector<int64_t, 4>;

// Element (i0, i1, ...) of a view is at data + sum(i_d * strides[d]) elements.
struct View {
  char* data = nullptr;
  Dims dims;
  Dims strides;
  ir::DType dtype = ir::DType::kInvalid;
};

// Row-major strides of `dims`, the view of a whole tensor, and a copy of `src` into `dst` (the
// same dims; rows contiguous on both sides move at once).
Dims RowMajor(const Dims& dims);
View DenseView(ir::Tensor& t);
void CopyView(const View& dst, const View& src);
// Sets every element of `dst` to `element` (DTypeSize(dst.dtype) bytes).
void FillView(const View& dst, const void* element);

// Rows of pending GEMMs dropped by every grid so far (PallasCallStats::gemm_rows_skipped).
int64_t GemmRowsSkipped();

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

  // Accumulating GEMMs not run yet: the next steps' GEMMs into the same window whose A and B
  // blocks continue a lone pending one's along k (blocks of the inputs) join it, so a grid axis
  // that accumulates over k runs as one product. They run before their ref is read or written,
  // before blocks are written back, and when the thread's steps end; a read of some rows of the
  // window runs only those rows (the others stay pending), a store that overwrites the whole
  // window drops them, and so does the end of the steps for scratch refs.
  struct Pending {
    GemmArgs args;  // f32 C, accumulating
    int ref = -1;
  };
  std::vector<Pending> pending;
  int64_t rows_skipped = 0;  // rows of pending GEMMs dropped
  absl::Status Flush();
  absl::Status FlushRef(int ref);
  // Runs the rows of the GEMMs pending into `ref` that rows [lo, hi) of `v`, a window of it,
  // cover.
  absl::Status FlushRows(int ref, const View& v, int64_t lo, int64_t hi);
  // Drops the GEMMs pending into `ref` whose C lies inside `w` (about to be overwritten) and
  // runs the others.
  absl::Status FlushUncovered(int ref, const View& w);
  // Drops the GEMMs pending into scratch refs (dead once the steps end), runs the others.
  absl::Status FlushAtEnd();

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
