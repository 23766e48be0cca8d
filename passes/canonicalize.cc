#include "passes/canonicalize.h"

#include <map>
#include <string>
#include <unordered_map>

#include "base/status_macros.h"
#include "ir/prim.h"
#include "ir/collective_groups.h"
#include "ir/primitive.h"
#include "ir/regions.h"
#include "ir/sharding.h"
#include "ir/types.h"
#include "passes/dce.h"
#include "passes/int_range.h"
#include "passes/op_emitter.h"

namespace shardjit::passes {
namespace {

using Replacements = std::unordered_map<int64_t, int64_t>;

int64_t Resolve(const Replacements& r, int64_t id) {
  auto it = r.find(id);
  return it == r.end() ? id : it->second;
}

// The splatted value of a constant op, if it is one value for every element.
std::optional<double> SplatValue(const ir::Op* op) {
  if (op == nullptr || !op->has_constant()) return std::nullopt;
  const auto& values = op->constant().value();
  if (values.empty()) return std::nullopt;
  for (double v : values) {
    if (v != values[0]) return std::nullopt;
  }
  return values[0];
}

ir::Tensor ConstantTensor(const ir::Op& op) {
  const ir::ConstantAttrs& c = op.constant();
  return ir::Tensor::FromDoubles(ir::FromProto(op.result_types(0)),
                                 {c.value().begin(), c.value().end()});
}

class Canonicalizer {
 public:
  Canonicalizer(const ir::Module& module, const CanonicalizeOptions& options)
      : mesh_(module.mesh()), options_(options) {}

  bool changed() const { return changed_; }

  void Region(ir::Region& region) {
    std::map<std::string, const ir::Op*> seen;  // CSE key -> first op computing it
    for (ir::Op& op : *region.mutable_ops()) {
      for (int64_t& id : *op.mutable_operands()) id = Resolve(replacements_, id);
      if (op.has_fori_loop()) {
        const ir::ForiLoopAttrs& loop = op.fori_loop();
        if (loop.upper() > loop.lower() && loop.body().params_size() > 0) {
          ranges_[loop.body().params(0).id()] = {loop.lower(), loop.upper() - 1};
        }
      }
      for (ir::Region* r : ir::MutableRegions(op)) Region(*r);
      if (std::optional<int64_t> same = Identity(op)) {
        Replace(op.results(0), *same);
        continue;
      }
      Fold(op);
      for (int i = 0; i < op.results_size(); ++i) {
        producer_[op.results(i)] = &op;
        types_[op.results(i)] = ir::FromProto(op.result_types(i));
      }
      if (std::optional<IntRange> r = ResultRange(mesh_, op, [&](int64_t id) { return Range(id); })) {
        ranges_[op.results(0)] = *r;
      }
      // Each future is awaited once: two equal starts are two transfers, as are two equal
      // psends or precvs; two equal ref_loads may read different contents.
      const ir::Prim prim = ir::PrimOf(op);
      if (!ir::Regions(op).empty() || ir::IsAsyncStart(prim) || ir::IsAsyncDone(prim) ||
          ir::IsPointToPoint(prim) || ir::IsRefOp(prim)) {
        continue;
      }
      ir::Op key_op = op;
      key_op.clear_results();
      key_op.clear_name_scope();
      key_op.clear_loc();
      std::string key = key_op.SerializeAsString();
      auto [it, inserted] = seen.emplace(key, &op);
      if (!inserted) {
        for (int i = 0; i < op.results_size(); ++i) Replace(op.results(i), it->second->results(i));
      }
    }
    for (int64_t& id : *region.mutable_results()) id = Resolve(replacements_, id);
  }

 private:
  void Replace(int64_t from, int64_t to) {
    replacements_[from] = to;
    changed_ = true;
  }

  const ir::Op* Producer(int64_t id) const {
    auto it = producer_.find(id);
    return it == producer_.end() ? nullptr : it->second;
  }

  std::optional<IntRange> Range(int64_t id) const {
    auto it = ranges_.find(id);
    return it == ranges_.end() ? std::nullopt : std::optional(it->second);
  }

  // Whether operand `operand` of `op` already has the op's result type.
  bool SameType(const ir::Op& op, int operand) const {
    if (op.operands_size() <= operand) return false;
    auto it = types_.find(op.operands(operand));
    return it != types_.end() && it->second == ir::FromProto(op.result_types(0));
  }

  // The combined size of `op`'s axes; 0 for axes that are not distinct mesh axes.
  int64_t AxesSize(const ir::Op& op) const {
    return ir::CombinedAxisSize(mesh_, ir::CollectiveAxes(op)).value_or(0);
  }

  // The value `op` equals without computing anything, if any.
  std::optional<int64_t> Identity(const ir::Op& op) const {
    using ir::Prim;
    const Prim prim = ir::PrimOf(op);
    if (op.results_size() != 1) return std::nullopt;
    auto same_as = [&](int operand) -> std::optional<int64_t> {
      if (SameType(op, operand)) return op.operands(operand);
      return std::nullopt;
    };
    if (prim == Prim::kMul || prim == Prim::kAdd || prim == Prim::kSub || prim == Prim::kDiv) {
      std::optional<double> rhs = SplatValue(Producer(op.operands(1)));
      std::optional<double> lhs = SplatValue(Producer(op.operands(0)));
      bool integral = ir::IsInteger(ir::FromProto(op.result_types(0)).dtype);
      if ((prim == Prim::kMul || prim == Prim::kDiv) && rhs == 1.0) return same_as(0);
      if (prim == Prim::kMul && lhs == 1.0) return same_as(1);
      if (prim == Prim::kSub && rhs == 0.0) return same_as(0);
      // x + 0 is not x for floats when x is -0.0.
      if (prim == Prim::kAdd && integral && rhs == 0.0) return same_as(0);
      if (prim == Prim::kAdd && integral && lhs == 0.0) return same_as(1);
      return std::nullopt;
    }
    // select(p, a, b) with a constant p (a comparison the operands' ranges decide, folded).
    if (prim == Prim::kSelect && op.operands_size() == 3) {
      std::optional<double> p = SplatValue(Producer(op.operands(0)));
      if (p) return same_as(*p != 0 ? 1 : 2);
      return std::nullopt;
    }
    if (prim == Prim::kConvertElementType || prim == Prim::kReshape) return same_as(0);
    if (prim == Prim::kTranspose) {
      const auto& perm = op.transpose().permutation();
      for (int i = 0; i < perm.size(); ++i) {
        if (perm[i] != i) return std::nullopt;
      }
      return same_as(0);
    }
    if (prim == Prim::kBroadcastInDim) {
      const auto& dims = op.broadcast_in_dim().broadcast_dimensions();
      for (int i = 0; i < dims.size(); ++i) {
        if (dims[i] != i) return std::nullopt;
      }
      return same_as(0);
    }
    if (prim == Prim::kSlice) {
      for (int64_t s : op.slice().strides()) {
        if (s != 1) return std::nullopt;
      }
      return same_as(0);
    }
    if (ir::IsAllReduce(prim) && AxesSize(op) == 1) return same_as(0);
    if (prim == Prim::kAllGather && op.all_gather().tiled() && AxesSize(op) == 1) {
      return same_as(0);
    }
    return std::nullopt;
  }

  // Replaces `op` by a constant when all its operands are constants, or when it is a comparison
  // of s32 values whose ranges decide it (i < 0 for an i known to be >= 0).
  void Fold(ir::Op& op) {
    if (op.has_compare() && op.operands_size() == 2) {
      if (std::optional<bool> v = DecidedComparison(op, Range(op.operands(0)),
                                                    Range(op.operands(1)))) {
        ReplaceBySplat(op, *v ? 1.0 : 0.0);
        return;
      }
    }
    if (!options_.evaluate || op.has_constant() || op.results_size() != 1) return;
    // Folding would drop the layout the constraint asks for.
    if (op.has_with_sharding_constraint()) return;
    const ir::Primitive* prim = ir::FindPrimitive(ir::PrimOf(op));
    if (prim == nullptr || (prim->kind != ir::PrimitiveKind::kElementwise &&
                            prim->kind != ir::PrimitiveKind::kStructural)) {
      return;
    }
    ir::ShapedType type = ir::FromProto(op.result_types(0));
    if (type.num_elements() > options_.max_folded_elements) return;
    std::vector<ir::Tensor> operands;
    for (int64_t id : op.operands()) {
      const ir::Op* p = Producer(id);
      if (p == nullptr || !p->has_constant()) return;
      operands.push_back(ConstantTensor(*p));
    }
    absl::StatusOr<std::vector<ir::Tensor>> result = options_.evaluate(op, operands);
    if (!result.ok() || result->size() != 1) return;
    ir::Op folded;
    folded.set_opcode("constant");
    ir::ConstantAttrs* c = folded.mutable_constant();
    c->set_dtype(ir::ToProto(type.dtype));
    for (int64_t d : type.dims) c->add_shape(d);
    std::vector<double> values = (*result)[0].ToDoubles();
    std::optional<double> splat = values.empty() ? std::nullopt : std::optional(values[0]);
    for (double v : values) {
      if (v != values[0]) splat.reset();
    }
    if (splat) {
      c->add_value(*splat);
    } else {
      for (double v : values) c->add_value(v);
    }
    ReplaceBy(op, std::move(folded));
  }

  // Replaces single-result `op` by a constant of its type with every element `value`.
  void ReplaceBySplat(ir::Op& op, double value) {
    OpEmitter e(mesh_, "canonicalize", types_, /*next_id=*/nullptr);
    e.SetOrigin(op);
    e.Constant(ir::FromProto(op.result_types(0)), value, op.results(0));
    Take(op, e);
  }

  // Replaces `op` by `constant` (an op with no operands computing op's result).
  void ReplaceBy(ir::Op& op, ir::Op constant) {
    OpEmitter e(mesh_, "canonicalize", types_, /*next_id=*/nullptr);
    e.SetOrigin(op);
    e.Emit(std::move(constant), {}, op.results(0));
    Take(op, e);
  }

  // Replaces `op` by the one op `e` emitted, if it emitted one.
  void Take(ir::Op& op, OpEmitter& e) {
    std::vector<ir::Op> ops = e.Take();
    if (ops.empty()) return;
    op = std::move(ops[0]);
    changed_ = true;
  }

 public:
  void AddParams(const ir::Region& region) {
    for (const ir::Param& p : region.params()) types_[p.id()] = ir::FromProto(p.type());
    for (const ir::Op& op : region.ops()) {
      for (const ir::Region* r : ir::Regions(op)) AddParams(*r);
    }
  }

 private:
  const ir::Mesh& mesh_;
  const CanonicalizeOptions& options_;
  Replacements replacements_;
  std::unordered_map<int64_t, const ir::Op*> producer_;
  std::unordered_map<int64_t, ir::ShapedType> types_;
  std::unordered_map<int64_t, IntRange> ranges_;  // s32 values with known bounds
  bool changed_ = false;
};

}  // namespace

absl::StatusOr<bool> Canonicalize::Run(ir::Module& module) {
  bool changed = false;
  for (ir::Function& f : *module.mutable_functions()) {
    Canonicalizer c(module, options_);
    c.AddParams(f.body());
    c.Region(*f.mutable_body());
    changed |= c.changed();
  }
  ASSIGN_OR_RETURN(bool dce, DeadCodeElimination().Run(module));
  return changed || dce;
}

}  // namespace shardjit::passes
