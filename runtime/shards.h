// Host scatter and gather of sharded arrays: the one place that splits a global tensor into the
// blocks a PartitionSpec gives each mesh position, and assembles a global tensor from them.
// device_put / to_host / process_allgather (frontend/array.h) and the shard_map fan-out of a
// global-view run (Runtime::RunGlobal) all go through it.
//
// Mesh position p (row-major over the mesh axes, ir::MeshCoords) holds, per dimension d, block
// ir::BlockIndex(...)[d] of size global_dims[d] / ir::NumBlocks(..., d): a dimension split over
// several axes (P(("x", "y"))) numbers its blocks x-major; a dimension the spec leaves None (or
// does not reach: trailing entries) is whole on every position; positions that differ only along
// axes the spec does not name hold the same block (replicas). Sizes must divide evenly: the
// errors are ir::LocalDims's.
#ifndef SHARDJIT_RUNTIME_SHARDS_H_
#define SHARDJIT_RUNTIME_SHARDS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/allocator.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"
#include "ir/types.h"
#include "runtime/remote.h"

namespace shardjit::runtime {

// Where position `position`'s block (of `local_dims`) starts in the global array.
std::vector<int64_t> BlockOffset(const ir::Mesh& mesh, const ir::PartitionSpec& spec,
                                 const std::vector<int64_t>& local_dims, int64_t position);

// Position `position`'s block of `global`, a new tensor in `allocator` (null: host memory).
// `what` prefixes the errors of a spec that is not valid for the mesh or does not divide a dim.
absl::StatusOr<ir::Tensor> ShardOf(const ir::Tensor& global, const ir::Mesh& mesh,
                                   const ir::PartitionSpec& spec, int64_t position,
                                   ir::Allocator* allocator, std::string_view what);

// Every position's block of `global` (one per mesh position): position p's is allocated by
// `*allocator_of(p)` (null: host memory), or left undefined (ir::Tensor()) where allocator_of(p)
// is nullopt (a block this process does not hold). Positions holding the same block (replicas
// over the axes the spec does not name) share one buffer, allocated by the first of them: arrays
// are immutable and kernels write in place only into a buffer nothing else shares
// (ir::Tensor::unique). The spec is checked once, before any copy.
using AllocatorOf = std::function<std::optional<ir::Allocator*>(int64_t position)>;
absl::StatusOr<std::vector<ir::Tensor>> ScatterShards(const ir::Tensor& global,
                                                      const ir::Mesh& mesh,
                                                      const ir::PartitionSpec& spec,
                                                      const AllocatorOf& allocator_of,
                                                      std::string_view what);

// The distinct blocks among `shards` (shards[p]: position p's block, undefined where this
// process does not hold it) with their offsets in the global array: of the replicas of a block,
// the lowest position's. Offsets follow each shard's own dims.
std::vector<ProcessGroup::Block> HeldBlocks(const std::vector<ir::Tensor>& shards,
                                            const ir::Mesh& mesh, const ir::PartitionSpec& spec);

// Copies `block.data` into `global` at `block.offset`. InvalidArgument `a block of f32[2,2] at
// [4,0] does not fit` (global unchanged) where its dtype or rank differ from global's, or it
// would reach past an edge.
absl::Status PlaceBlock(const ProcessGroup::Block& block, ir::Tensor& global);

// A global tensor (in host memory) assembled from blocks, and the positions whose blocks were
// not among them (no position holding that block had it defined), in increasing order.
struct Assembled {
  ir::Tensor global;
  std::vector<int64_t> missing;
};
// Assembles the global array of `type` from `shards` (as in HeldBlocks), each block copied once.
// Errors, prefixed by `what`: the spec's (as in ShardOf), and a shard that does not fit.
absl::StatusOr<Assembled> AssembleFrom(const std::vector<ir::Tensor>& shards,
                                       const ir::Mesh& mesh, const ir::PartitionSpec& spec,
                                       const ir::ShapedType& type, std::string_view what);

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_SHARDS_H_
