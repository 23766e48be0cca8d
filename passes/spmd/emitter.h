// Emitter: builds the per-device function of the SPMD partitioner. Every op goes through
// ir::FunctionBuilder, so each is checked by its primitive's shape rule as it is added; the
// emitter adds the index arithmetic of block offsets (cached) and the collectives of resharding.
#ifndef SHARDJIT_PASSES_SPMD_EMITTER_H_
#define SHARDJIT_PASSES_SPMD_EMITTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/builder.h"
#include "ir/ir.pb.h"
#include "ir/types.h"
#include "passes/spmd/spec.h"

namespace shardjit::passes::spmd {

class Emitter {
 public:
  explicit Emitter(const ir::Mesh& mesh);

  const ir::Mesh& mesh() const { return mesh_; }
  int64_t AddParam(const ir::ShapedType& type) { return builder_.AddParam(type); }
  const ir::ShapedType& TypeOf(int64_t id) const { return builder_.TypeOf(id); }
  // The name scope and location given to the ops added from now on.
  void SetOrigin(const ir::Op& op);

  // Appends `op` (opcode and attributes set) on `operands`.
  absl::StatusOr<std::vector<int64_t>> Add(ir::Op op, const std::vector<int64_t>& operands);
  absl::StatusOr<int64_t> Add1(ir::Op op, const std::vector<int64_t>& operands);

  // An s32 scalar constant.
  absl::StatusOr<int64_t> S32(int64_t value);
  // axis_index(axes) * block: where this device's block starts along a dimension split over
  // `axes` into blocks of `block` elements.
  absl::StatusOr<int64_t> BlockOffset(const AxisList& axes, int64_t block);

  // The local block of a value of global type `global`, laid out by `from`, relaid out by `to`
  // (passes/spmd/reshard.h). Collectives over axes of total size 1 are left out.
  absl::StatusOr<int64_t> Reshard(int64_t id, const ir::ShapedType& global, const Spec& from,
                                  const Spec& to);
  // Combines partial results over `axes`: `collective` (psum, pmax or pmin) or, when
  // scatter_dim >= 0, a tiled psum_scatter onto that dimension. Nothing for axes of size 1.
  absl::StatusOr<int64_t> Combine(int64_t id, const std::string& collective, const AxisList& axes,
                                  int64_t scatter_dim);

  // Opens a nested region (a loop body; `spmd`: a mapped body); values added from now on are
  // visible only inside it. The offset and constant caches are restored when it closes.
  void OpenRegion(bool spmd);
  ir::Region CloseRegion(const std::vector<int64_t>& results);

  ir::Function Finish(const std::string& name, const std::vector<int64_t>& results);

 private:
  struct Caches {
    std::map<int64_t, int64_t> s32;
    std::map<std::pair<AxisList, int64_t>, int64_t> offsets;
  };

  const ir::Mesh& mesh_;
  ir::FunctionBuilder builder_;
  ir::Op origin_;
  std::map<int64_t, int64_t> s32_;
  std::map<std::pair<AxisList, int64_t>, int64_t> offsets_;
  std::vector<Caches> saved_;
};

}  // namespace shardjit::passes::spmd

#endif  // SHARDJIT_PASSES_SPMD_EMITTER_H_
