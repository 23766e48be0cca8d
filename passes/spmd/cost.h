// The communication cost model of the SPMD passes: the bytes one device receives per collective.
// Sharding propagation chooses layouts with it, and tests measure partitioned programs with it.
//   all_gather: result - operand bytes        psum/pmean/pmax/pmin: operand bytes
//   psum_scatter: operand - result bytes      all_to_all: operand bytes * (n-1)/n
//   ppermute: operand bytes                   everything else: 0
#ifndef SHARDJIT_PASSES_SPMD_COST_H_
#define SHARDJIT_PASSES_SPMD_COST_H_

#include <cstdint>

#include "ir/ir.pb.h"

namespace shardjit::passes::spmd {

// Per device, for a collective over a group of n devices.
inline int64_t AllGatherBytes(int64_t operand_bytes, int64_t n) { return operand_bytes * (n - 1); }
inline int64_t AllReduceBytes(int64_t operand_bytes, int64_t n) {
  return n > 1 ? operand_bytes : 0;
}
inline int64_t ReduceScatterBytes(int64_t operand_bytes, int64_t n) {
  return operand_bytes - operand_bytes / n;
}
inline int64_t AllToAllBytes(int64_t operand_bytes, int64_t n) {
  return operand_bytes * (n - 1) / n;
}

// Bytes one device communicates running `module`'s entry function (a fori_loop body counts once
// per trip, a shard_map body once).
int64_t CommunicatedBytes(const ir::Module& module);

}  // namespace shardjit::passes::spmd

#endif  // SHARDJIT_PASSES_SPMD_COST_H_
