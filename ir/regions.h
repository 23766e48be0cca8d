// The regions an op holds, in a fixed order: the one place that knows which primitives have
// regions, so that passes and backends walk nested code without naming each primitive.
#ifndef SHARDJIT_IR_REGIONS_H_
#define SHARDJIT_IR_REGIONS_H_

#include <string>
#include <vector>

#include "ir/ir.pb.h"

namespace shardjit::ir {

// fori_loop: {body}; while_loop: {cond, body}; cond: its branches; shard_map and fusion:
// {body}; none for other ops.
std::vector<const Region*> Regions(const Op& op);
std::vector<Region*> MutableRegions(Op& op);

// How messages name region `index` of `op`: "body", "cond" (a while_loop's), "branch 1".
std::string RegionName(const Op& op, int index);

// Whether `op`'s regions only see their own params (shard_map and fusion bodies); the others
// (loops, cond branches) may read values of the regions around them.
bool HasClosedRegions(const Op& op);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_REGIONS_H_
