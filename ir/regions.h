// The regions an op holds, in a fixed order: the one place that knows which primitives have
// regions, so that passes and backends walk nested code without naming each primitive.
#ifndef SHARDJIT_IR_REGIONS_H_
#define SHARDJIT_IR_REGIONS_H_

#include <string>
#include <vector>

#include "ir/ir.pb.h"

namespace shardjit::ir {

// fori_loop: {body}; while_loop: {cond, body}; cond: its branches; shard_map and fusion:
// {body}; pallas_call: the index maps of its in_specs then out_specs (whole-array specs have
// none), then the kernel; custom_jvp_call: {fun, jvp}; custom_vjp_call: {fun, fwd, bwd};
// checkpoint: {body}; none for other ops.
std::vector<const Region*> Regions(const Op& op);
std::vector<Region*> MutableRegions(Op& op);

// How messages name region `index` of `op`: "body", "cond" (a while_loop's), "branch 1",
// "in_specs[0] index_map", "kernel", "fun", "jvp", "fwd", "bwd".
std::string RegionName(const Op& op, int index);

// Whether `op`'s regions only see their own params (shard_map, fusion and pallas_call
// regions); the others (loops, cond branches, custom derivatives, checkpoint) may read values
// of the regions around them.
bool HasClosedRegions(const Op& op);

// Whether `op` writes state besides its results (a ref_store, or a loop or branch inside a
// kernel that stores): such ops stay where they are even when their results are unused.
bool HasEffects(const Op& op);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_REGIONS_H_
