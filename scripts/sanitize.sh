#!/usr/bin/env bash
# The sanitizer runs, each sanitizer building in an output base of its own per checkout
# (/tmp/shardjit_asan_<hash of its path>, /tmp/shardjit_tsan_<...>) so that the normal build's
# cache stays as it is and two checkouts never share runfiles. Ends with
# "N passed, M failed" over both runs.
#   scripts/sanitize.sh          ASan+UBSan over the runtime, IR, passes, tools, GEMM, copy
#                                kernels, grouped matmul, collective, multi-process and example
#                                tests, then TSan
#                                over the runtime, scheduler, fabric, point-to-point and
#                                cancellation tests.
#                                Cold, about 11 minutes on 2 cores.
#   scripts/sanitize.sh --ci     the subset CI runs after the normal tests, within its budget:
#                                ASan+UBSan over every loader (IR text, binary and text proto,
#                                .npy: the IR tests, npy_test and the three loader fuzz corpora)
#                                and TSan over the thread pool, the scheduler (fibers, parking,
#                                wakes) and the device allocator. Cold, about 3 minutes on 2 cores.
# Other arguments go to both bazel test commands.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_deps.sh || exit 1
if [ "${1:-}" = "--ci" ]; then
  shift
  asan_targets=(//ir:all //tools:npy_test //fuzz:ir_text_fuzzer_corpus_test
                //fuzz:proto_fuzzer_corpus_test //fuzz:npy_fuzzer_corpus_test
                //runtime/distributed:tcp_store_test)
  tsan_targets=(//base:thread_pool_test //runtime:scheduler_test //runtime:device_test
                //runtime/distributed:tcp_store_test)
else
  asan_targets=(//runtime:all //runtime/distributed:all //ir:all //passes:all //tools:all
                //backends/x86:gemm_test //backends/x86:gemm_stream_test
                //backends/x86:gemm_in_place_test //backends/x86:copy_kernels_test
                //backends/x86:gemm_int8_test
                //frontend:autodiff_test //frontend:vmap_test //examples:train_mlp_test
                //frontend:custom_derivatives_test //frontend:vma_test
                //frontend:transpose_identity_test
                //tests:collectives_test_2threads //tests:collectives_errors_test_1threads
                //tests:cancellation_test //tests:ragged_all_to_all_test_2threads
                //tests:psend_precv_test_1threads //backends/x86:grouped_matmul_test
                //tests:grouped_matmul_test //examples:moe_layer_test //examples:pipeline_test
                //tests:multiprocess_test //frontend:pallas_test //frontend:pallas_compiled_test
                //frontend:pallas_deferred_test
                //examples:blocked_matmul_test
                //examples:gmm_kernel_test //frontend:pallas_remote_test
                //examples:distributed_kernels_test
                //fuzz:ir_text_fuzzer_corpus_test //fuzz:proto_fuzzer_corpus_test
                //fuzz:npy_fuzzer_corpus_test //fuzz:module_fuzzer_corpus_test)
  tsan_targets=(//base:thread_pool_test //runtime:scheduler_test
                //runtime:runtime_parallelism_test //runtime:device_test
                //runtime/distributed:tcp_store_test
                //tests:collectives_test_2threads //tests:async_collectives_test_2threads
                //tests:collectives_errors_test_2threads //tests:cancellation_test
                //tests:psend_precv_test_2threads //tests:ragged_all_to_all_test_2threads
                //examples:pipeline_test //frontend:pallas_test //frontend:pallas_remote_test
                //examples:distributed_kernels_test)
fi
log=$(mktemp)
checkout=$(pwd -P | md5sum | cut -c1-12)
bazel --output_base="/tmp/shardjit_asan_$checkout" test --symlink_prefix=/ --config=asan --config=ubsan \
  "${asan_targets[@]}" "$@" 2>&1 | tee "$log"
asan=${PIPESTATUS[0]}
# TSan runs the async collective tests ~20x slower (560 s on 2 cores): a longer timeout.
bazel --output_base="/tmp/shardjit_tsan_$checkout" test --symlink_prefix=/ --config=tsan --test_timeout=1800 \
  "${tsan_targets[@]}" "$@" 2>&1 | tee -a "$log"
tsan=${PIPESTATUS[0]}
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD)' "$log")
if { [ "$asan" -ne 0 ] || [ "$tsan" -ne 0 ]; } && [ "$failed" -eq 0 ]; then failed=1; fi
rm -f "$log"
echo "sanitizers: $passed passed, $failed failed"
[ "$asan" -eq 0 ] && [ "$tsan" -eq 0 ]
