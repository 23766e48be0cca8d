"""Seed 000's ring all-gather by remote DMA in JAX's TPU-Pallas interpret mode on CPU devices,
timed like bench/pallas_collective.cc's RingAllGather/pallas_kernel cases (f32 shards of 256x1024
gathered over x). Each mesh runs in a child process with a time limit: a run that does not finish
is reported, not waited for.

Run by scripts/bench_xla.sh pallas inside its private virtual environment. Prints one JSON object
per case: {"case": "RingAllGather/pallas_kernel/2/1", "median_ms": ...} or {"case": ...,
"error": "..."}.
"""

import argparse
import functools
import json
import multiprocessing
import os
import time


def run_case(sx, sy, runs, queue):
    # At least 4 host devices: with exactly 2, JAX 0.10's interpreter never finished the 2x1 case.
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={max(4, sx * sy)}"
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    from jax.sharding import Mesh, PartitionSpec as P

    h, w = 256, 1024

    def kernel(x_ref, out_ref, local_sem, send_sem, recv_sem):
        me = jax.lax.axis_index("x")
        step = pl.program_id(0)
        right = jax.lax.rem(me + 1, sx)

        @pl.when(step == 0)
        def _():
            c = pltpu.make_async_copy(x_ref, out_ref.at[pl.ds(me * h, h)], local_sem)
            c.start()
            c.wait()

        @pl.when(step > 0)
        def _():
            blk = jax.lax.rem(me - step + sx + 1, sx)
            slot = out_ref.at[pl.ds(blk * h, h)]
            device = (right,) if sy == 1 else (right, jax.lax.axis_index("y"))
            c = pltpu.make_async_remote_copy(slot, slot, send_sem, recv_sem, device_id=device,
                                             device_id_type=pl.DeviceIdType.MESH)
            c.start()
            c.wait()

    call = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=(sx,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.SemaphoreType.DMA] * 3),
        out_shape=jax.ShapeDtypeStruct((sx * h, w), jnp.float32),
        interpret=pltpu.InterpretParams())
    axes = ("x",) if sy == 1 else ("x", "y")
    devices = np.array(jax.devices()[:sx * sy]).reshape((sx,) if sy == 1 else (sx, sy))
    mesh = Mesh(devices, axes)
    f = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=P("x", None),
                              out_specs=P(None, None), check_vma=False))
    x = jnp.arange(sx * h * w, dtype=jnp.float32).reshape(sx * h, w)
    try:
        out = f(x).block_until_ready()
        if not np.array_equal(np.asarray(out), np.asarray(x)):
            queue.put({"error": "wrong result"})
            return
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            f(x).block_until_ready()
            times.append((time.perf_counter() - t0) * 1e3)
        queue.put({"median_ms": sorted(times)[len(times) // 2]})
    except Exception as e:  # reported, as the notebook saw it
        queue.put({"error": f"{type(e).__name__}: {str(e)[:200]}"})


def main():
    multiprocessing.set_start_method("spawn")
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--meshes", default="2x1,2x2,4x4")
    p.add_argument("--limit-s", type=float, default=120)
    args = p.parse_args()
    for mesh in args.meshes.split(","):
        sx, sy = (int(v) for v in mesh.split("x"))
        queue = multiprocessing.Queue()
        child = multiprocessing.Process(target=run_case, args=(sx, sy, args.runs, queue))
        child.start()
        child.join(args.limit_s)
        if child.is_alive():
            child.kill()
            row = {"error": f"did not finish within {args.limit_s:g} s"}
        else:
            row = queue.get() if not queue.empty() else {"error": f"exit code {child.exitcode}"}
        row["case"] = f"RingAllGather/pallas_kernel/{sx}/{sy}"
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
