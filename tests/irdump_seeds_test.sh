#!/usr/bin/env bash
# The seed programs through irdump, as README.md and docs/api.md tell: //examples:seed_modules
# writes them as module files (traced, global view), irdump lowers them (jit's pipeline) and
# prints the result, every stage, or the cost report. Neither tool knows the other; this test
# (above both) runs them together.
set -uo pipefail

RUNFILES="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-shardjit}"
SEED_MODULES="$RUNFILES/examples/seed_modules"
IRDUMP="$RUNFILES/tools/irdump"
PRINT_PLAN="$RUNFILES/tests/print_plan"
[ -x "$SEED_MODULES" ] || SEED_MODULES=examples/seed_modules
[ -x "$IRDUMP" ] || IRDUMP=tools/irdump
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
# expect_status, expect_grep, fail, finish.
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-shardjit}/base/shell_test_lib.sh" 2>/dev/null ||
  source base/shell_test_lib.sh

# bf16 x[2048,2048] P(x,y) @ w[2048,1024] P(x,None) on 2x2 and on 4x4.
expect_status 0 "$SEED_MODULES" --out_dir="$TMP/seeds"
expect_status 0 "$SEED_MODULES" --out_dir="$TMP/seeds4x4" --mesh=4x4

# Every variant lowers and verifies.
for v in a b c d e f; do
  expect_status 0 "$IRDUMP" "$TMP/seeds/seed_$v.txt" --lower
  expect_grep 'view=per_device' "$TMP/out"
  expect_status 0 "$IRDUMP" "$TMP/seeds4x4/seed_$v.txt" --lower
  expect_grep 'mesh={x:4,y:4}' "$TMP/out"
done

# seed_c: all_gather of w, dynamic_slice by axis_index, dot_general, psum over y, per device;
# collective-fusion fetches the one block of w each device needs and sums in f32.
expect_status 0 "$IRDUMP" "$TMP/seeds/seed_c.txt" --lower
for op in 'ppermute_start\[axes=(x,y)' ppermute_done dot_general 'f32\[1024,1024\] = psum' \
    convert_element_type 'view=per_device' 'a:bf16\[1024,1024\] b:bf16\[1024,1024\]'; do
  expect_grep "$op" "$TMP/out"
done

# seed_a (global view) is partitioned into a per-device module; on 4x4 each device receives w's
# block from its transpose.
expect_status 0 "$IRDUMP" "$TMP/seeds/seed_a.txt" --lower
expect_grep 'view=per_device' "$TMP/out"
expect_grep 'ppermute\[axes=(x,y)' "$TMP/out"
expect_status 0 "$IRDUMP" "$TMP/seeds4x4/seed_a.txt" --lower
expect_grep 'ppermute\[axes=(x,y) perm=((0,0),(4,1),(8,2)' "$TMP/out"
expect_status 0 "$IRDUMP" "$TMP/seeds/seed_e.txt" --lower
expect_grep 'fori_loop' "$TMP/out"
expect_grep 'ppermute' "$TMP/out"

# --stages: the module after every pass.
expect_status 0 "$IRDUMP" "$TMP/seeds/seed_c.txt" --stages
expect_grep '^# --- stage 0: input ---$' "$TMP/out"
expect_grep '^# --- stage 5: lower-shard-map (changed, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- stage [0-9]*: collective-fusion (changed, [0-9.]* ms) ---$' "$TMP/out"

# --cost of seed_c lowered (passes/cost_analysis.h): one 1024^3 dot and 1M converts; the 2 MiB
# block of w a device sends to the one that needs it; a ring psum over 2 devices of 4 MiB (f32).
expect_status 0 "$IRDUMP" "$TMP/seeds/seed_c.txt" --lower --cost
expect_grep '^flops: 2148532224$' "$TMP/out"
expect_grep '^bytes communicated: 6291456$' "$TMP/out"
expect_grep '^  ppermute_start\[axes=(x,y)\] bf16\[1024,1024\] n=4 x1: 2097152 bytes$' "$TMP/out"
expect_grep '^  psum\[axes=(y)\] f32\[1024,1024\] n=2 x1: 4194304 bytes$' "$TMP/out"

# README.md's commands: seed (d) after every pass, and its cost report as jit runs it.
expect_status 0 "$IRDUMP" "$TMP/seeds/seed_d.txt" --stages
expect_grep '^# --- stage [0-9]*: collective-fusion (changed, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- pipeline total: [0-9.]* ms ---$' "$TMP/out"
expect_status 0 "$IRDUMP" "$TMP/seeds/seed_d.txt" --lower --cost
expect_grep '^flops: [0-9]*$' "$TMP/out"
expect_grep '^bytes communicated: [0-9]*$' "$TMP/out"

# Protos as well: seed_modules --format=binary, lowered by irdump to a text proto.
expect_status 0 "$SEED_MODULES" --out_dir="$TMP/pb" --format=binary --variants=c
expect_status 0 "$IRDUMP" "$TMP/pb/seed_c.pb" --lower --out="$TMP/pb/seed_c_lowered.pbtxt"
expect_grep 'view: PER_DEVICE' "$TMP/pb/seed_c_lowered.pbtxt"

# irdump --lower prints the plan jit runs: the same passes and machine model (the kept host
# model, read from one cache file), for every variant; print_plan prints jit's (Lowered::as_text).
export XDG_CACHE_HOME="$TMP/cache"
unset SHARDJIT_MACHINE_MODEL SHARDJIT_BACKEND
expect_status 0 "$PRINT_PLAN"
cp "$TMP/out" "$TMP/jit_plans"
for v in a b c d e f; do
  expect_status 0 "$IRDUMP" "$TMP/seeds/seed_$v.txt" --lower
  # jit's text for this variant: after its "# variant" line, up to the next (global-view modules
  # start with a comment line saying how they run).
  awk -v v="# variant $v" '$0 == v {on = 1; next} /^# variant / {on = 0} on && !/^# execution:/' \
    "$TMP/jit_plans" >"$TMP/jit_$v"
  cmp -s "$TMP/out" "$TMP/jit_$v" ||
    fail "variant $v: irdump --lower differs from jit: $(diff "$TMP/out" "$TMP/jit_$v" | head -20)"
done

finish
