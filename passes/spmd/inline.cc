#include "passes/spmd/inline.h"

#include <unordered_map>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "ir/printer.h"
#include "ir/regions.h"

namespace shardjit::passes::spmd {
namespace {

class Inliner {
 public:
  explicit Inliner(OpEmitter& emitter) : e_(emitter) {}

  // Copies the ops of `region` (its params already bound) and returns its mapped results.
  absl::StatusOr<std::vector<int64_t>> Ops(const ir::Region& region) {
    for (const ir::Op& op : region.ops()) {
      ir::Op copy = op;
      if (copy.has_shard_map()) {
        return absl::InvalidArgumentError("spmd-partition: shard_map nested in a shard_map body");
      }
      for (ir::Region* body : ir::MutableRegions(copy)) {
        e_.OpenRegion(/*spmd=*/false);
        for (const ir::Param& p : body->params())
          ids_[p.id()] = e_.AddParam(ir::FromProto(p.type()));
        absl::StatusOr<std::vector<int64_t>> results = Ops(*body);
        *body = e_.CloseRegion(results.ok() ? *results : std::vector<int64_t>{});
        if (!results.ok()) return results;
      }
      absl::StatusOr<std::vector<int64_t>> operands = Map(op.operands());
      if (!operands.ok()) return operands;
      e_.SetOrigin(op);
      absl::StatusOr<std::vector<int64_t>> ids = e_.Add(std::move(copy), *operands);
      if (!ids.ok()) return ids;
      for (int r = 0; r < op.results_size(); ++r) ids_[op.results(r)] = (*ids)[r];
    }
    return Map(region.results());
  }

  void Bind(int64_t from, int64_t to) { ids_[from] = to; }

 private:
  absl::StatusOr<std::vector<int64_t>> Map(
      const google::protobuf::RepeatedField<int64_t>& values) const {
    std::vector<int64_t> out;
    for (int64_t id : values) {
      auto it = ids_.find(id);
      if (it == ids_.end()) {
        return absl::InternalError(
            fmt::format("spmd-partition: value {} of a shard_map body is not defined in it",
                        ir::ValueName(id)));
      }
      out.push_back(it->second);
    }
    return out;
  }

  OpEmitter& e_;
  std::unordered_map<int64_t, int64_t> ids_;
};

}  // namespace

absl::StatusOr<std::vector<int64_t>> InlineRegion(OpEmitter& emitter, const ir::Region& region,
                                                  const std::vector<int64_t>& args) {
  if (static_cast<int>(args.size()) != region.params_size()) {
    return absl::InternalError(fmt::format("spmd-partition: {} arguments for a region of {} params",
                                           args.size(), region.params_size()));
  }
  Inliner inliner(emitter);
  for (int i = 0; i < region.params_size(); ++i) inliner.Bind(region.params(i).id(), args[i]);
  return inliner.Ops(region);
}

}  // namespace shardjit::passes::spmd
