#!/usr/bin/env bash
# End-to-end test of irdump: the seed examples, stages, dumps, format conversion round trips and
# the exit status of bad input (1) and bad flags (2).
set -uo pipefail

IRDUMP="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-shardjit}/tools/irdump"
[ -x "$IRDUMP" ] || IRDUMP=tools/irdump
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# expect_status STATUS CMD...: runs CMD with stdout to $TMP/out and stderr to $TMP/err.
expect_status() {
  local want=$1
  shift
  "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  [ "$got" -eq "$want" ] || fail "'$*' exited $got, expected $want; stderr: $(cat "$TMP/err")"
}

expect_grep() {  # expect_grep PATTERN FILE
  grep -q -- "$1" "$2" || fail "no '$1' in $2: $(head -c 2000 "$2")"
}

# seed_c: all_gather of w, dynamic_slice by axis_index, dot_general, psum over y, per device;
# collective-fusion fetches the one block of w each device needs and sums in f32.
expect_status 0 "$IRDUMP" --example=seed_c
for op in 'ppermute_start\[axes=(x,y)' ppermute_done dot_general 'f32\[1024,1024\] = psum' \
    convert_element_type 'view=per_device' 'a:bf16\[1024,1024\] b:bf16\[1024,1024\]'; do
  expect_grep "$op" "$TMP/out"
done
cp "$TMP/out" "$TMP/seed_c.txt"

# Every example lowers and verifies; seed_a (global view) is partitioned into a per-device module.
for e in a b c d e; do
  expect_status 0 "$IRDUMP" --example=seed_$e
done
expect_status 0 "$IRDUMP" --example=seed_a
expect_grep 'view=per_device' "$TMP/out"
expect_grep 'ppermute\[axes=(x,y)' "$TMP/out"
# --mesh: the examples on another mesh; on 4x4 each device receives w's block from its transpose.
expect_status 0 "$IRDUMP" --example=seed_a --mesh=4x4
expect_grep 'mesh={x:4,y:4}' "$TMP/out"
expect_grep 'ppermute\[axes=(x,y) perm=((0,0),(4,1),(8,2)' "$TMP/out"
expect_status 2 "$IRDUMP" --example=seed_a --mesh=4
expect_status 0 "$IRDUMP" --example=seed_e
expect_grep 'fori_loop' "$TMP/out"
expect_grep 'ppermute' "$TMP/out"

# --stages: one header per stage, "(unchanged)" for passes that changed nothing, timings.
expect_status 0 "$IRDUMP" --example=seed_c --stages
expect_grep '^# --- stage 0: input ---$' "$TMP/out"
expect_grep '^# --- stage 1: canonicalize (unchanged, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^(unchanged)$' "$TMP/out"
expect_grep '^# --- stage 2: sharding-propagation (unchanged, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- stage 3: spmd-partition (unchanged, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- stage 4: lower-shard-map (changed, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- stage [0-9]*: collective-simplify (unchanged, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- stage [0-9]*: collective-fusion (changed, [0-9.]* ms) ---$' "$TMP/out"
num_stages=$(grep -c '^# --- stage ' "$TMP/out")
expect_grep 'shard_map\[' "$TMP/out"

# --dump_to writes the module before and after each pass as .txt and .pbtxt.
expect_status 0 "$IRDUMP" --example=seed_c --dump_to="$TMP/dump"
[ "$(ls "$TMP/dump" | wc -l)" -eq $((2 * num_stages)) ] ||
  fail "expected $((2 * num_stages)) dump files: $(ls "$TMP/dump")"
[ -f "$TMP/dump/04-xla_matmul2-lower-shard-map.pbtxt" ] || fail "no lower-shard-map pbtxt dump"

# --cost: flops and bytes per device of seed_c (passes/cost_analysis.h): one 1024^3 dot and 1M
# converts; the 2 MiB block of w a device sends to the one that needs it; a ring psum over 2
# devices of 4 MiB (f32).
expect_status 0 "$IRDUMP" --example=seed_c --cost
expect_grep '^flops: 2148532224$' "$TMP/out"
expect_grep '^bytes communicated: 6291456$' "$TMP/out"
expect_grep '^estimated time: [0-9.]* us$' "$TMP/out"
expect_grep '^  ppermute_start\[axes=(x,y)\] bf16\[1024,1024\] n=4 x1: 2097152 bytes$' "$TMP/out"
expect_grep '^  psum\[axes=(y)\] f32\[1024,1024\] n=2 x1: 4194304 bytes$' "$TMP/out"
expect_status 2 "$IRDUMP" --example=seed_c --cost --stages

# --out in every format, read back and printed as the same text.
for ext in txt pbtxt pb; do
  expect_status 0 "$IRDUMP" --example=seed_c --out="$TMP/m.$ext"
  [ -s "$TMP/out" ] && fail "--out without --format printed to stdout"
  expect_status 0 "$IRDUMP" "$TMP/m.$ext"
  cmp -s "$TMP/out" "$TMP/seed_c.txt" || fail "m.$ext does not print as seed_c: $(diff "$TMP/out" "$TMP/seed_c.txt")"
done
expect_status 0 "$IRDUMP" "$TMP/m.pb" --format=pbtxt
expect_grep 'view: PER_DEVICE' "$TMP/out"
expect_status 0 "$IRDUMP" "$TMP/m.txt" --format=binary
cmp -s "$TMP/out" "$TMP/m.pb" || fail "--format=binary differs from --out=m.pb"

# A global-view module file is lowered on request.
expect_status 0 "$IRDUMP" "$TMP/dump/00-xla_matmul2-input.txt"
expect_grep 'view=global' "$TMP/out"
expect_status 0 "$IRDUMP" "$TMP/dump/00-xla_matmul2-input.txt" --lower
expect_grep 'view=per_device' "$TMP/out"

# Bad input: exit 1 with a clear message.
expect_status 1 "$IRDUMP" "$TMP/missing.txt"
expect_grep 'cannot open module file' "$TMP/err"
printf 'module m [view=global entry=f]\nfunc f = { lambda ; a:f32[2]. let\n    b:f32[2] = = neg a\n  in (b) }\n' >"$TMP/syntax.txt"
expect_status 1 "$IRDUMP" "$TMP/syntax.txt"
expect_grep 'syntax.txt: IR text line 3' "$TMP/err"
printf 'module m [view=global entry=f]\nfunc f = { lambda ; a:f32[2]. let\n    b:f32[3] = neg a\n  in (b) }\n' >"$TMP/invalid.txt"
expect_status 1 "$IRDUMP" "$TMP/invalid.txt"
expect_grep 'verification failed' "$TMP/err"
expect_status 0 "$IRDUMP" "$TMP/invalid.txt" --verify=false
printf 'not a proto' >"$TMP/garbage.pb"
expect_status 1 "$IRDUMP" "$TMP/garbage.pb"
expect_grep 'not a binary ir.Module proto' "$TMP/err"

# Bad flags: usage and exit 2.
expect_status 2 "$IRDUMP"
expect_grep 'usage: irdump' "$TMP/err"
expect_status 2 "$IRDUMP" --example=seed_z
expect_status 2 "$IRDUMP" --example=seed_c --format=xml
expect_status 2 "$IRDUMP" --example=seed_c --bogus
expect_status 2 "$IRDUMP" --example=seed_c "$TMP/m.txt"
expect_status 2 "$IRDUMP" --example=seed_c --stages --format=pbtxt
expect_status 0 "$IRDUMP" --help
expect_grep 'usage: irdump' "$TMP/out"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "PASS"
