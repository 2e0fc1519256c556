#!/usr/bin/env bash
# The end-to-end harness itself (lib.sh), in the unit suite: it needs nothing
# but bash. A script that sources lib.sh and exits non-zero after an `ok` (an
# abort, `set -e` meeting a failed command, `exit 3`) must fail, with or
# without a clean-up of its own; a clean-up's exit status must not stand for
# the script's, and its `fail` must count. Every script sets its EXIT trap
# through e2e_on_exit: a hand-written one is refused here.
. "$(dirname "$0")/lib.sh"
LIB=$(cd "$(dirname "$0")" && pwd)/lib.sh

# script NAME BODY: runs BODY as a script that sources lib.sh first (in its own
# bash, as meson runs a test); sets RC and OUT.
script() {
  printf '. %q\n%s\n' "$LIB" "$2" >"$E2E_TMP/$1.sh"
  OUT=$(cd "$E2E_TMP" && bash "$E2E_TMP/$1.sh" 2>&1)
  RC=$?
}
# expect NAME WANT BODY [COND...]: WANT is 0 or "non-zero"; each COND holds.
expect() {
  local name=$1 want=$2 body=$3 c
  shift 3
  script "${name//[^a-z0-9]/_}" "$body"
  if { [ "$want" = 0 ] && [ "$RC" -ne 0 ]; } || { [ "$want" != 0 ] && [ "$RC" -eq 0 ]; }; then
    fail "$name" "exit status $RC, want $want; output: $OUT"
    return
  fi
  for c in "$@"; do eval "$c" || { fail "$name" "not true: $c; output: $OUT"; return; }; done
  ok "$name (status $RC)"
}

expect "one ok, no fail: passes" 0 'ok x' '[ "$(tail -1 <<<"$OUT")" = "1 passed, 0 failed" ]'
expect "nothing checked: fails" non-zero ':'
expect "ok, then exit 3: fails" non-zero 'ok x; exit 3' '[ "$(tail -1 <<<"$OUT")" = "1 passed, 0 failed" ]'
expect "set -e, ok, then false: fails there" non-zero 'set -e; ok x; false; ok y' \
  '! grep -q "ok: y" <<<"$OUT"'
expect "e2e_on_exit CLEANUP, ok, then exit 3: fails, the clean-up ran" non-zero \
  'cleanup() { echo cleaned; }; e2e_on_exit cleanup; ok x; exit 3' 'grep -qx cleaned <<<"$OUT"'
expect "e2e_on_exit CLEANUP, set -e, ok, then false: fails, the clean-up ran" non-zero \
  'set -e; cleanup() { echo cleaned; }; e2e_on_exit cleanup; ok x; false; ok y' \
  'grep -qx cleaned <<<"$OUT"' '! grep -q "ok: y" <<<"$OUT"'
expect "a clean-up's own status is not the script's" 0 \
  'cleanup() { echo cleaned; return 1; }; e2e_on_exit cleanup; ok x' 'grep -qx cleaned <<<"$OUT"'
expect "under set -e a failed command does not cut the clean-up short" 0 \
  'set -e; cleanup() { false; echo cleaned; }; e2e_on_exit cleanup; ok x' 'grep -qx cleaned <<<"$OUT"'
expect "a fail in the clean-up counts" non-zero \
  'cleanup() { fail clean-up "pods left"; }; e2e_on_exit cleanup; ok x' \
  '[ "$(tail -1 <<<"$OUT")" = "1 passed, 1 failed" ]'
expect "e2e_on_exit again replaces the clean-up" non-zero \
  'a() { echo A; }; b() { echo B; }; e2e_on_exit a; e2e_on_exit b; ok x; exit 3' \
  'grep -qx B <<<"$OUT"' '! grep -qx A <<<"$OUT"'
expect "a clean-up with arguments" 0 'e2e_on_exit echo "two words"; ok x' 'grep -qx "two words" <<<"$OUT"'
# For the record, the form e2e_on_exit replaced: a trap that runs its clean-up
# before reading $? reports the clean-up's status, and a run that exits 3
# after one ok passes.
expect "the hand-written trap without E2E_RC=\$? passed a run that exits 3" 0 \
  "cleanup() { :; }; trap 'cleanup; e2e_finish; exit \$?' EXIT; ok x; exit 3"

# One way: no test/e2e script sets an EXIT trap of its own.
hand=$(grep -nE '^[[:space:]]*trap[[:space:]]' "$(dirname "$LIB")"/*.sh | grep -v '^[^:]*/lib\.sh:')
[ -z "$hand" ] && ok "every test/e2e script sets its EXIT trap with e2e_on_exit" ||
  fail "trap by hand (use e2e_on_exit)" "$hand"
