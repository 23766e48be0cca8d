#include "frontend/sharding.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/ir.pb.h"
#include "ir/sharding.h"
#include "ir/types.h"

namespace shardjit {

absl::StatusOr<Mesh> make_mesh(const Runtime& runtime,
                               std::vector<std::pair<std::string, int64_t>> axes,
                               std::vector<int64_t> device_ids) {
  ir::Mesh proto;
  for (const auto& [name, n] : axes) {
    ir::MeshAxis* a = proto.add_axes();
    a->set_name(name);
    a->set_size(n);
  }
  RETURN_IF_ERROR(ir::ValidateMesh(proto, "Mesh"));
  const int64_t size = ir::MeshSize(proto);
  if (device_ids.empty()) {
    for (int64_t i = 0; i < size; ++i) device_ids.push_back(i);
  }
  if (static_cast<int64_t>(device_ids.size()) != size) {
    return absl::InvalidArgumentError(fmt::format("Mesh: {} has {} positions but {} device ids",
                                                  ir::MeshToString(proto), size,
                                                  device_ids.size()));
  }
  std::set<int64_t> seen;
  for (int64_t id : device_ids) {
    if (id < 0 || id >= runtime.num_devices() || !seen.insert(id).second) {
      return absl::InvalidArgumentError(fmt::format(
          "Mesh: {} needs {} distinct devices in [0, {}); device {} is out of range or repeated",
          ir::MeshToString(proto), size, runtime.num_devices(), id));
    }
    proto.add_device_ids(id);
  }
  return Mesh(runtime, std::make_shared<const ir::Mesh>(std::move(proto)));
}

absl::StatusOr<Runtime*> Mesh::runtime() const {
  Runtime* runtime = runtime_->get();
  if (runtime == nullptr) {
    return absl::FailedPreconditionError(fmt::format(
        "mesh {}: its Runtime (id {}) was destroyed; a Runtime must outlive the meshes used",
        to_string(), runtime_id_));
  }
  return runtime;
}

int64_t Mesh::size() const { return ir::MeshSize(*proto_); }

int64_t Mesh::axis_size(const std::string& name) const {
  int64_t a = ir::MeshAxisIndex(*proto_, name);
  return a < 0 ? 0 : proto_->axes(a).size();
}

std::string Mesh::to_string() const { return ir::MeshToString(*proto_); }

bool Mesh::operator==(const Mesh& o) const {
  return runtime_id_ == o.runtime_id_ &&
         (proto_ == o.proto_ || ir::MeshesEqual(*proto_, *o.proto_));
}

PartitionSpec::PartitionSpec(std::vector<SpecEntry> entries) {
  ir::PartitionSpec proto;
  for (SpecEntry& e : entries) {
    ir::DimSpec* d = proto.add_dims();
    for (std::string& a : e.axes) d->add_axes(std::move(a));
  }
  proto_ = std::make_shared<const ir::PartitionSpec>(std::move(proto));
}

PartitionSpec::PartitionSpec(const ir::PartitionSpec& proto)
    : proto_(std::make_shared<const ir::PartitionSpec>(proto)) {}

const ir::PartitionSpec& PartitionSpec::proto() const {
  return proto_ != nullptr ? *proto_ : ir::PartitionSpec::default_instance();
}

std::string PartitionSpec::to_string() const { return ir::SpecToString(proto()); }

bool PartitionSpec::operator==(const PartitionSpec& o) const {
  // Trailing replicated entries do not change the layout.
  const ir::PartitionSpec& x = proto();
  const ir::PartitionSpec& y = o.proto();
  const int n = std::max(x.dims_size(), y.dims_size());
  for (int i = 0; i < n; ++i) {
    const bool here = i < x.dims_size(), there = i < y.dims_size();
    if (here && there) {
      const auto& a = x.dims(i).axes();
      const auto& b = y.dims(i).axes();
      if (!std::equal(a.begin(), a.end(), b.begin(), b.end())) return false;
    } else if ((here ? x.dims(i) : y.dims(i)).axes_size() > 0) {
      return false;
    }
  }
  return true;
}

std::string NamedSharding::to_string() const {
  return fmt::format("NamedSharding(mesh={}, spec={})", mesh_.to_string(), spec_.to_string());
}

}  // namespace shardjit
