// Internals of collective-simplify (passes/collective_simplify.h) shared by its .cc files.
#ifndef SHARDJIT_PASSES_COLLECTIVE_SIMPLIFY_INTERNAL_H_
#define SHARDJIT_PASSES_COLLECTIVE_SIMPLIFY_INTERNAL_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/ir.pb.h"
#include "ir/types.h"
#include "passes/op_emitter.h"
#include "passes/spmd_rewrite.h"

namespace shardjit::passes::collective_simplify {

using namespace spmd_rewrite;  // NOLINT: the shared region rewrite kit

// Combines independent psums, and independent tiled all_gathers on dimension 0, of `region` and
// of the fori_loop bodies in it (see CollectiveSimplifyOptions::combine_max_bytes); new values get
// ids from `next_id`. Returns whether anything changed.
bool CombineCollectives(const ir::Mesh& mesh, ir::Region& region, const TypeMap& types,
                        int64_t max_bytes, int64_t& next_id);

}  // namespace shardjit::passes::collective_simplify

#endif  // SHARDJIT_PASSES_COLLECTIVE_SIMPLIFY_INTERNAL_H_
