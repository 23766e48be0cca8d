#include "passes/spmd/spec.h"

#include <set>

#include "absl/strings/str_join.h"
#include "ir/sharding.h"

namespace shardjit::passes::spmd {

AxisList Spec::Axes() const {
  AxisList all;
  for (const AxisList& d : dims) all.insert(all.end(), d.begin(), d.end());
  return all;
}

bool Spec::IsReplicated() const {
  for (const AxisList& d : dims) {
    if (!d.empty()) return false;
  }
  return true;
}

std::string Spec::ToString() const {
  std::vector<std::string> parts;
  for (const AxisList& d : dims) {
    if (d.empty()) {
      parts.push_back("None");
    } else if (d.size() == 1) {
      parts.push_back(d[0]);
    } else {
      parts.push_back("(" + absl::StrJoin(d, ",") + ")");
    }
  }
  return "P(" + absl::StrJoin(parts, ",") + ")";
}

Spec Replicated(int64_t rank) { return Spec{std::vector<AxisList>(rank)}; }

Spec FromProto(const ir::PartitionSpec& proto, int64_t rank) {
  Spec spec = Replicated(rank);
  for (int64_t d = 0; d < rank && d < proto.dims_size(); ++d) {
    spec.dims[d] = ir::ToAxisList(proto.dims(d).axes());
  }
  return spec;
}

ir::PartitionSpec ToProto(const Spec& spec) {
  ir::PartitionSpec proto;
  for (const AxisList& d : spec.dims) {
    ir::SetAxisList(d, proto.add_dims()->mutable_axes());
  }
  return proto;
}

int64_t AxesSize(const ir::Mesh& mesh, const AxisList& axes) {
  return ir::CombinedAxisSize(mesh, axes).value_or(1);
}

bool IsValid(const ir::Mesh& mesh, const Spec& spec, const std::vector<int64_t>& dims) {
  if (spec.rank() != static_cast<int64_t>(dims.size())) return false;
  std::set<std::string> seen;
  for (int64_t d = 0; d < spec.rank(); ++d) {
    for (const std::string& a : spec.dims[d]) {
      if (ir::MeshAxisIndex(mesh, a) < 0 || !seen.insert(a).second) return false;
    }
    if (dims[d] % AxesSize(mesh, spec.dims[d]) != 0) return false;
  }
  return true;
}

std::vector<int64_t> BlockDims(const ir::Mesh& mesh, const Spec& spec,
                               const std::vector<int64_t>& dims) {
  std::vector<int64_t> block = dims;
  for (size_t d = 0; d < dims.size() && d < spec.dims.size(); ++d) {
    block[d] /= AxesSize(mesh, spec.dims[d]);
  }
  return block;
}

ir::ShapedType BlockType(const ir::Mesh& mesh, const Spec& spec, const ir::ShapedType& type) {
  return ir::ShapedType{type.dtype, BlockDims(mesh, spec, type.dims)};
}

int64_t BlockBytes(const ir::Mesh& mesh, const Spec& spec, const ir::ShapedType& type) {
  return BlockType(mesh, spec, type).byte_size();
}

AxisList CommonPrefix(const AxisList& a, const AxisList& b) {
  AxisList out;
  for (size_t i = 0; i < a.size() && i < b.size() && a[i] == b[i]; ++i) out.push_back(a[i]);
  return out;
}

Spec ClearDims(Spec spec, const std::vector<int64_t>& dims) {
  for (int64_t d : dims) spec.dims[d].clear();
  return spec;
}

}  // namespace shardjit::passes::spmd
