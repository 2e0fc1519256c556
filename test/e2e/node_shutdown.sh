#!/usr/bin/env bash
# Graceful node shutdown on the real containerd: `nanolet shutdown-hook` stops
# the pods in upstream's order within shutdownGracePeriod (the others first,
# within shutdownGracePeriod - shutdownGracePeriodCriticalPods; a
# system-node-critical pod after them), preStop hooks run, the pods end Failed
# with reason Terminated and the DisruptionTarget condition, and a pod added
# afterwards is rejected. Then, joined to the control plane, an API pod shows
# the same status in kubectl (one whose container exits 0 on SIGTERM ends
# Succeeded, with the condition alone) and the node goes NotReady ("node is
# shutting down"). The node name and kubeconfig of the joined part come from
# NANOLET_E2E_SHUTDOWN_NODE / NANOLET_E2E_SHUTDOWN_KUBECONFIG (default:
# nanolet-shutdown, with a credential minted by the control plane script).
PODS_NS=shutdown-e2e
. "$(dirname "$0")/pods_lib.sh"
IMG=localhost/busybox:1.36
SHARED=$E2E_TMP/shared
mkdir -p "$SHARED"
CFG=$E2E_TMP/config.yaml
# 10 s in all: 6 s for the others, the last 4 s for critical pods.
cat >"$CFG" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
shutdownGracePeriod: 10s
shutdownGracePeriodCriticalPods: 4s
# /pods on the read-only port without an API server
authentication: {webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
EOF
hook() { "$NANOLET" shutdown-hook --config "$CFG" --root-dir "$ROOT" "$@"; }

# manifest NAME SCRIPT [extra spec lines]: a pod that logs its preStop and its
# SIGTERM to the shared file, in the order they happen.
manifest() {
  put "$1" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    image: $IMG
    command: ["sh", "-c", "$2"]
    lifecycle:
      preStop: {exec: {command: ["sh", "-c", "echo $1-prestop >> /shared/log"]}}
    volumeMounts: [{name: s, mountPath: /shared}]
  volumes: [{name: s, hostPath: {path: $SHARED, type: Directory}}]
${3:-}
EOF
}
# graceful NAME: a script that traps TERM, logs it and exits.
graceful() { echo "trap \\\"echo $1-term >> /shared/log; exit 0\\\" TERM; while :; do sleep 0.2; done"; }

out=$(hook 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q 'nanolet is not running' <<<"$out" && ok "hook: no agent, nothing to stop" \
  || fail "hook without an agent" "rc=$rc $out"

start_agent --config "$CFG" || { fail "agent start" ""; exit 1; }
manifest web "$(graceful web)"
# sh as PID 1 ignores SIGTERM: it holds the first group for its whole 6 s.
manifest stubborn 'sleep 3600'
manifest crit "$(graceful crit)" "  priorityClassName: system-node-critical"
for p in web stubborn crit; do expect "$p runs" 90 "$p" .status.phase Running; done
sleep 1 # the TERM traps are set

t0=$(date +%s%N)
out=$(hook 2>&1); rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc -eq 0 ] && grep -q '^done in' <<<"$out" && [ $ms -le 11000 ] \
  && ok "hook: returns when the pods have stopped, within shutdownGracePeriod (${ms} ms)" \
  || fail "hook" "rc=$rc after ${ms} ms: $out"
[ $ms -ge 6000 ] && ok "hook: the others had their 6 s before critical pods" || fail "hook: too quick" "${ms} ms"
log=$(tr '\n' ' ' <"$SHARED/log")
# web and stubborn first (preStop, then SIGTERM), crit last.
[[ "$log" =~ ^(web-prestop|stubborn-prestop)\ .*web-term.*crit-prestop\ crit-term\ $ ]] \
  && ok "order: the others' preStop hooks and SIGTERM, then the critical pod's" || fail "order" "$log"
grep -q 'stubborn-prestop' "$SHARED/log" && ok "preStop hooks ran" || fail "preStop" "$log"
no_running() { [ "$(pod_containers "$1-$NODE" | jq '[.[] | select(.state == "CONTAINER_RUNNING")] | length')" = 0 ]; }
# The hook is done when the last group's period has run out: a slow StopContainer
# may still be finishing.
running=
for p in web stubborn crit; do
  wait_for 10 no_running "$p" || running+=" $p: $(pod_containers "$p-$NODE" | jq -c '[.[].state]')"
done
[ -z "$running" ] && ok "every pod's containers are stopped" || fail "pods stopped" "still running:$running"
expect "status: phase Failed" 10 web .status.phase Failed
expect "status: reason Terminated" 5 crit .status.reason Terminated
expect "status: upstream's message" 5 stubborn .status.message "Pod was terminated in response to imminent node shutdown."
expect "status: DisruptionTarget" 5 web \
  '.status.conditions[] | select(.type == "DisruptionTarget") | "\(.status) \(.reason)"' "True TerminationByKubelet"
sleep 3
no_running web && ok "the pods stay stopped" || fail "restarted" "web runs again"
manifest late "$(graceful late)"
expect "a pod added now is rejected: NodeShutdown" 20 late .status.reason NodeShutdown
out=$(hook 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q '^done in' <<<"$out" && ok "hook: a second call says done at once" || fail "second hook" "rc=$rc $out"
stop_agent TERM

# ---- joined: the status kubectl shows, the node's Ready condition -----------------
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
rm -f "$MANIFESTS"/*.yaml
start_agent >/dev/null 2>&1 && wait_for 60 runtime_clear
stop_agent TERM
NODE=${NANOLET_E2E_SHUTDOWN_NODE:-nanolet-shutdown}
KC=${NANOLET_E2E_SHUTDOWN_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
# A namespace of this run's own: a shared control plane may still be deleting
# an earlier run's.
PODS_NS=shutdown-e2e-$$
e2e_on_exit api_cleanup
fresh_ns "$PODS_NS"
wait_for 30 kubectl get serviceaccount default -n "$PODS_NS" -o name >/dev/null
kubectl delete node "$NODE" --ignore-not-found >/dev/null
cat >"$CFG" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
shutdownGracePeriod: 4s
shutdownGracePeriodCriticalPods: 2s
EOF
start_agent --config "$CFG" --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1
# api dies of SIGTERM (143), api0 exits 0 on it; applied again while the
# shared apiserver does not answer.
for p in api:143 api0:0; do
  cat <<EOF
---
apiVersion: v1
kind: Pod
metadata: {name: ${p%:*}, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 30
  containers:
  - {name: main, image: $IMG, command: [sh, -c, 'trap "exit ${p#*:}" TERM; while :; do sleep 0.2; done']}
EOF
done >"$E2E_TMP/api.yaml"
wait_for 60 kubectl apply -f "$E2E_TMP/api.yaml" >/dev/null || fail "kubectl apply" "the apiserver did not take the pod"
# shellcheck disable=SC2086 # $1 is "KIND/NAME [-n NS]"
jget() { kubectl get $1 -o json 2>/dev/null | jq -r "$2" 2>/dev/null; }
is() { [ "$(jget "$1" "$2")" = "$3" ]; }
for p in api api0; do
  wait_for 90 is "pod/$p -n $PODS_NS" .status.phase Running || fail "API pod $p runs" "$(jget "pod/$p -n $PODS_NS" .status.phase)"
done
ready_q='.status.conditions[] | select(.type == "Ready") | "\(.status) \(.message)"'
wait_for 20 is "node/$NODE" "$ready_q" "True kubelet is posting ready status" || fail "node Ready" "$(jget "node/$NODE" "$ready_q")"
out=$(hook 2>&1); rc=$?
[ $rc -eq 0 ] && ok "joined: hook done" || fail "joined: hook" "rc=$rc $out"
want='Failed Terminated Pod was terminated in response to imminent node shutdown. True'
q='"\(.status.phase) \(.status.reason) \(.status.message) \(.status.conditions[] | select(.type == "DisruptionTarget") | .status)"'
if wait_for 20 is "pod/api -n $PODS_NS" "$q" "$want"; then ok "kubectl: the API pod is Failed/Terminated with DisruptionTarget"
else fail "kubectl: API pod status" "$(jget "pod/api -n $PODS_NS" "$q")"; fi
# Its container exits 0 on SIGTERM: Succeeded, the condition without the
# reason (upstream's status after the kill keeps the reason with Failed only).
if wait_for 20 is "pod/api0 -n $PODS_NS" "$q" "Succeeded null null True"; then
  ok "kubectl: an API pod whose container exits 0 on SIGTERM is Succeeded with DisruptionTarget"
else fail "kubectl: API pod status (exit 0)" "$(jget "pod/api0 -n $PODS_NS" "$q")"; fi
if wait_for 20 is "node/$NODE" "$ready_q" "False node is shutting down"; then ok "kubectl: the node is NotReady: node is shutting down"
else fail "kubectl: node Ready" "$(jget "node/$NODE" "$ready_q")"; fi
ev() { kubectl get events -n default --field-selector "involvedObject.name=$NODE,reason=NodeShutdown" -o name 2>/dev/null | grep -q .; }
wait_for 20 ev && ok "kubectl: the NodeShutdown event" || fail "NodeShutdown event" "none"
