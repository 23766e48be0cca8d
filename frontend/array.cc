#include "frontend/array.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/sharding.h"
#include "runtime/collective_ops.h"

namespace shardjit {
namespace {

std::vector<int64_t> BlockOffset(const ir::Mesh& mesh, const ir::PartitionSpec& spec,
                                 const std::vector<int64_t>& local, int64_t position) {
  std::vector<int64_t> block =
      ir::BlockIndex(mesh, spec, static_cast<int64_t>(local.size()), ir::MeshCoords(mesh, position));
  for (size_t d = 0; d < block.size(); ++d) block[d] *= local[d];
  return block;
}

}  // namespace

bool Array::fully_addressable() const {
  for (const Tensor& shard : shards_) {
    if (!shard.defined()) return false;
  }
  return true;
}

absl::StatusOr<Tensor> Array::ToHost() const {
  const ir::Mesh& mesh = sharding_.mesh().proto();
  const ir::PartitionSpec& spec = sharding_.spec().proto();
  absl::StatusOr<std::vector<int64_t>> local = ir::LocalDims(mesh, spec, type_.dims, "ToHost");
  if (!local.ok()) return local.status();
  Tensor host = Tensor::Empty(type_);
  std::set<std::vector<int64_t>> written;
  for (int64_t p = 0; p < static_cast<int64_t>(shards_.size()); ++p) {
    const Tensor& shard = shards_[p];
    if (!shard.defined()) continue;
    std::vector<int64_t> offset = BlockOffset(mesh, spec, shard.dims(), p);
    if (!written.insert(offset).second) continue;
    runtime::CopyBox(shard, std::vector<int64_t>(offset.size(), 0), host, offset, shard.dims());
  }
  std::set<int64_t> elsewhere;
  for (int64_t p = 0; p < static_cast<int64_t>(shards_.size()); ++p) {
    if (!written.count(BlockOffset(mesh, spec, *local, p))) {
      elsewhere.insert(sharding_.mesh().runtime().ProcessOfDevice(mesh.device_ids(p)));
    }
  }
  if (!elsewhere.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "ToHost of {} ({}): blocks live only in processes [{}]; process_allgather gathers them",
        type_.ToString(), sharding_.spec().ToString(), absl::StrJoin(elsewhere, ",")));
  }
  return host;
}

absl::StatusOr<Tensor> process_allgather(const Array& array) {
  const Mesh& mesh = array.sharding().mesh();
  runtime::ProcessGroup* group = mesh.runtime().processes();
  if (group == nullptr || group->num_processes() == 1) return array.ToHost();
  const ir::PartitionSpec& spec = array.sharding().spec().proto();
  std::vector<runtime::ProcessGroup::Block> mine;
  std::set<std::vector<int64_t>> offsets;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    const Tensor& shard = array.shards()[p];
    if (!shard.defined()) continue;
    std::vector<int64_t> offset = BlockOffset(mesh.proto(), spec, shard.dims(), p);
    if (offsets.insert(offset).second) mine.push_back({std::move(offset), shard});
  }
  absl::StatusOr<std::vector<runtime::ProcessGroup::Block>> theirs = group->ExchangeBlocks(mine);
  if (!theirs.ok()) return theirs.status();
  Tensor host = Tensor::Empty(array.type());
  for (const std::vector<runtime::ProcessGroup::Block>* blocks : {&mine, &*theirs}) {
    for (const runtime::ProcessGroup::Block& b : *blocks) {
      bool fits = b.data.dtype() == array.dtype() && b.offset.size() == array.shape().size();
      for (size_t d = 0; fits && d < b.offset.size(); ++d) {
        fits = b.offset[d] >= 0 && b.data.dims()[d] <= array.shape()[d] - b.offset[d];
      }
      if (!fits) {
        return absl::DataLossError(fmt::format(
            "process_allgather of {}: a block of {} at [{}] does not fit", array.type().ToString(),
            b.data.type().ToString(), absl::StrJoin(b.offset, ",")));
      }
      runtime::CopyBox(b.data, std::vector<int64_t>(b.offset.size(), 0), host, b.offset,
                       b.data.dims());
    }
  }
  return host;
}

absl::StatusOr<Array> device_put(const Tensor& host, const NamedSharding& sharding) {
  const Mesh& mesh = sharding.mesh();
  absl::StatusOr<std::vector<int64_t>> local =
      ir::LocalDims(mesh.proto(), sharding.spec().proto(), host.dims(),
                    fmt::format("device_put of {}", host.type().ToString()));
  if (!local.ok()) return local.status();
  std::vector<Tensor> shards;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    if (!mesh.runtime().is_local(mesh.proto().device_ids(p))) {
      shards.emplace_back();  // another process holds it
      continue;
    }
    runtime::Device& device = mesh.runtime().device(mesh.proto().device_ids(p));
    Tensor shard = Tensor::Empty({host.dtype(), *local}, device.allocator());
    std::vector<int64_t> offset = BlockOffset(mesh.proto(), sharding.spec().proto(), *local, p);
    runtime::CopyBox(host, offset, shard, std::vector<int64_t>(offset.size(), 0), *local);
    shards.push_back(std::move(shard));
  }
  return Array(host.type(), sharding, std::move(shards));
}

absl::StatusOr<Array> device_put(const Array& array, const NamedSharding& sharding) {
  if (array.sharding() == sharding) return array;
  if (&array.sharding().mesh().runtime() != &sharding.mesh().runtime()) {
    return absl::InvalidArgumentError("device_put: the target mesh belongs to another runtime");
  }
  absl::StatusOr<Tensor> host =
      array.fully_addressable() ? array.ToHost() : process_allgather(array);
  if (!host.ok()) return host.status();
  return device_put(*host, sharding);
}

Tensor HostTensor(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  return Tensor::FromDoubles({dtype, std::move(shape)}, values);
}

}  // namespace shardjit
