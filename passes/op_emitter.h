// OpEmitter: how passes build per-device ops. Each op goes through ir::FunctionBuilder, so its
// result types come from its primitive's shape rule; it takes the name scope and location of the
// op it stands for (its origin). On top: cached s32 constants and block offsets, and a few ops
// every pass spells the same way.
//
// It builds either a new function (spmd-partition), or op lists that replace ops of an existing
// function (collective-fusion, collective-simplify, canonicalize), whose value ids it keeps.
#ifndef SHARDJIT_PASSES_OP_EMITTER_H_
#define SHARDJIT_PASSES_OP_EMITTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/builder.h"
#include "ir/ir.pb.h"
#include "ir/sharding.h"
#include "ir/types.h"

namespace shardjit::passes {

class OpEmitter {
 public:
  using TypeMap = std::unordered_map<int64_t, ir::ShapedType>;

  // Builds a new per-device function on `mesh`. `pass` names the pass in errors.
  OpEmitter(const ir::Mesh& mesh, std::string pass);
  // Builds ops to splice into a function whose values have `types` (held, not copied). An op's
  // result takes the id given to Emit, else the next of `*next_id` (may be null when every op
  // is given one). Take() hands the ops over.
  OpEmitter(const ir::Mesh& mesh, std::string pass, const TypeMap& types, int64_t* next_id);

  const ir::Mesh& mesh() const { return mesh_; }
  // The type of value `id` (splicing: a new one, or one of the function).
  const ir::ShapedType& TypeOf(int64_t id) const;
  // The first error (an op its shape rule rejects); later ops are dropped.
  const absl::Status& status() const { return status_; }
  // The name scope and location given to the ops added from now on.
  void SetOrigin(const ir::Op& op);

  // Appends `op` (opcode and attributes set) on `operands`; returns its results.
  absl::StatusOr<std::vector<int64_t>> Add(ir::Op op, const std::vector<int64_t>& operands);
  // Appends a one-result op; returns its result (given id `result` when >= 0, splicing only),
  // or -1 after an error.
  int64_t Emit(ir::Op op, const std::vector<int64_t>& operands, int64_t result = -1);
  int64_t Emit(const std::string& opcode, const std::vector<int64_t>& operands,
               int64_t result = -1);

  // A constant of `type` with every element `value` (result id `result` when >= 0).
  int64_t Constant(const ir::ShapedType& type, double value, int64_t result = -1);
  // An s32 scalar constant (emitted once per value).
  int64_t S32(int64_t value);
  // axis_index(axes) (emitted once per list).
  int64_t AxisIndex(const ir::AxisList& axes);
  // axis_index(axes) * block: where this device's block starts along a dimension split over
  // `axes` into blocks of `block` elements (cached; 0 for axes of total size 1).
  int64_t BlockOffset(const ir::AxisList& axes, int64_t block);
  int64_t Convert(int64_t x, ir::DType dtype, int64_t result = -1);
  // The done of the async `blocking` collective `future` was started by.
  int64_t AsyncDone(const std::string& blocking, int64_t future, int64_t result = -1);

  // New function only: params, nested regions (a loop body; `spmd`: a mapped body; the caches
  // are restored when it closes) and the finished function.
  int64_t AddParam(const ir::ShapedType& type);
  void OpenRegion(bool spmd);
  ir::Region CloseRegion(const std::vector<int64_t>& results);
  ir::Function Finish(const std::string& name, const std::vector<int64_t>& results);

  // Splicing only: the ops emitted since the last Take; none after an error. (Ops holding
  // regions are not spliced.)
  std::vector<ir::Op> Take();

 private:
  struct Caches {
    std::map<int64_t, int64_t> s32;
    std::map<std::pair<ir::AxisList, int64_t>, int64_t> offsets;
  };

  // Add, the first result taking id `result` when >= 0 (splicing).
  absl::StatusOr<std::vector<int64_t>> Append(ir::Op op, const std::vector<int64_t>& operands,
                                              int64_t result);
  // The builder's id of value `id`; splicing, a value of the function is declared to the
  // builder on first use.
  int64_t Local(int64_t id);

  const ir::Mesh& mesh_;
  const std::string pass_;
  ir::FunctionBuilder builder_;
  ir::Op origin_;
  absl::Status status_;
  Caches caches_;
  std::vector<Caches> saved_;
  // Splicing: the function's types, the next id, and ids between the function and the builder.
  const bool splice_;
  const TypeMap* types_ = nullptr;
  int64_t* next_id_ = nullptr;
  std::unordered_map<int64_t, int64_t> local_, global_;
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_OP_EMITTER_H_
