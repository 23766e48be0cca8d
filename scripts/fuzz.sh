#!/usr/bin/env bash
# Builds the libFuzzer targets of //fuzz with clang (ASan+UBSan, coverage-guided) in an output base
# of their own (/tmp/shardjit_fuzz) and runs each for SECONDS (default 600), starting from its
# corpus in fuzz/corpus/<target>/ (new inputs go to a scratch directory; copy a crash input into
# the corpus to make it a regression test). Installs clang when it is missing.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   targets: ir_text proto npy module (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_deps.sh
if ! command -v clang++ >/dev/null; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq clang >&2
fi
seconds="${1:-600}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(ir_text proto npy module)
labels=()
for t in "${targets[@]}"; do labels+=("//fuzz:${t}_fuzzer"); done
bazel --output_base=/tmp/shardjit_fuzz build --symlink_prefix=/ --config=fuzz "${labels[@]}"
bin="$(bazel --output_base=/tmp/shardjit_fuzz info --config=fuzz bazel-bin)"
for t in "${targets[@]}"; do
  scratch="$(mktemp -d)"
  echo "== ${t}_fuzzer for ${seconds} s (new inputs in ${scratch})"
  "$bin/fuzz/${t}_fuzzer" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=4096 \
    -artifact_prefix="${scratch}/" "$scratch" "fuzz/corpus/$t"
done
