#!/usr/bin/env bash
# What kubectl shows of pods nanolet runs from the API server, on the real
# control plane and containerd: a pod becomes Running and Ready with its IPs,
# start time, QoS class and container statuses; a pod with readiness gates is
# Ready only while their conditions are True; activeDeadlineSeconds set on a
# running pod fails it with DeadlineExceeded; runAsNonRoot refuses a container
# that would run as root (runAsUser 0, or an image without a user) with upstream's
# CreateContainerConfigError and Failed event; kubectl debug starts an
# ephemeral container (status, exec, logs, the target's process namespace),
# never restarted; `kubectl delete` ends with the
# API object gone (nanolet deletes it once the containers are); pods without a
# running container (an image that cannot be pulled, a crash-looping init
# container, containers that all exited) deleted with the default grace period
# go within seconds, and so when deleted while nanolet was stopped, and so when
# deleted after their worker finished but before the API had their terminal
# phase; a force delete;
# a crash-looping pod shows CrashLoopBackOff and its restart count; a pod that
# does not fit is rejected with OutOfmemory; a pod that does not tolerate the
# node's NoExecute taint is refused and never runs. The node name and kubeconfig come from
# NANOLET_E2E_STATUS_NODE / NANOLET_E2E_STATUS_KUBECONFIG (default:
# nl-e2e-status, with a credential minted by the control plane script), the
# namespace from NANOLET_E2E_STATUS_NS.
PODS_NS=${NANOLET_E2E_STATUS_NS:-nanolet-e2e-api-status}
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_E2E_STATUS_NODE:-nl-e2e-status}
KC=${NANOLET_E2E_STATUS_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
IMG=localhost/busybox:1.36

status_cleanup() {
  kubectl delete validatingadmissionpolicybinding nanolet-e2e-hold-phase --ignore-not-found >/dev/null 2>&1
  kubectl delete validatingadmissionpolicy nanolet-e2e-hold-phase --ignore-not-found >/dev/null 2>&1
  api_cleanup
}
e2e_on_exit status_cleanup

kubectl delete ns "$PODS_NS" --ignore-not-found --wait=true >/dev/null 2>&1
kubectl create ns "$PODS_NS" >/dev/null
# The ServiceAccount admission refuses pods until the controller made it.
wait_for 30 kubectl get serviceaccount default -n "$PODS_NS" -o name >/dev/null
kubectl delete node "$NODE" --ignore-not-found >/dev/null

# mkpod NAME [EXTRA SPEC LINES...]: a pod bound to this node
mkpod() { api_pod "$1" 2 "${@:2}"; }
get() { kubectl get pod -n "$PODS_NS" "$1" -o json 2>/dev/null; }
jget() { get "$1" | jq -r "$2" 2>/dev/null; }
is() { [ "$(jget "$1" "$2")" = "$3" ]; }
gone() { ! kubectl get pod -n "$PODS_NS" "$1" -o name >/dev/null 2>&1; }
expect_api() { # expect_api NAME SECONDS POD JQ VALUE
  if wait_for "$2" is "$3" "$4" "$5"; then ok "$1"; else fail "$1" "$4 = $(jget "$3" "$4"), want $5"; fi
}

start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
wait_for 20 node_ready || fail "node Ready" "$NODE is not Ready"

# --- Running and Ready in kubectl ---------------------------------------------------
mkpod web "containers:" \
  "- name: httpd" \
  "  image: $IMG" \
  "  command: [sh, -c, 'echo ok > /tmp/index.html; exec httpd -f -p 8080 -h /tmp']" \
  "  resources: {requests: {cpu: 10m, memory: 16Mi}}" \
  "  readinessProbe: {httpGet: {path: /index.html, port: 8080}, periodSeconds: 1}"
expect_api "kubectl get pod: Running" 40 web .status.phase Running
expect_api "kubectl get pod: Ready (readiness probe)" 20 web '.status.conditions[] | select(.type == "Ready") | .status' True
p=$(get web)
# the test runtime's CNI subnet (setup.sh's, or containerd2.sh's /24)
subnet=${NANOLET_TESTENV_SUBNET:-10.88.0.0/24}
check "podIP in the pod network ($subnet)" bash -c "[[ '$(jq -r .status.podIP <<<"$p")' == ${subnet%0/24}* ]]"
check "hostIP is the node's" [ "$(jq -r .status.hostIP <<<"$p")" = "$NODE_IP" ]
check "startTime is set" [ "$(jq -r '.status.startTime | test("^20[0-9-]+T")' <<<"$p")" = true ]
check "qosClass Burstable" [ "$(jq -r .status.qosClass <<<"$p")" = Burstable ]
cs=$(jq -c '.status.containerStatuses[0]' <<<"$p")
check "containerStatuses: containerID from containerd" bash -c "[[ '$(jq -r .containerID <<<"$cs")' == containerd://* ]]"
check "containerStatuses: imageID" bash -c "[[ '$(jq -r .imageID <<<"$cs")' == *sha256:* ]]"
check "containerStatuses: started, ready, no restarts" \
  [ "$(jq -r '"\(.started) \(.ready) \(.restartCount) \(.state | keys[0])"' <<<"$cs")" = "true true 0 running" ]
check "kubectl get pods shows 1/1 Running" \
  bash -c "'$NANOLET_TEST_KUBECTL' get pods -n '$PODS_NS' web --no-headers | grep -Eq '^web +1/1 +Running +0 '"
# Another writer sets Ready False, as the node lifecycle controller does to every
# pod of a node whose Lease it saw stop (an outage, a clock stepped back): the
# agent, whose own status has not changed, writes Ready back at its next status
# sync (every 10 s, upstream's syncBatch and needsReconcile).
kubectl patch pod -n "$PODS_NS" web --subresource=status --type=strategic -p \
  '{"status":{"conditions":[{"type":"Ready","status":"False","reason":"NodeNotReady"}]}}' >/dev/null
check "Ready set False by another writer: the agent writes it back (within 20 s)" \
  wait_for 20 is web '.status.conditions[] | select(.type == "Ready") | .status' True

# --- readiness gates: Ready only once their conditions are True ---------------------
mkpod gated "containers: [{name: c, image: $IMG, command: [sleep, '3600']}]" \
  "readinessGates: [{conditionType: example.com/one}, {conditionType: example.com/two}]"
ready_of() { jget gated '.status.conditions[] | select(.type == "Ready") | "\(.status) \(.reason)"'; }
gate() { kubectl patch pod -n "$PODS_NS" gated --subresource=status --type=strategic \
  -p "{\"status\":{\"conditions\":[{\"type\":\"example.com/$1\",\"status\":\"$2\"}]}}" >/dev/null; }
expect_api "readiness gates: ContainersReady once the container runs" 40 gated '.status.conditions[] | select(.type == "ContainersReady") | .status' True
check "readiness gates unset: Ready False (ReadinessGatesNotReady)" [ "$(ready_of)" = "False ReadinessGatesNotReady" ]
gate one True
sleep 3
check "one readiness gate True of two: Ready still False" [ "$(ready_of)" = "False ReadinessGatesNotReady" ]
gate two True
expect_api "both readiness gates True: Ready True" 10 gated '.status.conditions[] | select(.type == "Ready") | .status' True
gate one False
expect_api "a readiness gate back to False: Ready False" 10 gated '.status.conditions[] | select(.type == "Ready") | .reason' ReadinessGatesNotReady
kubectl delete pod -n "$PODS_NS" gated --grace-period=0 --force >/dev/null 2>&1

# --- activeDeadlineSeconds set on a running pod -----------------------------------
# The container exits 0 when stopped, as the conformance spec's pause does: the
# pod stays Failed with the reason, not Succeeded from its exit code.
mkpod deadline "containers: [{name: c, image: $IMG, command: [sh, -c, 'trap \"exit 0\" TERM; while :; do sleep 1; done']}]"
expect_api "activeDeadlineSeconds: the pod runs first" 40 deadline .status.phase Running
kubectl patch pod -n "$PODS_NS" deadline -p '{"spec":{"activeDeadlineSeconds":5}}' >/dev/null
expect_api "activeDeadlineSeconds lowered on a running pod: Failed" 15 deadline .status.phase Failed
deadline_stopped() { [ "$(cri ps -o json | jq --arg ns "$PODS_NS" '[.containers[] | select(.labels["io.kubernetes.pod.name"] == "deadline" and .labels["io.kubernetes.pod.namespace"] == $ns)] | length')" = 0 ]; }
check "activeDeadlineSeconds: its container is stopped" wait_for 10 deadline_stopped
expect_api "activeDeadlineSeconds: its container exited 0" 10 deadline '.status.containerStatuses[0].state.terminated.exitCode' 0
check "activeDeadlineSeconds: still Failed, reason DeadlineExceeded and upstream's message" \
  [ "$(jget deadline '"\(.status.phase) \(.status.reason): \(.status.message)"')" = "Failed DeadlineExceeded: Pod was active on the node longer than the specified deadline" ]
deadline_event() { kubectl get events -n "$PODS_NS" --field-selector involvedObject.name=deadline,reason=DeadlineExceeded -o name | grep -q .; }
check "activeDeadlineSeconds: event DeadlineExceeded" wait_for 10 deadline_event
kubectl delete pod -n "$PODS_NS" deadline --wait=false >/dev/null

# --- runAsNonRoot: a container that would run as root never starts ------------------
mkpod rootuid "restartPolicy: Never" "containers: [{name: c, image: $IMG, command: [id, -u], securityContext: {runAsNonRoot: true, runAsUser: 0}}]"
mkpod rootimage "restartPolicy: Never" "containers: [{name: c, image: $IMG, command: [id, -u], securityContext: {runAsNonRoot: true}}]"
mkpod nonroot "restartPolicy: Never" "containers: [{name: c, image: $IMG, command: [id, -u], securityContext: {runAsNonRoot: true, runAsUser: 1000}}]"
failed_event() { # failed_event POD: the message of its Failed event
  kubectl get events -n "$PODS_NS" --field-selector "involvedObject.name=$1,reason=Failed" -o jsonpath='{.items[0].message}' 2>/dev/null
}
for p in rootuid rootimage; do
  expect_api "runAsNonRoot ($p): CreateContainerConfigError" 40 "$p" '.status.containerStatuses[0].state.waiting.reason' CreateContainerConfigError
done
uid_rootuid=$(jget rootuid .metadata.uid) uid_rootimage=$(jget rootimage .metadata.uid)
want="Error: container's runAsUser breaks non-root policy (pod: \"rootuid_${PODS_NS}($uid_rootuid)\", container: c)"
check "runAsNonRoot with runAsUser 0: event Failed, upstream's message" wait_for 10 test "$(failed_event rootuid)" = "$want"
rootimage_event() { [ "$(failed_event rootimage)" = "Error: container has runAsNonRoot and image will run as root (pod: \"rootimage_${PODS_NS}($uid_rootimage)\", container: c)" ]; }
check "runAsNonRoot with an image without a user (root): event Failed, upstream's message" wait_for 10 rootimage_event
check "runAsNonRoot: the containers were never created" [ "$(pod_containers rootuid | jq length) $(pod_containers rootimage | jq length)" = "0 0" ]
expect_api "runAsNonRoot with runAsUser 1000: runs (Succeeded)" 40 nonroot .status.phase Succeeded
kubectl delete pod -n "$PODS_NS" rootuid rootimage nonroot --wait=false >/dev/null

# --- ephemeral containers: kubectl debug --------------------------------------------
mkpod target "containers: [{name: c, image: $IMG, command: [sleep, '3600']}]"
expect_api "ephemeral containers: the target pod runs" 40 target .status.phase Running
kubectl debug -n "$PODS_NS" target --image="$IMG" --container=debugger --target=c -- \
  sh -c 'while true; do echo polo; sleep 1; done' >/dev/null 2>&1
expect_api "kubectl debug: the ephemeral container runs (ephemeralContainerStatuses)" 30 target \
  '.status.ephemeralContainerStatuses[0] | "\(.name) \(.state | keys[0])"' "debugger running"
check "kubectl exec into the ephemeral container" \
  test "$(kubectl exec -n "$PODS_NS" target -c debugger -- echo marco 2>&1)" = marco
debug_logs() { kubectl logs -n "$PODS_NS" target -c debugger 2>/dev/null | grep -q polo; }
# The bound is not the behaviour (the logs are readable): room for a loaded machine.
check "kubectl logs of the ephemeral container" wait_for 30 debug_logs
check "it shares the target's process namespace (--target)" \
  bash -c "'$NANOLET_TEST_KUBECTL' exec -n '$PODS_NS' target -c debugger -- ps | grep -q 'sleep 3600'"
kubectl debug -n "$PODS_NS" target --image="$IMG" --container=once -- true >/dev/null 2>&1
expect_api "an ephemeral container that exits stays terminated (never restarted)" 30 target \
  '.status.ephemeralContainerStatuses[] | select(.name == "once") | "\(.state | keys[0]) \(.restartCount)"' "terminated 0"
sleep 3
check "... and is not started again" \
  [ "$(pod_containers target | jq '[.[] | select(.labels["io.kubernetes.container.name"] == "once")] | length')" = 1 ]
check "the pod's own container kept running" is target '.status.containerStatuses[0].restartCount' 0
kubectl delete pod -n "$PODS_NS" target --wait=false >/dev/null
if wait_for 20 gone target; then ok "a pod with ephemeral containers is deleted"; else fail "ephemeral delete" "still there"; fi

# --- kubectl delete: the API object goes once the containers have ------------------
kubectl delete pod -n "$PODS_NS" web --wait=false >/dev/null
if wait_for 30 gone web; then ok "kubectl delete: the API object is removed after termination"
else fail "kubectl delete" "still there: $(jget web '.metadata.deletionTimestamp + " " + .status.phase')"; fi
web_removed() { ! runtime_has_pod web; }
check "kubectl delete: the sandbox is removed" wait_for 20 web_removed

# --- kubectl delete --grace-period=0 --force -----------------------------------------
mkpod quick "containers: [{name: c, image: $IMG, command: [sleep, '3600']}]"
expect_api "a second pod runs" 40 quick .status.phase Running
kubectl delete pod -n "$PODS_NS" quick --grace-period=0 --force >/dev/null 2>&1
check "force delete: the object is gone at once" gone quick
quick_stopped() { [ "$(pod_containers quick | jq length)" = 0 ] && ! runtime_has_pod quick; }
check "force delete: containers and sandbox go" wait_for 20 quick_stopped

# --- kubectl delete of pods without a running container ------------------------------
# Pods that never started (an image that cannot be pulled; an init container that
# crash-loops; a volume that never mounts) or whose containers have all exited
# (restartPolicy Never): a
# delete with the default grace period finishes at once, as upstream's (the
# worker terminates them, the status manager deletes the object), and so after
# an agent restart (deleted while it was down).
idle_pods() { # idle_pods SUFFIX: the three pods, default grace period
  api_pod "noimg$1" 30 "containers: [{name: c, image: 127.0.0.1:1/nanolet-e2e/none:1, command: [sleep, '3600']}]"
  api_pod "initcrash$1" 30 "initContainers: [{name: i, image: $IMG, command: [sh, -c, 'exit 1']}]" \
    "containers: [{name: c, image: $IMG, command: [sleep, '3600']}]"
  api_pod "exited$1" 30 "restartPolicy: Never" "containers: [{name: c, image: $IMG, command: ['true']}]"
  api_pod "novol$1" 30 "volumes: [{name: v, configMap: {name: nanolet-e2e-absent}}]" \
    "containers: [{name: c, image: $IMG, command: [sleep, '3600'], volumeMounts: [{name: v, mountPath: /v}]}]"
}
idle_pods_settled() { # the three are where the deletes are to catch them
  [[ "$(jget "noimg$1" '.status.containerStatuses[0].state.waiting.reason')" =~ ^(ErrImagePull|ImagePullBackOff)$ ]] &&
    [ "$(jget "initcrash$1" '.status.initContainerStatuses[0].restartCount')" -ge 1 ] 2>/dev/null &&
    is "exited$1" .status.phase Succeeded &&
    kubectl get events -n "$PODS_NS" --field-selector "involvedObject.name=novol$1,reason=FailedMount" -o name | grep -q .
}
idle_pods_delete_gone() { # idle_pods_delete_gone SUFFIX WHEN
  local p
  for p in noimg initcrash exited novol; do
    if wait_for 10 gone "$p$1"; then ok "kubectl delete${2:+ $2}: pod $p$1 (no running container) is gone"
    else fail "kubectl delete${2:+ $2}: $p$1" "still there: $(jget "$p$1" '"\(.metadata.deletionTimestamp) \(.status.phase)"')"; fi
  done
}
idle_pods ""
wait_for 60 idle_pods_settled "" || fail "pods without a running container" "not settled: $(get noimg | jq -c .status.containerStatuses) $(jget initcrash .status.initContainerStatuses[0].restartCount) $(jget exited .status.phase)"
kubectl delete pod -n "$PODS_NS" noimg initcrash exited novol --wait=false >/dev/null
idle_pods_delete_gone "" ""
idle_pods 2
wait_for 60 idle_pods_settled 2 || fail "pods without a running container (2)" "not settled"
stop_agent TERM
kubectl delete pod -n "$PODS_NS" noimg2 initcrash2 exited2 novol2 --wait=false >/dev/null
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || { fail "agent restart" "it did not start"; exit 1; }
idle_pods_delete_gone 2 "while nanolet was stopped"

# A pod whose containers all exited, deleted before the API had its terminal
# phase (the API then deletes gracefully, not at once), after its worker had
# finished: nanolet still deletes the object once the phase is written. The
# race (Pods Extended "should never report success for a pending container"
# under load) made certain here: a ValidatingAdmissionPolicy holds the phase
# Failed out of the API until the delete is in, then lets it through.
HOLD=nanolet-e2e-hold-phase
kubectl apply -f - >/dev/null <<EOF2
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: $HOLD}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [pods/status]}]
  validations:
  - expression: "!has(object.metadata.labels) || !('$HOLD' in object.metadata.labels) || object.status.phase != 'Failed'"
    message: the terminal phase is held back
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: $HOLD}
spec:
  policyName: $HOLD
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $PODS_NS}}}
EOF2
sleep 2 # the policy reaches the API server's admission
kubectl apply -f - >/dev/null <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: held, namespace: $PODS_NS, labels: {$HOLD: "true"}}
spec:
  nodeName: $NODE
  restartPolicy: Never
  terminationGracePeriodSeconds: 30
  automountServiceAccountToken: false
  containers: [{name: c, image: $IMG, command: [sh, -c, 'exit 1']}]
EOF2
held_sandbox_stopped() { # its containers ran and its worker stopped the sandbox
  cri pods -o json | jq -e --arg ns "$PODS_NS" '[.items[] | select(.metadata.name == "held" and
    .metadata.namespace == $ns and .state == "SANDBOX_NOTREADY")] | length == 1' >/dev/null
}
if wait_for 30 held_sandbox_stopped; then ok "held: its container exited and its sandbox is stopped"
else fail "held" "the sandbox is not stopped: $(cri pods -o json | jq -c '[.items[] | select(.metadata.name == "held") | .state]')"; fi
sleep 1 # the worker's last step
check "held: the API has no terminal phase (the policy holds it)" bash -c "[ \"\$(kubectl get pod -n '$PODS_NS' held -o jsonpath='{.status.phase}')\" != Failed ]"
kubectl delete pod -n "$PODS_NS" held --wait=false >/dev/null
check "held: the API deletes it gracefully (a deletionTimestamp, the object stays)" \
  bash -c "kubectl get pod -n '$PODS_NS' held -o jsonpath='{.metadata.deletionTimestamp}' | grep -q ."
sleep 1 # nanolet sees the delete
kubectl delete validatingadmissionpolicybinding "$HOLD" >/dev/null
kubectl delete validatingadmissionpolicy "$HOLD" >/dev/null
if wait_for 30 gone held; then ok "held: deleted after its worker finished, the object goes once its phase is written"
else fail "held" "still there: $(jget held '"\(.metadata.deletionTimestamp) \(.status.phase)"')"; fi

# --- crash loop ------------------------------------------------------------------------
mkpod crash "containers: [{name: c, image: $IMG, command: [sh, -c, 'exit 1']}]"
crashlooping() {
  local s; s=$(jget crash '.status.containerStatuses[0] | "\(.state.waiting.reason) \(.restartCount)"')
  [[ "$s" =~ ^CrashLoopBackOff\ ([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 1 ]
}
if wait_for 60 crashlooping; then ok "crash loop: CrashLoopBackOff and restartCount in kubectl ($(jget crash '.status.containerStatuses[0].restartCount') restarts)"
else fail "crash loop" "$(jget crash '.status.containerStatuses[0] | tojson')"; fi
kubectl delete pod -n "$PODS_NS" crash --grace-period=0 --force >/dev/null 2>&1

# --- admission ---------------------------------------------------------------------------
mkpod huge "containers: [{name: c, image: $IMG, command: [sleep, '3600'], resources: {requests: {memory: 64Ti}}}]"
expect_api "a pod that does not fit: Failed" 20 huge .status.phase Failed
check "a pod that does not fit: reason OutOfmemory" is huge .status.reason OutOfmemory
never_ran() { [ "$(pod_containers huge | jq length)" = 0 ] && ! runtime_has_pod huge; }
check "a pod that does not fit: never ran" never_ran
kubectl taint node "$NODE" nanolet-e2e=x:NoExecute >/dev/null
tainted() { kubectl get node "$NODE" -o jsonpath='{.spec.taints[*].key}' | grep -qw nanolet-e2e; }
wait_for 10 tainted
sleep 11 # the node manager reads the Node every nodeStatusUpdateFrequency (10 s)
mkpod intolerant "containers: [{name: c, image: $IMG, command: [sleep, '3600']}]"
mkpod tolerant "containers: [{name: c, image: $IMG, command: [sleep, '3600']}]" \
  "tolerations: [{key: nanolet-e2e, operator: Exists, effect: NoExecute}]"
# The controller-manager's taint eviction deletes the pod at once too, so its
# API status may never be seen: the agent must refuse it, say why, never run it.
refused() { grep -q "pod $PODS_NS/intolerant rejected: TaintToleration" "$E2E_TMP/agent.log"; }
check "an untolerated NoExecute taint: the pod is refused (TaintToleration)" wait_for 20 refused
intolerant_never_ran() { [ "$(pod_containers intolerant | jq length)" = 0 ] && ! runtime_has_pod intolerant; }
check "an untolerated NoExecute taint: the pod never ran" intolerant_never_ran
expect_api "a pod that tolerates the taint runs" 40 tolerant .status.phase Running
kubectl taint node "$NODE" nanolet-e2e- >/dev/null
