"""Times one training step of examples/train_mlp.h (value_and_grad + SGD, and its forward alone)
on XLA-CPU (bench/xla_train_mlp.py, one process per mesh) and on shardjit (the bench/train_mlp
binary), in one run, and prints both per mesh with the ratio XLA / shardjit (above 1: shardjit
is faster).

  python3 bench/xla_compare_train.py --train-mlp=PATH [--meshes=2x2,4x4] [--runs=10]
"""

import argparse
import os
import sys

from xla_compare import cpu_model
from xla_compare_decoder import run


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--train-mlp", required=True)
    p.add_argument("--meshes", default="2x2,4x4")
    p.add_argument("--runs", type=int, default=10)
    args = p.parse_args()
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "xla_train_mlp.py")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores")
    rows = []
    for mesh in args.meshes.split(","):
        ours = run([args.train_mlp, f"--meshes={mesh}", f"--runs={args.runs}"])[0]
        theirs = run([sys.executable, script, f"--mesh={mesh}", f"--runs={args.runs}"])[0]
        rows.append((mesh, ours, theirs))
    print(f"XLA-CPU: jax {rows[0][2]['jax'] if rows else '?'}; MLP batch 256, model 1024, hidden "
          "4096, f32; times in ms, median (p90); ratio = XLA median / shardjit median")
    print(f"{'mesh':5} {'step: shardjit':>18} {'XLA-CPU':>18} {'ratio':>7} "
          f"{'forward: ours':>14} {'XLA':>8} {'compile: ours':>14} {'XLA':>8}")
    for mesh, o, t in rows:
        fmt = lambda r: f"{r['median_ms']:.2f} ({r['p90_ms']:.2f})"  # noqa: E731
        print(f"{mesh:5} {fmt(o):>18} {fmt(t):>18} {t['median_ms'] / o['median_ms']:7.2f} "
              f"{o['forward_ms']:12.2f}ms {t['forward_ms']:6.2f}ms "
              f"{o['compile_ms']:12.1f}ms {t['compile_ms']:6.0f}ms")


if __name__ == "__main__":
    main()
