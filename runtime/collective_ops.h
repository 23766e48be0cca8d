// The data semantics of each collective (JAX lax.parallel), as pure functions: given the operands
// of every member of a device's group (in group order) and the device's index in the group,
// compute that device's result. The fabric (runtime/fabric.h) gathers the operands.
#ifndef SHARDJIT_RUNTIME_COLLECTIVE_OPS_H_
#define SHARDJIT_RUNTIME_COLLECTIVE_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "ir/ir.pb.h"
#include "ir/prim.h"
#include "ir/tensor.h"

namespace shardjit::runtime {

struct GroupOperands {
  // The (first) operand of each member, in group order.
  std::vector<ir::Tensor> inputs;
  // For ops of several operands (ragged_all_to_all): every operand of each member, in group
  // order; empty otherwise.
  std::vector<std::vector<ir::Tensor>> all_inputs;
  // The member whose result is computed.
  int64_t my_index = 0;
  // For ppermute: the combined axis index of each member (perm pairs refer to these).
  std::vector<int64_t> axis_indices;
  // For an all-reduce split across processes (runtime/remote.h): per input, the element of the
  // operand that its first element is (ReduceRange); empty: every input is a whole operand.
  std::vector<int64_t> firsts;
  // For all_gather: its result, allocated ahead (undefined: allocated here). A member's operand
  // that already lies in its place there (received in place, runtime/fabric.h) is not copied.
  ir::Tensor output;
};

// psum, pmean, pmax, pmin, all_gather, psum_scatter, ppermute, pbroadcast, all_to_all,
// ragged_all_to_all, and the `*_start` forms (ir/async.h); float reductions run on `backend`'s
// kernels (Backend::ReduceBuffers). Errors that depend on the data (a
// ragged_all_to_all's offsets) name the op, the devices and the values at fault.
absl::StatusOr<ir::Tensor> ComputeCollective(const ir::Op& op, const GroupOperands& group,
                                             const backends::Backend& backend,
                                             ir::Allocator* allocator);

// Whether each member's block of an all_gather of `operand` along `axis` is one run of the
// result's elements (every dim before `axis` is 1), so that it can be received in place.
bool GatherBlocksAreRuns(const ir::ShapedType& operand, int64_t axis);

// Elements [begin, end) of the all-reduce `kind` (psum, pmean, pmax, pmin; psum_scatter sums)
// of `inputs` (in group order) into `out`, allocated by the caller with the result type: the
// members of a group may each reduce a share of one result they then all read. `firsts` (empty:
// all 0) gives, per input, the element of its operand that the input's first element is: an
// input may hold only the elements of its operand from there on (a share sent by another
// process) that [begin, end) reads.
absl::Status ReduceRange(const std::vector<ir::Tensor>& inputs, ir::Prim kind,
                         const backends::Backend& backend, ir::Tensor& out, int64_t begin, int64_t end,
                         const std::vector<int64_t>& firsts = {});

// Copies the box of size `extent` at `src_offset` of `src` to `dst_offset` of `dst` (same rank).
void CopyBox(const ir::Tensor& src, const std::vector<int64_t>& src_offset, ir::Tensor& dst,
             const std::vector<int64_t>& dst_offset, const std::vector<int64_t>& extent);

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_COLLECTIVE_OPS_H_
