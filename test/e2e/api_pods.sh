#!/usr/bin/env bash
# Pods from the API server on the real control plane and containerd: a pod
# created with kubectl for this node runs; `kubectl delete` runs preStop,
# honours the grace period and removes the sandbox; a sidecar stops only after
# the main container (it serves its preStop hook), and sidecars whose preStop
# hooks outlast the grace period are stopped together; a force delete stops the
# containers at once; pods deleted while nanolet was stopped (with a
# deletionTimestamp, or gone from the API) are stopped at its start; with the
# API server unreachable the checkpointed pods carry on with the same containers,
# and when it answers again a pod deleted meanwhile is stopped and the others
# keep their containers. Pod status in the API is not checked here (that is the
# status manager's). The node name and its kubeconfig come from
# NANOLET_E2E_API_NODE / NANOLET_E2E_API_KUBECONFIG (default: nl-apisrc, with a
# credential minted by the control plane script), the namespace from
# NANOLET_E2E_API_NS.
PODS_NS=${NANOLET_E2E_API_NS:-nanolet-e2e-api-pods}
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_E2E_API_NODE:-nl-apisrc}
KC=${NANOLET_E2E_API_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
DEAD_KC=$E2E_TMP/dead.kubeconfig
sed 's#^\( *server:\).*#\1 https://127.0.0.1:1#' "$KC" >"$DEAD_KC"
IMG=localhost/busybox:1.36
MARKS=$E2E_TMP/marks
mkdir -p "$MARKS"

e2e_on_exit api_cleanup

kubectl delete ns "$PODS_NS" --ignore-not-found --wait=true >/dev/null 2>&1
kubectl create ns "$PODS_NS" >/dev/null

# apply NAME GRACE [IGNORE_TERM]: a pod bound to this node; its container
# ignores SIGTERM when asked (so only the grace period's SIGKILL ends it) and
# its preStop hook writes $MARKS/NAME.
apply() {
  local trap_cmd="trap 'exit 0' TERM"
  [ "${3:-}" = ignore ] && trap_cmd="trap '' TERM"
  kubectl apply -f - >/dev/null <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: $2
  volumes: [{name: marks, hostPath: {path: $MARKS}}]
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, "$trap_cmd; while true; do sleep 0.2; done"]
    volumeMounts: [{name: marks, mountPath: /marks}]
    lifecycle: {preStop: {exec: {command: [sh, -c, "date +%s%N > /marks/$1"]}}}
EOF2
}
# The running container id of API pod NAME ("" when none).
running_id() {
  cri ps -o json | jq -r --arg n "$1" --arg ns "$PODS_NS" '[.containers[]
    | select(.labels["io.kubernetes.pod.name"] == $n and .labels["io.kubernetes.pod.namespace"] == $ns)
    | .id][0] // ""'
}
is_running() { [ -n "$(running_id "$1")" ]; }
not_running() { [ -z "$(running_id "$1")" ]; }
no_sandbox() { ! runtime_has_pod "$1"; }
api_phase() { curl -fsS "http://127.0.0.1:$RO_PORT/pods" | jq -r --arg n "$1" --arg ns "$PODS_NS" \
  '[.items[] | select(.metadata.name == $n and .metadata.namespace == $ns) | .status.phase][0] // ""'; }
phase_is() { [ "$(api_phase "$1")" = "$2" ]; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# --- a pod from kubectl runs -------------------------------------------------
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1
apply web 5 ignore
if wait_for 30 phase_is web Running; then ok "kubectl apply: the pod is Running in nanolet's /pods"
else fail "pod runs" "phase $(api_phase web)"; fi
check "kubectl apply: its container runs (nanolet cri ps)" is_running web
check "the checkpoint is written" test -s "$ROOT/api-pods.checkpoint"

# --- kubectl delete: preStop, the grace period, the sandbox --------------------
t0=$(now_ms)
kubectl delete pod -n "$PODS_NS" web --wait=false >/dev/null
if wait_for 10 test -s "$MARKS/web"; then ok "kubectl delete runs the preStop hook"; else fail "preStop" "no marker"; fi
wait_for 20 not_running web
took=$(($(now_ms) - t0))
if [ "$took" -ge 4000 ] && [ "$took" -le 9000 ]; then ok "the container that ignores SIGTERM is killed after the 5 s grace period (${took} ms)"
else fail "grace period" "stopped after $took ms, want ~5000"; fi
if wait_for 20 no_sandbox web; then ok "the sandbox of the deleted pod is removed"; else fail "sandbox removal" "still there"; fi
kubectl delete pod -n "$PODS_NS" web --grace-period=0 --force >/dev/null 2>&1 # the status manager's part

# --- a sidecar serves the main container's preStop hook to the end ---------------
# upstream's termination ordering: the sidecar (restartable init container)
# stops only after the main container has (its preStop hook fetches a page from
# the sidecar 2 s into the termination).
kubectl apply -f - >/dev/null <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: served, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 15
  volumes: [{name: marks, hostPath: {path: $MARKS}}]
  initContainers:
  - name: side
    image: $IMG
    restartPolicy: Always
    command: [sh, -c, "echo served > /tmp/page; httpd -f -p 8080 -h /tmp & p=\$!; trap '[ -e /marks/main-stopped ] && w=after || w=before; echo \$w > /marks/side-stopped; kill \$p; exit 0' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{name: marks, mountPath: /marks}]
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, "trap 'touch /marks/main-stopped; exit 0' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{name: marks, mountPath: /marks}]
    lifecycle: {preStop: {exec: {command: [sh, -c, "sleep 2; wget -q -O /marks/served http://127.0.0.1:8080/page"]}}}
EOF2
served_main_running() {
  [ "$(cri ps -o json | jq --arg ns "$PODS_NS" '[.containers[] | select(.labels["io.kubernetes.pod.name"] == "served"
    and .labels["io.kubernetes.pod.namespace"] == $ns and .labels["io.kubernetes.container.name"] == "c")] | length')" = 1 ]
}
wait_for 40 served_main_running || fail "sidecar pod" "its main container does not run"
kubectl delete pod -n "$PODS_NS" served --wait=false >/dev/null
if wait_for 20 test -s "$MARKS/side-stopped"; then
  check "a sidecar serves the main container's preStop hook (2 s in)" grep -qx served "$MARKS/served"
  check "the sidecar stops after the main container" grep -qx after "$MARKS/side-stopped"
else fail "sidecar stop" "the sidecar was never stopped"; fi
kubectl delete pod -n "$PODS_NS" served --grace-period=0 --force >/dev/null 2>&1

# --- sidecars whose preStop hooks outlast the grace period ---------------------
# upstream: the hooks run at once and take the whole grace period; then no
# sidecar waits for its turn: all are stopped together (each SIGKILLed 2 s
# later, since these ignore SIGTERM).
kubectl apply -f - >/dev/null <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: hooked, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 3
  volumes: [{name: marks, hostPath: {path: $MARKS}}]
  initContainers:
  - name: side1
    image: $IMG
    restartPolicy: Always
    command: [sh, -c, "trap 'read u x < /proc/uptime; echo \$u > /marks/side1-term; sleep 30' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{name: marks, mountPath: /marks}]
    lifecycle: {preStop: {exec: {command: [sh, -c, "while true; do sleep 1; done"]}}}
  - name: side2
    image: $IMG
    restartPolicy: Always
    command: [sh, -c, "trap 'read u x < /proc/uptime; echo \$u > /marks/side2-term; sleep 30' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{name: marks, mountPath: /marks}]
    lifecycle: {preStop: {exec: {command: [sh, -c, "while true; do sleep 1; done"]}}}
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, "while true; do sleep 0.2; done"]
EOF2
hooked_running() {
  [ "$(cri ps -o json | jq --arg ns "$PODS_NS" '[.containers[] | select(.labels["io.kubernetes.pod.name"] == "hooked"
    and .labels["io.kubernetes.pod.namespace"] == $ns and .labels["io.kubernetes.container.name"] == "c")] | length')" = 1 ]
}
wait_for 40 hooked_running || fail "hooked pod" "its main container does not run"
kubectl delete pod -n "$PODS_NS" hooked --wait=false >/dev/null
if wait_for 20 test -s "$MARKS/side1-term" -a -s "$MARKS/side2-term"; then
  # (the host's uptime, in hundredths of a second: busybox's date has no %N)
  apart=$(awk -v a="$(cat "$MARKS/side1-term")" -v b="$(cat "$MARKS/side2-term")" \
    'BEGIN { d = (a - b) * 1000; if (d < 0) d = -d; printf "%d", d }')
  if [ "$apart" -le 1000 ]; then ok "sidecars whose preStop hooks outlast the grace period are stopped together (${apart} ms apart)"
  else fail "sidecars stopped together" "${apart} ms apart"; fi
else fail "hooked sidecars" "not both stopped"; fi
kubectl delete pod -n "$PODS_NS" hooked --grace-period=0 --force >/dev/null 2>&1

# --- a shorter grace while sidecars wait for their turn ---------------------------
# The pod is deleted (30 s), its main container ignores SIGTERM, so both
# sidecars wait for their turn; then it is force-deleted: the first kill is
# abandoned for a shorter one. When the first kill's stop of the main
# container returns, its two waiting sidecars are let go, one after the
# other: nothing of it is left behind, and the agent then stops at once.
kubectl apply -f - >/dev/null <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: twosides, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 30
  initContainers:
  - {name: side1, image: $IMG, restartPolicy: Always, command: [sleep, "3600"]}
  - {name: side2, image: $IMG, restartPolicy: Always, command: [sleep, "3600"]}
  containers:
  - {name: c, image: $IMG, command: [sh, -c, "trap '' TERM; while true; do sleep 0.2; done"]}
EOF2
twosides_running() { [ "$(pod_containers twosides | jq '[.[] | select(.state == "CONTAINER_RUNNING")] | length')" = 3 ]; }
twosides_gone() {
  ! kubectl get pod -n "$PODS_NS" twosides >/dev/null 2>&1 &&
    [ "$(pod_containers twosides | jq '[.[] | select(.state == "CONTAINER_RUNNING")] | length')" = 0 ]
}
wait_for 40 twosides_running || fail "twosides pod" "its three containers do not run"
kubectl delete pod -n "$PODS_NS" twosides --wait=false >/dev/null
sleep 2
kubectl delete pod -n "$PODS_NS" twosides --grace-period=0 --force >/dev/null 2>&1
wait_for 30 twosides_gone || fail "twosides force delete" "the pod is still there"
sleep 1
kill -TERM "$AGENT_PID"
if wait_for 10 bash -c "! kill -0 $AGENT_PID 2>/dev/null"; then
  ok "a kill abandoned while two sidecars waited for their turn: the agent still stops on SIGTERM"
else
  fail "agent stop after an abandoned kill" "still running 10 s after SIGTERM"
  kill -KILL "$AGENT_PID" 2>/dev/null
fi
wait "$AGENT_PID" 2>/dev/null
AGENT_PID=
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1

# --- force delete ----------------------------------------------------------------
apply force 60 ignore
wait_for 30 is_running force
t0=$(now_ms)
kubectl delete pod -n "$PODS_NS" force --grace-period=0 --force >/dev/null 2>&1
wait_for 20 not_running force
took=$(($(now_ms) - t0))
if [ "$took" -le 6000 ]; then ok "kubectl delete --grace-period=0 --force stops the containers (${took} ms, grace 60 s)"
else fail "force delete" "stopped after $took ms"; fi
check "force delete runs the preStop hook too" test -s "$MARKS/force"
if wait_for 20 no_sandbox force; then ok "the force-deleted pod's sandbox is removed"; else fail "force sandbox" "still there"; fi

# --- deleted while nanolet was stopped ----------------------------------------
apply gone-graceful 3
apply gone-forced 3
wait_for 30 is_running gone-graceful && wait_for 30 is_running gone-forced
stop_agent TERM
check "containers keep running while nanolet is stopped" is_running gone-forced
kubectl delete pod -n "$PODS_NS" gone-graceful --wait=false >/dev/null
kubectl delete pod -n "$PODS_NS" gone-forced --grace-period=0 --force >/dev/null 2>&1
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP"
if wait_for 20 not_running gone-graceful; then ok "a pod deleted (deletionTimestamp) while nanolet was stopped is stopped at start"
else fail "deleted while down" "gone-graceful still runs"; fi
if wait_for 20 not_running gone-forced && wait_for 20 no_sandbox gone-forced; then
  ok "a pod gone from the API while nanolet was stopped is stopped and removed at start"
else fail "gone while down" "gone-forced still there"; fi
kubectl delete pod -n "$PODS_NS" gone-graceful --grace-period=0 --force >/dev/null 2>&1

# --- no control plane: the checkpoint ----------------------------------------
apply keep 2
apply drop 2
wait_for 30 is_running keep && wait_for 30 is_running drop
keep_id=$(running_id keep)
drop_id=$(running_id drop)
wait_for 10 grep -q '"name":"drop"' "$ROOT/api-pods.checkpoint"
stop_agent TERM
t0=$(now_ms)
start_agent --kubeconfig "$DEAD_KC" --node-ip "$NODE_IP"
if wait_for 20 phase_is keep Running && wait_for 5 phase_is drop Running; then
  ok "API server unreachable: the checkpointed pods run again ($(($(now_ms) - t0)) ms after start)"
else fail "offline start" "keep $(api_phase keep), drop $(api_phase drop)"; fi
sleep 3 # a sync or two: nothing may be restarted
check "offline: no container restarted (same container ids)" \
  [ "$(running_id keep) $(running_id drop)" = "$keep_id $drop_id" ]
check "offline: the agent says it runs from the checkpoint" grep -Eq "running the [0-9]+ pods of the checkpoint" "$E2E_TMP/agent.log"
stop_agent TERM
kubectl delete pod -n "$PODS_NS" drop --grace-period=0 --force >/dev/null 2>&1
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP"
if wait_for 20 not_running drop; then ok "API server back: the pod deleted meanwhile is stopped"
else fail "reconcile" "drop still runs"; fi
sleep 2
check "API server back: the other pod keeps its container" [ "$(running_id keep)" = "$keep_id" ]
