"""Runs bench/xla_pallas.py (JAX's Pallas interpret mode) and //bench:pallas_matmul (shardjit) in
one run and prints, per case, both medians and JAX's time over shardjit's."""

import argparse
import json
import subprocess
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pallas-matmul", required=True, help="the //bench:pallas_matmul binary")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    jax_out = subprocess.run([sys.executable, "bench/xla_pallas.py", f"--runs={args.runs}"],
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
    print(f"{'case':40} {'jax interpret ms':>18} {'shardjit ms':>12} {'jax/shardjit':>13}")
    for name, row in jax_cases.items():
        key = name if not name.startswith("EmptyGridStep") else "EmptyGridStep"
        mine = ours_cases.get(key)
        if mine is None:
            continue
        print(f"{name:40} {row['median_ms']:18.2f} {mine:12.3f} {row['median_ms'] / mine:13.1f}")


if __name__ == "__main__":
    main()
