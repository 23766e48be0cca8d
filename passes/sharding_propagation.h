// sharding-propagation: gives every op result of a global-view module a layout (Op.sharding,
// printed `@sharding(P(x,None))`), which spmd-partition then realises.
//
// Seeds: the entry's param_shardings (fixed), with_sharding_constraint results (fixed), and the
// result_shardings (wanted by the returned values). Layouts flow forwards and backwards through
// each op by its partitioning rule (passes/spmd/rules.h): elementwise ops share a layout;
// broadcast_in_dim, transpose and reshape map dimensions (a reshape keeps the layout of
// dimensions that are unchanged or split/merged evenly, else replicates them); slices replicate
// the dimensions they cut; reduce_* drops reduced dimensions (which may stay sharded: partial
// results are then combined); dot_general shares batch dimensions, maps free dimensions to the
// result and may keep contracting dimensions sharded by the same axes on both sides (the result is
// then partial: psum or psum_scatter); concatenate shares every dimension but the concatenated
// one; constants and iota take the layout their users want, else replicated; shard_map results
// are fixed to its out_specs and its operands want its in_specs; a fori_loop carry has one
// layout at entry, exit and in the body (its entry layout, or the one its users want if cheaper).
//
// Cost model (conflicts): an op's layout is the candidate of its rule with the least estimated
// time per device (passes/machine_model.h): its flops on the candidate's blocks, plus the bytes
// and collectives of resharding its known operands to the candidate's layouts, its own
// reduction, and resharding its results to every layout their users want (passes/spmd/cost.h);
// ties go to fewer bytes, then fewer collectives, then smaller blocks.
//
// Plan search: the propagated plan is compared with its neighbours, the plans with one op's
// result laid out by another candidate of its rule (AlternativeLayouts) and everything else
// propagated around it; the one the machine model estimates fastest once partitioned
// (EstimatePlanSeconds) wins (for modules of at most 64 top-level ops, at most 48 neighbours
// estimated). fori_loop bodies follow their loop's layouts.
//
// Iteration: a backward sweep collects the layouts each undecided value's users want; a forward
// sweep decides every op with a decided operand; when nothing more is decided, sources
// (constants, iota) take their wanted layout. This repeats until every value has a layout (each
// round decides at least one value, so it ends).
//
// fori_loop bodies are propagated once the enclosing region is decided: the index is replicated,
// the carries' params are fixed to the loop's layouts (which the body's results want), and values
// of the enclosing regions keep theirs. shard_map bodies are per-device code: not annotated.
//
// Left unchanged: per-device modules, modules without mesh axes or with more than one function,
// modules that only wrap one shard_map (lower-shard-map's), and modules with an op that
// spmd-partition has no rule for (their layouts would have no use).
#ifndef SHARDJIT_PASSES_SHARDING_PROPAGATION_H_
#define SHARDJIT_PASSES_SHARDING_PROPAGATION_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "passes/machine_model.h"
#include "passes/pass.h"
#include "passes/spmd/spec.h"

namespace shardjit::passes {

class ShardingPropagation final : public Pass {
 public:
  explicit ShardingPropagation(MachineModel machine = {}) : machine_(machine) {}
  std::string name() const override { return "sharding-propagation"; }
  absl::StatusOr<bool> Run(ir::Module& module) override;

 private:
  MachineModel machine_;  // what plans are priced by
};

// The pieces of the plan search, for tests and tools. `module` is a global-view module of one
// function that every op has a rule for.
//
// Propagates layouts through `module` as the pass does, with the results in `forced` (value id ->
// layout) fixed like with_sharding_constraint results, and annotates it; whether it changed.
absl::StatusOr<bool> PropagateShardings(ir::Module& module,
                                        const std::map<int64_t, spmd::Spec>& forced,
                                        const MachineModel& machine = {});
// The machine model's estimate (passes/cost_analysis.h) of the annotated module once partitioned.
absl::StatusOr<double> EstimatePlanSeconds(const ir::Module& annotated,
                                           const MachineModel& machine = {});
// Every other layout the rules propose for a top-level op result, given the annotated layouts of
// its operands: the single changes the search tries.
std::vector<std::pair<int64_t, spmd::Spec>> AlternativeLayouts(const ir::Module& annotated);

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_SHARDING_PROPAGATION_H_
