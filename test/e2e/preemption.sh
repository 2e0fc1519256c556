#!/usr/bin/env bash
# Critical pod admission on the real containerd and control plane: with the
# node's cpu taken by two Burstable pods, a pod that is not critical asking
# for all of the node's allocatable cpu is rejected (OutOfcpu), while a
# system-node-critical pod in kube-system asking the same preempts both
# (Warning events "Preempting"; the one that dies of the kill ends Failed with
# reason Preempting and upstream's message, the one that exits 0 on SIGTERM
# Succeeded, both with the DisruptionTarget condition; kubelet_preemptions
# counts them under cpu), starts only once they have stopped, and runs; the
# BestEffort pod beside them, which frees no cpu, keeps running. Node and
# credential: NANOLET_E2E_PREEMPT_NODE / NANOLET_E2E_PREEMPT_KUBECONFIG
# (default nanolet-preemption, minted by the control plane script).
PODS_NS=preempt-e2e-$$
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_E2E_PREEMPT_NODE:-nanolet-preemption}
KC=${NANOLET_E2E_PREEMPT_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
IMG=localhost/busybox:1.36
CRIT=critical-$$
crit_gone() { [ "$(cri pods -o json | jq --arg n "$CRIT" '[.items[] | select(.metadata.name == $n)] | length')" = 0 ]; }
cleanup() {
  kubectl delete pod -n kube-system "$CRIT" --grace-period=0 --force >/dev/null 2>&1
  [ -n "$AGENT_PID" ] && kill -0 "$AGENT_PID" 2>/dev/null && wait_for 60 crit_gone
  api_cleanup
  crit_gone || fail "clean-up" "the critical pod's sandbox is left"
}
e2e_on_exit cleanup
fresh_ns "$PODS_NS"
wait_for 30 kubectl get serviceaccount default -n "$PODS_NS" -o name >/dev/null
kubectl delete node "$NODE" --ignore-not-found >/dev/null
start_agent --kubeconfig "$KC" --node-status-update-frequency 2s || { fail "agent start" ""; exit 1; }
wait_for 60 node_ready || { fail "node Ready" "$(kubectl get node "$NODE" -o json 2>&1 | tail -5)"; exit 1; }
cpu=$(kubectl get node "$NODE" -o jsonpath='{.status.allocatable.cpu}')
[ -n "$cpu" ] && ok "the node's allocatable cpu: $cpu" || { fail "allocatable" "none"; exit 1; }

# pod NAME NAMESPACE REQUESTS SCRIPT [EXTRA SPEC LINE]
pod() {
  local res=""
  [ -n "$3" ] && res="resources: {requests: {$3}}"
  kubectl apply -f - >/dev/null <<EOP
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $2}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 2
  containers:
  - {name: c, image: $IMG, command: [sh, -c, '$4'], $res}
${5:-}
EOP
}
# sh as PID 1 ignores SIGTERM: killed after its 2 s, it dies of SIGKILL.
pod stubborn "$PODS_NS" "cpu: 100m, memory: 16Mi" 'sleep 3600'
pod graceful "$PODS_NS" "cpu: 100m, memory: 16Mi" 'trap "exit 0" TERM; while :; do sleep 0.2; done'
pod bystander "$PODS_NS" "" 'sleep 3600'
for p in stubborn graceful bystander; do expect_api "$p runs" 90 "$p" .status.phase Running; done

pod plain "$PODS_NS" "cpu: \"$cpu\", memory: 16Mi" 'sleep 3600'
expect_api "a pod that is not critical asking for all the cpu is rejected: OutOfcpu" 30 plain .status.reason OutOfcpu
jget_is stubborn .status.phase Running && ok "  ... and preempts nothing" || fail "plain preempted" "$(jget stubborn .status)"

pod "$CRIT" kube-system "cpu: \"$cpu\", memory: 16Mi" 'sleep 3600' "  priorityClassName: system-node-critical"
cget() { kubectl get pod -n kube-system "$CRIT" -o json 2>/dev/null | jq -r "$1" 2>/dev/null; }
cget_is() { [ "$(cget "$1")" = "$2" ]; }
[ "$(cget .spec.priority)" = 2000001000 ] && ok "the critical pod has system-node-critical's priority" \
  || fail "priority" "$(cget .spec.priority)"
if wait_for 90 cget_is .status.phase Running; then ok "the critical pod runs"
else fail "critical pod Running" "$(cget .status)"; fi
want='Failed Preempting Preempted in order to admit critical pod'
expect_api "the pod killed by SIGKILL: $want" 30 stubborn '"\(.status.phase) \(.status.reason) \(.status.message)"' "$want"
expect_api "the pod that exits 0 on SIGTERM: Succeeded" 30 graceful .status.phase Succeeded
dt='.status.conditions[] | select(.type == "DisruptionTarget") | "\(.status) \(.reason) \(.message)"'
for p in stubborn graceful; do
  expect_api "$p: DisruptionTarget" 10 "$p" "$dt" "True TerminationByKubelet Pod was preempted by Kubelet to accommodate a critical pod."
done
jget_is bystander .status.phase Running && [ "$(jget bystander '.status.containerStatuses[0].restartCount')" = 0 ] \
  && ok "the BestEffort pod is not preempted" || fail "bystander" "$(jget bystander .status)"
# The critical pod's container started after the preempted ones had stopped
# (RFC 3339 times of one zone compare as strings).
started=$(cget '.status.containerStatuses[0].state.running.startedAt')
finished=$(jget stubborn '.status.containerStatuses[0].state.terminated.finishedAt')
[ -n "$finished" ] && [ "$finished" != null ] && [[ ! "$started" < "$finished" ]] \
  && ok "the critical pod started ($started) once the preempted pod had stopped ($finished)" \
  || fail "start order" "critical started $started, stubborn finished $finished"
events() { kubectl get events -n "$PODS_NS" --field-selector "involvedObject.name=$1,reason=Preempting" -o json 2>/dev/null | jq -r '.items[] | "\(.type) \(.message)"'; }
has_event() { [ "$(events "$1")" = "Warning Preempted in order to admit critical pod" ]; }
for p in stubborn graceful; do
  wait_for 20 has_event "$p" && ok "$p: a Warning event Preempting" || fail "$p: Preempting event" "$(events "$p")"
done
metrics_is() {
  local m
  m=$(curl -fsS "http://127.0.0.1:$RO_PORT/metrics") && grep -qx "$1" <<<"$m"
}
metrics_is 'kubelet_preemptions{preemption_signal="cpu"} 2' && ok 'kubelet_preemptions{preemption_signal="cpu"} 2' \
  || fail "kubelet_preemptions" "$(curl -sS "http://127.0.0.1:$RO_PORT/metrics" | grep preemptions)"
sleep 3
jget_is stubborn .status.phase Failed && [ "$(pod_containers "stubborn" | jq '[.[] | select(.state == "CONTAINER_RUNNING")] | length' 2>/dev/null)" = 0 ] \
  && ok "the preempted pods stay stopped" || fail "preempted pod restarted" "$(jget stubborn .status.phase)"
