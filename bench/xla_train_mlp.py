"""One training step of examples/train_mlp.h on XLA-CPU (JAX), timed like bench/train_mlp:
jax.jit(jax.value_and_grad(loss)) of the shard_map'd MLP (tensor-parallel over y, data-parallel
over x) and the SGD update, f32, batch 256, model 1024, hidden 4096. Run by
scripts/bench_xla.sh train inside its private virtual environment, one process per mesh. Prints
one JSON object: {"mesh": "2x2", "median_ms": ..., "p90_ms": ..., "forward_ms": ...,
"compile_ms": ..., "jax": ...}.
"""

import argparse
import json
import os
import time


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--mesh", required=True, help="AxB, e.g. 2x2")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
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

BATCH, DIM, HIDDEN = 256, 1024, 4096
mesh = Mesh(np.array(jax.devices()[: sx * sy]).reshape(sx, sy), ("x", "y"))


def body(w1, w2, x, t):
    hidden = jnp.tanh(x @ w1)
    out = jax.lax.psum(hidden @ w2, "y")
    err = out - t
    return jax.lax.psum(jnp.sum(err * err) / BATCH, "x")


loss = jax.shard_map(body, mesh=mesh,
                     in_specs=(P(None, "y"), P("y", None), P("x", None), P("x", None)),
                     out_specs=P(), check_vma=False)


def step(w1, w2, x, t):
    value, (g1, g2) = jax.value_and_grad(loss, argnums=(0, 1))(w1, w2, x, t)
    return w1 - 0.01 * g1, w2 - 0.01 * g2, value


rng = np.random.default_rng(1)
specs = [((DIM, HIDDEN), P(None, "y"), 0.02), ((HIDDEN, DIM), P("y", None), 0.02),
         ((BATCH, DIM), P("x", None), 1.0), ((BATCH, DIM), P("x", None), 1.0)]
args_ = [jax.device_put((rng.standard_normal(s) * k).astype(np.float32), NamedSharding(mesh, sp))
         for s, sp, k in specs]
step_jit, loss_jit = jax.jit(step), jax.jit(loss)
t0 = time.perf_counter()
jax.block_until_ready(step_jit(*args_))
compile_ms = (time.perf_counter() - t0) * 1e3
jax.block_until_ready(loss_jit(*args_))
steps, forwards = [], []
for i in range(args.warmup + args.runs):
    t0 = time.perf_counter()
    jax.block_until_ready(step_jit(*args_))
    t1 = time.perf_counter()
    jax.block_until_ready(loss_jit(*args_))
    t2 = time.perf_counter()
    if i >= args.warmup:
        steps.append((t1 - t0) * 1e3)
        forwards.append((t2 - t1) * 1e3)
steps.sort()
forwards.sort()
print(json.dumps({"mesh": args.mesh, "median_ms": steps[len(steps) // 2],
                  "p90_ms": steps[min(len(steps) - 1, len(steps) * 9 // 10)],
                  "forward_ms": forwards[len(forwards) // 2], "compile_ms": compile_ms,
                  "jax": jax.__version__}))
