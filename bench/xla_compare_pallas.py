"""Runs bench/xla_pallas.py and bench/xla_pallas_ring.py (JAX's Pallas interpret mode) and
//bench:pallas_matmul and //bench:pallas_collective (shardjit) in one run and prints, per case,
both medians and JAX's time over shardjit's (or why JAX gave none)."""

import argparse
import json
import subprocess
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pallas-matmul", required=True, help="the //bench:pallas_matmul binary")
    p.add_argument("--pallas-collective", required=True,
                   help="the //bench:pallas_collective binary")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    jax_out = subprocess.run([sys.executable, "bench/xla_pallas.py", f"--runs={args.runs}"],
                             check=True, capture_output=True, text=True).stdout
    jax_out += subprocess.run([sys.executable, "bench/xla_pallas_ring.py",
                               f"--runs={args.runs}"],
                              check=True, capture_output=True, text=True).stdout
    jax_cases = {}
    for line in jax_out.splitlines():
        row = json.loads(line)
        jax_cases[row["case"]] = row
    ours = subprocess.run([args.pallas_matmul, "--benchmark_format=json",
                           "--benchmark_filter=(pallas_kernel|EmptyGridStep)"],
                          check=True, capture_output=True, text=True).stdout
    ours_cases = {}
    for b in json.loads(ours)["benchmarks"]:
        name = b["name"].replace("Matmul/", "").replace("/real_time", "")
        ours_cases[name] = b["real_time"]  # ms
    ring = subprocess.run([args.pallas_collective, "--benchmark_format=json",
                           "--benchmark_filter=RingAllGather/pallas_kernel"],
                          check=True, capture_output=True, text=True).stdout
    for b in json.loads(ring)["benchmarks"]:
        ours_cases[b["name"].replace("/real_time", "")] = b["real_time"]
    print(f"{'case':40} {'jax interpret ms':>18} {'shardjit ms':>12} {'jax/shardjit':>13}")
    for name, row in jax_cases.items():
        key = name if not name.startswith("EmptyGridStep") else "EmptyGridStep"
        mine = ours_cases.get(key)
        if mine is None:
            continue
        if "error" in row:
            print(f"{name:40} {'-':>18} {mine:12.3f}   JAX: {row['error']}")
            continue
        print(f"{name:40} {row['median_ms']:18.2f} {mine:12.3f} {row['median_ms'] / mine:13.1f}")


if __name__ == "__main__":
    main()
