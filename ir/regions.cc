#include "ir/regions.h"

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
    case Op::kFusion:
      return {&op.fusion().body()};
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
    case Op::kFusion:
      return {op.mutable_fusion()->mutable_body()};
    default:
      return {};
  }
}

std::string RegionName(const Op& op, int index) {
  if (op.has_cond()) return "branch " + std::to_string(index);
  if (op.has_while_loop() && index == 0) return "cond";
  return "body";
}

bool HasClosedRegions(const Op& op) { return op.has_shard_map() || op.has_fusion(); }

}  // namespace shardjit::ir
