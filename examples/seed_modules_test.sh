#!/usr/bin/env bash
# End-to-end test of seed_modules: one traced (global-view) module file per seed variant, in each
# format, on other meshes and sizes, for a chosen few variants; bad flags.
set -uo pipefail

SEED_MODULES="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-shardjit}/examples/seed_modules"
[ -x "$SEED_MODULES" ] || SEED_MODULES=examples/seed_modules
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
# expect_status, expect_grep, fail, finish.
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-shardjit}/base/shell_test_lib.sh" 2>/dev/null ||
  source base/shell_test_lib.sh

# Every variant, IR text, on the default 2x2 mesh; the paths written are printed.
expect_status 0 "$SEED_MODULES" --out_dir="$TMP/seeds"
for v in a b c d e f g h; do
  f="$TMP/seeds/seed_$v.txt"
  [ -s "$f" ] || { fail "no $f"; continue; }
  expect_grep "^$f\$" "$TMP/out"
  expect_grep 'view=global mesh={x:2,y:2}' "$f"
  expect_grep 'param_shardings=(P(x,y),P(x,None))' "$f"
  expect_grep 'bf16\[2048,2048\]' "$f"
done
[ "$(wc -l <"$TMP/out")" -eq 8 ] || fail "expected 8 paths: $(cat "$TMP/out")"
# (a) is a plain matmul in the global view; (c) a shard_map with the collectives written.
expect_grep 'dot_general' "$TMP/seeds/seed_a.txt"
expect_grep 'shard_map\[' "$TMP/seeds/seed_c.txt"
expect_grep 'all_gather' "$TMP/seeds/seed_c.txt"
expect_grep 'psum' "$TMP/seeds/seed_c.txt"
expect_grep 'fori_loop' "$TMP/seeds/seed_e.txt"
# (g) is the user kernel: a pallas_call with its refs.
expect_grep 'pallas_call\[name=matmul grid=(8,8,8)' "$TMP/seeds/seed_g.txt"
expect_grep 'ref\[f32\[128,128\]\]' "$TMP/seeds/seed_g.txt"
# (h) gathers w with the ring kernel's remote copies.
expect_grep 'pallas_call\[name=ring_all_gather grid=(2)' "$TMP/seeds/seed_h.txt"
expect_grep 'ref\[dma_sem\[\]\]' "$TMP/seeds/seed_h.txt"

# --mesh, --m/--k/--n and --variants; a relative --out_dir under bazel run is the user's directory.
mkdir -p "$TMP/cwd"
expect_status 0 env BUILD_WORKING_DIRECTORY="$TMP/cwd" "$SEED_MODULES" --out_dir=small \
  --mesh=4x4 --m=256 --k=256 --n=128 --variants=a,c
[ "$(ls "$TMP/cwd/small")" = "$(printf 'seed_a.txt\nseed_c.txt')" ] ||
  fail "expected seed_a.txt and seed_c.txt: $(ls "$TMP/cwd/small")"
expect_grep 'mesh={x:4,y:4}' "$TMP/cwd/small/seed_c.txt"
expect_grep 'bf16\[256,256\]' "$TMP/cwd/small/seed_c.txt"
expect_grep 'bf16\[256,128\]' "$TMP/cwd/small/seed_c.txt"

# --format: text protos and binary protos.
expect_status 0 "$SEED_MODULES" --out_dir="$TMP/pbtxt" --format=pbtxt --variants=c
expect_grep 'view: GLOBAL' "$TMP/pbtxt/seed_c.pbtxt"
expect_status 0 "$SEED_MODULES" --out_dir="$TMP/pb" --format=binary --variants=c
[ -s "$TMP/pb/seed_c.pb" ] || fail "no seed_c.pb"

# Bad flags: a message naming the flag and a nonzero status; --help prints the usage.
expect_status 2 "$SEED_MODULES"
expect_grep 'no --out_dir' "$TMP/err"
expect_status 2 "$SEED_MODULES" --out_dir="$TMP/bad" --mesh=4
expect_grep 'mesh must be XxY' "$TMP/err"
expect_status 2 "$SEED_MODULES" --out_dir="$TMP/bad" --variants=z
expect_grep 'no variant "z"' "$TMP/err"
expect_status 2 "$SEED_MODULES" --out_dir="$TMP/bad" --format=xml
expect_status 2 "$SEED_MODULES" --out_dir="$TMP/bad" extra
expect_status 1 "$SEED_MODULES" --out_dir="$TMP/bad" --bogus
expect_grep "Unknown command line flag 'bogus'" "$TMP/err"
[ -e "$TMP/bad" ] && fail "bad flags wrote $TMP/bad"
"$SEED_MODULES" --help >"$TMP/out" 2>&1
expect_grep 'usage: seed_modules --out_dir=DIR' "$TMP/out"
expect_grep 'out_dir' "$TMP/out"

finish
