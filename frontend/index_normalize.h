// jnp's _normalize_index, shared by the traced indexing functions: a negative index i into a
// dimension of `size` becomes i + size.
#ifndef SHARDJIT_FRONTEND_INDEX_NORMALIZE_H_
#define SHARDJIT_FRONTEND_INDEX_NORMALIZE_H_

#include <cstdint>

#include "frontend/tracer.h"

namespace shardjit {

// select(i < 0, i + size, i) for traced integer indices `i` (any shape): unsigned indices are
// returned as they are; signed ones wrap in their own dtype, as JAX does, unless `size` does not
// fit it (an s8 index into 300 rows), in which case they are widened to s32 first.
Tracer NormalizeIndex(Tracer i, int64_t size, Loc loc);

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_INDEX_NORMALIZE_H_
