#include "ir/indexing.h"

#include <algorithm>

namespace shardjit::ir {

std::vector<int64_t> WindowDims(int64_t rank, absl::Span<const int64_t> collapsed,
                                absl::Span<const int64_t> batching) {
  auto contains = [](absl::Span<const int64_t> dims, int64_t d) {
    return std::find(dims.begin(), dims.end(), d) != dims.end();
  };
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!contains(collapsed, d) && !contains(batching, d)) out.push_back(d);
  }
  return out;
}

}  // namespace shardjit::ir
