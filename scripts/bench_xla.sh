#!/usr/bin/env bash
# The XLA-CPU peer benchmark: the seed variants (a)-(e) at full size (2048x2048 @ 2048x1024) and at
# 256x256 @ 256x128 on 2x2 and 4x4 meshes, timed on JAX's XLA-CPU and on shardjit's seed_matmul in
# one run, with the ratio per case. JAX goes into a private virtual environment
# ($SHARDJIT_BENCH_VENV, default ~/.cache/shardjit/xla-venv): a benchmark-only dependency that
# nothing else needs. Arguments go to bench/xla_compare.py (e.g. --meshes=2x2 --sizes=small).
#   scripts/bench_xla.sh decoder [--meshes=2x2,4x4] [--shapes=serving,decode]
# compares the decoder block of examples/decoder_block.h instead (bench/xla_compare_decoder.py).
#   scripts/bench_xla.sh train [--meshes=2x2,4x4] [--runs=10]
# compares a training step of examples/train_mlp.h (bench/xla_compare_train.py).
#   scripts/bench_xla.sh pallas [--runs=5]
# compares seed 000's Pallas kernel, an empty kernel and seed 000's ring all-gather by remote DMA
# with JAX's Pallas interpret mode (bench/xla_compare_pallas.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_deps.sh
venv="${SHARDJIT_BENCH_VENV:-$HOME/.cache/shardjit/xla-venv}"
if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq python3-venv >&2
  fi
  python3 -m venv "$venv"
fi
"$venv/bin/python" -c 'import jax' 2>/dev/null ||
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'jax>=0.6' numpy >&2
bin="$(bazel info -c opt bazel-bin)"
if [ "${1:-}" = "decoder" ]; then
  shift
  bazel build -c opt //bench:decoder_block >&2
  exec "$venv/bin/python" bench/xla_compare_decoder.py --decoder-block="$bin/bench/decoder_block" "$@"
fi
if [ "${1:-}" = "train" ]; then
  shift
  bazel build -c opt //bench:train_mlp >&2
  exec "$venv/bin/python" bench/xla_compare_train.py --train-mlp="$bin/bench/train_mlp" "$@"
fi
if [ "${1:-}" = "pallas" ]; then
  shift
  bazel build -c opt //bench:pallas_matmul //bench:pallas_collective >&2
  exec "$venv/bin/python" bench/xla_compare_pallas.py --pallas-matmul="$bin/bench/pallas_matmul" \
    --pallas-collective="$bin/bench/pallas_collective" "$@"
fi
bazel build -c opt //examples:seed_matmul >&2
exec "$venv/bin/python" bench/xla_compare.py --seed-matmul="$bin/examples/seed_matmul" "$@"
