#include "runtime/shards.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/sharding.h"
#include "runtime/collective_ops.h"

namespace shardjit::runtime {
namespace {

// The block of `global` of `local_dims` at `offset` (checked by the caller).
ir::Tensor CopyBlockOut(const ir::Tensor& global, const std::vector<int64_t>& offset,
                        const std::vector<int64_t>& local_dims, ir::Allocator* allocator) {
  ir::Tensor shard = ir::Tensor::Empty({global.dtype(), local_dims}, allocator);
  CopyBox(global, offset, shard, std::vector<int64_t>(local_dims.size(), 0), local_dims);
  return shard;
}

}  // namespace

std::vector<int64_t> BlockOffset(const ir::Mesh& mesh, const ir::PartitionSpec& spec,
                                 const std::vector<int64_t>& local_dims, int64_t position) {
  std::vector<int64_t> offset = ir::BlockIndex(
      mesh, spec, static_cast<int64_t>(local_dims.size()), ir::MeshCoords(mesh, position));
  for (size_t d = 0; d < offset.size(); ++d) offset[d] *= local_dims[d];
  return offset;
}

absl::StatusOr<ir::Tensor> ShardOf(const ir::Tensor& global, const ir::Mesh& mesh,
                                   const ir::PartitionSpec& spec, int64_t position,
                                   ir::Allocator* allocator, std::string_view what) {
  ASSIGN_OR_RETURN(std::vector<int64_t> local, ir::LocalDims(mesh, spec, global.dims(), what));
  return CopyBlockOut(global, BlockOffset(mesh, spec, local, position), local, allocator);
}

absl::StatusOr<std::vector<ir::Tensor>> ScatterShards(const ir::Tensor& global,
                                                      const ir::Mesh& mesh,
                                                      const ir::PartitionSpec& spec,
                                                      const AllocatorOf& allocator_of,
                                                      std::string_view what) {
  ASSIGN_OR_RETURN(std::vector<int64_t> local, ir::LocalDims(mesh, spec, global.dims(), what));
  const int64_t n = ir::MeshSize(mesh);
  std::vector<ir::Tensor> shards(n);
  std::map<std::vector<int64_t>, int64_t> holder;  // block offset -> first position holding it
  for (int64_t p = 0; p < n; ++p) {
    if (std::optional<ir::Allocator*> allocator = allocator_of(p)) {
      const auto [first, fresh] = holder.emplace(BlockOffset(mesh, spec, local, p), p);
      shards[p] = fresh ? CopyBlockOut(global, first->first, local, *allocator)
                        : shards[first->second];
    }
  }
  return shards;
}

std::vector<ProcessGroup::Block> HeldBlocks(const std::vector<ir::Tensor>& shards,
                                            const ir::Mesh& mesh, const ir::PartitionSpec& spec) {
  std::vector<ProcessGroup::Block> blocks;
  std::set<std::vector<int64_t>> offsets;
  for (int64_t p = 0; p < static_cast<int64_t>(shards.size()); ++p) {
    if (!shards[p].defined()) continue;
    std::vector<int64_t> offset = BlockOffset(mesh, spec, shards[p].dims(), p);
    if (offsets.insert(offset).second) blocks.push_back({std::move(offset), shards[p]});
  }
  return blocks;
}

absl::Status PlaceBlock(const ProcessGroup::Block& block, ir::Tensor& global) {
  const std::vector<int64_t>& dims = global.dims();
  bool fits = block.data.dtype() == global.dtype() && block.offset.size() == dims.size() &&
              block.data.dims().size() == dims.size();
  for (size_t d = 0; fits && d < dims.size(); ++d) {
    fits = block.offset[d] >= 0 && block.data.dims()[d] <= dims[d] - block.offset[d];
  }
  if (!fits) {
    return absl::InvalidArgumentError(fmt::format("a block of {} at [{}] does not fit",
                                                  block.data.type().ToString(),
                                                  absl::StrJoin(block.offset, ",")));
  }
  CopyBox(block.data, std::vector<int64_t>(dims.size(), 0), global, block.offset,
          block.data.dims());
  return absl::OkStatus();
}

absl::StatusOr<Assembled> AssembleFrom(const std::vector<ir::Tensor>& shards,
                                       const ir::Mesh& mesh, const ir::PartitionSpec& spec,
                                       const ir::ShapedType& type, std::string_view what) {
  ASSIGN_OR_RETURN(std::vector<int64_t> local, ir::LocalDims(mesh, spec, type.dims, what));
  Assembled out{ir::Tensor::Empty(type), {}};
  std::set<std::vector<int64_t>> written;
  for (ProcessGroup::Block& block : HeldBlocks(shards, mesh, spec)) {
    if (absl::Status s = PlaceBlock(block, out.global); !s.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}: {}", what, s.message()));
    }
    written.insert(std::move(block.offset));
  }
  for (int64_t p = 0; p < static_cast<int64_t>(shards.size()); ++p) {
    if (!written.count(BlockOffset(mesh, spec, local, p))) out.missing.push_back(p);
  }
  return out;
}

}  // namespace shardjit::runtime
