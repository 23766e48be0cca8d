// pallas_call in the reference backend: the grid walked in order, blocks copied in and out of
// the operands (padding where they overhang), and the kernel ops (ref_load, ref_store,
// program_id, num_programs) run one by one. It is the oracle the compiled kernels are checked
// against, and follows Pallas' interpreter: fresh outputs, scratch and padding read as NaN (the
// dtype's minimum for integers, false for pred), and output blocks are read back from the
// output before every step, so consecutive steps on one block accumulate.
#ifndef SHARDJIT_BACKENDS_REFERENCE_PALLAS_H_
#define SHARDJIT_BACKENDS_REFERENCE_PALLAS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/kernel_peers.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference {

// Fills `t` with the padding value of its dtype (ir::PaddingValue); a fresh array of `type` so
// filled (what fresh outputs and scratch buffers hold).
void FillWithPadding(ir::Tensor& t);
ir::Tensor PaddingArray(const ir::ShapedType& type, ir::Allocator* allocator);

// The grid of a call on `operands`: its static sizes, and those sized at run time read from the
// leading operands (negative ones as 0).
std::vector<int64_t> GridSizes(const ir::PallasCallAttrs& a,
                               const std::vector<ir::Tensor>& operands);
// "kernel matmul at grid index (1,0,2)".
std::string KernelWhere(const ir::Op& call, const std::vector<int64_t>& index);
// How errors name kernel param `param` of pallas_call attrs `a`: "in_specs[0] block",
// "scratch ref 1", ...
std::string KernelRefName(const ir::PallasCallAttrs& a, int param);
// The error for a block whose index map (of `spec_name`, "in_specs[0]") puts it outside its array.
absl::Status BlockOutsideArray(const std::string& where, const std::string& spec_name,
                               const std::vector<int64_t>& blocks, int64_t start, int dim,
                               const ir::ShapedType& array);
// The error for a ref_load / ref_store window that leaves its ref.
absl::Status WindowOutsideRef(const ir::Op& op, const std::string& where,
                              const std::vector<int64_t>& starts,
                              const std::vector<int64_t>& sizes, const std::string& ref_name,
                              const ir::ShapedType& ref);

// What the kernel ops of one grid step see.
struct KernelFrame {
  const ir::Op* call = nullptr;
  std::vector<int64_t> grid;   // the grid's sizes (those sized at run time included)
  std::vector<int64_t> index;  // the grid index
  // Kernel param id -> how errors name it ("in_specs[0] block"), and its position.
  std::unordered_map<int64_t, std::string> ref_names;
  std::unordered_map<int64_t, int> param_of;
  // The instances of this kernel on the other devices (set when the kernel has semaphores).
  KernelPeers* peers = nullptr;

  std::string Where() const { return KernelWhere(*call, index); }
};

// Runs `region` (an index map or the kernel of `frame.call`) on `args` with `frame`.
using KernelRegionRunner = std::function<absl::StatusOr<std::vector<ir::Tensor>>(
    const ir::Region& region, std::vector<ir::Tensor> args, const KernelFrame& frame)>;

// Runs pallas_call `op` on its operands. A kernel with semaphores meets its instances on other
// devices through `peers` (null: the device runs alone).
absl::StatusOr<std::vector<ir::Tensor>> RunPallasCall(const ir::Op& op,
                                                      const std::vector<ir::Tensor>& operands,
                                                      const KernelRegionRunner& run,
                                                      ir::Allocator* allocator,
                                                      KernelPeers* peers = nullptr);

// Runs kernel op `op` (ref_load, ref_store, program_id, num_programs, the semaphore ops,
// dma_start, dma_wait) in `frame`. A window that leaves its ref, a semaphore index outside its
// array or a device outside the mesh is an error naming the kernel, the grid index and the ref.
absl::StatusOr<std::vector<ir::Tensor>> RunKernelOp(const ir::Op& op,
                                                    const std::vector<ir::Tensor>& operands,
                                                    const KernelFrame& frame,
                                                    ir::Allocator* allocator);

}  // namespace shardjit::backends::reference

#endif  // SHARDJIT_BACKENDS_REFERENCE_PALLAS_H_
