#!/usr/bin/env bash
# Benchmarks against the peer libraries (oneDNN, OpenBLAS): installs them when missing, then runs
# //bench:gemm_with_peers with the given Google Benchmark flags, e.g.
#   scripts/bench.sh --benchmark_filter='M:1024/K:1024/N:1024/threads:1'
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_deps.sh
missing=()
for p in libdnnl-dev libopenblas-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >&2
fi
# OpenBLAS detects AVX-512 Zen as Haswell; name the core type when the CPU has AVX-512.
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SKYLAKEX; fi
bazel build -c opt //bench:gemm_with_peers //bench:seed_matmul
bin="$(bazel info -c opt bazel-bin)"
"$bin/bench/gemm_with_peers" "$@"
