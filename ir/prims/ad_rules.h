// The differentiation rules of the primitives (ir/ad_rule.h), by primitive name, for their
// registrations in ir/prims/*.cc to attach: a name without rules gets empty ones.
#ifndef SHARDJIT_IR_PRIMS_AD_RULES_H_
#define SHARDJIT_IR_PRIMS_AD_RULES_H_

#include <string>
#include <string_view>
#include <unordered_map>

#include "ir/ad_rule.h"

namespace shardjit::ir::prims {

// The batching rule of every elementwise primitive (batch_rules.cc), and those of the others by
// name (an empty rule for a name without one).
BatchRule ElementwiseBatch();
BatchRule BatchRuleFor(std::string_view name);
// The collectives' batching rules, vmap's axis_name included (batch_collectives.cc).
BatchRule CollectiveBatch(std::string_view name);

// A name's rules in one of the tables below, empty ones for a name it lacks.
using AdRuleTable = std::unordered_map<std::string, AdRules>;
AdRules FindAdRules(const AdRuleTable& table, std::string_view name);

// Elementwise and math primitives (ad_elementwise.cc): add ... logistic, select, clamp,
// convert_element_type, sin ... atan2, and zero tangents for floor, ceil, round and sign.
AdRules ElementwiseAd(std::string_view name);
// Reductions, dot_general and data movement (ad_structural.cc).
AdRules StructuralAd(std::string_view name);
// Collectives (ad_collectives.cc): psum, pmean, all_gather, psum_scatter, ppermute,
// all_to_all, pbroadcast.
AdRules CollectiveAd(std::string_view name);
// gather, scatter_add, sort, top_k and cumsum (ad_indexing.cc).
AdRules IndexingAd(std::string_view name);
// gmm and tgmm (ad_grouped_matmul.cc); empty rules for other names.
AdRules GroupedMatmulAd(std::string_view name);
// reduce_prod, cumprod, cummax and cummin (ad_scans.cc); empty rules for other names.
AdRules ScanAd(std::string_view name);

}  // namespace shardjit::ir::prims

#endif  // SHARDJIT_IR_PRIMS_AD_RULES_H_
