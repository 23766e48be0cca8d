#include "examples/kernels/collective_matmul.h"

#include <utility>

#include "fmt/format.h"

namespace shardjit::examples {
namespace {

constexpr int kLeft = 0, kRight = 1;
constexpr int64_t kBuffering = 2;

Tracer S32(int64_t v) { return lax::scalar(static_cast<double>(v), DType::kS32); }

}  // namespace

pl::PallasCall CollectiveMatmulKernel(const ShapedType& x_shard, const ShapedType& w,
                                      const std::string& axis, int64_t n) {
  const int64_t m = x_shard.dims[0], ks = x_shard.dims[1], cols = w.dims[1];
  const int64_t last = n / 2 - 1;
  auto kernel = [=](pl::Ref x, pl::Ref w_ref, pl::Ref out, pl::Ref scratch, pl::Ref capacity_left,
                    pl::Ref capacity_right, pl::Ref send_right, pl::Ref send_left,
                    pl::Ref recv_right, pl::Ref recv_left) {
    Tracer me = lax::axis_index(axis);
    Tracer right = (me + 1) % n;
    Tracer left = (me + (n - 1)) % n;
    Tracer s = pl::program_id(0);
    auto slot = [&](pl::Indexer version, int side) { return scratch.at({version, side}); };
    pl::when(lax::eq(s, S32(0)), [&] {
      pl::semaphore_signal(capacity_left, kBuffering - 1);
      pl::semaphore_signal(capacity_right, kBuffering - 1);
      // Only neighbours talk: meet them.
      pl::Ref barrier = pl::get_barrier_semaphore();
      pl::semaphore_signal(barrier, 1, pl::DeviceId({{axis, left}}));
      pl::semaphore_signal(barrier, 1, pl::DeviceId({{axis, right}}));
      pl::semaphore_wait(barrier, 2);
      scratch.store({0, kLeft}, x.load());
      pl::AsyncCopy first = pl::make_async_remote_copy(
          slot(0, kLeft), slot(0, kRight), send_right, recv_right, pl::DeviceId({{axis, right}}));
      first.start();
      out.store(lax::full({m, cols}, 0, DType::kF32));
      first.wait_send();
    });
    pl::when(s > 0, [&] {
      // Invariant: this version's LEFT block is here and its RIGHT block was sent to us.
      Tracer step = s - 1;
      Tracer version = step % kBuffering;
      Tracer next = (step + 1) % kBuffering;
      Tracer more = lax::ne(step, S32(last));
      pl::AsyncCopy shift_left =
          pl::make_async_remote_copy(slot(version, kLeft), slot(next, kLeft), send_left,
                                     recv_left, pl::DeviceId({{axis, left}}));
      pl::AsyncCopy shift_right =
          pl::make_async_remote_copy(slot(version, kRight), slot(next, kRight), send_right,
                                     recv_right, pl::DeviceId({{axis, right}}));
      pl::when(more, [&] {
        pl::semaphore_wait(capacity_left, 1);  // the left neighbour has a free slot
        shift_left.start();
      });
      shift_right.wait_recv();
      pl::when(more, [&] {
        pl::semaphore_wait(capacity_right, 1);
        shift_right.start();
      });
      // LEFT holds block me + step of the ring, RIGHT block me - 1 - step.
      Tracer left_block = (me + step) % n;
      Tracer right_block = (me + (n - 1) - step) % n;
      // Each product accumulates into the output (on x86: a GEMM into it, in place).
      out.store(out.load() + pl::dot(scratch.load({version, kLeft}),
                                     w_ref.load({pl::ds(left_block * ks, ks)}), DType::kF32));
      out.store(out.load() + pl::dot(scratch.load({version, kRight}),
                                     w_ref.load({pl::ds(right_block * ks, ks)}), DType::kF32));
      pl::when(more, [&] {
        shift_left.wait_send();
        pl::semaphore_signal(capacity_left, 1, pl::DeviceId({{axis, right}}));
        shift_right.wait_send();
        pl::semaphore_signal(capacity_right, 1, pl::DeviceId({{axis, left}}));
        shift_left.wait_recv();
      });
      pl::when(lax::eq(step, S32(last)), [&] {
        // The capacity the neighbours gave back (the last step returns none).
        pl::semaphore_wait(capacity_left, kBuffering - 1);
        pl::semaphore_wait(capacity_right, kBuffering - 1);
      });
    });
  };
  return pl::pallas_call(
      kernel,
      {.out_shapes = {{DType::kF32, {m, cols}}},
       .grid = {n / 2 + 1},
       .scratch_shapes = {{x_shard.dtype, {kBuffering, 2, m, ks}},
                          pl::Semaphores(),
                          pl::Semaphores(),
                          pl::DmaSemaphores(),
                          pl::DmaSemaphores(),
                          pl::DmaSemaphores(),
                          pl::DmaSemaphores()},
       .dimension_semantics = {pl::kArbitrary},
       .name = "collective_matmul",
       .barrier_semaphore = true});
}

absl::StatusOr<Jitted<Array>> CollectiveMatmulKernelProgram(const Mesh& mesh,
                                                             const std::string& axis,
                                                             JitOptions options) {
  const int64_t n = mesh.axis_size(axis);
  if (n < 2 || n % 2 != 0) {
    return absl::InvalidArgumentError(fmt::format(
        "collective matmul kernel: the ring along \"{}\" has {} devices; the bidirectional "
        "kernel needs an even ring",
        axis, n));
  }
  options.name = "collective_matmul_kernel";
  return jit(shard_map(
                 [axis, n](Tracer x, Tracer w) {
                   return CollectiveMatmulKernel(x.type(), w.type(), axis, n)(x, w)[0];
                 },
                 mesh, {P(None, axis), P(None, None)}, {P(None, None)}, /*check_vma=*/false),
             std::move(options));
}

}  // namespace shardjit::examples
