#include "examples/kernels/ring_all_gather.h"

#include <utility>

namespace shardjit::examples {

pl::PallasCall RingAllGather(const ShapedType& shard, const std::string& axis, int64_t n) {
  const int64_t h = shard.dims.at(0);
  std::vector<int64_t> gathered = shard.dims;
  gathered[0] = n * h;
  return pl::pallas_call(
      [=](pl::Ref x, pl::Ref out, pl::Ref local_sem, pl::Ref send_sem, pl::Ref recv_sem) {
        Tracer me = lax::axis_index(axis);
        Tracer step = pl::program_id(0);
        Tracer right = (me + 1) % n;
        Tracer left = (me + (n - 1)) % n;
        pl::when(lax::eq(step, lax::scalar(0, DType::kS32)), [&] {
          // Both neighbours are in the kernel before anyone copies into them.
          pl::Ref barrier = pl::get_barrier_semaphore();
          pl::semaphore_signal(barrier, 1, pl::DeviceId({{axis, left}}));
          pl::semaphore_signal(barrier, 1, pl::DeviceId({{axis, right}}));
          pl::semaphore_wait(barrier, 2);
          pl::AsyncCopy local = pl::make_async_copy(x, out.at({pl::ds(me * h, h)}), local_sem);
          local.start();
          local.wait();
        });
        pl::when(step > 0, [&] {
          // Forward the block that came from the left at the previous step (own block first).
          Tracer block = (me - step + (n + 1)) % n;
          pl::View slot = out.at({pl::ds(block * h, h)});
          pl::AsyncCopy hop = pl::make_async_remote_copy(slot, slot, send_sem, recv_sem,
                                                         pl::DeviceId({{axis, right}}));
          hop.start();
          hop.wait();
        });
      },
      {.out_shapes = {{shard.dtype, gathered}},
       .grid = {n},
       .in_specs = {pl::BlockSpec::Any()},
       .out_specs = {pl::BlockSpec::Any()},
       .scratch_shapes = {pl::DmaSemaphores(), pl::DmaSemaphores(), pl::DmaSemaphores()},
       .dimension_semantics = {pl::kArbitrary},
       .name = "ring_all_gather",
       .barrier_semaphore = true});
}

Jitted<Array> RingAllGatherProgram(const Mesh& mesh, const std::string& axis,
                                   JitOptions options) {
  const int64_t n = mesh.axis_size(axis);
  options.name = "ring_all_gather";
  return jit(shard_map([axis, n](Tracer x) { return RingAllGather(x.type(), axis, n)(x)[0]; },
                       mesh, {P(axis, None)}, {P(None, None)}, /*check_vma=*/false),
             std::move(options));
}

}  // namespace shardjit::examples
