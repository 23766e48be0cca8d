// Mesh and PartitionSpec arithmetic shared by the shard_map shape rule, the frontend's
// NamedSharding and the runtime: local block shapes, mesh coordinates and block offsets.
#ifndef SHARDJIT_IR_SHARDING_H_
#define SHARDJIT_IR_SHARDING_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"
#include "ir/ir.pb.h"

namespace shardjit::ir {

// Checks that every axis has a distinct non-empty name and a size >= 1, and that the mesh has at
// most kMaxMeshDevices devices. `what` prefixes the error, e.g. "Mesh".
absl::Status ValidateMesh(const Mesh& mesh, std::string_view what);
// The number of devices of a valid mesh.
int64_t MeshSize(const Mesh& mesh);
// Whether two meshes have the same axes (names and sizes, in order) and the same device_ids
// (field by field: an empty list and the identity list differ).
bool MeshesEqual(const Mesh& a, const Mesh& b);
// Index of axis `name` in the mesh, or -1.
int64_t MeshAxisIndex(const Mesh& mesh, std::string_view name);
// Row-major coordinates of mesh position `position` (0 <= position < MeshSize).
std::vector<int64_t> MeshCoords(const Mesh& mesh, int64_t position);
// Inverse of MeshCoords.
int64_t MeshPosition(const Mesh& mesh, const std::vector<int64_t>& coords);

// A list of mesh axis names, major first: the axes a collective runs over, or those one array
// dimension is split over. This is the one type for it outside the protos, which keep it as a
// `repeated string axes` field (ToAxisList and SetAxisList convert). Code that reads an op's axes
// in place may keep a const reference to the field; a set of axes searched in a loop may be a
// bitset of axis indices (passes/spmd_rewrite.h's AxisMask).
using AxisList = std::vector<std::string>;
AxisList ToAxisList(const google::protobuf::RepeatedPtrField<std::string>& field);
// The mesh axes `spec` splits over, in its order: what a shard_map body's value laid out by it
// varies over.
AxisList MentionedAxes(const PartitionSpec& spec);
void SetAxisList(const AxisList& axes, google::protobuf::RepeatedPtrField<std::string>* field);

// The size of the combined `axes`: the product of their sizes (1 for none). Errors, in the order
// of the names: `axis "z" is named twice`, `axis "z" is not in mesh {x:2, y:2}`.
absl::StatusOr<int64_t> CombinedAxisSize(const Mesh& mesh, const AxisList& axes);
// The index of mesh position `position` along the combined `axes` (x * size(y) + y for axes
// (x, y), as JAX numbers them); every name must be a mesh axis.
int64_t CombinedAxisIndex(const Mesh& mesh, int64_t position, const AxisList& axes);

// Checks that the spec names only mesh axes, each at most once, and has at most `rank` entries.
// `what` prefixes the error, e.g. "shard_map in_specs[0]".
absl::Status ValidateSpec(const Mesh& mesh, const PartitionSpec& spec, int64_t rank,
                          std::string_view what);
// How many blocks dimension `dim` is split into (1 when the spec does not list it).
int64_t NumBlocks(const Mesh& mesh, const PartitionSpec& spec, int64_t dim);
// The block shape of a global array; an error names the dimension a spec does not divide.
absl::StatusOr<std::vector<int64_t>> LocalDims(const Mesh& mesh, const PartitionSpec& spec,
                                               const std::vector<int64_t>& global_dims,
                                               std::string_view what);
// The global shape of blocks of `local_dims`; an error names the dimension that would overflow
// int64 (the result is still to be checked against the type limits).
absl::StatusOr<std::vector<int64_t>> GlobalDims(const Mesh& mesh, const PartitionSpec& spec,
                                                const std::vector<int64_t>& local_dims,
                                                std::string_view what);
// Per dimension, which block the device at mesh coordinates `coords` holds.
std::vector<int64_t> BlockIndex(const Mesh& mesh, const PartitionSpec& spec, int64_t rank,
                                const std::vector<int64_t>& coords);
// A spec with no axes (fully replicated).
PartitionSpec ReplicatedSpec();

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_SHARDING_H_
