# shellcheck shell=bash
# Shared by the end-to-end tests on the fake CRI (not a test itself): the
# fake runtime as a helper process and an agent on it, without cgroups, with
# kubelet server ports of its own (lib.sh server_flags). Both stop at exit.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
FAKE_CRI=${NANOLET_FAKE_CRI:-$(dirname "$NANOLET")/../test/fakes/nanolet-fake-cri}
AGENT_PID= CRI_PID=
fake_stop() {
  [ -z "$AGENT_PID" ] || kill "$AGENT_PID" 2>/dev/null
  [ -z "$CRI_PID" ] || kill "$CRI_PID" 2>/dev/null
  wait 2>/dev/null
  AGENT_PID= CRI_PID=
}
e2e_on_exit fake_stop

# fake_cri NAME [FAKE CRI FLAGS...]: the fake runtime on $E2E_TMP/NAME.sock
# (its output in NAME-cri.log).
fake_cri() {
  local name=$1
  shift
  "$FAKE_CRI" --socket "$E2E_TMP/$name.sock" "$@" >"$E2E_TMP/$name-cri.log" 2>&1 &
  CRI_PID=$!
  wait_for 5 test -S "$E2E_TMP/$name.sock" || { fail "fake CRI $name" "no socket"; return 1; }
}

# fake_agent NAME [AGENT FLAGS...]: an agent on that runtime as node NAME, its
# root dir $E2E_TMP/NAME/root and its log $E2E_TMP/NAME.log, until /healthz
# answers.
fake_agent() {
  local name=$1
  shift
  server_flags "$E2E_TMP/$name"
  HPORT=$(free_port)
  # shellcheck disable=SC2086
  "$NANOLET" --healthz-port "$HPORT" $SERVER_FLAGS --container-runtime-endpoint "unix://$E2E_TMP/$name.sock" \
    --root-dir "$E2E_TMP/$name/root" ${NANOLET_TEST_FLAGS:-} --hostname-override "$name" \
    --cgroups-per-qos=false --enforce-node-allocatable= "$@" >"$E2E_TMP/$name.log" 2>&1 &
  AGENT_PID=$!
  wait_for 10 healthz_ok "$HPORT" || { fail "agent start" "$(tail -5 "$E2E_TMP/$name.log")"; return 1; }
}
