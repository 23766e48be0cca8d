#!/usr/bin/env bash
# Builds and runs every test (bazel test //...) and ends with "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_deps.sh || exit 1
log=$(mktemp)
bazel test //... "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD)' "$log")
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
rm -f "$log"
echo "$passed passed, $failed failed"
exit "$status"
