// Internals of collective-fusion (passes/collective_fusion.h): the ring builders.
#ifndef SHARDJIT_PASSES_COLLECTIVE_FUSION_INTERNAL_H_
#define SHARDJIT_PASSES_COLLECTIVE_FUSION_INTERNAL_H_

#include <cstdint>
#include <vector>

#include "ir/ir.pb.h"
#include "passes/op_emitter.h"

namespace shardjit::passes::collective_fusion {

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
