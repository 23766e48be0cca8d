// Internals of collective-simplify (passes/collective_simplify.h) shared by its .cc files.
#ifndef SHARDJIT_PASSES_COLLECTIVE_SIMPLIFY_INTERNAL_H_
#define SHARDJIT_PASSES_COLLECTIVE_SIMPLIFY_INTERNAL_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/ir.pb.h"
#include "ir/types.h"

namespace shardjit::passes::collective_simplify {

using TypeMap = std::unordered_map<int64_t, ir::ShapedType>;
using AxisNames = google::protobuf::RepeatedPtrField<std::string>;

// The regions an op holds (fori_loop, shard_map and fusion bodies).
std::vector<const ir::Region*> Regions(const ir::Op& op);
std::vector<ir::Region*> MutableRegions(ir::Op& op);

// The types of every value of `region`, nested regions included.
void AddTypes(const ir::Region& region, TypeMap& types);
// The largest value id defined in `region`, nested regions included (-1 when none).
int64_t MaxValueId(const ir::Region& region);

// An op `opcode(operands) -> result: type` that inherits `origin`'s name scope and location.
ir::Op DerivedOp(const ir::Op& origin, const std::string& opcode,
                 const std::vector<int64_t>& operands, int64_t result, const ir::ShapedType& type);

// Combines independent psums, and independent tiled all_gathers on dimension 0, of `region` and
// of the fori_loop bodies in it (see CollectiveSimplifyOptions::combine_max_bytes); new values get
// ids from `next_id`. Returns whether anything changed.
bool CombineCollectives(ir::Region& region, const TypeMap& types, int64_t max_bytes,
                        int64_t& next_id);

}  // namespace shardjit::passes::collective_simplify

#endif  // SHARDJIT_PASSES_COLLECTIVE_SIMPLIFY_INTERNAL_H_
