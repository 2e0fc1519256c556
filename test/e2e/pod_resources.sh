#!/usr/bin/env bash
# Pod-level resources (spec.resources, PodLevelResources) end to end, on the
# real containerd (cgroup v1, cgroupfs) and the test control plane, as a user
# sees them: pods created with kubectl whose spec.resources bound containers
# that have no limits of their own get a pod cgroup with the pod-level memory
# limit, cfs quota and shares (read from the cgroup files), the QoS class
# upstream gives them (Guaranteed from pod-level limits alone, Burstable with
# requests only), the pod-level limit in a container's downward API
# limits.cpu/memory, and an OOM kill when the pod goes over its pod-level
# memory; a pod whose pod-level cpu request exceeds the node is rejected
# (OutOfcpu) though its containers ask for nothing; `kubectl patch
# --subresource resize` of spec.resources changes the pod cgroup and the
# containers that run with the pod-level limits in place (no restart), with
# status.resources and allocatedResources; a static pod's spec.resources do
# the same as an API pod's.
PODS_NS=nanolet-e2e-plr
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_TEST_PLR_NODE:-nl-plr}
KC=$(node_kubeconfig "$NODE")
IMG=localhost/busybox:1.36
CG=${NANOLET_TEST_CGROUP_FS:-/sys/fs/cgroup}
[ -d "$CG/cpu" ] && [ -d "$CG/memory" ] || { fail "cgroup v1" "cpu and memory are needed under $CG"; exit 1; }
MI=$((1024 * 1024))

e2e_on_exit api_cleanup

# The pod cgroup of an API pod: kubepods[/burstable|/besteffort]/pod<uid>.
podcg() { # podcg POD QOS-DIR
  echo "$KUBEPODS${2:+/$2}/pod$(jget "$1" .metadata.uid)"
}
# The container's cgroup below it (cgroupfs: <pod cgroup>/<container id>).
ctrcg() { # ctrcg POD QOS-DIR CONTAINER
  local cid; cid=$(jget "$1" ".status.containerStatuses[] | select(.name == \"$3\") | .containerID")
  echo "$(podcg "$1" "$2")/${cid#containerd://}"
}
SLEEP='trap "exit 0" TERM; while :; do sleep 1; done'

join_agent "$KC" || { fail "agent start" ""; exit 1; }
wait_for 20 node_ready || fail "node Ready" "$NODE is not Ready"

# ---- pod-level limits only: Guaranteed, the pod cgroup bounded ----
api_pod plg 1 "resources: {limits: {cpu: 200m, memory: 64Mi}}" \
  "containers:" \
  "- name: app" \
  "  image: $IMG" \
  "  command: [sh, -c, 'echo CPU=\$CPU_LIMIT MEM=\$MEM_LIMIT; $SLEEP']" \
  "  env:" \
  "  - {name: CPU_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}" \
  "  - {name: MEM_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}" \
  "- name: side" \
  "  image: $IMG" \
  "  command: [sh, -c, '$SLEEP']"
# ---- pod-level requests and a memory limit: Burstable ----
api_pod plb 1 "resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 128Mi}}" \
  "containers:" \
  "- name: app" \
  "  image: $IMG" \
  "  command: [sh, -c, '$SLEEP']" \
  "  resources: {requests: {cpu: 50m}}"
expect_api "pod-level limits only: Running" 40 plg .status.phase Running
expect_api "pod-level requests: Running" 40 plb .status.phase Running
check "the API server defaulted pod-level requests from the limits" \
  [ "$(jget plg '.spec.resources.requests | "\(.cpu) \(.memory)"')" = "200m 64Mi" ]
expect_api "pod-level limits only: QoS Guaranteed" 5 plg .status.qosClass Guaranteed
expect_api "pod-level requests, a memory limit: QoS Burstable" 5 plb .status.qosClass Burstable

G=$(podcg plg "")
B=$(podcg plb burstable)
check_cg "Guaranteed pod cgroup: memory limit from spec.resources" memory "$G" memory.limit_in_bytes $((64 * MI))
check_cg "Guaranteed pod cgroup: cfs quota from spec.resources" cpu "$G" cpu.cfs_quota_us 20000
check_cg "Guaranteed pod cgroup: shares from the pod-level request" cpu "$G" cpu.shares 204
check_cg "a container without limits is bounded by the pod's memory" memory "$(ctrcg plg "" app)" \
  memory.limit_in_bytes $((64 * MI))
check_cg "... and the pod's cpu" cpu "$(ctrcg plg "" side)" cpu.cfs_quota_us 20000
check_cg "Burstable pod cgroup: memory limit from spec.resources" memory "$B" memory.limit_in_bytes $((128 * MI))
check_cg "Burstable pod cgroup: no cpu limit anywhere, no quota" cpu "$B" cpu.cfs_quota_us -1
check_cg "Burstable pod cgroup: shares from the pod-level request (100m), not the container's" \
  cpu "$B" cpu.shares 102
logs_say() { kubectl logs -n "$PODS_NS" plg -c app 2>/dev/null | grep -qx "$1"; }
wait_for 10 logs_say "CPU=200 MEM=$((64 * MI))" \
  && ok "downward API limits.cpu/memory fall back to the pod-level limits" \
  || fail "downward API" "logs: $(kubectl logs -n "$PODS_NS" plg -c app 2>&1 | head -2)"

# ---- over the pod-level memory: OOMKilled ----
# the hog's container has no limit of its own: the pod's 32Mi bounds it
api_pod ploom 1 "restartPolicy: Never" "resources: {limits: {memory: 32Mi}}" \
  "containers:" \
  "- name: hog" \
  "  image: $IMG" \
  "  command: [sh, -c, 'sleep 1; exec dd if=/dev/zero of=/dev/null bs=64M count=1']"
expect_api "a pod over its pod-level memory limit is OOMKilled" 40 ploom \
  '.status.containerStatuses[0].state.terminated.reason' OOMKilled

# ---- admission counts the pod-level request ----
api_pod plbig 1 "resources: {requests: {cpu: '$(($(nproc) * 100))'}}" \
  "containers:" \
  "- name: app" \
  "  image: $IMG" \
  "  command: [sh, -c, '$SLEEP']"
expect_api "a pod-level cpu request beyond the node is rejected: OutOfcpu" 20 plbig .status.reason OutOfcpu
expect_api "... and Failed" 5 plbig .status.phase Failed

# ---- in-place resize of pod-level resources (InPlacePodLevelResourcesVerticalScaling) ----
check "the node declares InPlacePodLevelResourcesVerticalScaling" \
  bash -c "kubectl get node '$NODE' -o json | jq -e '.status.declaredFeatures | index(\"InPlacePodLevelResourcesVerticalScaling\")' >/dev/null"
api_pod plr 1 "resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 200m, memory: 128Mi}}" \
  "containers:" \
  "- name: app" \
  "  image: $IMG" \
  "  command: [sh, -c, '$SLEEP']"
expect_api "resizable pod Running" 40 plr .status.phase Running
R=$(podcg plr burstable)
expect_api "status.allocatedResources: the pod-level requests" 10 plr \
  '.status.allocatedResources | "\(.cpu) \(.memory)"' "100m 64Mi"
check_cg "before the resize: pod cfs quota" cpu "$R" cpu.cfs_quota_us 20000
cid=$(jget plr '.status.containerStatuses[0].containerID')
out=$(kubectl patch pod -n "$PODS_NS" plr --subresource resize --type merge \
  -p '{"spec":{"resources":{"requests":{"cpu":"150m","memory":"64Mi"},"limits":{"cpu":"300m","memory":"192Mi"}}}}' 2>&1) \
  && ok "kubectl patch --subresource resize of spec.resources accepted" || fail "resize patch" "$out"
expect_api "status.resources: the new pod-level limits, as applied" 30 plr \
  '.status.resources.limits | "\(.cpu) \(.memory)"' "300m 192Mi"
expect_api "no resize condition left" 20 plr \
  '[.status.conditions[] | select(.type | startswith("PodResize"))] | length' 0
expect_api "status.allocatedResources follow" 5 plr '.status.allocatedResources.cpu' 150m
check_cg "pod cgroup: cfs quota from the new pod-level limit" cpu "$R" cpu.cfs_quota_us 30000
check_cg "pod cgroup: shares from the new pod-level request" cpu "$R" cpu.shares 153
check_cg "pod cgroup: memory limit from the new pod-level limit" memory "$R" memory.limit_in_bytes $((192 * MI))
check_cg "the container without limits follows the pod's memory" memory "$(ctrcg plr burstable app)" \
  memory.limit_in_bytes $((192 * MI))
check_cg "... and its cpu" cpu "$(ctrcg plr burstable app)" cpu.cfs_quota_us 30000
check "resized in place: the same container, no restart" \
  [ "$(jget plr '.status.containerStatuses[0] | "\(.containerID) \(.restartCount)"')" = "$cid 0" ]
resize_completed() {
  kubectl get events -n "$PODS_NS" --field-selector involvedObject.name=plr,reason=ResizeCompleted \
    -o name 2>/dev/null | grep -q .
}
wait_for 10 resize_completed && ok "a ResizeCompleted event" || fail "ResizeCompleted event" "none"

# ---- a static pod's spec.resources ----
put plstatic <<EOF
apiVersion: v1
kind: Pod
metadata: {name: plstatic, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  resources: {limits: {cpu: 100m, memory: 48Mi}}
  containers:
  - name: main
    image: $IMG
    command: [sh, -c, '$SLEEP']
EOF
expect "static pod with pod-level limits Running" 40 plstatic .status.phase Running
expect "static pod: QoS Guaranteed from its pod-level limits" 5 plstatic .status.qosClass Guaranteed
S=$KUBEPODS/pod$(uid_of plstatic)
check_cg "static pod cgroup: memory limit from spec.resources" memory "$S" memory.limit_in_bytes $((48 * MI))
check_cg "static pod cgroup: cfs quota from spec.resources" cpu "$S" cpu.cfs_quota_us 10000
unput plstatic
