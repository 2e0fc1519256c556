#!/usr/bin/env bash
# Probes and lifecycle hooks on the real containerd, through the agent:
# readiness flips Ready in /pods as a file appears and disappears (httpGet on
# busybox httpd), a failing exec liveness probe restarts its container, a startup
# probe holds liveness back and its success runs the readiness probe at once,
# tcpSocket liveness keeps a healthy container alive, also on an address whose
# neighbour entry still names a departed pod's MAC,
# postStart runs after the start and preStop runs before the container stops.
. "$(dirname "$0")/lib.sh"

: "${NANOLET_TEST_CRI_ENDPOINT:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
EP=$NANOLET_TEST_CRI_ENDPOINT
NS=nanolet-e2e-probes
M=$E2E_TMP/manifests
SHARED=$E2E_TMP/shared
mkdir -p "$M" "$SHARED"
port=$(free_port)
server_flags "$E2E_TMP"

# -v 3: events (Unhealthy, ...) are logged at that level, as upstream's recorder
# shellcheck disable=SC2086
"$NANOLET" --healthz-port "$port" $SERVER_FLAGS --pod-manifest-path "$M" --file-check-frequency 1s \
  --container-runtime-endpoint "$EP" --root-dir "$E2E_TMP/root" --hostname-override e2e-node \
  ${NANOLET_TEST_CGROUP_ROOT:+--cgroup-root "$NANOLET_TEST_CGROUP_ROOT"} -v 3 >"$E2E_TMP/agent.log" 2>&1 &
AGENT_PID=$!

cleanup() {
  rm -f "$M"/*.yaml
  # pods are removed once no source wants them; wait before stopping the agent
  wait_for 90 sh -c "! '$NANOLET' cri -r '$EP' pods | grep -q '$NS'" ||
    echo "warning: pods of $NS still present" >&2
  kill -TERM "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID"
}
e2e_on_exit cleanup

wait_for 10 healthz_ok "$port" || { fail "agent start" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; }

pods() { curl -fsS "http://127.0.0.1:$RO_PORT/pods"; }
# q POD JQ-FILTER: the filter applied to the pod's status
q() { pods | jq -r --arg n "$1" ".items[] | select(.metadata.name == (\$n + \"-e2e-node\")) | .status | $2"; }
ready() { [ "$(q nanolet-e2e-ready '.conditions[]? | select(.type == "Ready") | .status')" = "$1" ]; }
cstat() { q nanolet-e2e-live ".containerStatuses[]? | select(.name == \"$1\") | $2"; }

cat >"$M/ready.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: nanolet-e2e-ready, namespace: $NS, uid: nanolet-e2e-probes-ready}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: localhost/busybox:1.36
    command: [sh, -c, 'mkdir -p /www && echo hi >/www/index.html && exec httpd -f -p 8080 -h /www']
    ports: [{name: http, containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /ready.html, port: http}
      periodSeconds: 1
      failureThreshold: 1
EOF

cat >"$M/live.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: nanolet-e2e-live, namespace: $NS, uid: nanolet-e2e-probes-live}
spec:
  terminationGracePeriodSeconds: 5
  volumes: [{name: shared, hostPath: {path: $SHARED, type: Directory}}]
  containers:
  - name: failing
    image: localhost/busybox:1.36
    command: [sleep, '3600']
    livenessProbe:
      exec: {command: [cat, /tmp/absent]}
      periodSeconds: 1
      failureThreshold: 2
  - name: slow
    image: localhost/busybox:1.36
    command: [sh, -c, 'sleep 15; touch /tmp/started; exec sleep 3600']
    startupProbe:
      exec: {command: [test, -f, /tmp/started]}
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      exec: {command: [test, -f, /tmp/started]}
      periodSeconds: 1
      failureThreshold: 1
    readinessProbe: # its first period ends long after the start
      exec: {command: ['true']}
      periodSeconds: 60
  - name: tcp
    image: localhost/busybox:1.36
    command: [httpd, -f, -p, '9090']
    livenessProbe:
      tcpSocket: {port: 9090}
      initialDelaySeconds: 2
      periodSeconds: 1
      failureThreshold: 1
  - name: hooks
    image: localhost/busybox:1.36
    command: [sh, -c, 'trap "echo term >>/shared/log; exit 0" TERM; while true; do sleep 0.2; done']
    volumeMounts: [{name: shared, mountPath: /shared}]
    lifecycle:
      postStart:
        exec: {command: [sh, -c, 'echo poststart >>/shared/log']}
      preStop:
        exec: {command: [sh, -c, 'echo prestop >>/shared/log; sleep 1']}
EOF

# A pod on an address an earlier pod had: the host's neighbour entry still
# names the departed pod's MAC (tools/testenv/setup.sh). Its server sends
# nothing first, as upstream's grpc-health-checking does not.
cat >"$M/reused.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: nanolet-e2e-reused, namespace: $NS, uid: nanolet-e2e-probes-reused}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: quiet
    image: localhost/busybox:1.36
    command: [httpd, -f, -p, '9091']
    livenessProbe:
      tcpSocket: {port: 9091}
      periodSeconds: 2
      timeoutSeconds: 3
      failureThreshold: 1
EOF

# readiness: not ready while /ready.html is missing, ready once it exists, not
# ready again once it is gone
if wait_for 60 sh -c "[ \"\$(curl -fsS http://127.0.0.1:$RO_PORT/pods | jq -r '.items[] | select(.metadata.name==\"nanolet-e2e-ready-e2e-node\") | .status.containerStatuses[0].state | has(\"running\")')\" = true ]"; then
  ok "readiness pod running"
else
  fail "readiness pod running" "$(pods | jq -c '.items[].status' | head -c 600)"
fi
sleep 2
ready False && ok "Ready is False without the file" || fail "Ready False at first" "$(q nanolet-e2e-ready .conditions)"
cid=$(q nanolet-e2e-ready '.containerStatuses[0].containerID' | sed 's|.*://||')
"$NANOLET" cri -r "$EP" exec "$cid" touch /www/ready.html >/dev/null
if wait_for 15 ready True; then ok "Ready turns True when the file appears"; else fail "Ready True" "$(q nanolet-e2e-ready .conditions)"; fi
[ "$(q nanolet-e2e-ready '.conditions[] | select(.type=="ContainersReady") | .status')" = True ] &&
  [ "$(q nanolet-e2e-ready '.containerStatuses[0].ready')" = true ] &&
  ok "ContainersReady and the container's ready follow" || fail "ContainersReady" "$(q nanolet-e2e-ready .)"
"$NANOLET" cri -r "$EP" exec "$cid" rm /www/ready.html >/dev/null
if wait_for 15 ready False; then ok "Ready turns False when the file goes"; else fail "Ready False again" "$(q nanolet-e2e-ready .conditions)"; fi
grep -q 'Readiness probe failed: HTTP probe failed with statuscode: 404' "$E2E_TMP/agent.log" &&
  ok "readiness failure event as upstream" || fail "readiness event" "$(grep -i probe "$E2E_TMP/agent.log" | tail -3)"

# startup holds liveness back: "slow" is not started for ~15 s (longer than the
# readiness checks above take), yet its liveness
# probe (which fails until then) does not restart it
if wait_for 30 sh -c "[ \"\$(curl -fsS http://127.0.0.1:$RO_PORT/pods | jq -r '.items[] | select(.metadata.name==\"nanolet-e2e-live-e2e-node\") | .status.containerStatuses[]? | select(.name==\"slow\") | .state | has(\"running\")')\" = true ]"; then
  [ "$(cstat slow .started)" = false ] && ok "startup probe: not started at first" || fail "slow started early" "$(cstat slow .)"
else
  fail "slow running" "$(q nanolet-e2e-live .containerStatuses)"
fi
if wait_for 30 sh -c "[ \"\$(curl -fsS http://127.0.0.1:$RO_PORT/pods | jq -r '.items[] | select(.metadata.name==\"nanolet-e2e-live-e2e-node\") | .status.containerStatuses[] | select(.name==\"slow\") | .started')\" = true ]"; then
  ok "startup probe succeeds once the file exists"
  # upstream runs the readiness probe as soon as the container has started (an exec
  # probe: 15 s for a loaded machine, still far from its 60 s period)
  if wait_for 15 sh -c "[ \"\$(curl -fsS http://127.0.0.1:$RO_PORT/pods | jq -r '.items[] | select(.metadata.name==\"nanolet-e2e-live-e2e-node\") | .status.containerStatuses[] | select(.name==\"slow\") | .ready')\" = true ]"; then
    ok "readiness probe runs right after the startup probe succeeds (period 60 s)"
  else
    fail "ready after startup" "$(cstat slow .)"
  fi
else
  fail "slow started" "$(cstat slow .)"
fi

# a failing liveness probe restarts its container
if wait_for 60 sh -c "[ \"\$(curl -fsS http://127.0.0.1:$RO_PORT/pods | jq -r '.items[] | select(.metadata.name==\"nanolet-e2e-live-e2e-node\") | .status.containerStatuses[] | select(.name==\"failing\") | .restartCount')\" -ge 1 ]"; then
  ok "failing liveness probe restarts the container (restartCount $(cstat failing .restartCount))"
else
  fail "liveness restart" "$(cstat failing .)"
fi
grep -q 'Liveness probe failed: cat: can.t open ./tmp/absent.: No such file or directory' "$E2E_TMP/agent.log" &&
  ok "liveness failure event carries the exec output" || fail "liveness event" "$(grep -i 'liveness' "$E2E_TMP/agent.log" | tail -3)"
grep -q 'failed liveness probe' "$E2E_TMP/agent.log" && ok "kill reason logged" || fail "kill reason"
sleep 3
[ "$(cstat slow .restartCount)" = 0 ] && ok "startup-gated liveness never restarted 'slow'" || fail "slow restarted" "$(cstat slow .)"
[ "$(cstat tcp .restartCount)" = 0 ] && [ "$(cstat tcp .started)" = true ] &&
  ok "tcpSocket liveness keeps a listening container alive" || fail "tcp liveness" "$(cstat tcp .)"
[ "$(cstat hooks .restartCount)" = 0 ] && grep -qx poststart "$SHARED/log" &&
  ok "postStart hook ran" || fail "postStart" "$(cat "$SHARED/log" 2>&1)"

# The reused address: a stale entry with a MAC nobody has, as the kernel keeps
# one for a departed pod; the next probes must still connect (within 3 s).
BR=${NANOLET_TESTENV_BRIDGE:-nl-br0}
reused() { pods | jq -r ".items[] | select(.metadata.name == \"nanolet-e2e-reused-e2e-node\") | .status | $1"; }
if wait_for 60 sh -c "[ \"\$(curl -fsS http://127.0.0.1:$RO_PORT/pods | jq -r '.items[] | select(.metadata.name==\"nanolet-e2e-reused-e2e-node\") | .status.containerStatuses[0].started')\" = true ]"; then
  ip=$(reused .podIP)
  ip neigh replace "$ip" lladdr 02:00:00:00:00:99 dev "$BR" nud stale
  sleep 8 # four probe periods
  entry=$(ip neigh show "$ip" dev "$BR")
  [ "$(reused '.containerStatuses[0].restartCount')" = 0 ] && ! grep -q "probe failed: dial tcp $ip:9091" "$E2E_TMP/agent.log" &&
    ok "a pod on a reused address: its liveness probe connects past the stale neighbour entry" ||
    fail "reused address" "$(grep "probe failed: dial tcp $ip:9091" "$E2E_TMP/agent.log" | tail -2)"
  [[ $entry != *02:00:00:00:00:99* ]] &&
    ok "a pod on a reused address: the host learnt its MAC ($entry)" || fail "reused address: entry" "$entry"
  mac=$(awk '{ for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1) }' <<<"$entry")
else
  fail "reused-address pod running" "$(reused .)"
fi
rm -f "$M/reused.yaml"

# preStop: deleting the pod runs the hook before the container gets SIGTERM
rm -f "$M/live.yaml"
if wait_for 30 grep -qx term "$SHARED/log"; then
  got=$(tr '\n' ' ' <"$SHARED/log")
  [ "$got" = "poststart prestop term " ] && ok "preStop ran before the container stopped ($got)" ||
    fail "preStop order" "$got"
else
  fail "preStop" "$(cat "$SHARED/log" 2>&1)"
fi

# The departed pod's entry is collected (gc_stale_time 15 s, the collector's
# period 15 s): a pod that gets the address next starts without it.
entry_gone() { ! ip neigh show "$ip" dev "$BR" | grep -qi "lladdr $mac "; }
if [ -n "${mac:-}" ]; then
  wait_for 60 entry_gone && ok "a departed pod's neighbour entry is collected" ||
    fail "neighbour entry kept" "$(ip neigh show "$ip" dev "$BR")"
fi
