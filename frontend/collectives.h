// Collectives on tracers, inside shard_map (jax.lax.parallel semantics; seed 004). Each takes one
// axis name or several; a tuple of axes acts as one axis indexed x*size(y)+y.
#ifndef SHARDJIT_FRONTEND_COLLECTIVES_H_
#define SHARDJIT_FRONTEND_COLLECTIVES_H_

#include <utility>
#include <vector>

#include "frontend/ops.h"

namespace shardjit {

// pred operands are converted to s32 first, as JAX does.
Tracer psum(Tracer x, AxisNames axes, AxisIndexGroups groups = {}, Loc loc = Loc::current());
Tracer pmean(Tracer x, AxisNames axes, AxisIndexGroups groups = {}, Loc loc = Loc::current());
Tracer pmax(Tracer x, AxisNames axes, AxisIndexGroups groups = {}, Loc loc = Loc::current());
Tracer pmin(Tracer x, AxisNames axes, AxisIndexGroups groups = {}, Loc loc = Loc::current());
// tiled=false stacks the blocks in a new dimension at `axis`; tiled=true concatenates along it.
// Negative axis and dimension arguments count from the end, as in JAX.
Tracer all_gather(Tracer x, AxisNames axes, int64_t axis = 0, bool tiled = false,
                  AxisIndexGroups groups = {}, Loc loc = Loc::current());
Tracer psum_scatter(Tracer x, AxisNames axes, int64_t scatter_dimension = 0, bool tiled = false,
                    AxisIndexGroups groups = {}, Loc loc = Loc::current());
// perm: (source, target) axis indices; devices that are no target receive zeros.
Tracer ppermute(Tracer x, AxisNames axes, std::vector<std::pair<int64_t, int64_t>> perm,
                Loc loc = Loc::current());
Tracer all_to_all(Tracer x, AxisNames axes, int64_t split_axis, int64_t concat_axis,
                  bool tiled = false, AxisIndexGroups groups = {}, Loc loc = Loc::current());
// s32 scalars.
Tracer axis_index(AxisNames axes, Loc loc = Loc::current());
Tracer axis_size(AxisNames axes, Loc loc = Loc::current());

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_COLLECTIVES_H_
