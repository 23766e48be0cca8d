// Builds a Function op by op, inferring result types with each primitive's shape rule (the same
// rule the verifier applies). Regions (loop and shard_map bodies) are built by opening a nested
// region, adding to it, and closing it into the op's attributes.
#ifndef SHARDJIT_IR_BUILDER_H_
#define SHARDJIT_IR_BUILDER_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/sharding.h"
#include "ir/types.h"

namespace shardjit::ir {

class FunctionBuilder {
 public:
  // `mesh` may be null (no collectives or shard_map then); `per_device`: the function is a
  // per-device program, so collectives are allowed at top level.
  FunctionBuilder(const Mesh* mesh, bool per_device);

  // Adds a parameter to the innermost open region; `vma`: the mesh axes it varies over (in a
  // region typed with varying manual axes).
  int64_t AddParam(const ShapedType& type, AxisList vma = {});
  // Appends `op` (opcode, attributes and, optionally, name scope/location set; operands given)
  // to the innermost open region. Returns its result ids, or the shape rule's error. In a region
  // typed with varying manual axes (jax's check_vma), operands that vary over fewer axes than
  // the op needs get a pvary first (the union of the operands' for ordinary ops, the axes of a
  // collective for it), psum and pmean are typed invariant, and each result gets its axes.
  absl::StatusOr<std::vector<int64_t>> AddOp(Op op, const std::vector<int64_t>& operands);

  // Opens a nested region; `spmd` marks a mapped (shard_map) body, `kernel_grid_rank` >= 0 a
  // pallas_call kernel or index map over a grid of that rank, `check_vma` a region typed with
  // varying manual axes (regions nested in one inherit all three; kernels are not typed).
  void OpenRegion(bool spmd, int kernel_grid_rank = -1, bool check_vma = false);
  // Closes the innermost region with the given results and returns it.
  Region CloseRegion(const std::vector<int64_t>& results);
  // `id` made to vary over `axes` too, in the innermost region: a pvary of the axes it lacks
  // (in mesh order), or `id` itself when it lacks none.
  absl::StatusOr<int64_t> VaryingOver(int64_t id, const AxisList& axes);
  // Opens `region` again (built by this builder and closed, as OpenRegion(false) would open it
  // here) to append ops after its own; its results are dropped: CloseRegion sets new ones.
  void ReopenRegion(Region region);

  const ShapedType& TypeOf(int64_t id) const { return types_.at(id); }
  // The id the next value will get: values added from now on have ids at least this.
  int64_t next_id() const { return next_id_; }
  bool in_spmd() const { return spmd_.back(); }
  bool checks_vma() const { return check_vma_.back(); }
  // The mesh axes value `id` varies over, in mesh order (empty outside typed regions).
  const AxisList& VmaOf(int64_t id) const;
  // The grid rank of the kernel being built, or -1 outside kernels.
  int kernel_grid_rank() const { return kernel_.back(); }
  int depth() const { return static_cast<int>(open_.size()); }
  // The mesh shape rules see: the function's, with the named axes pushed below appended.
  const Mesh* mesh() const { return named_axes_.empty() ? mesh_ : &extended_mesh_; }

  // Names an axis that exists only while tracing (vmap's axis_name): until PopNamedAxis, shape
  // rules see the mesh with it appended, so that collectives may name it.
  void PushNamedAxis(const std::string& name, int64_t size);
  void PopNamedAxis();
  // The axes pushed, innermost last.
  std::vector<std::string> named_axes() const;

  // Finishes the top-level region with `results`; value ids are canonicalised.
  Function Finish(const std::string& name, const std::vector<int64_t>& results);

 private:
  const Mesh* mesh_;
  std::vector<std::pair<std::string, int64_t>> named_axes_;
  Mesh extended_mesh_;  // mesh_ and named_axes_
  // Inserts what varying manual axes need before `op` (see AddOp): `operands` updated.
  absl::Status TypeOperands(Op& op, std::vector<int64_t>& operands);
  // The axes of each result of `op` (added with `operands`).
  absl::Status TypeResults(const Op& op, const std::vector<int64_t>& operands,
                           const std::vector<int64_t>& results);
  // pvary(id, axes), once per value and axes in the innermost region.
  absl::StatusOr<int64_t> Pvary(int64_t id, const AxisList& axes);
  // a and b together, in mesh order.
  AxisList Union(const AxisList& a, const AxisList& b) const;

  std::vector<Region> open_;
  std::vector<bool> spmd_;
  std::vector<bool> check_vma_;
  std::vector<std::unordered_map<std::string, int64_t>> pvarys_;  // per open region
  std::unordered_map<int64_t, AxisList> vma_;
  std::vector<int> kernel_;
  std::unordered_map<int64_t, ShapedType> types_;
  int64_t next_id_ = 0;
};

// Opens a region of `b` for its lifetime: Close returns it; otherwise (an error path) the
// destructor closes and drops it, leaving the builder as it was.
class RegionScope {
 public:
  RegionScope(FunctionBuilder& b, bool spmd, int kernel_grid_rank = -1, bool check_vma = false)
      : b_(b) {
    b_.OpenRegion(spmd, kernel_grid_rank, check_vma);
  }
  ~RegionScope() {
    if (open_) b_.CloseRegion({});
  }
  RegionScope(const RegionScope&) = delete;
  RegionScope& operator=(const RegionScope&) = delete;
  Region Close(const std::vector<int64_t>& results) {
    open_ = false;
    return b_.CloseRegion(results);
  }

 private:
  FunctionBuilder& b_;
  bool open_ = true;
};

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_BUILDER_H_
