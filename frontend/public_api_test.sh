#!/usr/bin/env bash
# The public API compiles on its own: frontend/shardjit.h, with only the headers listed in
# //frontend:public_headers beside it (no generated ir/ir.pb.h, no bazel-out include path),
# preprocesses and compiles with the system compiler, and its include closure has no protobuf,
# fabric, scheduler or intrinsics header.
set -uo pipefail

RUNFILES="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-shardjit}"
[ -f "$RUNFILES/frontend/shardjit.h" ] || RUNFILES=.
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
# expect_status, expect_grep, fail, finish.
source "$RUNFILES/base/shell_test_lib.sh" 2>/dev/null || source base/shell_test_lib.sh
CXX="${CXX:-g++}"

cat >"$TMP/main.cc" <<'CC'
#include "frontend/shardjit.h"
int main() { return shardjit::P("x").to_string().empty() ? 1 : 0; }
CC

# Dependencies of a TU that includes only shardjit.h.
expect_status 0 "$CXX" -std=c++20 -M -I"$RUNFILES" "$TMP/main.cc"
cp "$TMP/out" "$TMP/deps"
for forbidden in 'ir\.pb\.h' 'google/protobuf' 'runtime/fabric\.h' 'runtime/scheduler\.h' \
  'immintrin\.h' 'ir/builder\.h'; do
  if grep -q -- "$forbidden" "$TMP/deps"; then
    fail "frontend/shardjit.h pulls $forbidden: $(tr ' ' '\n' <"$TMP/deps" | grep -v '^/usr' |
      tr '\n' ' ')"
  fi
done
# And it compiles without the protobuf include path (the generated ir/ir.pb.h is not there).
expect_status 0 "$CXX" -std=c++20 -fsyntax-only -I"$RUNFILES" "$TMP/main.cc"
finish
