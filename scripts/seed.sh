#!/usr/bin/env bash
# The main job: the seed notebook's matmul variants on 2x2 and 4x4 meshes. Extra arguments go to
# the program (e.g. --runs=10 --meshes=2x2,4x4; --processes=4 runs it as 4 processes of one job).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_deps.sh
bazel run -c opt //examples:seed_matmul -- "$@"
