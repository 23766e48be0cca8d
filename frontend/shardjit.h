// The shardjit embedding API: include this one header.
//
//   Runtime rt({.num_devices = 4});
//   Mesh mesh = *Mesh::Create(rt, {{"x", 2}, {"y", 2}});
//   Array x = *device_put(*random::Normal(Key(1), {2048, 2048}, DType::kBF16),
//                         NamedSharding(mesh, P("x", "y")));
//   auto f = jit(shard_map([](Tracer x) { return psum(x, "x"); }, mesh, {P("x", "y")},
//                          {P(None, "y")}));
//   absl::StatusOr<std::vector<Array>> out = f(x);
#ifndef SHARDJIT_FRONTEND_SHARDJIT_H_
#define SHARDJIT_FRONTEND_SHARDJIT_H_

#include "frontend/array.h"
#include "frontend/collectives.h"
#include "frontend/control_flow.h"
#include "frontend/distributed.h"
#include "frontend/jit.h"
#include "frontend/mpmd.h"
#include "frontend/ops.h"
#include "frontend/random.h"
#include "frontend/sharding.h"
#include "frontend/tracer.h"

#endif  // SHARDJIT_FRONTEND_SHARDJIT_H_
