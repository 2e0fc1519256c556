#!/usr/bin/env bash
# The agent dies or stops under running static pods: after kill -9 and a
# restart it adopts them (no container restarts: same IDs, same restart counts)
# and cleans up a pod whose manifest went away while it was down; SIGTERM
# leaves the pods running, as upstream does.
PODS_NS=nanolet-e2e-pods-restart
. "$(dirname "$0")/pods_lib.sh"
IMG=localhost/busybox:1.36

pod_manifest() { # pod_manifest NAME [EXTRA] : two containers and an init container
  put "$1" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PODS_NS, labels: {app: $1}}
spec:
  terminationGracePeriodSeconds: 2
  initContainers: [{name: init, image: $IMG, command: [sh, -c, "echo init"]}]
  containers:
  - {name: a, image: $IMG, command: [sh, -c, "trap 'exit 0' TERM; while :; do sleep 1; done"]${2:-}}
  - {name: b, image: $IMG, command: [sleep, "3600"]}
${3:-}
EOF
}
# What must not change across an agent restart: uid, containers and counts.
fingerprint() {
  refresh_pods
  pod "$1" '"\(.metadata.uid) \(.status.phase) \([.status.containerStatuses[] | "\(.name)=\(.containerID)/\(.restartCount)"] | join(","))"'
}
all_running() { for p in keep other gone; do [ "$(pod "$p" .status.phase)" = Running ] || return 1; done; }
pods_ready() { refresh_pods; all_running; }

start_agent || { fail "agent start" ""; exit 1; }
for p in keep other; do pod_manifest "$p"; done
# gone's preStop hook leaves a mark on the host: it must run even though the
# agent learns of the pod only from the runtime (restored from annotations).
mkdir -p "$E2E_TMP/gone-out"
pod_manifest gone ", lifecycle: {preStop: {exec: {command: [sh, -c, 'echo ran > /out/prestop']}}},
     volumeMounts: [{name: out, mountPath: /out}]" \
  "  volumes: [{name: out, hostPath: {path: $E2E_TMP/gone-out, type: Directory}}]"
# A finished pod: after the restart it must stay finished, not run again.
put done <<EOF
apiVersion: v1
kind: Pod
metadata: {name: done, namespace: $PODS_NS}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers: [{name: main, image: $IMG, command: [sh, -c, "echo once"]}]
EOF
wait_for 40 pods_ready && ok "three pods Running" || fail "pods running" "$(jq -c '[.items[] | [.metadata.name, .status.phase]]' <<<"$PODS_JSON")"
expect "finished pod Succeeded" 20 done .status.phase Succeeded
done_sandbox_stopped() { [ "$(ns_sandboxes | jq -r --arg n "done-$NODE" '.[] | select(.metadata.name == $n) | .state')" = SANDBOX_NOTREADY ]; }
wait_for 10 done_sandbox_stopped && ok "  ... its sandbox stopped" || fail "finished sandbox" "$(ns_sandboxes | jq -c '.[] | [.metadata.name, .state]')"
done0=$(fingerprint done)
keep0=$(fingerprint keep) other0=$(fingerprint other)
gone_uid=$(pod gone .metadata.uid)
gone_sid=$(ns_sandboxes | jq -r --arg u "$gone_uid" '.[] | select(.metadata.uid == $u) | .id')
sandboxes0=$(ns_sandboxes | jq -c '[.[] | .id] | sort')

# ---- kill -9, one manifest removed while the agent is down, restart ----
stop_agent KILL
rc=$?
check "agent killed with SIGKILL (exit status $rc: 128 + 9)" [ "$rc" -eq 137 ]
unput gone
sleep 1
log_mark=$(($(wc -l <"$E2E_TMP/agent.log") + 1))
[ "$(cri ps -o json | jq --arg ns "$PODS_NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns)] | length')" = 6 ] \
  && ok "containers keep running without the agent" || fail "containers without the agent"
start_agent || { fail "agent restart" ""; exit 1; }
same_keep() { [ "$(fingerprint keep)" = "$keep0" ] && [ "$(fingerprint other)" = "$other0" ]; }
wait_for 15 same_keep && ok "restarted agent reports the same containers" \
  || fail "adoption" "keep: $(fingerprint keep) want $keep0"
gone_removed() { ! ns_sandboxes | jq -e --arg u "$gone_uid" '.[] | select(.metadata.uid == $u)' >/dev/null; }
wait_for 20 gone_removed && ok "pod whose manifest was removed while down is stopped and removed" \
  || fail "orphan clean-up" "$(ns_sandboxes | jq -c '[.[].metadata.name]')"
grep -qx ran "$E2E_TMP/gone-out/prestop" 2>/dev/null && ok "  ... after its preStop hook ran (spec restored from the container)" \
  || fail "orphan preStop" "$(ls -la "$E2E_TMP/gone-out"; grep -i prestop "$E2E_TMP/agent.log" | tail -3)"
no_dir() { [ ! -e "$ROOT/pods/$gone_uid" ]; }
wait_for 10 no_dir && ok "  ... and its pod directory" || fail "orphan dir" "$ROOT/pods/$gone_uid"
sleep 3 # a few syncs and housekeeping rounds more
[ "$(fingerprint done)" = "$done0" ] && ok "finished pod still Succeeded, not run again" \
  || fail "finished pod after restart" "$(fingerprint done) want $done0"
[ "$(pod_containers "done-$NODE" | jq length)" = 1 ] && ok "  ... one container instance" \
  || fail "finished pod re-ran" "$(pod_containers "done-$NODE" | jq -c '[.[] | [.metadata.attempt, .state]]')"
if same_keep; then ok "no container restarted: IDs and restart counts unchanged"; else
  fail "restarts" "keep $(fingerprint keep) want $keep0; other $(fingerprint other) want $other0"
fi
left=$(ns_sandboxes | jq -c '[.[] | .id] | sort')
want=$(jq -c --arg g "$gone_sid" '. - [$g]' <<<"$sandboxes0")
[ "$left" = "$want" ] && ok "same sandboxes, none new" || fail "sandboxes" "want $want now $left"
tail -n +"$log_mark" "$E2E_TMP/agent.log" | grep -q -e "creating sandbox" -e "started container" \
  && fail "restart created something" "$(tail -n +"$log_mark" "$E2E_TMP/agent.log" | grep -e 'creating sandbox' -e 'started container' | head -2)" \
  || ok "  ... nothing created after the restart"

# ---- SIGTERM leaves the pods running ----
t0=$(date +%s%N)
kill -TERM "$AGENT_PID"; wait "$AGENT_PID"; rc=$?; AGENT_PID=
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc -eq 0 ] && ok "SIGTERM: agent exits 0 (${ms} ms)" || fail "SIGTERM exit" "rc=$rc"
sleep 2
running=$(cri ps -o json | jq --arg ns "$PODS_NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns and .state == "CONTAINER_RUNNING")] | length')
[ "$running" = 4 ] && ok "SIGTERM: pods keep running" || fail "after SIGTERM" "$running containers running, want 4"
start_agent || { fail "agent restart" ""; exit 1; }
wait_for 10 same_keep && sleep 3 && same_keep && ok "started again: adopted without restarts" \
  || fail "adoption after SIGTERM" "keep $(fingerprint keep) want $keep0"
