#!/usr/bin/env bash
# The agent as an operator meets it: flags, config errors, /healthz, SIGTERM,
# and a leak-free start-and-stop cycle under valgrind.
. "$(dirname "$0")/lib.sh"

out=$("$NANOLET" --version) && [[ $out == "nanolet v"* ]] && ok "--version" || fail "--version" "$out"
out=$("$NANOLET" --help) && grep -q -- '--pod-manifest-path' <<<"$out" && ok "--help lists flags" || fail "--help"

"$NANOLET" --bogus >/dev/null 2>"$E2E_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q 'unknown flag: --bogus' "$E2E_TMP/err" && grep -q '^Usage:' "$E2E_TMP/err" \
  && ok "unknown flag exits 2 with usage" || fail "unknown flag" "rc=$rc"

printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsyncFrequency: banana\n' >"$E2E_TMP/bad.yaml"
"$NANOLET" --config "$E2E_TMP/bad.yaml" 2>"$E2E_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q 'syncFrequency' "$E2E_TMP/err" \
  && ok "syncFrequency: banana exits 2 naming the field" || fail "bad config" "rc=$rc $(cat "$E2E_TMP/err")"

# A node IP the apiserver could not reach the node at: refused before anything
# starts, with upstream's reason (its node status gives it at every update).
"$NANOLET" --node-ip 127.0.0.1 --root-dir "$E2E_TMP/never" 2>"$E2E_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "failed to validate nodeIP: nodeIP can't be loopback address" "$E2E_TMP/err" &&
  [ ! -e "$E2E_TMP/never" ] && ok "--node-ip 127.0.0.1 exits 2 with upstream's reason" ||
  fail "--node-ip 127.0.0.1" "rc=$rc $(cat "$E2E_TMP/err")"
"$NANOLET" --node-ip 203.0.113.77 --root-dir "$E2E_TMP/never" 2>"$E2E_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "node IP: \"203.0.113.77\" not found in the host's network interfaces" "$E2E_TMP/err" &&
  ok "--node-ip of no interface here exits 2" || fail "--node-ip 203.0.113.77" "rc=$rc $(cat "$E2E_TMP/err")"

"$NANOLET" --config /nonexistent.yaml 2>"$E2E_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q '/nonexistent.yaml' "$E2E_TMP/err" && ok "missing config exits 2" || fail "missing config" "rc=$rc"

: "${NANOLET_TEST_CRI_ENDPOINT:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
start_agent() { # start_agent PORT [wrapper...]: starts nanolet in the background
  local port=$1; shift
  mkdir -p "$E2E_TMP/manifests"
  server_flags "$E2E_TMP"
  # shellcheck disable=SC2086
  "$@" "$NANOLET" --healthz-port "$port" $SERVER_FLAGS --pod-manifest-path "$E2E_TMP/manifests" \
    --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" \
    --root-dir "$E2E_TMP/root" --hostname-override e2e-node --pid-file "$E2E_TMP/pid" \
    >"$E2E_TMP/agent.log" 2>&1 &
  AGENT_PID=$!
}

port=$(free_port)
start_agent "$port"
if wait_for 10 healthz_ok "$port"; then ok "/healthz answers ok"; else fail "/healthz" "$(tail -5 "$E2E_TMP/agent.log")"; fi
wait_for 10 grep -q 'container runtime containerd' "$E2E_TMP/agent.log"
[ "$(cat "$E2E_TMP/pid" 2>/dev/null)" = "$AGENT_PID" ] && ok "pid file" || fail "pid file"
t0=$(date +%s%N)
kill -TERM "$AGENT_PID"; wait "$AGENT_PID"; rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc -eq 0 ] && [ $ms -lt 1000 ] && ok "SIGTERM exits 0 in ${ms} ms" || fail "SIGTERM" "rc=$rc after ${ms} ms"
if [ -s "$E2E_TMP/agent.log" ] && ! grep -q 'loop closed with handles still open' "$E2E_TMP/agent.log"; then
  ok "every handle closed"
else
  fail "handles closed" "$(tail -3 "$E2E_TMP/agent.log" 2>/dev/null)"
fi
grep -q 'container runtime containerd' "$E2E_TMP/agent.log" && ok "runtime version logged" \
  || fail "runtime version" "$(grep -i runtime "$E2E_TMP/agent.log")"

if command -v valgrind >/dev/null; then
  port=$(free_port)
  start_agent "$port" valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --error-exitcode=3
  if wait_for 60 healthz_ok "$port"; then
    kill -TERM "$AGENT_PID"; wait "$AGENT_PID"; rc=$?
    [ $rc -eq 0 ] && ok "valgrind: no leak or error over start and stop" \
      || fail "valgrind" "rc=$rc $(tail -30 "$E2E_TMP/agent.log")"
  else
    kill -KILL "$AGENT_PID" 2>/dev/null; fail "valgrind start" "$(tail -5 "$E2E_TMP/agent.log")"
  fi
else
  fail "valgrind" "not installed (tools/install-deps.sh --test installs it)"
fi

# --lock-file: a second agent waits for the lock; with --exit-on-lock-contention
# the holder exits when someone else opens the lock file.
port=$(free_port)
mkdir -p "$E2E_TMP/m2"
server_flags "$E2E_TMP"
# shellcheck disable=SC2086
"$NANOLET" --healthz-port "$port" $SERVER_FLAGS --pod-manifest-path "$E2E_TMP/m2" --root-dir "$E2E_TMP/root" \
  --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" --lock-file "$E2E_TMP/lock" \
  --exit-on-lock-contention >"$E2E_TMP/lock.log" 2>&1 &
holder=$!
if wait_for 10 healthz_ok "$port"; then
  : <"$E2E_TMP/lock" # another process opens the lock file
  if wait_for 5 sh -c "! kill -0 $holder"; then
    wait "$holder"; rc=$?
    [ $rc -eq 0 ] && grep -q 'wanted by another process' "$E2E_TMP/lock.log" \
      && ok "--exit-on-lock-contention exits 0 when the lock file is opened" || fail "lock contention" "rc=$rc"
  else
    kill -KILL "$holder"; fail "lock contention" "agent still running"
  fi
else
  kill -KILL "$holder" 2>/dev/null; fail "lock holder start" "$(tail -3 "$E2E_TMP/lock.log")"
fi

# A configuration file with no authentication: section (webhook, by default)
# and no API server: the secure port stays closed, readOnlyPort is served.
port=$(free_port)
server_flags "$E2E_TMP"
mkdir -p "$E2E_TMP/m3"
cat >"$E2E_TMP/ro.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
healthzPort: $port
port: $KPORT
readOnlyPort: $RO_PORT
staticPodPath: $E2E_TMP/m3
containerRuntimeEndpoint: $NANOLET_TEST_CRI_ENDPOINT
EOF
"$NANOLET" --config "$E2E_TMP/ro.yaml" --root-dir "$E2E_TMP/root" --cert-dir "$E2E_TMP/pki" \
  --hostname-override e2e-node >"$E2E_TMP/ro.log" 2>&1 &
ro_agent=$!
if wait_for 10 healthz_ok "$port"; then
  out=$(curl -fsS "http://127.0.0.1:$RO_PORT/pods")
  [ "$(jq -r .kind <<<"$out" 2>/dev/null)" = PodList ] && grep -q "port $KPORT is off: .*readOnlyPort is served" "$E2E_TMP/ro.log" &&
    ! curl -ksS -o /dev/null "https://127.0.0.1:$KPORT/healthz" 2>/dev/null &&
    ok "standalone, webhook authentication: readOnlyPort serves /pods, the secure port stays closed" ||
    fail "read-only port alone" "${out:0:200} $(grep -i 'kubelet server' "$E2E_TMP/ro.log")"
  kill -TERM "$ro_agent"; wait "$ro_agent"; rc=$?
  [ $rc -eq 0 ] && ok "and exits 0 on SIGTERM" || fail "read-only agent SIGTERM" "rc=$rc $(tail -3 "$E2E_TMP/ro.log")"
else
  kill -KILL "$ro_agent" 2>/dev/null; fail "read-only agent start" "$(tail -3 "$E2E_TMP/ro.log")"
fi
