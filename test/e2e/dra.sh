#!/usr/bin/env bash
# Dynamic Resource Allocation end to end: upstream's DRA test driver
# (k8s.io/kubernetes/test/e2e/dra/test-driver, built by
# tools/testenv/k8s-build.sh) runs on the node as its kubelet plugin against
# nanolet joined to the test control plane; everything is seen as a user sees
# it, with kubectl:
#   - the driver registers through <root-dir>/plugins_registry (the agent logs
#     it; the driver logs the kubelet's NotifyRegistrationStatus) and publishes
#     its ResourceSlice for the node;
#   - a DeviceClass and a ResourceClaim (with an opaque config a=b) made with
#     kubectl; a pod on the node using the claim waits while the claim is not
#     reserved for it, with upstream's message in a FailedPrepareDynamicResources
#     event;
#   - the claim allocated and reserved for the pod as the scheduler does (the
#     test control plane has no scheduler: kubectl writes the same status);
#     the pod runs, and its container has what the driver's CDI spec injects:
#     user_a=b and claim_<claim>_<request>=true in its environment
#     (containerd 2 applies CDI edits; containerd 1.6 has no CDI);
#   - the pod resources API on <root-dir>/pod-resources/kubelet.sock, read
#     with an independent gRPC client (python3-grpcio,
#     test/unit/managers/podres_python_client.py): List and Get give the
#     container that names the claim one dynamic_resources entry (the claim's
#     name and namespace, the driver, pool, device and the CDI ID the driver
#     answered), the pod's other container none;
#   - an agent restart keeps the pod's container (same ID) and prepares
#     nothing again (the checkpoint <root-dir>/dra_manager_state), and the pod
#     resources API still shows the claim;
#   - /metrics (the read-only port): dra_operations_duration_seconds counts the
#     failed preparations (the claim not reserved) and the one that worked,
#     dra_grpc_operations_duration_seconds the driver's NodePrepareResources
#     call (OK);
#   - the pod deleted: the claim is unprepared (the driver removes its CDI
#     spec; the agent logs it; the checkpoint forgets it), and /metrics counts
#     the UnprepareResources operation and the NodeUnprepareResources call;
#   - the driver stopped: its registration goes (and its call series on
#     /metrics), and after the grace period (30 s) the agent deletes the
#     driver's ResourceSlices of the node.
#
# Needs containerd 2 (NANOLET_TEST_RUNTIME=containerd2, tools/e2e-runtime.sh):
# the CDI spec goes to the machine's /var/run/cdi, where containerd 2 reads
# specs; the driver's spec files are named after its driver name and the
# claim's UID, and removed at the end.
PODS_NS=nanolet-e2e-dra
. "$(dirname "$0")/pods_lib.sh"
if [ "${NANOLET_TEST_RUNTIME:-containerd}" != containerd2 ]; then
  fail "runtime" "needs containerd 2 for CDI (tools/e2e-runtime.sh containerd2 e2e_dra)"
  exit 1
fi
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_TEST_DRA_NODE:-nl-dra}
KC=$(node_kubeconfig "$NODE")
IMG=localhost/busybox:1.36
# A driver name of the test's own: upstream's specs run the same driver as
# test-driver.cdi.k8s.io, and its CDI spec files (named after the driver) must
# not be taken for this test's, nor removed by it.
DRIVER=dra.e2e.nanolet.example
CDI_DIR=/var/run/cdi
DRIVER_PID=
DRIVER_LOG=$E2E_TMP/driver.log
CLASS=nanolet-e2e-dra

dra_cleanup() {
  api_pods_clear
  stop_driver
  kubectl delete ns "$PODS_NS" --wait=false >/dev/null 2>&1
  kubectl delete deviceclass "$CLASS" --ignore-not-found >/dev/null 2>&1
  kubectl delete resourceslices --field-selector "spec.nodeName=$NODE" >/dev/null 2>&1
  kubectl delete node "$NODE" --ignore-not-found >/dev/null 2>&1
  kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null 2>&1
  rm -f "$CDI_DIR/$DRIVER"-*.json
  if [ -n "${E2E_KEEP:-}" ] || [ "$E2E_FAILED" -gt 0 ]; then
    echo "--- agent log (DRA lines and the last 30) ---"
    grep -iE "dra|plugin|claim" "$E2E_TMP/agent.log" | tail -40
    tail -30 "$E2E_TMP/agent.log"
    echo "--- driver log (last 30 lines) ---"; tail -30 "$DRIVER_LOG"
  fi
}
e2e_on_exit dra_cleanup
[ -n "$NODE_IP" ] || { fail "node IP" "no non-loopback address (set NANOLET_TEST_NODE_IP)"; exit 1; }
DRIVER_BIN=$("$(dirname "$0")/../../tools/testenv/k8s-build.sh" test-driver)/test-driver ||
  { fail "DRA test driver" "tools/testenv/k8s-build.sh test-driver failed"; exit 1; }
if ls "$CDI_DIR/$DRIVER"-*.json >/dev/null 2>&1; then
  fail "CDI specs" "$CDI_DIR/$DRIVER-*.json are there already (another run's driver?)"
  exit 1
fi

# The driver listens in <datadir>/<driver name>/, which its deployment mounts
# from the host (DirectoryOrCreate); the agent makes <root-dir>/plugins.
start_driver() {
  mkdir -p "$ROOT/plugins/$DRIVER"
  "$DRIVER_BIN" --kubeconfig "$NANOLET_TEST_KUBECONFIG" --drivername "$DRIVER" -v 5 \
    kubelet-plugin --node-name "$NODE" --plugin-registration-path "$ROOT/plugins_registry" \
    --datadir "$ROOT/plugins" --cdi-dir "$CDI_DIR" >>"$DRIVER_LOG" 2>&1 &
  DRIVER_PID=$!
}
stop_driver() {
  [ -n "$DRIVER_PID" ] || return 0
  kill -TERM "$DRIVER_PID" 2>/dev/null
  wait "$DRIVER_PID" 2>/dev/null
  DRIVER_PID=
}
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
kpod() { kubectl get pod -n "$PODS_NS" "$1" -o json 2>/dev/null; }
kpod_is() { [ "$(kpod "$1" | jq -r "$2")" = "$3" ]; }
slices() { kubectl get resourceslices --field-selector "spec.nodeName=$NODE,spec.driver=$DRIVER" -o name 2>/dev/null | wc -l; }
has_slice() { [ "$(slices)" -ge 1 ]; }
no_slice() { [ "$(slices)" = 0 ]; }
prepares() { grep -c 'NodePrepareResources of' "$E2E_TMP/agent.log"; }
event_msg() { # the message of the pod's FailedPrepareDynamicResources events
  kubectl get events -n "$PODS_NS" --field-selector "involvedObject.name=$1,reason=FailedPrepareDynamicResources" \
    -o jsonpath='{.items[*].message}' 2>/dev/null
}
has_event() { [[ "$(event_msg "$1")" == *"$2"* ]]; }
cdi_specs() { ls "$CDI_DIR/$DRIVER"-*.json 2>/dev/null | wc -l; }
metrics() { curl -fsS "http://127.0.0.1:$RO_PORT/metrics"; }
# metric_at_least MIN SERIES_REGEX: /metrics has a sample of a series the
# (extended) regex matches whole, with a value of at least MIN.
metric_at_least() {
  metrics | awk -v min="$1" -v re="^$2\$" '$1 ~ re && $2 + 0 >= min + 0 { found = 1 } END { exit !found }'
}
OPS='dra_operations_duration_seconds_count'
# the driver's calls, whichever of the DRA API's versions it chose
GRPC="dra_grpc_operations_duration_seconds_count[{]driver_name=\"${DRIVER//./[.]}\",method_name=\"/k8s[.]io[.]kubelet[.]pkg[.]apis[.]dra[.]v1(beta1)?[.]DRAPlugin"

# --- the driver registers ------------------------------------------------------
kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null 2>&1
kubectl delete resourceslices --field-selector "spec.nodeName=$NODE" >/dev/null 2>&1
join_agent "$KC" --v 2 || { fail "agent start" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; }
check "the node is Ready" wait_for 20 node_ready
start_driver
check "the agent registers the driver's kubelet plugin (plugins_registry, DRAPlugin)" \
  wait_for 20 grep -q "DRA driver $DRIVER: plugin registered at $ROOT/plugins/$DRIVER/dra.sock" "$E2E_TMP/agent.log"
check "the driver answered NotifyRegistrationStatus (registered: true)" \
  wait_for 10 grep -q "plugin $DRIVER at $ROOT/plugins_registry/$DRIVER-reg.sock: told it is registered" "$E2E_TMP/agent.log"
check "kubectl: the driver published its ResourceSlice for the node" wait_for 30 has_slice

# --- a claim that is not reserved: the pod waits ---------------------------------
kubectl apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: $CLASS}
spec:
  selectors:
  - cel: {expression: 'device.driver == "$DRIVER"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, namespace: $PODS_NS}
spec:
  devices:
    requests:
    - name: req-0
      exactly: {deviceClassName: $CLASS}
    config:
    - requests: [req-0]
      opaque:
        driver: $DRIVER
        parameters: {a: b}
EOF
check "kubectl: the ResourceClaim exists" kubectl get resourceclaim -n "$PODS_NS" gpu
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: claimer, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  resourceClaims:
  - {name: gpu, resourceClaimName: gpu}
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, 'env; trap "exit 0" TERM; while true; do sleep 0.2; done']
    resources:
      claims: [{name: gpu}]
  - name: plain
    image: $IMG
    command: [sh, -c, 'trap "exit 0" TERM; while true; do sleep 0.2; done']
EOF
UID1=$(kpod claimer | jq -r .metadata.uid)
CUID=$(kubectl get resourceclaim -n "$PODS_NS" gpu -o jsonpath='{.metadata.uid}')
WANT="pod claimer ($UID1) is not allowed to use ResourceClaim gpu ($CUID)"
check "kubectl: the pod waits with upstream's event (Failed to prepare dynamic resources: ... $WANT)" \
  wait_for 30 has_event claimer "Failed to prepare dynamic resources: prepare dynamic resources: $WANT"
check "the pod is Pending and has no container" \
  bash -c "[ \"\$($NANOLET_TEST_KUBECTL get pod -n $PODS_NS claimer -o jsonpath='{.status.phase}')\" = Pending ]"
check "the driver was not asked to prepare anything" [ "$(prepares)" = 0 ]

# --- allocated and reserved, as the scheduler writes it: the pod runs -------------
kubectl patch resourceclaim -n "$PODS_NS" gpu --subresource status --type merge -p "$(cat <<EOF
{"status": {
  "allocation": {"devices": {
    "results": [{"request": "req-0", "driver": "$DRIVER", "pool": "$NODE", "device": "device-00"}],
    "config": [{"source": "FromClaim", "requests": ["req-0"],
                "opaque": {"driver": "$DRIVER", "parameters": {"a": "b"}}}]}},
  "reservedFor": [{"resource": "pods", "name": "claimer", "uid": "$UID1"}]}}
EOF
)" >/dev/null || fail "claim status" "kubectl patch --subresource status failed"
if wait_for 60 kpod_is claimer .status.phase Running; then ok "kubectl: the pod using the claim is Running"
else fail "pod claimer" "$(kpod claimer | jq -c .status)"; fi
check "the driver was asked to prepare once (NodePrepareResources)" [ "$(prepares)" = 1 ]
check "the driver wrote the claim's CDI spec in $CDI_DIR" [ "$(cdi_specs)" = 1 ]
env_out=$(kubectl exec -n "$PODS_NS" claimer -- env 2>&1)
check "kubectl exec: user_a=b in the container's environment (the CDI spec's env edit from the claim's config)" \
  grep -qx 'user_a=b' <<<"$env_out"
check "kubectl exec: claim_gpu_req_0=true in the container's environment" \
  grep -qx 'claim_gpu_req_0=true' <<<"$env_out"
check "/metrics: dra_operations_duration_seconds counts the failed preparations (is_error=\"true\", the claim not reserved)" \
  metric_at_least 1 "$OPS[{]operation_name=\"PrepareResources\",is_error=\"true\"[}]"
check "/metrics: dra_operations_duration_seconds counts the preparation that worked (is_error=\"false\")" \
  metric_at_least 1 "$OPS[{]operation_name=\"PrepareResources\",is_error=\"false\"[}]"
check "/metrics: dra_grpc_operations_duration_seconds counts the driver's NodePrepareResources call (OK)" \
  metric_at_least 1 "$GRPC/NodePrepareResources\",grpc_status_code=\"OK\"[}]"
check "the checkpoint holds the prepared claim" grep -q "\\\\\"ClaimUID\\\\\":\\\\\"$CUID\\\\\"" "$ROOT/dra_manager_state"
check "kubectl: the container's allocatedResourcesStatus names the claim and its device (claim:gpu, $DRIVER/$NODE/device-00; device health)" \
  wait_for 20 kpod_is claimer '.status.containerStatuses[0].allocatedResourcesStatus[0] | "\(.name) \(.resources[0].resourceID)"' "claim:gpu $DRIVER/$NODE/device-00"

# --- the pod resources API: the claim, for the container that names it ----------------
PODRES=(/usr/bin/python3 "$(dirname "$0")/../unit/managers/podres_python_client.py" call
  "$ROOT/pod-resources/kubelet.sock")
# The claimer pod's containers with their dynamic_resources, keys sorted, from
# List or Get (METHOD [ARGS]).
podres_dyn() {
  "${PODRES[@]}" "$@" | jq -cS --arg ns "$PODS_NS" \
    '[.pod_resources[] | select(.name == "claimer" and .namespace == $ns) | .containers[] | {name, dynamic_resources}]'
}
# The driver's CDI device ID: <driver>/test=claim-<claim UID>-<request>.
PODRES_WANT=$(jq -cnS --arg ns "$PODS_NS" --arg d "$DRIVER" --arg p "$NODE" \
  --arg cdi "$DRIVER/test=claim-$CUID-req-0" \
  '[{name: "c", dynamic_resources: [{claim_name: "gpu", claim_namespace: $ns, claim_resources: [
     {driver_name: $d, pool_name: $p, device_name: "device-00", share_id: "", cdi_devices: [$cdi]}]}]},
    {name: "plain", dynamic_resources: []}]')
podres_is() { [ -n "$PODRES_WANT" ] && [ "$(podres_dyn "$@")" = "$PODRES_WANT" ]; }
podres_check() { # podres_check NAME METHOD [ARGS]
  local name=$1 got; shift
  got=$(podres_dyn "$@")
  if [ -n "$PODRES_WANT" ] && [ "$got" = "$PODRES_WANT" ]; then ok "$name"
  else fail "$name" "got '$got', want '$PODRES_WANT'"; fi
}
podres_check "pod resources API List: container c has the claim gpu ($PODS_NS) with $DRIVER/$NODE/device-00 and its CDI ID; container plain, which names no claim, has none" List
podres_check "pod resources API Get of the pod: the same" Get "$PODS_NS" claimer

# --- an agent restart prepares nothing again ----------------------------------------
ID1=$(kpod claimer | jq -r '.status.containerStatuses[0].containerID')
regs() { grep -c "DRA driver $DRIVER: plugin registered" "$E2E_TMP/agent.log"; }
regs0=$(regs)
stop_agent
start_agent --config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --node-ip "$NODE_IP" --v 2 ||
  { fail "agent restart" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; }
check "the driver registers again after the agent's restart (its socket is found again)" \
  wait_for 20 bash -c "[ \$(grep -c 'DRA driver $DRIVER: plugin registered' '$E2E_TMP/agent.log') -gt $regs0 ]"
sleep 5
check "after the restart the container is the same (no restart) and Running" \
  kpod_is claimer '"\(.status.phase) \(.status.containerStatuses[0].containerID) \(.status.containerStatuses[0].restartCount)"' "Running $ID1 0"
check "after the restart nothing was prepared again" [ "$(prepares)" = 1 ]
check "after the restart the claim is not unprepared (the CDI spec is there)" [ "$(cdi_specs)" = 1 ]
check "after the restart the pod resources API shows the claim again (the checkpoint's devices and CDI IDs)" \
  wait_for 20 podres_is List

# --- the pod deleted: the claim unprepared -------------------------------------------
kubectl delete pod -n "$PODS_NS" claimer --wait=false >/dev/null 2>&1
check "kubectl: the pod is gone" wait_for 30 bash -c "! $NANOLET_TEST_KUBECTL get pod -n $PODS_NS claimer >/dev/null 2>&1"
check "the agent unprepared the claim (NodeUnprepareResources)" \
  wait_for 20 grep -q "ResourceClaim $PODS_NS/gpu ($CUID) unprepared" "$E2E_TMP/agent.log"
check "the driver removed the claim's CDI spec" wait_for 5 bash -c "[ \$(ls $CDI_DIR/$DRIVER-*.json 2>/dev/null | wc -l) = 0 ]"
check "the checkpoint forgot the claim" wait_for 5 bash -c "! grep -q '$CUID' '$ROOT/dra_manager_state'"
check "/metrics: dra_operations_duration_seconds counts the pod's UnprepareResources (is_error=\"false\")" \
  metric_at_least 1 "$OPS[{]operation_name=\"UnprepareResources\",is_error=\"false\"[}]"
check "/metrics: dra_grpc_operations_duration_seconds counts the driver's NodeUnprepareResources call (OK)" \
  metric_at_least 1 "$GRPC/NodeUnprepareResources\",grpc_status_code=\"OK\"[}]"

# --- the driver goes: its registration, then its ResourceSlices ------------------------
# (the agent's restart deleted the node's slices, as upstream's kubelet does at
# its start: the driver publishes its slice again on its next sync)
check "kubectl: the driver's ResourceSlice is there (published again after the agent's restart)" \
  wait_for 60 has_slice
stop_driver
check "the agent deregisters the driver's plugin when its socket goes" \
  wait_for 10 grep -q "DRA driver $DRIVER: plugin at .* deregistered" "$E2E_TMP/agent.log"
driver_calls_gone() {
  local m
  m=$(metrics) && ! grep -q "^dra_grpc_operations_duration_seconds_[a-z]*{driver_name=\"$DRIVER\"" <<<"$m" &&
    grep -q "^$OPS{operation_name=\"UnprepareResources\"" <<<"$m"
}
check "/metrics: the driver's call series went with its plugin; the operations stay" driver_calls_gone
t0=$(date +%s)
check "kubectl: the driver's ResourceSlice is still there 20 s after (the grace period)" \
  bash -c "sleep 20; [ \$($NANOLET_TEST_KUBECTL get resourceslices --field-selector spec.nodeName=$NODE,spec.driver=$DRIVER -o name | wc -l) -ge 1 ]"
if wait_for 30 no_slice; then
  ok "kubectl: the agent deleted the driver's ResourceSlice of the node $(($(date +%s) - t0)) s after the driver went (grace period 30 s)"
else
  fail "ResourceSlice wipe" "still there $(($(date +%s) - t0)) s after the driver went"
fi
