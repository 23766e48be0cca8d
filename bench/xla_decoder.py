"""The decoder block of examples/decoder_block.h on XLA-CPU (JAX), timed like bench/decoder_block.

Run by scripts/bench_xla.sh (decoder) inside its private virtual environment, one process per
mesh. f32; the batch (for a batch of one, the sequence) over x, heads and MLP units over y; jit
partitions the block from the arguments' shardings. With --grad, times value_and_grad of the
sum of the block's squared output with respect to its nine weights (as decoder_block --grad).
Prints one JSON object:
{"mesh": "2x2", "shape": "serving", "median_ms": ..., "p90_ms": ..., "compile_ms": ..., "jax": ...}.
"""

import argparse
import json
import os
import time


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--mesh", required=True, help="AxB, e.g. 2x2")
    p.add_argument("--shape", default="serving", choices=["serving", "decode"])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--grad", action="store_true")
    return p.parse_args()


args = parse_args()
sx, sy = (int(v) for v in args.mesh.split("x"))
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={sx * sy}"
)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

MODEL, HEADS, HEAD_DIM, MLP = 1024, 16, 64, 2816
INNER = HEADS * HEAD_DIM
decode = args.shape == "decode"
BATCH, SEQ = (1, 16) if decode else (8, 512)


def rms_norm(x, scale, eps=1e-6):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * scale


def rope(x, theta=10000.0):
    b, s, h, dh = x.shape
    half = dh // 2
    position = jnp.arange(s, dtype=jnp.float32)[:, None]
    i = jnp.arange(half, dtype=jnp.float32)[None, :]
    angle = position * jnp.exp(i * (-2.0 * np.log(theta) / dh))
    cos, sin = jnp.cos(angle)[None, :, None, :], jnp.sin(angle)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def decoder_block(x, attention_norm, wq, wk, wv, wo, mlp_norm, w_gate, w_up, w_down):
    b, s, _ = x.shape
    h = rms_norm(x, attention_norm)
    split = lambda t: t.reshape(b, s, HEADS, HEAD_DIM)  # noqa: E731
    q, k, v = rope(split(h @ wq)), rope(split(h @ wk)), split(h @ wv)
    scores = jnp.einsum("bshd,bthd->bhst", q, k) / np.sqrt(HEAD_DIM)
    causal = jnp.arange(s)[:, None] >= jnp.arange(s)[None, :]
    scores = jnp.where(causal, scores, -jnp.inf)
    probs = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhst,bthd->bshd", probs, v).reshape(b, s, INNER)
    x = x + out @ wo
    m = rms_norm(x, mlp_norm)
    return x + (jax.nn.silu(m @ w_gate) * (m @ w_up)) @ w_down


devices = np.array(jax.devices()[: sx * sy]).reshape(sx, sy)
mesh = Mesh(devices, ("x", "y"))
x_spec = P(None, "x", None) if decode else P("x", None, None)
specs = [x_spec, P(), P(None, "y"), P(None, "y"), P(None, "y"), P("y", None), P(),
         P(None, "y"), P(None, "y"), P("y", None)]
shapes = [(BATCH, SEQ, MODEL), (MODEL,), (MODEL, INNER), (MODEL, INNER), (MODEL, INNER),
          (INNER, MODEL), (MODEL,), (MODEL, MLP), (MODEL, MLP), (MLP, MODEL)]
scales = [1.0, 1.0, 0.03, 0.03, 0.03, 0.03, 1.0, 0.03, 0.03, 0.02]
rng = np.random.default_rng(0)
arrays = [jax.device_put((rng.standard_normal(s) * c).astype(np.float32), NamedSharding(mesh, p))
          for s, c, p in zip(shapes, scales, specs)]

def loss(x, *weights):
    y = decoder_block(x, *weights)
    return jnp.sum(y * y)


program = jax.value_and_grad(loss, argnums=tuple(range(1, 10))) if args.grad else decoder_block
start = time.perf_counter()
compiled = jax.jit(program).lower(*arrays).compile()
compile_ms = (time.perf_counter() - start) * 1e3
times = []
for i in range(args.warmup + args.runs):
    start = time.perf_counter()
    jax.block_until_ready(compiled(*arrays))
    if i >= args.warmup:
        times.append((time.perf_counter() - start) * 1e3)
times.sort()
print(json.dumps({"mesh": args.mesh, "shape": args.shape, "grad": args.grad,
                  "median_ms": times[len(times) // 2],
                  "p90_ms": times[min(len(times) - 1, len(times) * 9 // 10)],
                  "compile_ms": compile_ms, "jax": jax.__version__}))
