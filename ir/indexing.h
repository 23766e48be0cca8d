// What gather and scatter share of their dimension numbers: the operand dimensions a window spans.
#ifndef SHARDJIT_IR_INDEXING_H_
#define SHARDJIT_IR_INDEXING_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace shardjit::ir {

// The operand dimensions (of `rank`) a gather or scatter window spans, in increasing order: those
// neither collapsed (gather's collapsed_slice_dims, scatter's inserted_window_dims) nor batching.
// Window dimension j of the result (offset_dims[j]) or of the updates (update_window_dims[j])
// runs along the j-th of them.
std::vector<int64_t> WindowDims(int64_t rank, absl::Span<const int64_t> collapsed,
                                absl::Span<const int64_t> batching);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_INDEXING_H_
