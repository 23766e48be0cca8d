"""Seed 000's blocked Pallas matmul, seed 003's megablox gmm and tgmm (JAX's own kernels) and an
empty kernel in JAX's Pallas interpret mode on CPU, timed like bench/pallas_matmul.cc's cases of
the same names.

Run by scripts/bench_xla.sh pallas inside its private virtual environment. Prints one JSON object
per case: {"case": "bf16_pallas_kernel/2048/2048/1024", "median_ms": ..., "compile_ms": ...}.
"""

import argparse
import functools
import json
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--sizes", default="512x512x512,2048x2048x1024")
    p.add_argument("--empty-steps", type=int, default=100000)
    p.add_argument("--grouped", type=int, default=1, help="0: skip gmm and tgmm")
    return p.parse_args()


def simple_matmul(x_ref, y_ref, o_ref, scratch_ref, *, n_steps):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        scratch_ref[...] = jnp.zeros_like(scratch_ref)

    scratch_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == n_steps - 1)
    def _flush():
        o_ref[...] = scratch_ref[...].astype(o_ref.dtype)


def make_matmul(m, k, n, bm=128, bk=128, bn=128):
    from jax.experimental.pallas import tpu as pltpu

    return pl.pallas_call(
        functools.partial(simple_matmul, n_steps=k // bk),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=(m // bm, n // bn, k // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        interpret=True)


def empty_kernel(steps):
    def kernel(x_ref, o_ref):
        pass

    return pl.pallas_call(kernel, grid=(steps,),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          out_shape=jax.ShapeDtypeStruct((8,), jnp.float32), interpret=True)


def grouped_cases(runs):
    """megablox gmm and tgmm, 128^3 tiles, the groups and shapes of pallas_matmul's Grouped."""
    import importlib

    # The module (the package's own `gmm` attribute is the custom_vjp function of ops.py).
    megablox = importlib.import_module("jax.experimental.pallas.ops.tpu.megablox.gmm")

    m, k, n = 2048, 1024, 1024
    sizes = jnp.array([300, 129, 0, 511, 200, 77, 431, 400], jnp.int32)
    key1, key2 = jax.random.split(jax.random.key(1))
    lhs = jax.random.normal(key1, (m, k), jnp.bfloat16)
    rhs = jax.random.normal(key2, (8, k, n), jnp.bfloat16)
    time_case("Grouped/gmm_pallas_kernel",
              lambda a, b, s: megablox.gmm(a, b, s, jnp.float32, interpret=True),
              (lhs, rhs, sizes), runs)
    lhs_t = jax.random.normal(key1, (k, m), jnp.bfloat16)
    rhs_t = jax.random.normal(key2, (m, n), jnp.bfloat16)
    time_case("Grouped/tgmm_pallas_kernel",
              lambda a, b, s: megablox.tgmm(a, b, s, jnp.float32, interpret=True),
              (lhs_t, rhs_t, sizes), runs)


def time_case(name, fn, args, runs):
    t0 = time.perf_counter()
    f = jax.jit(fn)
    f(*args).block_until_ready()
    compile_ms = (time.perf_counter() - t0) * 1e3
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f(*args).block_until_ready()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    print(json.dumps({"case": name, "median_ms": times[len(times) // 2], "compile_ms": compile_ms}),
          flush=True)


def main():
    args = parse_args()
    key = jax.random.key(0)
    for size in args.sizes.split(","):
        m, k, n = (int(v) for v in size.split("x"))
        for dtype, label in ((jnp.bfloat16, "bf16"), (jnp.float32, "f32")):
            x = jax.random.normal(key, (m, k), dtype)
            y = jax.random.normal(key, (k, n), dtype)
            time_case(f"{label}_pallas_kernel/{m}/{k}/{n}", make_matmul(m, k, n), (x, y), args.runs)
    if args.grouped:
        grouped_cases(args.runs)
    x = jnp.zeros((8,), jnp.float32)
    time_case(f"EmptyGridStep/{args.empty_steps}", empty_kernel(args.empty_steps), (x,), args.runs)


if __name__ == "__main__":
    main()
