#include "ir/sharding.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/types.h"

namespace shardjit::ir {

absl::Status ValidateMesh(const Mesh& mesh, std::string_view what) {
  auto error = [&](const std::string& m) {
    return absl::InvalidArgumentError(fmt::format("{}: mesh {}{}", what, MeshToString(mesh), m));
  };
  std::set<std::string> names;
  int64_t size = 1;
  for (const MeshAxis& a : mesh.axes()) {
    if (a.name().empty() || !names.insert(a.name()).second) {
      return error(fmt::format(": axis name \"{}\" is empty or repeated", a.name()));
    }
    if (a.size() < 1) return error(fmt::format(": axis \"{}\" has size {}", a.name(), a.size()));
    std::optional<int64_t> product = CheckedMul(size, a.size());
    if (!product || *product > kMaxMeshDevices) {
      return error(fmt::format(" has more than {} devices (2^20)", kMaxMeshDevices));
    }
    size = *product;
  }
  return absl::OkStatus();
}

int64_t MeshSize(const Mesh& mesh) {
  int64_t n = 1;
  for (const MeshAxis& a : mesh.axes()) n *= a.size();
  return n;
}

bool MeshesEqual(const Mesh& a, const Mesh& b) {
  if (a.axes_size() != b.axes_size() || a.device_ids_size() != b.device_ids_size()) return false;
  for (int i = 0; i < a.axes_size(); ++i) {
    if (a.axes(i).name() != b.axes(i).name() || a.axes(i).size() != b.axes(i).size()) {
      return false;
    }
  }
  return std::equal(a.device_ids().begin(), a.device_ids().end(), b.device_ids().begin(),
                    b.device_ids().end());
}

int64_t MeshAxisIndex(const Mesh& mesh, std::string_view name) {
  for (int i = 0; i < mesh.axes_size(); ++i) {
    if (mesh.axes(i).name() == name) return i;
  }
  return -1;
}

std::vector<int64_t> MeshCoords(const Mesh& mesh, int64_t position) {
  std::vector<int64_t> coords(mesh.axes_size());
  for (int i = mesh.axes_size() - 1; i >= 0; --i) {
    coords[i] = position % mesh.axes(i).size();
    position /= mesh.axes(i).size();
  }
  return coords;
}

int64_t MeshPosition(const Mesh& mesh, const std::vector<int64_t>& coords) {
  int64_t p = 0;
  for (int i = 0; i < mesh.axes_size(); ++i) p = p * mesh.axes(i).size() + coords[i];
  return p;
}

AxisList MentionedAxes(const PartitionSpec& spec) {
  AxisList out;
  for (const DimSpec& d : spec.dims()) {
    for (const std::string& name : d.axes()) out.push_back(name);
  }
  return out;
}

AxisList ToAxisList(const google::protobuf::RepeatedPtrField<std::string>& field) {
  return AxisList(field.begin(), field.end());
}

void SetAxisList(const AxisList& axes, google::protobuf::RepeatedPtrField<std::string>* field) {
  field->Assign(axes.begin(), axes.end());
}

absl::StatusOr<int64_t> CombinedAxisSize(const Mesh& mesh, const AxisList& axes) {
  int64_t size = 1;
  for (size_t k = 0; k < axes.size(); ++k) {
    if (std::find(axes.begin(), axes.begin() + k, axes[k]) != axes.begin() + k) {
      return absl::InvalidArgumentError(fmt::format("axis \"{}\" is named twice", axes[k]));
    }
    const int64_t a = MeshAxisIndex(mesh, axes[k]);
    if (a < 0) {
      return absl::InvalidArgumentError(
          fmt::format("axis \"{}\" is not in mesh {}", axes[k], MeshToString(mesh)));
    }
    size *= mesh.axes(a).size();
  }
  return size;
}

int64_t CombinedAxisIndex(const Mesh& mesh, int64_t position, const AxisList& axes) {
  const std::vector<int64_t> coords = MeshCoords(mesh, position);
  int64_t index = 0;
  for (const std::string& name : axes) {
    const int64_t a = MeshAxisIndex(mesh, name);
    index = index * mesh.axes(a).size() + coords[a];
  }
  return index;
}

absl::Status ValidateSpec(const Mesh& mesh, const PartitionSpec& spec, int64_t rank,
                          std::string_view what) {
  if (spec.dims_size() > rank) {
    return absl::InvalidArgumentError(fmt::format("{}: spec {} has {} entries for an array of rank {}",
                                                  what, SpecToString(spec), spec.dims_size(), rank));
  }
  std::set<std::string> seen;
  for (const DimSpec& d : spec.dims()) {
    for (const std::string& axis : d.axes()) {
      if (MeshAxisIndex(mesh, axis) < 0) {
        return absl::InvalidArgumentError(fmt::format("{}: axis \"{}\" of spec {} is not in mesh {}",
                                                      what, axis, SpecToString(spec),
                                                      MeshToString(mesh)));
      }
      if (!seen.insert(axis).second) {
        return absl::InvalidArgumentError(
            fmt::format("{}: spec {} uses axis \"{}\" twice", what, SpecToString(spec), axis));
      }
    }
  }
  return absl::OkStatus();
}

int64_t NumBlocks(const Mesh& mesh, const PartitionSpec& spec, int64_t dim) {
  if (dim >= spec.dims_size()) return 1;
  int64_t n = 1;
  for (const std::string& axis : spec.dims(dim).axes()) {
    n *= mesh.axes(MeshAxisIndex(mesh, axis)).size();
  }
  return n;
}

absl::StatusOr<std::vector<int64_t>> LocalDims(const Mesh& mesh, const PartitionSpec& spec,
                                               const std::vector<int64_t>& global_dims,
                                               std::string_view what) {
  RETURN_IF_ERROR(ValidateSpec(mesh, spec, global_dims.size(), what));
  std::vector<int64_t> local = global_dims;
  for (size_t d = 0; d < global_dims.size(); ++d) {
    int64_t n = NumBlocks(mesh, spec, d);
    if (global_dims[d] % n != 0) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: spec {} splits dim {} (size {}) into {} blocks, which does not divide it", what,
          SpecToString(spec), d, global_dims[d], n));
    }
    local[d] = global_dims[d] / n;
  }
  return local;
}

absl::StatusOr<std::vector<int64_t>> GlobalDims(const Mesh& mesh, const PartitionSpec& spec,
                                                const std::vector<int64_t>& local_dims,
                                                std::string_view what) {
  std::vector<int64_t> global = local_dims;
  for (size_t d = 0; d < local_dims.size(); ++d) {
    const int64_t n = NumBlocks(mesh, spec, d);
    std::optional<int64_t> size = CheckedMul(local_dims[d], n);
    if (!size) {
      return absl::InvalidArgumentError(
          fmt::format("{}: spec {} makes dim {} of {} blocks of size {}, more than int64 holds",
                      what, SpecToString(spec), d, n, local_dims[d]));
    }
    global[d] = *size;
  }
  return global;
}

std::vector<int64_t> BlockIndex(const Mesh& mesh, const PartitionSpec& spec, int64_t rank,
                                const std::vector<int64_t>& coords) {
  std::vector<int64_t> block(rank, 0);
  for (int64_t d = 0; d < rank && d < spec.dims_size(); ++d) {
    int64_t index = 0;
    for (const std::string& axis : spec.dims(d).axes()) {
      int64_t a = MeshAxisIndex(mesh, axis);
      index = index * mesh.axes(a).size() + coords[a];
    }
    block[d] = index;
  }
  return block;
}

PartitionSpec ReplicatedSpec() { return PartitionSpec(); }

}  // namespace shardjit::ir
