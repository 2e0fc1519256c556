#!/usr/bin/env bash
# Hostile clients without credentials against every listener of one agent
# (docs/SERVER.md "Connections"): pipelining from a client that never reads
# (8 MiB of requests, on the kubelet port over TLS and on the local /healthz),
# 64 connections each POSTing a 1 MiB body, a 1024-connection slowloris on the
# kubelet port with 160 on /healthz, and 500 silent TCP sockets with 200
# stalled TLS handshakes, from one address (127.0.0.2); the TLS slowloris and
# the idle sockets also from 64 (127.0.0.2 and up: the bound of 128 unproven
# connections, not only the 32 per address). Under each: the agent lives, its
# RSS stays under 16 MiB, /healthz and an authenticated /pods (a client
# certificate the agent trusts: it stands for the API server's `kubectl logs`,
# which authenticates the same way) answer within 2 s, and after the flood RSS
# comes back within 2 MiB of where it started. Loopback only; each flood is bounded in
# connections and time (hostile_client.py), the whole file in about 2 minutes.
# The CRI is the fake one: the server is what is under test.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hostile_lib.sh"
PY=/usr/bin/python3
HOSTILE=$(dirname "$0")/hostile_client.py
TLSFIX=$(cd "$(dirname "$0")/../fixtures/tls" && pwd)
FAKE_CRI=${NANOLET_FAKE_CRI:-$(dirname "$NANOLET")/../test/fakes/nanolet-fake-cri}
FLOOD_SECS=${HOSTILE_FLOOD_SECS:-12}
ulimit -n 8192
cleanup() {
  [ -z "${ATTACK:-}" ] || kill "$ATTACK" 2>/dev/null
  [ -z "${AGENT_PID:-}" ] || kill "$AGENT_PID" 2>/dev/null
  [ -z "${CRI_PID:-}" ] || kill "$CRI_PID" 2>/dev/null
  wait 2>/dev/null
}
e2e_on_exit cleanup

"$FAKE_CRI" --socket "$E2E_TMP/cri.sock" >/dev/null 2>&1 &
CRI_PID=$!
wait_for 5 test -S "$E2E_TMP/cri.sock" || { fail "fake CRI" "no socket"; exit 1; }
hostile_config "$E2E_TMP/config.yaml" "$TLSFIX/ca.crt"
mkdir -p "$E2E_TMP/manifests"
server_flags "$E2E_TMP"
HPORT=$(free_port)
# shellcheck disable=SC2086
"$NANOLET" --config "$E2E_TMP/config.yaml" --healthz-port "$HPORT" $SERVER_FLAGS \
  --pod-manifest-path "$E2E_TMP/manifests" --container-runtime-endpoint "unix://$E2E_TMP/cri.sock" \
  --root-dir "$E2E_TMP/root" --hostname-override hostile-node >"$E2E_TMP/agent.log" 2>&1 &
AGENT_PID=$!
wait_for 10 healthz_ok "$HPORT" || { fail "agent start" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; }

url=https://127.0.0.1:$KPORT
# pods_ms: the authenticated /pods in ms, or "fail CODE".
pods_ms() {
  local out
  out=$(curl -sk --max-time 2 --cert "$TLSFIX/client.crt" --key "$TLSFIX/client.key" \
    -o /dev/null -w '%{http_code} %{time_total} (connected %{time_connect}, TLS %{time_appconnect})' \
    "$url/pods" 2>/dev/null)
  [ "${out%% *}" = 200 ] && awk '{printf "%d", $2 * 1000}' <<<"$out" || echo "fail ${out:-000}"
}
healthz_ms() {
  local out
  out=$(curl -s --max-time 2 -w ' %{time_total}' "http://127.0.0.1:$HPORT/healthz" 2>/dev/null)
  [ "${out%% *}" = ok ] && awk '{printf "%d", $2 * 1000}' <<<"$out" || echo "fail"
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$AGENT_PID/status" 2>/dev/null || echo 0; }
alive() { kill -0 "$AGENT_PID" 2>/dev/null; }

case $(pods_ms) in fail*) fail "authenticated /pods" "$(pods_ms)"; exit 1 ;; esac
[ "$(curl -sk -o /dev/null -w '%{http_code}' "$url/pods")" = 401 ] && ok "no credentials: 401" ||
  fail "no credentials" "not 401"
# The start's figure, after a trim of the heap (every 10 s).
sleep 11
RSS0=$(rss_kib)
echo "RSS at the start: $RSS0 KiB"

# flood NAME ARGS...: runs hostile_client.py ARGS in the background and probes
# every 0.3 s while it runs.
flood() {
  local name=$1; shift
  "$PY" "$HOSTILE" "$@" >"$E2E_TMP/attack.out" 2>&1 &
  ATTACK=$!
  local max=0 worst_pods=0 worst_healthz=0 bad=() r p h n=0
  sleep 1
  while kill -0 "$ATTACK" 2>/dev/null; do
    alive || break
    r=$(rss_kib); [ "$r" -gt "$max" ] && max=$r
    p=$(pods_ms); h=$(healthz_ms); n=$((n + 1))
    case $p in fail*) bad+=("pods $p") ;; *) [ "$p" -gt "$worst_pods" ] && worst_pods=$p ;; esac
    case $h in fail*) bad+=("healthz $h") ;; *) [ "$h" -gt "$worst_healthz" ] && worst_healthz=$h ;; esac
    sleep 0.3
  done
  wait "$ATTACK" 2>/dev/null
  ATTACK=
  echo "$name: $(cat "$E2E_TMP/attack.out"); max RSS $max KiB; $n probes, worst /pods ${worst_pods} ms, /healthz ${worst_healthz} ms"
  if ! alive; then fail "$name: the agent lives" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; fi
  ok "$name: the agent lives"
  [ "$max" -lt 16384 ] && ok "$name: RSS under 16 MiB ($max KiB)" || fail "$name: RSS" "$max KiB"
  [ ${#bad[@]} -eq 0 ] && [ "$n" -gt 0 ] && ok "$name: /healthz and authenticated /pods within 2 s" ||
    fail "$name: answers" "${bad[*]:0:4} ($n probes)"
  # After it: back within 2 MiB of the start (the heap is trimmed every 10 s).
  back() { [ "$(rss_kib)" -le $((RSS0 + 2048)) ]; }
  wait_for 15 back && ok "$name: RSS back within 2 MiB ($(rss_kib) KiB)" ||
    fail "$name: RSS after" "$(rss_kib) KiB, start $RSS0 KiB"
}

flood "pipelining on the kubelet port" pipeline "$KPORT" 1 8 "$FLOOD_SECS"
flood "pipelining on /healthz" pipeline "$HPORT" 0 8 "$FLOOD_SECS"
flood "64 bodies of 1 MiB" bodies "$KPORT" 1 64 "$FLOOD_SECS"
# Both listeners at once, each past its bound (1024 and 128).
"$PY" "$HOSTILE" slowloris "$HPORT" 0 160 "$FLOOD_SECS" >"$E2E_TMP/loris-healthz.out" 2>&1 &
LORIS=$!
flood "slowloris, 1024 on the kubelet port and 160 on /healthz" slowloris "$KPORT" 1 1024 "$FLOOD_SECS"
wait "$LORIS"; echo "healthz $(cat "$E2E_TMP/loris-healthz.out")"
# The same from 64 addresses, each reopening at once what the agent closes:
# past the listener's 128 unproven connections an address that holds its
# share has its newcomers closed at accept, so the churn costs no handshakes.
HOSTILE_SOURCES=64 flood "TLS slowloris, 1024 on the kubelet port from 64 addresses" \
  slowloris "$KPORT" 1 1024 "$FLOOD_SECS"
flood "500 idle TCP and 200 stalled TLS handshakes" idle "$KPORT" 500 200 "$FLOOD_SECS"
HOSTILE_SOURCES=64 flood "500 idle TCP and 200 stalled TLS handshakes from 64 addresses" \
  idle "$KPORT" 500 200 "$FLOOD_SECS"
