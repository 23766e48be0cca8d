// Includes frontend/shardjit.h alone (nothing else of the project, no ir/ir.pb.h) and runs a
// small program through it: the public API is enough to write one.
#include <cstdio>

#include "frontend/shardjit.h"

using namespace shardjit;

int main() {
  Runtime rt({.num_devices = 2});
  absl::StatusOr<Mesh> mesh = make_mesh(rt, {{"x", 2}});
  if (!mesh.ok()) return 1;
  absl::StatusOr<Array> x =
      device_put(HostTensor(DType::kF32, {2, 2}, {1, 2, 3, 4}), NamedSharding(*mesh, P("x")));
  if (!x.ok()) return 2;
  auto f = jit(shard_map([](Tracer b) { return lax::psum(b * 2.0, "x"); }, *mesh, {P("x")},
                         {P()}));
  absl::StatusOr<Array> y = f(*x);
  if (!y.ok()) {
    std::fprintf(stderr, "%s\n", std::string(y.status().message()).c_str());
    return 3;
  }
  absl::StatusOr<Tensor> host = y->to_host();
  if (!host.ok() || host->ToDoubles() != std::vector<double>{8, 12}) return 4;
  auto lowered = f.lower(*x);
  if (!lowered.ok() || lowered->as_text().empty() || !lowered->cost_analysis().ok()) return 5;
  std::printf("PASS %s\n", P("x", None).to_string().c_str());
  return 0;
}
