#include "ir/regions.h"

#include "fmt/format.h"
#include "ir/prim.h"

namespace shardjit::ir {

std::vector<const Region*> Regions(const Op& op) {
  switch (op.attrs_case()) {
    case Op::kForiLoop:
      return {&op.fori_loop().body()};
    case Op::kWhileLoop:
      return {&op.while_loop().cond(), &op.while_loop().body()};
    case Op::kCond: {
      std::vector<const Region*> out;
      for (const Region& r : op.cond().branches()) out.push_back(&r);
      return out;
    }
    case Op::kShardMap:
      return {&op.shard_map().body()};
    case Op::kCustomJvpCall:
      return {&op.custom_jvp_call().fun(), &op.custom_jvp_call().jvp()};
    case Op::kCustomVjpCall:
      return {&op.custom_vjp_call().fun(), &op.custom_vjp_call().fwd(),
              &op.custom_vjp_call().bwd()};
    case Op::kCheckpoint:
      return {&op.checkpoint().body()};
    case Op::kFusion:
      return {&op.fusion().body()};
    case Op::kPallasCall: {
      std::vector<const Region*> out;
      for (const auto* specs : {&op.pallas_call().in_specs(), &op.pallas_call().out_specs()}) {
        for (const BlockSpec& s : *specs) {
          if (!s.whole()) out.push_back(&s.index_map());
        }
      }
      out.push_back(&op.pallas_call().kernel());
      return out;
    }
    default:
      return {};
  }
}

std::vector<Region*> MutableRegions(Op& op) {
  switch (op.attrs_case()) {
    case Op::kForiLoop:
      return {op.mutable_fori_loop()->mutable_body()};
    case Op::kWhileLoop:
      return {op.mutable_while_loop()->mutable_cond(), op.mutable_while_loop()->mutable_body()};
    case Op::kCond: {
      std::vector<Region*> out;
      for (Region& r : *op.mutable_cond()->mutable_branches()) out.push_back(&r);
      return out;
    }
    case Op::kShardMap:
      return {op.mutable_shard_map()->mutable_body()};
    case Op::kCustomJvpCall:
      return {op.mutable_custom_jvp_call()->mutable_fun(),
              op.mutable_custom_jvp_call()->mutable_jvp()};
    case Op::kCustomVjpCall:
      return {op.mutable_custom_vjp_call()->mutable_fun(),
              op.mutable_custom_vjp_call()->mutable_fwd(),
              op.mutable_custom_vjp_call()->mutable_bwd()};
    case Op::kCheckpoint:
      return {op.mutable_checkpoint()->mutable_body()};
    case Op::kFusion:
      return {op.mutable_fusion()->mutable_body()};
    case Op::kPallasCall: {
      std::vector<Region*> out;
      PallasCallAttrs& a = *op.mutable_pallas_call();
      for (auto* specs : {a.mutable_in_specs(), a.mutable_out_specs()}) {
        for (BlockSpec& s : *specs) {
          if (!s.whole()) out.push_back(s.mutable_index_map());
        }
      }
      out.push_back(a.mutable_kernel());
      return out;
    }
    default:
      return {};
  }
}

std::string RegionName(const Op& op, int index) {
  if (op.has_cond()) return "branch " + std::to_string(index);
  if (op.has_pallas_call()) {
    int i = 0;
    for (const auto* specs : {&op.pallas_call().in_specs(), &op.pallas_call().out_specs()}) {
      const char* which = specs == &op.pallas_call().in_specs() ? "in_specs" : "out_specs";
      for (int k = 0; k < specs->size(); ++k) {
        if ((*specs)[k].whole()) continue;
        if (i++ == index) return fmt::format("{}[{}] index_map", which, k);
      }
    }
    return "kernel";
  }
  if (op.has_while_loop() && index == 0) return "cond";
  if (op.has_custom_jvp_call()) return index == 0 ? "fun" : "jvp";
  if (op.has_custom_vjp_call()) return index == 0 ? "fun" : index == 1 ? "fwd" : "bwd";
  return "body";
}

bool HasClosedRegions(const Op& op) {
  return op.has_shard_map() || op.has_fusion() || op.has_pallas_call();
}

bool HasEffects(const Op& op) {
  if (WritesRefs(PrimOf(op))) return true;
  // A pallas_call's effects stay inside it: its results are its only outputs.
  if (op.has_pallas_call()) return false;
  for (const Region* r : Regions(op)) {
    for (const Op& inner : r->ops()) {
      if (HasEffects(inner)) return true;
    }
  }
  return false;
}

}  // namespace shardjit::ir
