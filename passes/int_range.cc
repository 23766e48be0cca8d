#include "passes/int_range.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "ir/collective_groups.h"
#include "ir/prim.h"
#include "ir/sharding.h"
#include "ir/types.h"

namespace shardjit::passes {
namespace {

std::optional<IntRange> Checked(int64_t lo, int64_t hi) {
  if (lo < std::numeric_limits<int32_t>::min() || hi > std::numeric_limits<int32_t>::max()) {
    return std::nullopt;
  }
  return IntRange{lo, hi};
}

}  // namespace

std::optional<IntRange> ResultRange(
    const ir::Mesh& mesh, const ir::Op& op,
    const std::function<std::optional<IntRange>(int64_t id)>& operand_range) {
  using ir::Prim;
  if (op.results_size() != 1 || op.result_types_size() != 1 ||
      ir::FromProto(op.result_types(0)).dtype != ir::DType::kS32) {
    return std::nullopt;
  }
  const Prim prim = ir::PrimOf(op);
  if (prim == Prim::kConstant) {
    const auto& values = op.constant().value();
    if (values.empty()) return std::nullopt;
    auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    return Checked(static_cast<int64_t>(*lo), static_cast<int64_t>(*hi));
  }
  if (prim == Prim::kAxisIndex || prim == Prim::kAxisSize) {
    absl::StatusOr<int64_t> n = ir::CombinedAxisSize(mesh, ir::CollectiveAxes(op));
    if (!n.ok()) return std::nullopt;
    return prim == Prim::kAxisIndex ? Checked(0, *n - 1) : Checked(*n, *n);
  }
  std::vector<IntRange> in;
  for (int64_t id : op.operands()) {
    std::optional<IntRange> r = operand_range(id);
    if (!r) return std::nullopt;
    in.push_back(*r);
  }
  switch (prim) {
    case Prim::kConvertElementType:
    case Prim::kReshape:
    case Prim::kBroadcastInDim:
    case Prim::kTranspose:
      return in.empty() ? std::nullopt : std::optional(in[0]);
    case Prim::kAdd:
      return Checked(in[0].lo + in[1].lo, in[0].hi + in[1].hi);
    case Prim::kSub:
      return Checked(in[0].lo - in[1].hi, in[0].hi - in[1].lo);
    case Prim::kNeg:
      return Checked(-in[0].hi, -in[0].lo);
    case Prim::kMul: {
      // |bounds| <= 2^31, so the products fit in int64.
      const int64_t p[] = {in[0].lo * in[1].lo, in[0].lo * in[1].hi, in[0].hi * in[1].lo,
                           in[0].hi * in[1].hi};
      return Checked(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
    }
    case Prim::kMax:
      return Checked(std::max(in[0].lo, in[1].lo), std::max(in[0].hi, in[1].hi));
    case Prim::kMin:
      return Checked(std::min(in[0].lo, in[1].lo), std::min(in[0].hi, in[1].hi));
    case Prim::kRem:
      // A non-negative dividend and a positive divisor: 0 .. min(a, b - 1).
      if (in[0].lo >= 0 && in[1].lo > 0) return Checked(0, std::min(in[0].hi, in[1].hi - 1));
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

std::optional<bool> DecidedComparison(const ir::Op& op, const std::optional<IntRange>& lhs,
                                      const std::optional<IntRange>& rhs) {
  if (!op.has_compare() || !lhs || !rhs) return std::nullopt;
  const IntRange& a = *lhs;
  const IntRange& b = *rhs;
  switch (op.compare().direction()) {
    case ir::LT:
      if (a.hi < b.lo) return true;
      if (a.lo >= b.hi) return false;
      return std::nullopt;
    case ir::LE:
      if (a.hi <= b.lo) return true;
      if (a.lo > b.hi) return false;
      return std::nullopt;
    case ir::GT:
      if (a.lo > b.hi) return true;
      if (a.hi <= b.lo) return false;
      return std::nullopt;
    case ir::GE:
      if (a.lo >= b.hi) return true;
      if (a.hi < b.lo) return false;
      return std::nullopt;
    case ir::EQ:
    case ir::NE: {
      const bool disjoint = a.hi < b.lo || b.hi < a.lo;
      const bool same_point = a.lo == a.hi && b.lo == b.hi && a.lo == b.lo;
      if (!disjoint && !same_point) return std::nullopt;
      return (op.compare().direction() == ir::EQ) == same_point;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace shardjit::passes
