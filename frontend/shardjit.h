// The shardjit embedding API: include this one header. Types and transformations are in
// `shardjit`, primitives and collectives in `shardjit::lax`, numpy-style helpers in
// `shardjit::jnp`, random tensors in `shardjit::random` (as in JAX).
//
//   Runtime rt({.num_devices = 4});
//   ASSIGN_OR_RETURN(Mesh mesh, make_mesh(rt, {{"x", 2}, {"y", 2}}));
//   ASSIGN_OR_RETURN(Tensor host, random::normal(random::key(1), {2048, 2048}, DType::kBF16));
//   ASSIGN_OR_RETURN(Array x, device_put(host, NamedSharding(mesh, P("x", "y"))));
//   auto f = jit(shard_map([](Tracer x) { return lax::psum(x, "x"); }, mesh, {P("x", "y")},
//                          {P(None, "y")}));
//   ASSIGN_OR_RETURN(Array out, f(x));  // one Tracer returned: one Array
#ifndef SHARDJIT_FRONTEND_SHARDJIT_H_
#define SHARDJIT_FRONTEND_SHARDJIT_H_

#include "frontend/array.h"
#include "frontend/autodiff.h"
#include "frontend/collectives.h"
#include "frontend/control_flow.h"
#include "frontend/custom_derivatives.h"
#include "frontend/distributed.h"
#include "frontend/indexing.h"
#include "frontend/jit.h"
#include "frontend/mpmd.h"
#include "frontend/ops.h"
#include "frontend/pallas.h"
#include "frontend/random.h"
#include "frontend/sharding.h"
#include "frontend/sorting.h"
#include "frontend/tracer.h"

#endif  // SHARDJIT_FRONTEND_SHARDJIT_H_
