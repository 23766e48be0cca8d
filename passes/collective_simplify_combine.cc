// The combiners of collective-simplify: independent psums over the same axes of one dtype become
// one psum of the concatenation of their flattened operands, sliced and reshaped back; independent
// tiled all_gathers on dimension 0 over the same axes and groups, of one dtype, become one
// all_gather of their operands flattened to rows [1, n_i] and concatenated ([1, N] gathers to
// [devices, N]), whose column ranges reshape back to each result.
// A group can be combined when every operand is computed before the first use of any member's
// result (which also rules out one member depending on another); the combined psum goes right
// after the last operand is computed.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_join.h"
#include "ir/prim.h"
#include "ir/regions.h"
#include "passes/collective_simplify_internal.h"

namespace shardjit::passes::collective_simplify {
namespace {

struct Member {
  int index;    // of the psum in the region
  int64_t def;  // index of the op computing its operand; -1 when defined outside the ops
  int64_t first_use;
  int64_t bytes;
};

struct Group {
  std::vector<Member> members;
  int64_t def = -1;
  int64_t first_use = INT64_MAX;
  int64_t bytes = 0;

  void Add(const Member& m) {
    members.push_back(m);
    def = std::max(def, m.def);
    first_use = std::min(first_use, m.first_use);
    bytes += m.bytes;
  }
};

// Values read by `op`, its nested regions included.
void AddReads(const ir::Op& op, std::vector<int64_t>& reads) {
  reads.insert(reads.end(), op.operands().begin(), op.operands().end());
  for (const ir::Region* r : ir::Regions(op)) {
    reads.insert(reads.end(), r->results().begin(), r->results().end());
    for (const ir::Op& inner : r->ops()) AddReads(inner, reads);
  }
}

// reshape(x) to `dims`.
int64_t Reshape(OpEmitter& e, int64_t x, const std::vector<int64_t>& dims, int64_t result = -1) {
  ir::Op op;
  op.set_opcode("reshape");
  for (int64_t d : dims) op.mutable_reshape()->add_new_sizes(d);
  return e.Emit(std::move(op), {x}, result);
}

int64_t Concatenate(OpEmitter& e, const std::vector<int64_t>& xs, int64_t dim) {
  ir::Op op;
  op.set_opcode("concatenate");
  op.mutable_concatenate()->set_dimension(dim);
  return e.Emit(std::move(op), xs);
}

// x[start:limit], unit strides.
int64_t Slice(OpEmitter& e, int64_t x, const std::vector<int64_t>& start,
              const std::vector<int64_t>& limit, int64_t result = -1) {
  ir::Op op;
  op.set_opcode("slice");
  for (size_t d = 0; d < start.size(); ++d) {
    op.mutable_slice()->add_start_indices(start[d]);
    op.mutable_slice()->add_limit_indices(limit[d]);
    op.mutable_slice()->add_strides(1);
  }
  return e.Emit(std::move(op), {x}, result);
}

class Combiner {
 public:
  Combiner(const ir::Mesh& mesh, const TypeMap& types, int64_t& next_id)
      : mesh_(mesh), types_(types), next_id_(next_id) {}

  // The ops computing `group`'s results, which replace its collectives; none when they cannot
  // be built.
  std::vector<ir::Op> Emit(const ir::Region& region, const Group& group) {
    OpEmitter e(mesh_, "collective-simplify", types_, &next_id_);
    if (ir::PrimOf(region.ops(group.members[0].index)) == ir::Prim::kAllGather) {
      EmitAllGather(e, region, group);
    } else {
      EmitPsum(e, region, group);
    }
    return e.Take();
  }

 private:
  void EmitPsum(OpEmitter& e, const ir::Region& region, const Group& group) {
    const ir::Op& first = region.ops(group.members[0].index);
    e.SetOrigin(first);
    std::vector<int64_t> flat;
    for (const Member& m : group.members) {
      const int64_t x = region.ops(m.index).operands(0);
      const ir::ShapedType& type = types_.at(x);
      flat.push_back(type.rank() == 1 ? x : Reshape(e, x, {type.num_elements()}));
    }
    ir::Op psum;
    psum.set_opcode("psum");
    *psum.mutable_all_reduce() = first.all_reduce();
    const int64_t sum = e.Emit(std::move(psum), {Concatenate(e, flat, 0)});
    int64_t offset = 0;
    for (const Member& m : group.members) {
      const ir::Op& member = region.ops(m.index);
      const ir::ShapedType& type = types_.at(member.operands(0));
      const int64_t n = type.num_elements();
      const bool flat_result = type.rank() == 1;
      e.SetOrigin(member);
      const int64_t sliced =
          Slice(e, sum, {offset}, {offset + n}, flat_result ? member.results(0) : -1);
      offset += n;
      if (!flat_result) Reshape(e, sliced, type.dims, member.results(0));
    }
  }

  void EmitAllGather(OpEmitter& e, const ir::Region& region, const Group& group) {
    const ir::Op& first = region.ops(group.members[0].index);
    e.SetOrigin(first);
    std::vector<int64_t> rows;
    for (const Member& m : group.members) {
      const int64_t x = region.ops(m.index).operands(0);
      rows.push_back(Reshape(e, x, {1, types_.at(x).num_elements()}));
    }
    const int64_t devices =
        types_.at(first.results(0)).dims[0] / types_.at(first.operands(0)).dims[0];
    ir::Op gather;
    gather.set_opcode("all_gather");
    *gather.mutable_all_gather() = first.all_gather();
    const int64_t gathered = e.Emit(std::move(gather), {Concatenate(e, rows, 1)});
    int64_t offset = 0;
    for (const Member& m : group.members) {
      const ir::Op& member = region.ops(m.index);
      const int64_t n = types_.at(member.operands(0)).num_elements();
      e.SetOrigin(member);
      const int64_t slice = Slice(e, gathered, {0, offset}, {devices, offset + n});
      offset += n;
      Reshape(e, slice, types_.at(member.results(0)).dims, member.results(0));
    }
  }

  const ir::Mesh& mesh_;
  const TypeMap& types_;
  int64_t& next_id_;
};

// The group key of a combinable collective: its kind, axes (and groups) and dtype; empty when it
// cannot be combined.
std::string GroupKey(const ir::Op& op, const ir::ShapedType& operand) {
  const std::string dtype = std::to_string(static_cast<int>(operand.dtype));
  const ir::Prim prim = ir::PrimOf(op);
  if (prim == ir::Prim::kPsum && op.all_reduce().axis_index_groups().empty()) {
    return "psum:" + absl::StrJoin(op.all_reduce().axes(), ",") + ":" + dtype;
  }
  if (prim == ir::Prim::kAllGather && op.all_gather().tiled() && op.all_gather().axis() == 0 &&
      operand.rank() >= 1) {
    std::string groups;
    for (const ir::AxisIndexGroup& g : op.all_gather().axis_index_groups()) {
      groups += "(" + absl::StrJoin(g.indices(), ",") + ")";
    }
    return "all_gather:" + absl::StrJoin(op.all_gather().axes(), ",") + ":" + groups + ":" + dtype;
  }
  return "";
}

// Groups of the collectives of `region` that can be combined (two or more members each).
std::vector<Group> FindGroups(const ir::Region& region, const TypeMap& types, int64_t max_bytes) {
  const int64_t size = region.ops_size();
  std::unordered_map<int64_t, int64_t> def, first_use;
  for (int64_t i = 0; i < size; ++i) {
    const ir::Op& op = region.ops(i);
    std::vector<int64_t> reads;
    AddReads(op, reads);
    for (int64_t id : reads) first_use.emplace(id, i);
    for (int64_t id : op.results()) def[id] = i;
  }
  for (int64_t id : region.results()) first_use.emplace(id, size);
  // Open groups by (axes, dtype), in program order.
  std::map<std::string, Group> open;
  std::vector<Group> done;
  auto close = [&](Group& g) {
    if (g.members.size() > 1) done.push_back(std::move(g));
    g = Group();
  };
  for (int64_t i = 0; i < size; ++i) {
    const ir::Op& op = region.ops(i);
    if (op.operands_size() != 1) continue;
    const ir::ShapedType& type = types.at(op.operands(0));
    const std::string key = GroupKey(op, type);
    if (key.empty()) continue;
    auto d = def.find(op.operands(0));
    auto u = first_use.find(op.results(0));
    Member m{static_cast<int>(i), d == def.end() ? -1 : d->second,
             u == first_use.end() ? size : u->second, type.byte_size()};
    if (m.bytes > max_bytes) continue;
    Group& g = open[key];
    if (!g.members.empty() && (g.bytes + m.bytes > max_bytes ||
                               std::max(g.def, m.def) >= std::min(g.first_use, m.first_use))) {
      close(g);
    }
    g.Add(m);
  }
  for (auto& [key, g] : open) close(g);
  return done;
}

}  // namespace

bool CombineCollectives(const ir::Mesh& mesh, ir::Region& region, const TypeMap& types,
                        int64_t max_bytes, int64_t& next_id) {
  bool changed = false;
  for (ir::Op& op : *region.mutable_ops()) {
    if (op.has_fori_loop()) {
      changed |= CombineCollectives(mesh, *op.mutable_fori_loop()->mutable_body(), types,
                                    max_bytes, next_id);
    }
  }
  std::vector<Group> groups = FindGroups(region, types, max_bytes);
  if (groups.empty()) return changed;
  Combiner combiner(mesh, types, next_id);
  // Ops to insert before each index, and the psums they replace.
  std::map<int64_t, std::vector<ir::Op>> insert;
  std::vector<bool> removed(region.ops_size(), false);
  for (const Group& g : groups) {
    std::vector<ir::Op> ops = combiner.Emit(region, g);
    if (ops.empty()) continue;
    std::vector<ir::Op>& at = insert[g.def + 1];
    for (ir::Op& op : ops) at.push_back(std::move(op));
    for (const Member& m : g.members) removed[m.index] = true;
    changed = true;
  }
  google::protobuf::RepeatedPtrField<ir::Op> ops;
  for (int64_t i = 0; i < region.ops_size(); ++i) {
    if (auto it = insert.find(i); it != insert.end()) {
      for (ir::Op& op : it->second) *ops.Add() = std::move(op);
    }
    if (!removed[i]) *ops.Add() = std::move(*region.mutable_ops(i));
  }
  region.mutable_ops()->Swap(&ops);
  return changed;
}

}  // namespace shardjit::passes::collective_simplify
