// Internals of collective-fusion (passes/collective_fusion.h): an emitter that builds typed ops,
// and the ring builders.
#ifndef SHARDJIT_PASSES_COLLECTIVE_FUSION_INTERNAL_H_
#define SHARDJIT_PASSES_COLLECTIVE_FUSION_INTERNAL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/ir.pb.h"
#include "ir/types.h"
#include "passes/spmd_rewrite.h"

namespace shardjit::passes::collective_fusion {

using spmd_rewrite::AxisNames;

// Builds a list of ops that replaces `origin` (inheriting its name scope and location), typing
// each with its primitive's shape rule. New values get ids from `next_id`; the first error is
// kept and makes the rewrite be dropped.
class OpEmitter {
 public:
  OpEmitter(const ir::Mesh& mesh, const spmd_rewrite::TypeMap& types, const ir::Op& origin,
            int64_t& next_id);

  // Appends `op` (opcode and attributes set) on `operands`; returns its result, which is
  // `result` when given (the id of the value the list replaces).
  int64_t Emit(ir::Op op, const std::vector<int64_t>& operands, int64_t result = -1);
  int64_t Emit(const std::string& opcode, const std::vector<int64_t>& operands,
               int64_t result = -1);
  // An s32 constant (emitted once per value).
  int64_t ScalarS32(int64_t value);
  int64_t Zeros(const ir::ShapedType& type);
  int64_t AxisIndex(const AxisNames& axes);
  // ((me + shift) mod n) * scale, an s32 scalar: where shard (me + shift) starts.
  int64_t ShardStart(int64_t me, int64_t shift, int64_t n, int64_t scale);
  // Starts passing `x` `shift` positions along the ring of `axes` (n members).
  int64_t RingPermuteStart(int64_t x, const AxisNames& axes, int64_t n, int64_t shift);
  int64_t Done(const std::string& blocking, int64_t future, int64_t result = -1);
  // Later ops inherit `origin`'s name scope and location.
  void SetOrigin(const ir::Op& origin) { origin_ = &origin; }
  // x's block of `size` at `start` along `dim`, the other dims whole.
  int64_t Block(int64_t x, int64_t dim, int64_t start, int64_t size);
  int64_t Convert(int64_t x, ir::DType dtype, int64_t result = -1);

  const ir::ShapedType& Type(int64_t id) const { return types_.at(id); }
  const absl::Status& status() const { return status_; }
  std::vector<ir::Op> Take() { return std::move(ops_); }

 private:
  const ir::Mesh& mesh_;
  spmd_rewrite::TypeMap types_;
  const ir::Op* origin_;
  int64_t& next_id_;
  std::vector<ir::Op> ops_;
  std::map<int64_t, int64_t> scalars_;  // s32 constants emitted so far, by value
  absl::Status status_;
};

// A dot_general one of whose operands is a tiled all_gather over a ring of n devices.
struct GatherMatmul {
  const ir::Op* gather = nullptr;
  const ir::Op* dot = nullptr;
  int side = 0;             // the gathered value is the lhs (0) or the rhs (1)
  int64_t dim = 0;          // the gathered dim of that operand
  bool contracting = false; // dim is contracting; otherwise free
  int64_t result_dim = 0;   // free: the result dim it becomes
  int64_t other_dim = 0;    // contracting: the other operand's matching dim
  int64_t n = 0;
};

// The ring replacing gm.dot (its result keeps its id).
std::vector<ir::Op> AllGatherMatmulRing(const GatherMatmul& gm, bool bidirectional,
                                        OpEmitter& e);
// The number of steps (rendezvous) of that ring.
int64_t AllGatherRingSteps(int64_t n, bool bidirectional);

// A dot_general whose only use is a tiled psum_scatter along a free dim of one operand.
struct MatmulScatter {
  const ir::Op* dot = nullptr;
  const ir::Op* scatter = nullptr;
  int side = 0;     // the operand the scattered dim comes from
  int64_t dim = 0;  // that operand's dim
  int64_t n = 0;
};

// The reduce-scatter ring replacing ms.scatter (its result keeps its id).
std::vector<ir::Op> MatmulReduceScatterRing(const MatmulScatter& ms, OpEmitter& e);

}  // namespace shardjit::passes::collective_fusion

#endif  // SHARDJIT_PASSES_COLLECTIVE_FUSION_INTERNAL_H_
