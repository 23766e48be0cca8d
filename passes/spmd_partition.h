// spmd-partition: turns a global-view module whose ops carry result layouts (Op.sharding, from
// sharding-propagation) into the per-device module that computes the same results, with explicit
// collectives:
//   - parameters become blocks of param_shardings (ir::LocalDims); each op runs on blocks with the
//     layouts its partitioning rule needs (passes/spmd/rules.h, chosen by the same cost model as
//     propagation), and operands are resharded to them first (passes/spmd/reshard.h: all_to_all,
//     tiled all_gather, dynamic_slice at axis_index offsets);
//   - reduce_* and dot_general over sharded dimensions end with psum/pmax/pmin over their axes,
//     or psum_scatter when the result's layout splits a dimension over those axes;
//   - shard_map: operands are resharded to its in_specs and its body is inlined on the local
//     blocks (values renumbered into the function); its results are laid out by its out_specs
//     (axes an out_spec does not name: replicated, the values assumed equal, as JAX with
//     check_vma=False);
//   - fori_loop: the body is partitioned in place; each carry keeps the loop's layout at entry,
//     in the body's params and results (body results are resharded to it), the index is
//     replicated and values read from the enclosing function keep their layouts;
//   - results are resharded to result_shardings; the module becomes view=per_device.
// Left unchanged (Run returns false): per-device modules, modules without mesh axes or with more
// than one function, ops without a layout (propagation disabled), modules that only wrap one
// shard_map (lower-shard-map's), and modules with an op that has no partitioning rule (e.g. a
// fusion): those keep running unpartitioned.
// Errors (InvalidArgument): a layout that does not divide its dimension evenly, e.g. a result
// sharding P(x) for a dimension of size 3 on a mesh with x:2.
#ifndef SHARDJIT_PASSES_SPMD_PARTITION_H_
#define SHARDJIT_PASSES_SPMD_PARTITION_H_

#include "passes/machine_model.h"
#include "passes/pass.h"

namespace shardjit::passes {

class SpmdPartition final : public Pass {
 public:
  // `machine` prices each op's strategies, as it did in sharding-propagation.
  explicit SpmdPartition(MachineModel machine = {}) : machine_(machine) {}
  std::string name() const override { return "spmd-partition"; }
  absl::StatusOr<bool> Run(ir::Module& module) override;

  // OK when Run would partition `module`, else why it leaves it unchanged: UnimplementedError
  // naming the first op without a partitioning rule, FailedPreconditionError otherwise.
  static absl::Status CheckPartitionable(const ir::Module& module);

 private:
  MachineModel machine_;
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_SPMD_PARTITION_H_
