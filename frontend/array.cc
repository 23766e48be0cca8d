#include "frontend/array.h"

#include <set>

#include "absl/status/status.h"
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

absl::StatusOr<Tensor> Array::ToHost() const {
  const ir::Mesh& mesh = sharding_.mesh().proto();
  Tensor host = Tensor::Empty(type_);
  std::set<std::vector<int64_t>> written;
  for (int64_t p = 0; p < static_cast<int64_t>(shards_.size()); ++p) {
    const Tensor& shard = shards_[p];
    std::vector<int64_t> offset = BlockOffset(mesh, sharding_.spec().proto(), shard.dims(), p);
    if (!written.insert(offset).second) continue;
    runtime::CopyBox(shard, std::vector<int64_t>(offset.size(), 0), host, offset, shard.dims());
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
  absl::StatusOr<Tensor> host = array.ToHost();
  if (!host.ok()) return host.status();
  return device_put(*host, sharding);
}

Tensor HostTensor(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  return Tensor::FromDoubles({dtype, std::move(shape)}, values);
}

}  // namespace shardjit
