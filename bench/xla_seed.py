"""The seed notebook's bf16 matmul variants on XLA-CPU (JAX), timed like shardjit's seed_matmul.

Run by scripts/bench_xla.sh inside its private virtual environment, one process per mesh (the
number of virtual CPU devices is fixed when JAX starts). Prints one JSON object per variant:
{"mesh": "2x2", "variant": "a", "median_ms": ..., "p90_ms": ..., "compile_ms": ...}.

Variants (examples/seed_variants.h has shardjit's):
  (a) jit(matmul) on the sharded inputs (XLA's SPMD partitioner plans it);
  (b) shard_map: all_gather x over y and w over x, local matmul;
  (c) all_gather w over x, dynamic_slice by axis_index('y'), matmul, psum over y;
  (d) (c) with dot_general(precision=HIGHEST, preferred_element_type=f32);
  (e) a ring all-gather of w from ppermute in a fori_loop, then (d)'s matmul and psum.
"""

import argparse
import functools
import json
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--mesh", required=True, help="AxB, e.g. 2x2")
    p.add_argument("--m", type=int, default=2048)
    p.add_argument("--k", type=int, default=2048)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    return p.parse_args()


args = parse_args()
sx, sy = (int(v) for v in args.mesh.split("x"))
# Before JAX starts: the virtual CPU devices.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={sx * sy}"
)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

try:
    _shard_map = functools.partial(jax.shard_map, check_vma=False)
except AttributeError:  # older JAX
    from jax.experimental.shard_map import shard_map as _old_shard_map

    _shard_map = functools.partial(_old_shard_map, check_rep=False)

devices = np.array(jax.devices()[: sx * sy]).reshape(sx, sy)
mesh = Mesh(devices, ("x", "y"))
M, K, N = args.m, args.k, args.n
k_per_y = K // sy
k_per_x = K // sx
in_specs = (P("x", "y"), P("x", None))


def smap(f):
    return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=P("x", None))


def local_matmul_and_psum(x, w_full, preferred):
    y = jax.lax.axis_index("y")
    w_slice = jax.lax.dynamic_slice(w_full, (y * k_per_y, 0), (k_per_y, w_full.shape[1]))
    if preferred is None:
        out = x @ w_slice
    else:
        out = jax.lax.dot_general(
            x, w_slice, (((1,), (0,)), ((), ())),
            precision=jax.lax.Precision.HIGHEST, preferred_element_type=preferred)
    return jax.lax.psum(out, "y")


def variant_a(x, w):
    return jnp.matmul(x, w)


@smap
def variant_b(x, w):
    x_full = jax.lax.all_gather(x, "y", axis=1, tiled=True)
    w_full = jax.lax.all_gather(w, "x", axis=0, tiled=True)
    return x_full @ w_full


@smap
def variant_c(x, w):
    return local_matmul_and_psum(x, jax.lax.all_gather(w, "x", axis=0, tiled=True), None)


@smap
def variant_d(x, w):
    return local_matmul_and_psum(x, jax.lax.all_gather(w, "x", axis=0, tiled=True), jnp.float32)


@smap
def variant_e(x, w):
    right = [(i, (i + 1) % sx) for i in range(sx)]
    me = jax.lax.axis_index("x")
    buffer = jax.lax.dynamic_update_slice(jnp.zeros((K, w.shape[1]), w.dtype), w,
                                          (me * k_per_x, 0))

    def body(i, carry):
        filled, travelling = carry
        received = jax.lax.ppermute(travelling, "x", right)
        source = (me - (i + 1) + sx) % sx  # after i+1 hops
        return jax.lax.dynamic_update_slice(filled, received, (source * k_per_x, 0)), received

    full, _ = jax.lax.fori_loop(0, sx - 1, body, (buffer, w))
    return local_matmul_and_psum(x, full, jnp.float32)


def main():
    kx, kw = jax.random.split(jax.random.key(0))
    x = jax.device_put(jax.random.normal(kx, (M, K), jnp.bfloat16),
                       NamedSharding(mesh, in_specs[0]))
    w = jax.device_put(jax.random.normal(kw, (K, N), jnp.bfloat16),
                       NamedSharding(mesh, in_specs[1]))
    want = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    for name, f in [("a", variant_a), ("b", variant_b), ("c", variant_c), ("d", variant_d),
                    ("e", variant_e)]:
        start = time.perf_counter()
        compiled = jax.jit(f).lower(x, w).compile()
        compile_ms = (time.perf_counter() - start) * 1e3
        out = None
        for _ in range(args.warmup):
            out = compiled(x, w)
            out.block_until_ready()
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            out = compiled(x, w)
            out.block_until_ready()
            times.append((time.perf_counter() - start) * 1e3)
        times.sort()
        max_diff = float(np.max(np.abs(np.asarray(out, np.float64) - want)))
        print(json.dumps({"mesh": args.mesh, "variant": name,
                          "median_ms": times[len(times) // 2],
                          "p90_ms": times[len(times) * 9 // 10],
                          "compile_ms": compile_ms, "max_diff": max_diff,
                          "jax": jax.__version__}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
