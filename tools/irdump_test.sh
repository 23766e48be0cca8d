#!/usr/bin/env bash
# End-to-end test of irdump on a module by hand: lowering, stages, dumps, cost, format conversion
# round trips and the exit status of bad input (1) and bad flags (2).
set -uo pipefail

IRDUMP="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-shardjit}/tools/irdump"
[ -x "$IRDUMP" ] || IRDUMP=tools/irdump
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
# expect_status, expect_grep, fail, finish.
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-shardjit}/base/shell_test_lib.sh" 2>/dev/null ||
  source base/shell_test_lib.sh

# A global-view module by hand (seed_c of examples/seed_variants.h at a small size: x[8,8] P(x,y)
# @ w[8,4] P(x,None) on a 2x2 mesh): all_gather of w, dynamic_slice by axis_index, dot_general,
# psum over y. The seed programs at full size: tests/irdump_seeds_test.sh.
cat >"$TMP/c.txt" <<'MODULE'
module matmul [view=global mesh={x:2,y:2} devices=(0,1,2,3) entry=matmul param_shardings=(P(x,y),P(x,None)) result_shardings=()]
func matmul = { lambda ; a:bf16[8,8] b:bf16[8,4]. let
    m:bf16[8,4] = shard_map[in_specs=(P(x,y),P(x,None)) out_specs=(P(x,None)) body={ lambda ; c:bf16[4,4] d:bf16[4,4]. let
          e:bf16[8,4] = all_gather[axes=(x) axis=0 tiled=True] d
          f:s32[] = axis_index[axes=(y)]
          g:s32[] = constant[dtype=s32 value=(4)]
          h:s32[] = mul f g
          i:s32[] = constant[dtype=s32 value=(0)]
          j:bf16[4,4] = dynamic_slice[slice_sizes=(4,4)] e h i
          k:bf16[4,4] = dot_general[lhs_contracting_dims=(1) rhs_contracting_dims=(0) preferred_element_type=None] c j
          l:bf16[4,4] = psum[axes=(y)] k
        in (l) }] a b
  in (m) }
MODULE

# Printed as loaded; --lower runs jit's pipeline: collective-fusion fetches the one block of w
# each device needs and sums in f32.
expect_status 0 "$IRDUMP" "$TMP/c.txt"
expect_grep 'view=global' "$TMP/out"
expect_grep 'shard_map\[' "$TMP/out"
expect_status 0 "$IRDUMP" "$TMP/c.txt" --lower
for op in 'ppermute_start\[axes=(x,y)' ppermute_done dot_general 'f32\[4,4\] = psum' \
    convert_element_type 'view=per_device' 'a:bf16\[4,4\] b:bf16\[4,4\]'; do
  expect_grep "$op" "$TMP/out"
done
cp "$TMP/out" "$TMP/c_lowered.txt"

# --transform=vjp: the entry becomes (a, b, cotangent of the result) -> (result, da, db); the
# all_gather of b transposes to a psum_scatter; the VJP lowers like any module.
expect_status 0 "$IRDUMP" "$TMP/c.txt" --transform=vjp
expect_grep 'param_shardings=(P(x,y),P(x,None),P()) result_shardings=(P(),P(x,y),P(x,None))' "$TMP/out"
expect_grep 'psum_scatter\[axes=(x) scatter_dimension=0 tiled=True\]' "$TMP/out"
expect_status 0 "$IRDUMP" "$TMP/c.txt" --transform=vjp --lower
expect_grep 'view=per_device' "$TMP/out"
expect_status 0 "$IRDUMP" "$TMP/c.txt" --transform=jvp
expect_grep 'a:bf16\[8,8\] b:bf16\[8,4\] c:bf16\[8,8\] d:bf16\[8,4\]' "$TMP/out"
expect_status 2 "$IRDUMP" "$TMP/c.txt" --transform=hessian
expect_grep 'transform must be jvp or vjp' "$TMP/err"

# --stages: one header per stage, "(unchanged)" for passes that changed nothing, timings.
expect_status 0 "$IRDUMP" "$TMP/c.txt" --stages
expect_grep '^# --- stage 0: input ---$' "$TMP/out"
expect_grep '^# --- stage 1: inline-calls (unchanged, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- stage 2: canonicalize (unchanged, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^(unchanged)$' "$TMP/out"
expect_grep '^# --- stage 3: sharding-propagation (unchanged, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- stage 4: spmd-partition (unchanged, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- stage 5: lower-shard-map (changed, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- stage [0-9]*: collective-simplify (unchanged, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- stage [0-9]*: collective-fusion (changed, [0-9.]* ms) ---$' "$TMP/out"
expect_grep '^# --- pipeline total: [0-9.]* ms ---$' "$TMP/out"
num_stages=$(grep -c '^# --- stage ' "$TMP/out")
expect_grep 'shard_map\[' "$TMP/out"

# --dump_to writes the module before and after each pass as .txt and .pbtxt.
expect_status 0 "$IRDUMP" "$TMP/c.txt" --dump_to="$TMP/dump"
[ "$(ls "$TMP/dump" | wc -l)" -eq $((2 * num_stages)) ] ||
  fail "expected $((2 * num_stages)) dump files: $(ls "$TMP/dump")"
[ -f "$TMP/dump/05-matmul-lower-shard-map.pbtxt" ] || fail "no lower-shard-map pbtxt dump"
expect_grep 'wrote [0-9]* stages to' "$TMP/err"

# --cost: flops and bytes per device of the lowered module (passes/cost_analysis.h): one 4x4x4
# dot and 16 converts; the 32-byte block of w a device sends to the one that needs it; a ring
# psum over 2 devices of 64 bytes (f32).
expect_status 0 "$IRDUMP" "$TMP/c.txt" --lower --cost
expect_grep '^flops: 144$' "$TMP/out"
expect_grep '^bytes communicated: 96$' "$TMP/out"
expect_grep '^estimated time: [0-9.]* us$' "$TMP/out"
expect_grep '^  ppermute_start\[axes=(x,y)\] bf16\[4,4\] n=4 x1: 32 bytes$' "$TMP/out"
expect_grep '^  psum\[axes=(y)\] f32\[4,4\] n=2 x1: 64 bytes$' "$TMP/out"
expect_status 2 "$IRDUMP" "$TMP/c.txt" --cost --stages

# --out in every format, read back and printed as the same text.
for ext in txt pbtxt pb; do
  expect_status 0 "$IRDUMP" "$TMP/c.txt" --lower --out="$TMP/m.$ext"
  [ -s "$TMP/out" ] && fail "--out without --format printed to stdout"
  expect_status 0 "$IRDUMP" "$TMP/m.$ext"
  cmp -s "$TMP/out" "$TMP/c_lowered.txt" ||
    fail "m.$ext does not print as the lowered module: $(diff "$TMP/out" "$TMP/c_lowered.txt")"
done
expect_status 0 "$IRDUMP" "$TMP/m.pb" --format=pbtxt
expect_grep 'view: PER_DEVICE' "$TMP/out"
expect_status 0 "$IRDUMP" "$TMP/m.txt" --format=binary
cmp -s "$TMP/out" "$TMP/m.pb" || fail "--format=binary differs from --out=m.pb"
# --locations prints source locations (none here); --verify=false and --noverify skip the checks.
expect_status 0 "$IRDUMP" "$TMP/m.txt" --locations
expect_status 0 "$IRDUMP" "$TMP/m.txt" --noverify --verify=false

# A dumped stage reads back: the input stage is the global-view module, lowered on request.
expect_status 0 "$IRDUMP" "$TMP/dump/00-matmul-input.txt"
expect_grep 'view=global' "$TMP/out"
expect_status 0 "$IRDUMP" "$TMP/dump/00-matmul-input.txt" --lower
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

# Bad flags: usage and exit 2, for flags absl cannot parse as well.
expect_status 2 "$IRDUMP"
expect_grep 'usage: irdump' "$TMP/err"
expect_status 2 "$IRDUMP" "$TMP/c.txt" --format=xml
expect_grep 'usage: irdump' "$TMP/err"
expect_status 2 "$IRDUMP" "$TMP/c.txt" --bogus
expect_grep "Unknown command line flag 'bogus'" "$TMP/err"
expect_grep 'usage: irdump' "$TMP/err"
expect_status 2 "$IRDUMP" "$TMP/c.txt" --example=seed_c
expect_status 2 "$IRDUMP" "$TMP/c.txt" --lower=maybe
expect_status 2 "$IRDUMP" "$TMP/c.txt" "$TMP/m.txt"
expect_grep 'more than one module file' "$TMP/err"
expect_status 2 "$IRDUMP" "$TMP/c.txt" --stages --format=pbtxt
expect_status 0 "$IRDUMP" --help
expect_grep 'usage: irdump' "$TMP/out"
expect_grep 'examples:seed_modules' "$TMP/out"
expect_status 0 "$IRDUMP" -h
expect_grep 'usage: irdump' "$TMP/out"

finish
