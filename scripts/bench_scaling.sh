#!/usr/bin/env bash
# Thread scaling on this host: the main job (seed_matmul, both meshes), the user-kernel
# benchmarks (blocked matmul, gmm, tgmm beside the built-ins) and the decoder block, each with
# SHARDJIT_NUM_THREADS = 1, 2, 4, ... up to the host's cores (or the first argument). Prints each
# program's own output under a header naming the thread count, after the CPU model.
#   scripts/bench_scaling.sh [max_threads]
# SHARDJIT_BENCH_BIN=DIR runs DIR/examples/seed_matmul, DIR/bench/pallas_matmul and
# DIR/bench/decoder_block instead of building them (e.g. binaries copied to another host).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${SHARDJIT_BENCH_BIN:-}"
if [ -z "$bin" ]; then
  scripts/ensure_deps.sh
  bazel build -c opt //examples:seed_matmul //bench:pallas_matmul //bench:decoder_block >&2
  bin="$(bazel info -c opt bazel-bin)"
fi
max="${1:-$(nproc)}"
threads=()
for ((t = 1; t < max; t *= 2)); do threads+=("$t"); done
threads+=("$max")
(lscpu 2>/dev/null || cat /proc/cpuinfo) | grep -E -m3 "^Model name|^model name|^CPU\(s\)" || true
for t in "${threads[@]}"; do
  echo "== seed_matmul, $t threads"
  SHARDJIT_NUM_THREADS=$t "$bin/examples/seed_matmul" --runs=5 --warmup=2
done
for t in "${threads[@]}"; do
  echo "== pallas_matmul, $t threads"
  SHARDJIT_NUM_THREADS=$t "$bin/bench/pallas_matmul" \
    --benchmark_filter='Grouped|Matmul/.*/2048' --benchmark_min_time=0.2
done
for t in $(printf "%s\n" 2 "$max" | sort -nu); do
  echo "== decoder_block, $t threads"
  SHARDJIT_NUM_THREADS=$t "$bin/bench/decoder_block" --meshes=2x2,4x4 --runs=3
done
