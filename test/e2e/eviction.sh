#!/usr/bin/env bash
# The eviction manager on the real containerd and control plane, with a small
# tmpfs as nodefs (the root dir and the pod log dir on it) and short periods
# from the configuration file. Disk pressure: a BestEffort API pod filling its
# emptyDir is evicted (Failed, Evicted, upstream's message, the DisruptionTarget
# condition, one Evicted event annotated starved_resource=ephemeral-storage),
# the Node shows DiskPressure, a BestEffort pod created meanwhile is rejected,
# a Guaranteed pod beside them is untouched, and the pressure clears once the
# volume is gone. Memory pressure: a memory.available threshold just below
# what the node has forces the eviction of the BestEffort pod using memory,
# its Evicted event annotated as upstream's e2e_node specs read it
# (starved_resource memory, offending_containers c, and c's usage as a
# quantity over its request of 0).
# Static pods are critical and never evicted (upstream), hence API pods. Node
# and credential: NANOLET_E2E_EVICT_NODE / NANOLET_E2E_EVICT_KUBECONFIG
# (default nanolet-eviction, minted by the control plane script); namespace:
# NANOLET_E2E_EVICT_NS (default evict-e2e).
PODS_NS=${NANOLET_E2E_EVICT_NS:-evict-e2e}
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_E2E_EVICT_NODE:-nanolet-eviction}
KC=${NANOLET_E2E_EVICT_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
IMG=localhost/busybox:1.36
FS=$E2E_TMP/nodefs
mkdir -p "$FS"
mount -t tmpfs -o size=64m nanolet-evict "$FS" || { fail "tmpfs" "mount failed"; exit 1; }
ROOT=$FS/root
LOGS=$FS/logs
CONF=$E2E_TMP/kubelet.yaml
# The transition period holds a condition after its signal clears. The disk
# phase needs it long enough to apply and check the late pod once the hog's
# volume is gone (5 s lost that race under load).
write_conf() { # write_conf EVICTION_HARD_YAML TRANSITION
  cat >"$CONF" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
podLogsDir: $LOGS
evictionHard: $1
evictionPressureTransitionPeriod: $2
EOC
}
cleanup() {
  api_cleanup
  umount -l "$FS" 2>/dev/null
  [ -z "${ALLOC_ROOT:-}" ] || cgroup_root_remove "$ALLOC_ROOT"
}
e2e_on_exit cleanup
fresh_ns "$PODS_NS"

# apply NAME QOS SCRIPT
apply() {
  local res=""
  [ "$2" = Guaranteed ] && res="resources: {limits: {cpu: 10m, memory: 32Mi, ephemeral-storage: 8Mi}}"
  kubectl apply -f - >/dev/null <<EOP
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 2
  volumes: [{name: scratch, emptyDir: {}}]
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, "$3"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
    $res
EOP
}
api() { kubectl get pod -n "$PODS_NS" "$1" -o jsonpath="$2" 2>/dev/null; }
api_is() { [ "$(api "$1" "$2")" = "$3" ]; }
node_cond() { kubectl get node "$NODE" -o jsonpath="{.status.conditions[?(@.type==\"$1\")].status}" 2>/dev/null; }
node_cond_is() { [ "$(node_cond "$1")" = "$2" ]; }
# The pod's Evicted events as the API server has them (kubectl get events -o json).
evicted_events() {
  kubectl get events -n "$PODS_NS" --field-selector "reason=Evicted,involvedObject.name=$1" -o json 2>/dev/null
}
has_evicted_event() { [ "$(evicted_events "$1" | jq '.items | length')" -ge 1 ]; }
# annotation POD KEY: the key's value on the pod's Evicted event, "<none>" when absent
annotation() { evicted_events "$1" | jq -r --arg k "$2" '.items[0].metadata.annotations[$k] // "<none>"'; }
# The pod's DisruptionTarget condition: "status reason"
disruption() { api "$1" '{.status.conditions[?(@.type=="DisruptionTarget")].status} {.status.conditions[?(@.type=="DisruptionTarget")].reason}'; }

# ---- disk pressure: nodefs.available < 40% of the 64 MiB tmpfs ----
write_conf '{nodefs.available: "40%", memory.available: "1Mi"}' 30s
start_agent --kubeconfig "$KC" --config "$CONF" --node-status-update-frequency 2s \
  || { fail "agent start" ""; exit 1; }
apply guard Guaranteed 'sleep 3600'
apply hog BestEffort 'sleep 2; dd if=/dev/zero of=/scratch/fill bs=1M count=45; sleep 3600'
wait_for 60 api_is guard '{.status.phase}' Running && ok "Guaranteed pod runs" || fail "guard Running" "$(api guard '{.status.phase}')"
if wait_for 40 api_is hog '{.status.reason}' Evicted; then
  ok "BestEffort pod filling its emptyDir is evicted"
  api_is hog '{.status.phase}' Failed && ok "  ... phase Failed" || fail "hog phase" "$(api hog '{.status.phase}')"
  msg=$(api hog '{.status.message}')
  [[ $msg =~ ^"The node was low on resource: ephemeral-storage. Threshold quantity: "[0-9]+[KMG]?i?", available: "[0-9]+[KMG]?i?". " ]] \
    && ok "  ... upstream's message ($msg)" || fail "eviction message" "$msg"
else
  fail "hog evicted" "$(api hog '{.status}')"
fi
wait_for 15 node_cond_is DiskPressure True && ok "Node has DiskPressure" || fail "DiskPressure" "$(node_cond DiskPressure)"
[ "$(disruption hog)" = "True TerminationByKubelet" ] && ok "  ... condition DisruptionTarget (TerminationByKubelet)" \
  || fail "hog DisruptionTarget" "$(api hog '{.status.conditions}')"
if wait_for 10 has_evicted_event hog; then
  n=$(evicted_events hog | jq '.items | length')
  [ "$n" = 1 ] && ok "one Evicted event" || fail "Evicted events" "$n: $(evicted_events hog | jq -c '.items[].message')"
  [ "$(annotation hog starved_resource)" = ephemeral-storage ] && ok "  ... annotated starved_resource=ephemeral-storage" \
    || fail "disk starved_resource" "$(evicted_events hog | jq -c '.items[0].metadata')"
else
  fail "Evicted event" "$(kubectl get events -n "$PODS_NS" 2>&1 | tail -5)"
fi
# (read whole: grep -q would end curl by SIGPIPE, a failure under pipefail)
evictions_is() {
  local m
  m=$(curl -fsS "http://127.0.0.1:$RO_PORT/metrics") && grep -qx "kubelet_evictions{eviction_signal=\"$1\"} $2" <<<"$m"
}
evictions_is nodefs.available 1 && ok "kubelet_evictions{eviction_signal=\"nodefs.available\"} 1" \
  || fail "kubelet_evictions" "$(curl -sS "http://127.0.0.1:$RO_PORT/metrics" | grep evictions)"
apply late BestEffort 'sleep 3600'
if wait_for 15 api_is late '{.status.reason}' Evicted; then
  [[ $(api late '{.status.message}') == "Pod was rejected: The node had condition: [DiskPressure]. " ]] \
    && ok "a pod admitted under disk pressure is rejected" || fail "rejection message" "$(api late '{.status.message}')"
else
  fail "late pod rejected" "$(api late '{.status}')"
fi
wait_for 60 node_cond_is DiskPressure False && ok "DiskPressure clears once the volume is released" \
  || fail "DiskPressure clears" "$(node_cond DiskPressure); df: $(df -h "$FS" | tail -1)"
api_is guard '{.status.phase}' Running && [ "$(api guard '{.status.containerStatuses[0].restartCount}')" = 0 ] \
  && ok "Guaranteed pod untouched" || fail "guard" "$(api guard '{.status}')"
kubectl delete pod -n "$PODS_NS" hog late --grace-period=0 --force >/dev/null 2>&1
stop_agent TERM

# ---- memory pressure: a threshold just under what the node has ----
# as the agent computes it: MemTotal - (root memcg usage - inactive file).
# The suite's other lane runs beside this one and frees or fills memory of
# its own: CI once freed more than a 100 MiB margin and no pressure came, and
# once filled more than it before the eater had started (the eater evicted
# for memory it did not hold, the Guaranteed pod after it). So the margin is
# 1 GiB and the eater takes 1 GiB more: either lane's swing up to that leaves
# one eviction, the eater's. Not more: the threshold's allocatableMemory.available
# twin (below) must stay unmet, which holds while the eater's excess stays
# under what the host's own processes use (MemTotal - avail, 1.5 GiB idle).
total=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) * 1024))
usage=$(cat /sys/fs/cgroup/memory/memory.usage_in_bytes)
inactive=$(awk '$1 == "total_inactive_file" {print $2}' /sys/fs/cgroup/memory/memory.stat)
avail=$(((total - usage + inactive) / 1048576))
write_conf "{memory.available: \"$((avail - 1024))Mi\"}" 5s
start_agent --kubeconfig "$KC" --config "$CONF" --node-status-update-frequency 2s \
  || { fail "agent start" ""; exit 1; }
apply eater BestEffort 'sleep 1; head -c 2048m /dev/zero | tail; sleep 3600'
if wait_for 75 api_is eater '{.status.reason}' Evicted; then
  msg=$(api eater '{.status.message}')
  [[ $msg =~ ^"The node was low on resource: memory. Threshold quantity: ".*"Container c was using ".*"request is 0, has larger consumption of memory. "$ ]] \
    && ok "memory eviction with upstream's message ($msg)" || fail "memory message" "$msg"
  [ "$(disruption eater)" = "True TerminationByKubelet" ] && ok "  ... condition DisruptionTarget (TerminationByKubelet)" \
    || fail "eater DisruptionTarget" "$(api eater '{.status.conditions}')"
  if wait_for 10 has_evicted_event eater; then
    meta=$(evicted_events eater | jq -c '[(.items | length), .items[0].metadata.annotations]')
    [ "$(annotation eater starved_resource)" = memory ] && ok "  ... event annotated starved_resource=memory" \
      || fail "memory starved_resource" "$meta"
    [ "$(annotation eater offending_containers)" = c ] && ok "  ... offending_containers=c" \
      || fail "offending_containers" "$meta"
    # c's usage: one quantity as upstream prints a binary one, over its request of 0
    usage=$(annotation eater offending_containers_usage)
    [[ $usage =~ ^[1-9][0-9]*(Ki|Mi|Gi)?$ ]] && ok "  ... offending_containers_usage=$usage" \
      || fail "offending_containers_usage" "$meta"
    # the message names the same usage
    [[ $msg == *"Container c was using $usage, request is 0"* ]] && ok "  ... the usage the message gives" \
      || fail "usage in message" "$usage vs $msg"
    [ "$(evicted_events eater | jq '.items | length')" = 1 ] && ok "  ... one Evicted event" || fail "memory Evicted events" "$meta"
  else
    fail "memory Evicted event" "$(kubectl get events -n "$PODS_NS" 2>&1 | tail -5)"
  fi
else
  fail "eater evicted" "$(api eater '{.status}'); $(grep -i evict "$E2E_TMP/agent.log" | tail -3)"
fi
grep -q "node condition MemoryPressure is now True" "$E2E_TMP/agent.log" && ok "MemoryPressure reported" \
  || fail "MemoryPressure" "$(grep -i pressure "$E2E_TMP/agent.log" | tail -3)"
evictions_is memory.available 1 && ok "kubelet_evictions{eviction_signal=\"memory.available\"} 1" \
  || fail "kubelet_evictions (memory)" "$(curl -sS "http://127.0.0.1:$RO_PORT/metrics" | grep evictions)"
api_is guard '{.status.phase}' Running && ok "Guaranteed pod still untouched" || fail "guard after memory" "$(api guard '{.status}')"
kubectl delete pod -n "$PODS_NS" eater --grace-period=0 --force >/dev/null 2>&1
stop_agent TERM

# ---- allocatable memory: the pods cgroup short while the node is not ----
# enforceNodeAllocatable "pods" (the default) gives the hard memory.available
# threshold an allocatableMemory.available twin, as upstream: kubeReserved
# leaves the pods 300 MiB, and a pod whose processes take 10 MiB more each
# second (each a tail that holds what it read) passes the 100 MiB threshold
# ten seconds before the limit. The agent has a cgroup root of its own: the
# 300 MiB limit is on its kubepods alone.
write_conf '{memory.available: "100Mi"}' 5s
echo "kubeReserved: {memory: \"$((total / 1048576 - 300))Mi\"}" >>"$CONF"
ALLOC_ROOT=/nanolet-e2e-evict-alloc
cgroup_root_make "$ALLOC_ROOT"
start_agent --kubeconfig "$KC" --config "$CONF" --node-status-update-frequency 2s --cgroup-root "$ALLOC_ROOT" \
  || { fail "agent start" ""; exit 1; }
kubectl apply -f - >/dev/null <<EOP
apiVersion: v1
kind: Pod
metadata: {name: filler, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, "sleep 2; i=0; while [ \$i -lt 40 ]; do { head -c 10m /dev/zero; sleep 3600; } | tail & i=\$((i+1)); sleep 1; done; sleep 3600"]
EOP
if wait_for 90 api_is filler '{.status.reason}' Evicted; then
  msg=$(api filler '{.status.message}')
  [[ $msg =~ ^"The node was low on resource: memory. Threshold quantity: 100Mi, available: " ]] \
    && ok "the pods cgroup short of memory: evicted for memory ($msg)" || fail "allocatable message" "$msg"
else
  fail "filler evicted" "$(api filler '{.status.phase}'); kubepods: limit $(cat /sys/fs/cgroup/memory$ALLOC_ROOT/kubepods/memory.limit_in_bytes), usage $(cat /sys/fs/cgroup/memory$ALLOC_ROOT/kubepods/memory.usage_in_bytes); $(grep -i evict "$E2E_TMP/agent.log" | tail -3)"
fi
evictions_is allocatableMemory.available 1 && ok "kubelet_evictions{eviction_signal=\"allocatableMemory.available\"} 1" \
  || fail "kubelet_evictions (allocatable)" "$(curl -sS "http://127.0.0.1:$RO_PORT/metrics" | grep evictions)"
grep -q "threshold allocatableMemory.available hard met" "$E2E_TMP/agent.log" \
  && ok "the agent log names allocatableMemory.available" || fail "allocatable log" "$(grep -i threshold "$E2E_TMP/agent.log" | tail -3)"
kubectl delete pod -n "$PODS_NS" filler --grace-period=0 --force >/dev/null 2>&1
api_pods_clear
cgroup_root_remove "$ALLOC_ROOT"
