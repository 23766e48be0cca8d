#include "ir/pallas.h"

#include <limits>

#include "ir/prims/rule_util.h"

namespace shardjit::ir {

double PaddingValue(DType dtype) {
  if (IsFloating(dtype)) return std::numeric_limits<double>::quiet_NaN();
  if (std::optional<prims::IntegerBounds> range = prims::IntegerRange(dtype)) return range->lo;
  return 0;
}

}  // namespace shardjit::ir
