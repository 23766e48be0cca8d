#!/usr/bin/env bash
# End-to-end test of the launch command's command line: the program's arguments pass through
# untouched (after "--", or from the first argument that is not the launcher's), its flags in
# their spellings, and the exit statuses of bad usage (125), a failed process and --help.
set -uo pipefail

LAUNCH="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-shardjit}/tools/launch"
[ -x "$LAUNCH" ] || LAUNCH=tools/launch
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
# expect_status, expect_grep, fail, finish.
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-shardjit}/base/shell_test_lib.sh" 2>/dev/null ||
  source base/shell_test_lib.sh

# Everything after "--" is the program's, flags of the launcher's spelling and "--" included.
expect_status 0 "$LAUNCH" -n 2 -- /bin/echo hi -n 3 --port=1 --bogus -- --help
expect_grep '^\[0\] hi -n 3 --port=1 --bogus -- --help$' "$TMP/out"
expect_grep '^\[1\] hi -n 3 --port=1 --bogus -- --help$' "$TMP/out"
[ "$(wc -l <"$TMP/out")" -eq 2 ] || fail "expected 2 lines: $(cat "$TMP/out")"
# Without "--", the program starts at the first argument that is neither a flag nor a value.
expect_status 0 "$LAUNCH" -n 1 --timeout 30 --grace=0.5 /bin/echo --timeout=1 -h
expect_grep '^\[0\] --timeout=1 -h$' "$TMP/out"
# The other spellings of the flags (--n=N, -n=N, --port P) and the first failure's status.
expect_status 3 "$LAUNCH" --n=3 -- /bin/sh -c 'echo "$SHARDJIT_PROCESS_ID/$SHARDJIT_NUM_PROCESSES"; exit 3'
expect_grep '^\[2\] 2/3$' "$TMP/out"
expect_grep 'launch: process [0-2] exited with status 3' "$TMP/err"
port=$((20000 + RANDOM % 20000))  # only passed on: nothing listens on it here
expect_status 0 "$LAUNCH" -n=2 --port "$port" -- /bin/sh -c 'echo "$SHARDJIT_COORDINATOR"'
expect_grep "^\[1\] 127.0.0.1:$port\$" "$TMP/out"

# --timeout stops every process: 124.
expect_status 124 "$LAUNCH" -n 2 --timeout=0.5 --grace=0 -- /bin/sleep 30

# Bad usage: 125 and the usage on stderr.
for args in "" "-n 0 -- /bin/true" "-n x -- /bin/true" "-n 2" "-n 2 --" "--bogus -n 2 -- /bin/true" \
    "-n 2 --port=70000 -- /bin/true" "-n 2 --timeout=0 -- /bin/true" "-n 2 --grace=-1 -- /bin/true" \
    "-n 2 --timeout=soon -- /bin/true" "-- /bin/true"; do
  # shellcheck disable=SC2086
  expect_status 125 "$LAUNCH" $args
  expect_grep 'usage: launch' "$TMP/err"
done
expect_status 127 "$LAUNCH" -n 2 -- /nonexistent/program
expect_status 0 "$LAUNCH" --help
expect_grep 'usage: launch -n N' "$TMP/out"
expect_status 0 "$LAUNCH" -h
expect_grep 'usage: launch -n N' "$TMP/out"

finish
