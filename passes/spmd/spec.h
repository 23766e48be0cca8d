// Spec: a PartitionSpec in normal form (one entry per array dimension) and the arithmetic the
// SPMD passes need on it: block shapes, validity on a mesh, conversion to and from ir protos.
#ifndef SHARDJIT_PASSES_SPMD_SPEC_H_
#define SHARDJIT_PASSES_SPMD_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/ir.pb.h"
#include "ir/sharding.h"
#include "ir/types.h"

namespace shardjit::passes::spmd {

// Mesh axes, major first (a dimension split over several axes, or a collective's axes).
using ir::AxisList;

// Per array dimension, the mesh axes it is split over; empty: replicated along it.
struct Spec {
  std::vector<AxisList> dims;

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  // Every axis the spec uses, in dimension order.
  AxisList Axes() const;
  bool IsReplicated() const;
  // "P(x,None)", "P((x,y))", "P()": the IR text form.
  std::string ToString() const;
  bool operator==(const Spec& o) const { return dims == o.dims; }
  bool operator!=(const Spec& o) const { return dims != o.dims; }
  bool operator<(const Spec& o) const { return dims < o.dims; }
};

Spec Replicated(int64_t rank);
// `proto` as a spec of an array of rank `rank` (unlisted trailing dims are replicated; extra
// entries are dropped, so validate first).
Spec FromProto(const ir::PartitionSpec& proto, int64_t rank);
// One entry per dimension, `None` for replicated ones.
ir::PartitionSpec ToProto(const Spec& spec);

// Product of the sizes of `axes` in `mesh` (ir::CombinedAxisSize; 1 for none, and for a list
// that is not one of distinct mesh axes).
int64_t AxesSize(const ir::Mesh& mesh, const AxisList& axes);
// Whether `spec` fits an array of `dims` on `mesh`: one entry per dim, known axes, each used
// once, and every dim divisible by its number of blocks.
bool IsValid(const ir::Mesh& mesh, const Spec& spec, const std::vector<int64_t>& dims);
// The block shape of each device; `spec` must be valid for `dims`.
std::vector<int64_t> BlockDims(const ir::Mesh& mesh, const Spec& spec,
                               const std::vector<int64_t>& dims);
ir::ShapedType BlockType(const ir::Mesh& mesh, const Spec& spec, const ir::ShapedType& type);
int64_t BlockBytes(const ir::Mesh& mesh, const Spec& spec, const ir::ShapedType& type);

// The longest common prefix of two axis lists.
AxisList CommonPrefix(const AxisList& a, const AxisList& b);
// `spec` with the given dimensions replicated.
Spec ClearDims(Spec spec, const std::vector<int64_t>& dims);

}  // namespace shardjit::passes::spmd

#endif  // SHARDJIT_PASSES_SPMD_SPEC_H_
