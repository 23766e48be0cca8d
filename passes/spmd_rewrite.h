// A kit for passes that rewrite SPMD code (per-device modules and the shard_map bodies of
// global-view ones): facts about a region (producers, users, the mesh axes each value may vary
// across), a rewrite plan (values replaced by others, ops replaced by op lists) and applying it,
// and helpers to walk regions. Used by collective-simplify and collective-fusion, which build the
// replacing ops with passes/op_emitter.h.
#ifndef SHARDJIT_PASSES_SPMD_REWRITE_H_
#define SHARDJIT_PASSES_SPMD_REWRITE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/ir.pb.h"
#include "ir/types.h"

namespace shardjit::passes::spmd_rewrite {

using TypeMap = std::unordered_map<int64_t, ir::ShapedType>;
// An op's `axes` field, read in place: the rewrites compare and copy the axes of the ops they
// match without making lists of them (ir::AxisList, with ir::ToAxisList, where they need one).
using AxisNames = google::protobuf::RepeatedPtrField<std::string>;

// The types of every value of `region`, nested regions included.
void AddTypes(const ir::Region& region, TypeMap& types);
// The largest value id defined in `region`, nested regions included (-1 when none).
int64_t MaxValueId(const ir::Region& region);

// Bit i: mesh axis i. A set of axes, not a list (no order): the varying-axes dataflow below
// unions and tests these for every value of a region, which a bitset does without allocating.
using AxisMask = uint64_t;

// Read-only facts about one SPMD region (and the loop bodies in it): producers, users, and the
// mesh axes each value may vary across.
class Facts {
 public:
  // `param_varying[i]`: the axes param i of `root` may vary across (all axes when missing).
  Facts(const ir::Mesh& mesh, const ir::Region& root, const std::vector<AxisMask>& param_varying);

  AxisMask AllAxes() const { return (AxisMask{1} << mesh_.axes_size()) - 1; }
  // The bits of `axes` (all axes for a name the mesh lacks), and their combined size.
  AxisMask Mask(const AxisNames& axes) const;
  int64_t Size(const AxisNames& axes) const;

  const ir::ShapedType& Type(int64_t id) const { return types_.at(id); }
  const TypeMap& types() const { return types_; }
  const ir::Op* Producer(int64_t id) const {
    auto it = producer_.find(id);
    return it == producer_.end() ? nullptr : it->second;
  }
  // The ops using `id` (once per operand slot); empty for values a region returns.
  std::vector<const ir::Op*> Users(int64_t id) const {
    if (escapes_.count(id)) return {};
    auto it = users_.find(id);
    return it == users_.end() ? std::vector<const ir::Op*>{} : it->second;
  }
  const ir::Region* Owner(int64_t id) const { return owner_.at(id); }
  // Whether `id` is axis_index(axes) * scale (or axis_index(axes) itself when scale is 1): where
  // block axis_index(axes) of size `scale` starts.
  bool IsAxisIndexTimes(int64_t id, const AxisNames& axes, int64_t scale) const;
  AxisMask Varying(int64_t id) const {
    auto it = varying_.find(id);
    return it == varying_.end() ? AllAxes() : it->second;
  }

 private:
  void Region(const ir::Region& region);
  AxisMask ResultVarying(const ir::Op& op) const;

  const ir::Mesh& mesh_;
  TypeMap types_;
  std::unordered_map<int64_t, const ir::Op*> producer_;
  std::unordered_map<int64_t, std::vector<const ir::Op*>> users_;
  std::unordered_map<int64_t, const ir::Region*> owner_;
  std::unordered_map<int64_t, AxisMask> varying_;
  std::unordered_set<int64_t> escapes_;
};

// Whether two axis lists are the same (in order).
bool SameAxes(const AxisNames& a, const AxisNames& b);

// The rewrites chosen for a region: values replaced by others, and ops replaced by op lists
// (keyed by the op's first result).
struct Plan {
  std::unordered_map<int64_t, int64_t> replace;
  std::unordered_map<int64_t, std::vector<ir::Op>> rewrite;
  bool empty() const { return replace.empty() && rewrite.empty(); }
};

// Follows `replace` from `id` to the value that finally stands for it.
int64_t Resolve(const std::unordered_map<int64_t, int64_t>& replace, int64_t id);

// Applies `plan` to `region` and the loop bodies in it.
void Apply(const Plan& plan, ir::Region& region);

// Calls `fn` on each SPMD region of `f` with the axes each of its params may vary across: the
// entry of a per-device module, or the shard_map bodies of a global-view one.
void ForEachSpmdRegion(const ir::Module& module, ir::Function& f,
                       const std::function<void(ir::Region&, std::vector<AxisMask>)>& fn);

}  // namespace shardjit::passes::spmd_rewrite

#endif  // SHARDJIT_PASSES_SPMD_REWRITE_H_
