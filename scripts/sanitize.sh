#!/usr/bin/env bash
# The sanitizer runs: ASan+UBSan over the runtime, IR, passes, tools, GEMM, grouped matmul,
# collective and example tests, then TSan over the runtime, scheduler, fabric, point-to-point and
# cancellation tests. Each sanitizer builds in an
# output base of its own (/tmp/shardjit_asan, /tmp/shardjit_tsan), so the normal build's cache
# stays as it is. Ends with "N passed, M failed" over both runs. Cold, about 11 minutes on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_deps.sh || exit 1
log=$(mktemp)
bazel --output_base=/tmp/shardjit_asan test --symlink_prefix=/ --config=asan --config=ubsan \
  //runtime:all //ir:all //passes:all //tools:all //backends/x86:gemm_test \
  //tests:collectives_test_2threads //tests:collectives_errors_test_1threads \
  //tests:cancellation_test //tests:ragged_all_to_all_test_2threads \
  //tests:psend_precv_test_1threads //backends/x86:grouped_matmul_test //tests:grouped_matmul_test \
  //examples:moe_layer_test //examples:pipeline_test "$@" 2>&1 | tee "$log"
asan=${PIPESTATUS[0]}
bazel --output_base=/tmp/shardjit_tsan test --symlink_prefix=/ --config=tsan \
  //runtime:scheduler_test //runtime:runtime_parallelism_test //runtime:device_test \
  //tests:collectives_test_2threads //tests:async_collectives_test_2threads \
  //tests:collectives_errors_test_2threads //tests:cancellation_test \
  //tests:psend_precv_test_2threads //tests:ragged_all_to_all_test_2threads \
  //examples:pipeline_test "$@" 2>&1 | tee -a "$log"
tsan=${PIPESTATUS[0]}
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD)' "$log")
if { [ "$asan" -ne 0 ] || [ "$tsan" -ne 0 ]; } && [ "$failed" -eq 0 ]; then failed=1; fi
rm -f "$log"
echo "$passed passed, $failed failed"
[ "$asan" -eq 0 ] && [ "$tsan" -eq 0 ]
