#!/usr/bin/env bash
# In-place pod resize (InPlacePodVerticalScaling) end to end, against the test
# control plane and the real containerd, everything as a user does it:
# `kubectl patch pod P --subresource resize` changes the cpu and memory of a
# running container with no restart (restartCount 0, the same container ID):
# the new values are in the container's cgroup files (cpu quota and shares,
# memory limit; v1 or v2 names) and in status.containerStatuses[].resources and
# allocatedResources, and no resize condition is left; a container whose
# resizePolicy says RestartContainer for memory restarts exactly once; a memory
# limit below the container's usage is PodResizeInProgress/Error, undone by a
# resize back; a resize
# that does not fit beside another pod is PodResizePending/Deferred and changes
# nothing until that pod goes, then it is done; a resize above the node's
# allocatable is refused by the API server (v1.36's PodResizeValidator: the
# kubelet never sees it); an agent restart keeps the resized values, restarts
# nothing and writes nothing again. A running (non-sidecar) init container is
# resized the same way (InPlacePodVerticalScalingInitContainers, which the
# Node declares): its cgroup, the pod cgroup and initContainerStatuses change,
# nothing restarts; once it has completed, a resize changes its allocation
# alone.
PODS_NS=nanolet-e2e-resize
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_TEST_RESIZE_NODE:-nl-resize}
KC=$(node_kubeconfig "$NODE")
IMG=localhost/busybox:1.36
CG=${NANOLET_TEST_CGROUP_FS:-/sys/fs/cgroup}

e2e_on_exit api_cleanup

# a container's status, regular or init
cs() { echo "((.status.containerStatuses // []) + (.status.initContainerStatuses // []))[] | select(.name == \"$1\")"; }
resize() { # resize POD PATCH: the resize subresource, as a user patches it
  kubectl patch pod -n "$PODS_NS" "$1" --subresource resize --type strategic -p "$2" 2>&1
}
[ -f "$CG/cgroup.controllers" ] && CG_V2=1
[ -n "${CG_V2:-}" ] || [ -d "$CG/cpu" ] || { fail "cgroups" "no cpu controller under $CG"; exit 1; }
# A cgroup's directory for a controller (v1; one tree on v2).
cgdir() { if [ -n "${CG_V2:-}" ]; then echo "$CG$2"; else echo "$CG/$1$2"; fi; }
# The container's cgroup (cgroupfs driver: <pod cgroup>/<container id>).
ccg() { # ccg POD CONTAINER CONTROLLER
  local uid cid
  uid=$(jget "$1" .metadata.uid) cid=$(jget "$1" "$(cs "$2").containerID")
  ls -d "$(cgdir "$3" "$KUBEPODS")"/*/"pod$uid/${cid#containerd://}" 2>/dev/null | head -1
}
# cpu quota (us per 100 ms period), cpu shares (weight on v2), memory limit
quota_in() { if [ -f "$1/cpu.max" ]; then cut -d' ' -f1 "$1/cpu.max"; else cat "$1/cpu.cfs_quota_us"; fi 2>/dev/null; }
quota_of() { quota_in "$(ccg "$1" "$2" cpu)"; }
shares_of() { local d; d=$(ccg "$1" "$2" cpu)
  if [ -f "$d/cpu.weight" ]; then cat "$d/cpu.weight"; else cat "$d/cpu.shares"; fi 2>/dev/null; }
mem_of() { local d; d=$(ccg "$1" "$2" memory)
  if [ -f "$d/memory.max" ]; then cat "$d/memory.max"; else cat "$d/memory.limit_in_bytes"; fi 2>/dev/null; }
shares() { # cpu.shares for millicores (and cpu.weight on v2)
  local s=$(($1 * 1024 / 1000)); [ -n "${CG_V2:-}" ] && s=$((1 + ((s - 2) * 9999) / 262142)); echo $s; }
check_cg() { # check_cg NAME GOT WANT
  [ "$2" = "$3" ] && ok "$1 ($3)" || fail "$1" "got '$2', want $3"
}

join_agent "$KC" || { fail "agent start" ""; exit 1; }
wait_for 20 node_ready || fail "node Ready" "$NODE is not Ready"

api_pod rs 1 "containers:" \
  "- name: c1" \
  "  image: $IMG" \
  "  command: [sh, -c, 'trap \"exit 0\" TERM; while :; do sleep 1; done']" \
  "  resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 200m, memory: 64Mi}}" \
  "  resizePolicy: [{resourceName: cpu, restartPolicy: NotRequired}, {resourceName: memory, restartPolicy: NotRequired}]" \
  "- name: c2" \
  "  image: $IMG" \
  "  command: [sh, -c, 'trap \"exit 0\" TERM; while :; do sleep 1; done']" \
  "  resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 200m, memory: 64Mi}}" \
  "  resizePolicy: [{resourceName: memory, restartPolicy: RestartContainer}]"
expect_api "pod Running" 40 rs .status.phase Running
expect_api "c1 reports its resources (the API server's sign of resize support)" 10 rs \
  "$(cs c1).resources.limits.cpu" 200m
check "allocatedResources are the requests" \
  [ "$(jget rs "$(cs c1).allocatedResources | \"\(.cpu) \(.memory)\"")" = "100m 32Mi" ]
check_cg "c1 cgroup before: cpu quota" "$(quota_of rs c1)" 20000
cid1=$(jget rs "$(cs c1).containerID") cid2=$(jget rs "$(cs c2).containerID")

# --- in place: cpu and memory of c1, no restart -------------------------------------
out=$(resize rs '{"spec":{"containers":[{"name":"c1","resources":{"requests":{"cpu":"150m","memory":"48Mi"},"limits":{"cpu":"300m","memory":"96Mi"}}}]}}')
check "kubectl patch --subresource resize accepted" grep -q "patched" <<<"$out"
expect_api "c1 status.resources: the new cpu limit" 30 rs "$(cs c1).resources.limits.cpu" 300m
expect_api "c1 status.resources: the new memory limit" 5 rs "$(cs c1).resources.limits.memory" 96Mi
expect_api "c1 status.resources: the new requests" 5 rs "$(cs c1).resources.requests | \"\(.cpu) \(.memory)\"" "150m 48Mi"
expect_api "c1 allocatedResources" 5 rs "$(cs c1).allocatedResources | \"\(.cpu) \(.memory)\"" "150m 48Mi"
expect_api "no resize condition left" 10 rs '[.status.conditions[] | select(.type | startswith("PodResize"))] | length' 0
check "c1 not restarted (restartCount 0, same container)" \
  [ "$(jget rs "$(cs c1) | \"\(.restartCount) \(.containerID)\"")" = "0 $cid1" ]
check_cg "c1 cgroup: cpu quota" "$(quota_of rs c1)" 30000
check_cg "c1 cgroup: cpu shares" "$(shares_of rs c1)" "$(shares 150)"
check_cg "c1 cgroup: memory limit" "$(mem_of rs c1)" $((96 * 1024 * 1024))
uid=$(jget rs .metadata.uid)
check_cg "pod cgroup: cpu quota is the sum of the limits" "$(quota_in "$(cgdir cpu "$KUBEPODS/burstable/pod$uid")")" 50000
check "ResizeStarted and ResizeCompleted events" bash -c "'$NANOLET_TEST_KUBECTL' get events -n '$PODS_NS' \
  --field-selector involvedObject.name=rs -o json | jq -e '[.items[].reason] | index(\"ResizeStarted\") and index(\"ResizeCompleted\")' >/dev/null"

# --- RestartContainer for memory: exactly one restart of c2 -------------------------
resize rs '{"spec":{"containers":[{"name":"c2","resources":{"requests":{"memory":"40Mi"},"limits":{"memory":"80Mi"}}}]}}' >/dev/null
expect_api "c2 restarted once for its memory resize" 30 rs "$(cs c2).restartCount" 1
expect_api "c2 running again with the new memory limit" 20 rs "$(cs c2) | \"\(.state | keys[0]) \(.resources.limits.memory)\"" "running 80Mi"
sleep 3
check "c2 restarted exactly once" [ "$(jget rs "$(cs c2).restartCount")" = 1 ]
check "c2 is a new container" [ "$(jget rs "$(cs c2).containerID")" != "$cid2" ]
check_cg "c2 cgroup: memory limit" "$(mem_of rs c2)" $((80 * 1024 * 1024))
check "c1 untouched by c2's restart" [ "$(jget rs "$(cs c1) | \"\(.restartCount) \(.containerID)\"")" = "0 $cid1" ]
cid2=$(jget rs "$(cs c2).containerID")

# --- a running init container: in place, no restart -------------------------------
check "the Node declares InPlacePodVerticalScalingInitContainers" bash -c "'$NANOLET_TEST_KUBECTL' get node '$NODE' \
  -o json | jq -e '.status.declaredFeatures | index(\"InPlacePodVerticalScalingInitContainers\")' >/dev/null"
api_pod ri 1 "initContainers:" \
  "- name: i1" \
  "  image: $IMG" \
  "  command: [sh, -c, 'trap \"exit 1\" TERM; while [ ! -e /tmp/done ]; do sleep 1; done']" \
  "  resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 200m, memory: 64Mi}}" \
  "containers:" \
  "- name: c" \
  "  image: $IMG" \
  "  command: [sh, -c, 'trap \"exit 0\" TERM; while :; do sleep 1; done']" \
  "  resources: {requests: {cpu: 50m, memory: 16Mi}, limits: {cpu: 100m, memory: 32Mi}}"
expect_api "init container i1 running" 40 ri "$(cs i1).state | keys[0]" running
expect_api "i1 reports its resources" 10 ri "$(cs i1).resources.limits.cpu" 200m
check_cg "i1 cgroup before: cpu quota" "$(quota_of ri i1)" 20000
ri_uid=$(jget ri .metadata.uid) icid=$(jget ri "$(cs i1).containerID")
ri_pod=$(cgdir cpu "$KUBEPODS/burstable/pod$ri_uid")
check_cg "pod cgroup before: cpu quota is the init container's (the larger)" "$(quota_in "$ri_pod")" 20000
out=$(resize ri '{"spec":{"initContainers":[{"name":"i1","resources":{"requests":{"cpu":"150m","memory":"48Mi"},"limits":{"cpu":"300m","memory":"96Mi"}}}]}}')
check "kubectl patch --subresource resize of an init container accepted" grep -q "patched" <<<"$out"
expect_api "i1 status.resources: the new limits" 30 ri "$(cs i1).resources.limits | \"\(.cpu) \(.memory)\"" "300m 96Mi"
expect_api "i1 status.resources: the new requests" 5 ri "$(cs i1).resources.requests | \"\(.cpu) \(.memory)\"" "150m 48Mi"
expect_api "i1 allocatedResources" 5 ri "$(cs i1).allocatedResources | \"\(.cpu) \(.memory)\"" "150m 48Mi"
expect_api "no resize condition left" 10 ri '[.status.conditions[] | select(.type | startswith("PodResize"))] | length' 0
check "i1 not restarted (restartCount 0, same container, still running)" \
  [ "$(jget ri "$(cs i1) | \"\(.restartCount) \(.containerID) \(.state | keys[0])\"")" = "0 $icid running" ]
check_cg "i1 cgroup: cpu quota" "$(quota_of ri i1)" 30000
check_cg "i1 cgroup: cpu shares" "$(shares_of ri i1)" "$(shares 150)"
check_cg "i1 cgroup: memory limit" "$(mem_of ri i1)" $((96 * 1024 * 1024))
check_cg "pod cgroup: cpu quota follows the init container" "$(quota_in "$ri_pod")" 30000
resize ri '{"spec":{"initContainers":[{"name":"i1","resources":{"requests":{"cpu":"100m","memory":"32Mi"},"limits":{"cpu":"120m","memory":"40Mi"}}}]}}' >/dev/null
expect_api "i1 shrunk: status.resources" 30 ri "$(cs i1).resources.limits | \"\(.cpu) \(.memory)\"" "120m 40Mi"
check_cg "i1 cgroup: cpu quota shrunk" "$(quota_of ri i1)" 12000
check_cg "i1 cgroup: memory limit shrunk" "$(mem_of ri i1)" $((40 * 1024 * 1024))
check_cg "pod cgroup: cpu quota shrunk with it" "$(quota_in "$ri_pod")" 12000
check "i1 still the same running container" \
  [ "$(jget ri "$(cs i1) | \"\(.restartCount) \(.containerID) \(.state | keys[0])\"")" = "0 $icid running" ]
# completed: its allocation (and so its status) changes, nothing runs again
kubectl exec -n "$PODS_NS" ri -c i1 -- touch /tmp/done
expect_api "i1 completed, c runs" 40 ri "\"\($(cs i1) | .state | keys[0]) \($(cs c) | .state | keys[0])\"" "terminated running"
ccid=$(jget ri "$(cs c).containerID")
out=$(resize ri '{"spec":{"initContainers":[{"name":"i1","resources":{"limits":{"cpu":"140m"}}}]}}')
check "a completed init container's resize accepted" grep -q "patched" <<<"$out"
expect_api "completed i1: status.resources is its new allocation" 30 ri "$(cs i1).resources.limits.cpu" 140m
expect_api "... no resize condition left" 10 ri '[.status.conditions[] | select(.type | startswith("PodResize"))] | length' 0
check "... nothing ran again (i1 terminated, not restarted; c the same)" \
  [ "$(jget ri "\"\($(cs i1) | \"\(.restartCount) \(.state | keys[0])\") \($(cs c).containerID)\"")" = "0 terminated $ccid" ]
kubectl delete pod -n "$PODS_NS" ri --grace-period=1 >/dev/null

# --- a memory limit below what the container uses: Error, nothing changes ----------
resize rs '{"spec":{"containers":[{"name":"c1","resources":{"requests":{"memory":"8Ki"},"limits":{"memory":"10Ki"}}}]}}' >/dev/null
expect_api "a memory limit below the usage: PodResizeInProgress Error" 20 rs \
  '.status.conditions[] | select(.type == "PodResizeInProgress") | .reason' Error
check "... saying so" grep -q "memory limit (10240) below current usage" \
  <<<"$(jget rs '.status.conditions[] | select(.type == "PodResizeInProgress") | .message')"
check_cg "... and the limit stays" "$(mem_of rs c1)" $((96 * 1024 * 1024))
resize rs '{"spec":{"containers":[{"name":"c1","resources":{"requests":{"memory":"48Mi"},"limits":{"memory":"96Mi"}}}]}}' >/dev/null
expect_api "reverted: the condition goes" 20 rs '[.status.conditions[] | select(.type | startswith("PodResize"))] | length' 0
check "c1 still not restarted" [ "$(jget rs "$(cs c1) | \"\(.restartCount) \(.containerID)\"")" = "0 $cid1" ]

# --- above the node's allocatable: the API server refuses ---------------------------
out=$(resize rs '{"spec":{"containers":[{"name":"c1","resources":{"requests":{"cpu":"64"},"limits":{"cpu":"64"}}}]}}')
check "more cpu than the node has: refused (node didn't have enough allocatable)" \
  grep -q "enough allocatable" <<<"$out"
check "... and nothing changed" [ "$(jget rs "$(cs c1).resources.limits.cpu") $(quota_of rs c1)" = "300m 30000" ]

# --- does not fit now: Deferred until room is made ----------------------------------
alloc=$(kubectl get node "$NODE" -o json | jq -r '.status.allocatable.cpu')
case $alloc in *m) alloc=${alloc%m} ;; *) alloc=$((alloc * 1000)) ;; esac
big=$((alloc - 350)) # rs holds 250m: 100m is left, c1 asks for 350m more
api_pod big 1 "containers: [{name: c, image: $IMG, command: [sleep, '3600'], resources: {requests: {cpu: ${big}m}}}]"
expect_api "a pod holding the rest of the node's cpu runs" 40 big .status.phase Running
resize rs '{"spec":{"containers":[{"name":"c1","resources":{"requests":{"cpu":"500m"},"limits":{"cpu":"500m"}}}]}}' >/dev/null
expect_api "PodResizePending Deferred" 20 rs '.status.conditions[] | select(.type == "PodResizePending") | .reason' Deferred
check "Deferred says why (cpu)" grep -q "enough resource: cpu" \
  <<<"$(jget rs '.status.conditions[] | select(.type == "PodResizePending") | .message')"
check "Deferred: nothing changed" [ "$(jget rs "$(cs c1).resources.limits.cpu") $(quota_of rs c1)" = "300m 30000" ]
kubectl delete pod -n "$PODS_NS" big --wait=false >/dev/null
expect_api "once the other pod is gone, the resize is done" 40 rs "$(cs c1).resources.limits.cpu" 500m
expect_api "... and the condition is gone" 10 rs '[.status.conditions[] | select(.type | startswith("PodResize"))] | length' 0
check_cg "c1 cgroup: cpu quota after the deferred resize" "$(quota_of rs c1)" 50000

# --- an agent restart keeps everything as it is -------------------------------------
check "the allocation checkpoint is under the root dir" test -s "$ROOT/pod_resources_state"
before=$(jget rs '[.status.containerStatuses[] | "\(.name) \(.restartCount) \(.containerID) \(.resources.limits.cpu) \(.resources.limits.memory)"] | join(";")')
stop_agent
start_agent --config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --node-ip "$NODE_IP" || fail "agent restart" ""
sleep 5
wait_for 20 node_ready
after=$(jget rs '[.status.containerStatuses[] | "\(.name) \(.restartCount) \(.containerID) \(.resources.limits.cpu) \(.resources.limits.memory)"] | join(";")')
check "after an agent restart: same containers, no restart, the resized values" [ "$after" = "$before" ]
check_cg "after an agent restart: c1 cpu quota" "$(quota_of rs c1)" 50000
check_cg "after an agent restart: c2 memory limit" "$(mem_of rs c2)" $((80 * 1024 * 1024))
check "after an agent restart: no UpdateContainerResources again" \
  bash -c "! tail -n +\$(grep -n 'all managers stopped' '$E2E_TMP/agent.log' | tail -1 | cut -d: -f1) '$E2E_TMP/agent.log' | grep -q 'resized in place'"

