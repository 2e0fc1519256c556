#!/usr/bin/env bash
# Container restart rules (upstream's ContainerRestartRules, beta and on in
# 1.36) on the real control plane and containerd, as a user sees them with
# kubectl and the runtime's own listing (`nanolet cri ps`): a container's own
# restartPolicy Never in an Always pod is not restarted and the pod ends
# Failed; its own Always in a Never pod restarts it; a rule Restart on exit
# code 42 (operator In) restarts it on 42 and not on 1; a NotIn [0] rule
# restarts on 3 and lets exit 0 end the pod Succeeded; a RestartAllContainers
# rule on exit code 42 restarts the whole Never pod in place (its init
# container and its other container run again, each counted once, with a last
# state; the old containers are gone from the runtime, the sandbox and the pod
# IP stay); kubelet_terminated_containers_total counts the exits on /metrics
# through the node proxy.
PODS_NS=nanolet-e2e-restart-rules
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=nl-restart-rules
KC=$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)
IMG=localhost/busybox:1.36
e2e_on_exit api_cleanup
[ -n "$NODE_IP" ] || { fail "node IP" "no non-loopback address (set NANOLET_TEST_NODE_IP)"; exit 1; }

kubectl delete ns "$PODS_NS" --ignore-not-found --wait=true >/dev/null 2>&1
kubectl create ns "$PODS_NS" >/dev/null
wait_for 30 kubectl get serviceaccount default -n "$PODS_NS" -o name >/dev/null
kubectl delete node "$NODE" --ignore-not-found >/dev/null
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
wait_for 20 node_ready || fail "node Ready" "$NODE is not Ready"

jget() { kubectl get pod -n "$PODS_NS" "$1" -o json 2>/dev/null | jq -r "$2" 2>/dev/null; }
is() { [ "$(jget "$1" "$2")" = "$3" ]; }
expect_api() { # expect_api NAME SECONDS POD JQ VALUE
  if wait_for "$2" is "$3" "$4" "$5"; then ok "$1"; else fail "$1" "$4 = $(jget "$3" "$4"), want $5"; fi
}
# runtime_count POD: how many containers the runtime holds for the pod (all states)
runtime_count() { pod_containers "$1" | jq length; }
# The container exits with $1 the first time, then with $2 (a number) or
# sleeps (-); the emptyDir keeps the count across restarts.
twice() {
  local then="exit $2"
  [ "$2" = - ] && then="exec sleep 3600"
  echo "[sh, -c, 'if [ -f /w/ran ]; then $then; fi; touch /w/ran; exit $1']"
}
# rule_pod NAME POD_POLICY CONTAINER_FIELDS COMMAND
rule_pod() {
  api_pod "$1" 1 "restartPolicy: $2" \
    "volumes: [{name: w, emptyDir: {}}]" \
    "containers:" \
    "- {name: c, image: $IMG, command: $4, volumeMounts: [{name: w, mountPath: /w}]$3}"
}
R42="restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]"

rule_pod never-in-always Always ", restartPolicy: Never" "$(twice 1 -)"
rule_pod always-in-never Never ", restartPolicy: Always" "$(twice 1 -)"
rule_pod rule-42 Never ", restartPolicy: Never, $R42" "$(twice 42 -)"
rule_pod rule-1 Always ", restartPolicy: Never, $R42" "$(twice 1 -)"
rule_pod not-in-0 Always \
  ", restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: NotIn, values: [0]}}]" \
  "$(twice 3 0)"
api_pod restart-all 1 "restartPolicy: Never" \
  "volumes: [{name: w, emptyDir: {}}]" \
  "initContainers:" \
  "- {name: init, image: $IMG, command: [sh, -c, 'exit 0']}" \
  "containers:" \
  "- {name: c, image: $IMG, command: $(twice 42 -), volumeMounts: [{name: w, mountPath: /w}], restartPolicy: Never, restartPolicyRules: [{action: RestartAllContainers, exitCodes: {operator: In, values: [42]}}]}" \
  "- {name: other, image: $IMG, command: [sleep, '3600']}"

# --- a container's own policy over the pod's --------------------------------------
expect_api "restartPolicy Never in an Always pod: exit 1 ends the pod Failed" 60 never-in-always .status.phase Failed
check "  ... not restarted (restartCount 0, terminated with exit code 1)" \
  [ "$(jget never-in-always '.status.containerStatuses[0] | "\(.restartCount) \(.state.terminated.exitCode)"')" = "0 1" ]
check "  ... the runtime holds its one container, exited" \
  [ "$(pod_containers never-in-always | jq -r '[.[] | .state] | join(",")')" = CONTAINER_EXITED ]
expect_api "restartPolicy Always in a Never pod: restarted after exit 1, Running" 60 always-in-never \
  '"\(.status.phase) \(.status.containerStatuses[0].restartCount) \(.status.containerStatuses[0].state | keys[0])"' "Running 1 running"
check "  ... the runtime holds two containers for it" [ "$(runtime_count always-in-never)" = 2 ]

# --- restartPolicyRules ---------------------------------------------------------------
expect_api "rule Restart In [42]: exit 42 restarts the container (Never pod), Running" 60 rule-42 \
  '"\(.status.phase) \(.status.containerStatuses[0].restartCount) \(.status.containerStatuses[0].lastState.terminated.exitCode)"' "Running 1 42"
check "  ... the runtime holds two containers for it" [ "$(runtime_count rule-42)" = 2 ]
expect_api "rule Restart In [42]: exit 1 does not match, the container's Never: Failed" 60 rule-1 .status.phase Failed
check "  ... not restarted" [ "$(jget rule-1 '.status.containerStatuses[0].restartCount')" = 0 ]
check "  ... one container in the runtime" [ "$(runtime_count rule-1)" = 1 ]
expect_api "rule Restart NotIn [0]: restarted after exit 3, then exit 0 ends the pod Succeeded" 60 not-in-0 \
  '"\(.status.phase) \(.status.containerStatuses[0].restartCount)"' "Succeeded 1"

# --- RestartAllContainers: the whole pod again, in place -------------------------------
counts='[(.status.initContainerStatuses + .status.containerStatuses)[] | "\(.name)=\(.restartCount)"] | sort | join(" ")'
expect_api "RestartAllContainers on exit 42: init, c and other each restarted once" 90 restart-all \
  "$counts" "c=1 init=1 other=1"
expect_api "  ... Running, c and other running again" 60 restart-all \
  '"\(.status.phase) \([.status.containerStatuses[].state | keys[0]] | join(","))"' "Running running,running"
check "  ... each has a last state (terminated)" [ "$(jget restart-all \
  '[(.status.initContainerStatuses + .status.containerStatuses)[] | select(.lastState.terminated != null)] | length')" = 3 ]
check "  ... the AllContainersRestarting condition is False again" \
  [ "$(jget restart-all '.status.conditions[] | select(.type == "AllContainersRestarting") | .status')" = False ]
check "  ... the runtime holds one container each (the old ones removed)" [ "$(runtime_count restart-all)" = 3 ]
check "  ... in the one sandbox" [ "$(ns_sandboxes | jq '[.[] | select(.metadata.name == "restart-all")] | length')" = 1 ]
killing() {
  kubectl get events -n "$PODS_NS" --field-selector involvedObject.name=restart-all,reason=Killing \
    -o jsonpath='{.items[*].message}' 2>/dev/null | grep -q "Stopping container other"
}
check "  ... a Killing event for other, which was running" wait_for 10 killing

# --- the termination counter ---------------------------------------------------------
metric() { # metric EXIT_CODE: the container series' value for reason Error (0 if none)
  kubectl get --raw "/api/v1/nodes/$NODE/proxy/metrics" 2>/dev/null |
    awk -v c="$1" '$1 == "kubelet_terminated_containers_total{container_type=\"container\",exit_code=\"" c "\",reason=\"Error\"}" { v = $2 } END { print v + 0 }'
}
# exits with 42: rule-42 once, restart-all once; with 1: never-in-always,
# always-in-never and rule-1 once each; with 3: not-in-0 once.
check "kubelet_terminated_containers_total{exit_code=\"42\",reason=\"Error\"}: 2" [ "$(metric 42)" = 2 ]
check "kubelet_terminated_containers_total{exit_code=\"1\",reason=\"Error\"}: 3" [ "$(metric 1)" = 3 ]
check "kubelet_terminated_containers_total{exit_code=\"3\",reason=\"Error\"}: 1" [ "$(metric 3)" = 1 ]

