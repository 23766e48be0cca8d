# Shared by the shell tests (sh_test): source it after setting TMP to a scratch folder.
#   expect_status STATUS CMD...   runs CMD, stdout to $TMP/out and stderr to $TMP/err, and
#                                 records a failure unless it exits STATUS
#   expect_grep PATTERN FILE      records a failure unless FILE has a line matching PATTERN
#   fail MESSAGE                  records a failure
#   finish                        exits 1 if anything failed, else prints PASS
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

expect_status() {
  local want=$1
  shift
  "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  [ "$got" -eq "$want" ] || fail "'$*' exited $got, expected $want; stderr: $(cat "$TMP/err")"
}

expect_grep() {
  grep -q -- "$1" "$2" || fail "no '$1' in $2: $(head -c 2000 "$2")"
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)" >&2
    exit 1
  fi
  echo "PASS"
}
