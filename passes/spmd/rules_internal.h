// The rule families of passes/spmd/rules.cc and helpers they share.
#ifndef SHARDJIT_PASSES_SPMD_RULES_INTERNAL_H_
#define SHARDJIT_PASSES_SPMD_RULES_INTERNAL_H_

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/prim.h"
#include "passes/spmd/rules.h"

namespace shardjit::passes::spmd::internal {

using Rule = std::function<std::vector<Strategy>(const OpView&)>;

// The rules by primitive.
class RuleTable {
 public:
  Rule& operator[](ir::Prim prim) { return rules_[static_cast<int>(prim)]; }
  // nullptr where `prim` has no rule.
  const Rule* Find(ir::Prim prim) const {
    const Rule& rule = rules_[static_cast<int>(prim)];
    return rule ? &rule : nullptr;
  }

 private:
  std::array<Rule, ir::kPrimCount> rules_;
};

// Elementwise maps are handled by primitive kind; these add rules by primitive.
void AddDataMovementRules(RuleTable& table);  // constant, iota, broadcast_in_dim, reshape, ...
void AddContractionRules(RuleTable& table);   // reduce_sum/max/min, dot_general, gmm, tgmm
void AddRegionRules(RuleTable& table);        // shard_map, fori_loop
void AddAlongAxisRules(RuleTable& table);     // sort, top_k, argmax, cumsum, rev, pad, ...
void AddIndexingRules(RuleTable& table);      // gather, scatter, scatter_add, ...
std::vector<Strategy> ElementwiseRule(const OpView& view);

// Whether `dims` holds `d`.
inline bool Contains(const std::vector<int64_t>& dims, int64_t d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

// A repeated attribute field as a vector.
inline std::vector<int64_t> ToDims(const google::protobuf::RepeatedField<int64_t>& f) {
  return {f.begin(), f.end()};
}

// Appends `spec` to `list` unless it is there already.
void AddUnique(std::vector<Spec>& list, const Spec& spec);

// Strategies of a single-result op built from candidate result layouts: each known operand's
// layout mapped by `from_operand` (nullopt: no candidate), each layout the users want, and the
// replicated layout; `for_result` turns a result layout into a strategy.
std::vector<Strategy> FromResultLayouts(
    const OpView& view, const std::function<std::optional<Spec>(int, const Spec&)>& from_operand,
    const std::function<Strategy(const Spec&)>& for_result);

}  // namespace shardjit::passes::spmd::internal

#endif  // SHARDJIT_PASSES_SPMD_RULES_INTERNAL_H_
