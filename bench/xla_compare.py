"""Times the seed variants on XLA-CPU (bench/xla_seed.py, one process per mesh) and on shardjit
(the seed_matmul binary), in one run, and prints both per case with the ratio XLA / shardjit
(above 1: shardjit is faster).

  python3 bench/xla_compare.py --seed-matmul=PATH [--meshes=2x2,4x4] [--sizes=full,small]
"""

import argparse
import json
import os
import platform
import re
import subprocess
import sys

SIZES = {
    # name: (m, k, n, runs, warmup)
    "full": (2048, 2048, 1024, 10, 2),
    "small": (256, 256, 128, 500, 20),
}
VARIANTS = "abcde"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def run_xla(mesh, size):
    m, k, n, runs, warmup = SIZES[size]
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "xla_seed.py")
    out = subprocess.run(
        [sys.executable, script, f"--mesh={mesh}", f"--m={m}", f"--k={k}", f"--n={n}",
         f"--runs={runs}", f"--warmup={warmup}"],
        check=True, capture_output=True, text=True).stdout
    return {r["variant"]: r for r in (json.loads(line) for line in out.splitlines()
                                      if line.startswith("{"))}


# A row of seed_matmul's table: "(a) bf16  maxdiff meandiff median %>0.1  fused p90 written ...".
ROW = re.compile(r"^\((?P<v>[a-z])\)\s+\S+\s+(?P<max_diff>\S+)\s+\S+\s+\S+\s+\S+%\s+"
                 r"(?P<fused>[0-9.]+)\s+(?P<p90>[0-9.]+)\s+(?P<written>[0-9.]+)\s")
MESH = re.compile(r"^mesh \{x:(\d+), y:(\d+)\}")


def run_shardjit(binary, meshes, size):
    m, k, n, runs, warmup = SIZES[size]
    out = subprocess.run(
        [binary, f"--meshes={','.join(meshes)}", f"--m={m}", f"--k={k}", f"--n={n}",
         f"--runs={runs}", f"--warmup={warmup}"],
        check=True, capture_output=True, text=True).stdout
    results, mesh = {}, None
    for line in out.splitlines():
        if (mm := MESH.match(line)) is not None:
            mesh = f"{mm.group(1)}x{mm.group(2)}"
        elif (row := ROW.match(line)) is not None and mesh is not None:
            results[(mesh, row.group("v"))] = {
                "median_ms": float(row.group("fused")), "p90_ms": float(row.group("p90")),
                "max_diff": float(row.group("max_diff"))}
    if not results:
        sys.exit(f"xla_compare: no results parsed from seed_matmul's output:\n{out}")
    return results


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed-matmul", required=True)
    p.add_argument("--meshes", default="2x2,4x4")
    p.add_argument("--sizes", default="full,small")
    args = p.parse_args()
    meshes = args.meshes.split(",")
    sizes = args.sizes.split(",")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores")
    rows = []
    for size in sizes:
        ours = run_shardjit(args.seed_matmul, meshes, size)
        for mesh in meshes:
            theirs = run_xla(mesh, size)
            for v in VARIANTS:
                if (mesh, v) in ours and v in theirs:
                    rows.append((size, mesh, v, ours[(mesh, v)], theirs[v]))
    jax_version = rows[0][4]["jax"] if rows else "?"
    print(f"XLA-CPU: jax {jax_version}; times in ms, median (p90) of each run; "
          "ratio = XLA median / shardjit median")
    m_full = SIZES["full"]
    print(f"sizes: full = {m_full[0]}x{m_full[1]} @ {m_full[1]}x{m_full[2]}, "
          f"small = 256x256 @ 256x128; bf16 inputs")
    header = f"{'size':6} {'mesh':5} {'var':3} {'shardjit':>18} {'XLA-CPU':>18} {'ratio':>7}" \
             f" {'XLA compile':>12}"
    print(header)
    for size, mesh, v, o, t in rows:
        fmt = lambda r: f"{r['median_ms']:.3f} ({r['p90_ms']:.3f})"  # noqa: E731
        print(f"{size:6} {mesh:5} ({v}) {fmt(o):>18} {fmt(t):>18} "
              f"{t['median_ms'] / o['median_ms']:7.2f} {t['compile_ms']:10.1f}ms")


if __name__ == "__main__":
    main()
