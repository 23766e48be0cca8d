#include "ir/pallas.h"

#include <limits>
#include <unordered_map>

#include "ir/prim.h"
#include "ir/regions.h"

#include "ir/prims/rule_util.h"

namespace shardjit::ir {

double PaddingValue(DType dtype) {
  if (IsFloating(dtype)) return std::numeric_limits<double>::quiet_NaN();
  if (std::optional<prims::IntegerBounds> range = prims::IntegerRange(dtype)) return range->lo;
  return 0;
}

namespace {

void MarkDmaDestinations(const Region& region, const std::unordered_map<int64_t, int>& param_of,
                         const PallasCallAttrs& a, std::vector<bool>& out) {
  for (const Op& op : region.ops()) {
    if (PrimOf(op) == Prim::kDmaStart && op.operands_size() > 0) {
      auto src = param_of.find(op.operands(0));
      if (src != param_of.end()) {
        const int dst = 1 + a.kernel().params(src->second).type().dims_size();
        if (dst < op.operands_size()) {
          auto it = param_of.find(op.operands(dst));
          if (it != param_of.end()) out[it->second] = true;
        }
      }
    }
    for (const Region* r : Regions(op)) MarkDmaDestinations(*r, param_of, a, out);
  }
}

}  // namespace

std::vector<bool> DmaDestinations(const PallasCallAttrs& a) {
  std::unordered_map<int64_t, int> param_of;
  for (int p = 0; p < a.kernel().params_size(); ++p) param_of[a.kernel().params(p).id()] = p;
  std::vector<bool> out(a.kernel().params_size(), false);
  MarkDmaDestinations(a.kernel(), param_of, a, out);
  return out;
}

}  // namespace shardjit::ir
