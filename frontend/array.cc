#include "frontend/array.h"

#include <optional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "runtime/device.h"
#include "runtime/shards.h"

namespace shardjit {

bool Array::fully_addressable() const {
  for (const Tensor& shard : shards_) {
    if (!shard.defined()) return false;
  }
  return true;
}

absl::StatusOr<Tensor> Array::to_host() const {
  const ir::Mesh& mesh = sharding_.mesh().proto();
  ASSIGN_OR_RETURN(
      runtime::Assembled host,
      runtime::AssembleFrom(shards_, mesh, sharding_.spec().proto(), type_, "to_host"));
  if (!host.missing.empty()) {
    ASSIGN_OR_RETURN(Runtime* rt, sharding_.mesh().runtime());
    std::set<int64_t> elsewhere;
    for (int64_t p : host.missing) elsewhere.insert(rt->ProcessOfDevice(mesh.device_ids(p)));
    return absl::FailedPreconditionError(fmt::format(
        "to_host of {} ({}): blocks live only in processes [{}]; process_allgather gathers them",
        type_.ToString(), sharding_.spec().to_string(), absl::StrJoin(elsewhere, ",")));
  }
  return std::move(host.global);
}

absl::StatusOr<Tensor> process_allgather(const Array& array) {
  const Mesh& mesh = array.sharding().mesh();
  ASSIGN_OR_RETURN(Runtime* rt, mesh.runtime());
  runtime::ProcessGroup* group = rt->processes();
  if (group == nullptr || group->num_processes() == 1) return array.to_host();
  std::vector<runtime::ProcessGroup::Block> mine =
      runtime::HeldBlocks(array.shards(), mesh.proto(), array.sharding().spec().proto());
  ASSIGN_OR_RETURN(std::vector<runtime::ProcessGroup::Block> theirs,
                   group->ExchangeBlocks(mine));
  Tensor host = Tensor::Empty(array.type());
  for (const std::vector<runtime::ProcessGroup::Block>* blocks : {&mine, &theirs}) {
    for (const runtime::ProcessGroup::Block& b : *blocks) {
      if (absl::Status s = runtime::PlaceBlock(b, host); !s.ok()) {
        return absl::DataLossError(
            fmt::format("process_allgather of {}: {}", array.type().ToString(), s.message()));
      }
    }
  }
  return host;
}

absl::StatusOr<Array> device_put(const Tensor& host, const NamedSharding& sharding) {
  const Mesh& mesh = sharding.mesh();
  ASSIGN_OR_RETURN(Runtime* rt, mesh.runtime());
  ASSIGN_OR_RETURN(std::vector<Tensor> shards,
                   runtime::ScatterShards(
                       host, mesh.proto(), sharding.spec().proto(),
                       [&](int64_t p) -> std::optional<ir::Allocator*> {
                         const int64_t id = mesh.proto().device_ids(p);
                         if (!rt->is_local(id)) return std::nullopt;  // another process holds it
                         return rt->device(id).allocator();
                       },
                       fmt::format("device_put of {}", host.type().ToString())));
  return Array(host.type(), sharding, std::move(shards));
}

absl::StatusOr<Array> device_put(const Array& array, const NamedSharding& sharding) {
  if (array.sharding() == sharding) return array;
  if (array.sharding().mesh().runtime_id() != sharding.mesh().runtime_id()) {
    return absl::InvalidArgumentError("device_put: the target mesh belongs to another runtime");
  }
  ASSIGN_OR_RETURN(Tensor host,
                   array.fully_addressable() ? array.to_host() : process_allgather(array));
  return device_put(host, sharding);
}

Tensor HostTensor(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  return Tensor::FromDoubles({dtype, std::move(shape)}, values);
}

}  // namespace shardjit
