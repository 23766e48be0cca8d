"""Times the decoder block (examples/decoder_block.h) on XLA-CPU (bench/xla_decoder.py, one
process per mesh) and on shardjit (the bench/decoder_block binary), in one run, and prints both
per case with the ratio XLA / shardjit (above 1: shardjit is faster).

  python3 bench/xla_compare_decoder.py --decoder-block=PATH [--meshes=2x2,4x4]
      [--shapes=serving,decode] [--grad]

With --grad both time value_and_grad of the sum of the block's squared output with respect to
its nine weights (a training step's forward and backward).
"""

import argparse
import json
import os
import subprocess
import sys

from xla_compare import cpu_model

RUNS = {"serving": (5, 1), "decode": (50, 5)}  # (runs, warmup)


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--decoder-block", required=True)
    p.add_argument("--meshes", default="2x2,4x4")
    p.add_argument("--shapes", default="serving,decode")
    p.add_argument("--grad", action="store_true")
    args = p.parse_args()
    grad = ["--grad"] if args.grad else []
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "xla_decoder.py")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores")
    rows = []
    for shape in args.shapes.split(","):
        runs, warmup = RUNS[shape]
        for mesh in args.meshes.split(","):
            ours = run([args.decoder_block, f"--meshes={mesh}", f"--shape={shape}",
                        f"--runs={runs}", f"--warmup={warmup}"] + grad)[0]
            theirs = run([sys.executable, script, f"--mesh={mesh}", f"--shape={shape}",
                          f"--runs={runs}", f"--warmup={warmup}"] + grad)[0]
            rows.append((shape, mesh, ours, theirs))
    print(f"XLA-CPU: jax {rows[0][3]['jax'] if rows else '?'}; times in ms, median (p90); "
          "ratio = XLA median / shardjit median")
    print("shapes: serving = batch 8, sequence 512; decode = batch 1, sequence 16; model 1024, "
          "16 heads of 64, SwiGLU 2816; f32" +
          ("; value_and_grad with respect to the weights" if args.grad else ""))
    print(f"{'shape':8} {'mesh':5} {'shardjit':>18} {'XLA-CPU':>18} {'ratio':>7} "
          f"{'compile: ours':>14} {'XLA':>8}")
    for shape, mesh, o, t in rows:
        fmt = lambda r: f"{r['median_ms']:.2f} ({r['p90_ms']:.2f})"  # noqa: E731
        print(f"{shape:8} {mesh:5} {fmt(o):>18} {fmt(t):>18} "
              f"{t['median_ms'] / o['median_ms']:7.2f} {o['compile_ms']:12.1f}ms "
              f"{t['compile_ms']:6.0f}ms")


if __name__ == "__main__":
    main()
