// Collectives on tracers, inside shard_map: `lax::psum` etc. (jax.lax.parallel semantics; seed
// 004). Each takes one axis name or several; a tuple of axes acts as one axis indexed
// x*size(y)+y.
#ifndef SHARDJIT_FRONTEND_COLLECTIVES_H_
#define SHARDJIT_FRONTEND_COLLECTIVES_H_

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "frontend/ops.h"

namespace shardjit::lax {

// pred operands are converted to s32 first, as JAX does.
Tracer psum(Tracer x, AxisNames axes, AxisIndexGroups groups = {}, Loc loc = Loc::current());
Tracer pmean(Tracer x, AxisNames axes, AxisIndexGroups groups = {}, Loc loc = Loc::current());
Tracer pmax(Tracer x, AxisNames axes, AxisIndexGroups groups = {}, Loc loc = Loc::current());
Tracer pmin(Tracer x, AxisNames axes, AxisIndexGroups groups = {}, Loc loc = Loc::current());
// tiled=false stacks the blocks in a new dimension at `axis`; tiled=true concatenates along it.
// Negative axis and dimension arguments count from the end, as in JAX.
Tracer all_gather(Tracer x, AxisNames axes, int64_t axis = 0, bool tiled = false,
                  AxisIndexGroups groups = {}, Loc loc = Loc::current());
// JAX's all_gather_invariant: all_gather's result, typed invariant over `axes` in a shard_map
// body typed with varying manual axes (so an out_spec may claim replication over them); its
// transpose is the dynamic_slice of this device's block, not a psum_scatter.
Tracer all_gather_invariant(Tracer x, AxisNames axes, int64_t axis = 0, bool tiled = false,
                            Loc loc = Loc::current());
Tracer psum_scatter(Tracer x, AxisNames axes, int64_t scatter_dimension = 0, bool tiled = false,
                    AxisIndexGroups groups = {}, Loc loc = Loc::current());
// perm: (source, target) axis indices; devices that are no target receive zeros.
Tracer ppermute(Tracer x, AxisNames axes, std::vector<std::pair<int64_t, int64_t>> perm,
                Loc loc = Loc::current());
// The two halves of a ppermute (JAX's psend / precv): psend sends x from each source of `perm`
// to its target and returns a token; precv on a target returns what its source sent (a device
// that is no target gets zeros of `out_type`). The k-th precv of a target from a source receives
// that source's k-th psend to it, so the halves may sit in different programs (mpmd_map). A
// precv whose psend never comes fails the run at the collective timeout; a psend no precv
// receives, or one of another type than the precv expects, fails the run too.
Tracer psend(Tracer x, AxisNames axes, std::vector<std::pair<int64_t, int64_t>> perm,
             Loc loc = Loc::current());
Tracer precv(Tracer token, ShapedType out_type, AxisNames axes,
             std::vector<std::pair<int64_t, int64_t>> perm, Loc loc = Loc::current());
// A token for a precv with no psend before it in its program (JAX's lax.create_token).
Tracer create_token(Loc loc = Loc::current());
Tracer all_to_all(Tracer x, AxisNames axes, int64_t split_axis, int64_t concat_axis,
                  bool tiled = false, AxisIndexGroups groups = {}, Loc loc = Loc::current());
// JAX's ragged_all_to_all: the offset and size vectors (s32[K], K a multiple of the group size
// G) describe K row slices of `operand`; slice i goes to the member at group index i / (K / G),
// which writes it at output_offsets[i] of its copy of `output`, and must expect it: its
// recv_sizes[j * (K / G) + k] is the size of the k-th slice member j sends it. Slices out of
// range, overlapping in a receiver's output, or disagreeing sizes fail the run.
Tracer ragged_all_to_all(Tracer operand, Tracer output, Tracer input_offsets, Tracer send_sizes,
                         Tracer output_offsets, Tracer recv_sizes, AxisNames axes,
                         AxisIndexGroups groups = {}, Loc loc = Loc::current());
// Every device gets the operand of the device at axis index `source` (JAX's pbroadcast, the
// CollectiveBroadcast of XLA).
Tracer pbroadcast(Tracer x, AxisNames axes, int64_t source, Loc loc = Loc::current());
// JAX's compositions of the above (lax.parallel composes them the same way):
// pargmax / pargmin: elementwise, the index along `axis` (one axis only, as in JAX) of the device
// whose x is the largest / smallest, ties going to the lowest index; s32.
Tracer pargmax(Tracer x, const std::string& axis, Loc loc = Loc::current());
Tracer pargmin(Tracer x, const std::string& axis, Loc loc = Loc::current());
// A tuple of axes is refused at compile time (JAX raises TypeError).
Tracer pargmax(Tracer x, std::initializer_list<std::string> axes) = delete;
Tracer pargmin(Tracer x, std::initializer_list<std::string> axes) = delete;
// pshuffle: the device at axis index i gets the operand of the device at perm[i]; `perm` must be
// a permutation of [0, n).
Tracer pshuffle(Tracer x, AxisNames axes, std::vector<int64_t> perm, Loc loc = Loc::current());
// pswapaxes: all_to_all(x, axes, axis, axis): the mapped axis and dimension `axis` (whose size
// must be the group size) trade places.
Tracer pswapaxes(Tracer x, AxisNames axes, int64_t axis, AxisIndexGroups groups = {},
                 Loc loc = Loc::current());
// jax.lax.pvary: x typed as varying over `axes` besides the axes it varies over already (a cast
// in a shard_map body typed with varying manual axes; its transpose is a psum over them). x
// itself for no new axes, or outside a body typed with varying manual axes (check_vma=false).
Tracer pvary(Tracer x, AxisNames axes, Loc loc = Loc::current());
// s32 scalars.
Tracer axis_index(AxisNames axes, Loc loc = Loc::current());
Tracer axis_size(AxisNames axes, Loc loc = Loc::current());

// Asynchronous collectives (seed 004's `*_start` / `*_done`): `X_start` takes X's arguments,
// posts the collective and returns a future tracer (type `future[...]`) at once; the device goes
// on computing, and `X_done(future)` waits for what is still missing and returns what X returns.
// Each future is awaited exactly once, by the matching done, in the function or loop body that
// holds it; it may be carried through fori_loop (started in one iteration, awaited in the next).
Tracer psum_start(Tracer x, AxisNames axes, AxisIndexGroups groups = {},
                  Loc loc = Loc::current());
Tracer all_gather_start(Tracer x, AxisNames axes, int64_t axis = 0, bool tiled = false,
                        AxisIndexGroups groups = {}, Loc loc = Loc::current());
// JAX binds it as reduce_scatter_start.
Tracer psum_scatter_start(Tracer x, AxisNames axes, int64_t scatter_dimension = 0,
                          bool tiled = false, AxisIndexGroups groups = {},
                          Loc loc = Loc::current());
Tracer ppermute_start(Tracer x, AxisNames axes, std::vector<std::pair<int64_t, int64_t>> perm,
                      Loc loc = Loc::current());
Tracer pbroadcast_start(Tracer x, AxisNames axes, int64_t source, Loc loc = Loc::current());
Tracer all_to_all_start(Tracer x, AxisNames axes, int64_t split_axis, int64_t concat_axis,
                        bool tiled = false, AxisIndexGroups groups = {},
                        Loc loc = Loc::current());
Tracer psum_done(Tracer future, Loc loc = Loc::current());
Tracer all_gather_done(Tracer future, Loc loc = Loc::current());
Tracer psum_scatter_done(Tracer future, Loc loc = Loc::current());
Tracer ppermute_done(Tracer future, Loc loc = Loc::current());
Tracer pbroadcast_done(Tracer future, Loc loc = Loc::current());
Tracer all_to_all_done(Tracer future, Loc loc = Loc::current());

}  // namespace shardjit::lax

#endif  // SHARDJIT_FRONTEND_COLLECTIVES_H_
