#!/usr/bin/env bash
# The container manager on the real containerd (cgroup v1, cgroupfs driver):
# a Guaranteed, a Burstable and a BestEffort pod land in kubepods, burstable and
# besteffort with their limits, read from the cgroup files; node allocatable is
# enforced on kubepods; a pod over its memory limit is OOMKilled and says so;
# the hierarchy survives an agent restart with no container restarted; the
# restarted agent, given kubeletCgroups, moves into it with all its memory
# (one exec, no loop); a removed pod's cgroup goes.
PODS_NS=nanolet-e2e-cgroups
. "$(dirname "$0")/pods_lib.sh"
IMG=localhost/busybox:1.36
CG=${NANOLET_TEST_CGROUP_FS:-/sys/fs/cgroup}
[ -d "$CG/cpu" ] && [ -d "$CG/memory" ] || { fail "cgroup v1" "cpu and memory are needed under $CG"; exit 1; }

# pod_manifest NAME RESOURCES_YAML (indented 4) [COMMAND]
pod_manifest() {
  put "$1" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PODS_NS}
spec:
  restartPolicy: ${RESTART:-Always}
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: $IMG
    command: ["sh", "-c", "${3:-trap 'exit 0' TERM; while :; do sleep 1; done}"]
$2
EOF
}

RESERVED=$((64 * 1024 * 1024))
start_agent --kube-reserved memory=$RESERVED --pod-max-pids 256 || { fail "agent start" ""; exit 1; }

pod_manifest guaranteed '    resources: {limits: {cpu: 250m, memory: 64Mi}}'
pod_manifest burstable '    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 128Mi}}'
pod_manifest besteffort ''
# A second container's limit keeps the pod cgroup's (their sum) above the hog's
# own, so the kernel's OOM hits the hog's cgroup, which the runtime watches: an
# OOM at the pod cgroup (the pause container's pages count there too) shows as
# Error with exit code 137 unless the OOM watcher saw it (docs/RESOURCES.md).
# Its margin is wide: with 16Mi (a pod limit of 32Mi) the OOM hit the pod
# cgroup on a loaded machine. The hog waits a second, as upstream's OOMKiller
# test does, so that containerd's shim watches its cgroup before the kill (a
# kill before that never reaches containerd; oom_watcher.sh covers that case).
RESTART=Never pod_manifest hog "    resources: {limits: {memory: 16Mi}}
  - name: headroom
    image: $IMG
    command: [\"true\"]
    resources: {limits: {memory: 64Mi}}" 'sleep 1; exec dd if=/dev/zero of=/dev/null bs=64M count=1'

for p in guaranteed burstable besteffort; do expect "$p Running" 40 $p .status.phase Running; done
refresh_pods
G=$KUBEPODS/pod$(pod guaranteed .metadata.uid)
B=$KUBEPODS/burstable/pod$(pod burstable .metadata.uid)
E=$KUBEPODS/besteffort/pod$(pod besteffort .metadata.uid)

# ---- the QoS hierarchy and node allocatable ----
check_cg "besteffort QoS cgroup has the minimum shares" cpu "$KUBEPODS/besteffort" cpu.shares 2
burstable_shares() { [ "$(cgfile cpu "$KUBEPODS/burstable" cpu.shares)" = "$1" ]; }
wait_for 5 burstable_shares 102 \
  && ok "burstable QoS shares from its pods' requests (100m -> 102)" \
  || fail "burstable QoS shares" "$(cgfile cpu "$KUBEPODS/burstable" cpu.shares), want 102"
mem_total=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 1024))
page=$(getconf PAGESIZE)
want=$(((mem_total - RESERVED) / page * page)) # the kernel rounds down to pages
check_cg "kubepods memory = capacity - kubeReserved (enforceNodeAllocatable pods)" memory "$KUBEPODS" memory.limit_in_bytes $want
check_cg "kubepods cpu shares from allocatable cpu" cpu "$KUBEPODS" cpu.shares $(($(nproc) * 1024))

# ---- pod cgroups ----
check_cg "Guaranteed: cpu shares from requests" cpu "$G" cpu.shares 256
check_cg "Guaranteed: cfs quota from limits" cpu "$G" cpu.cfs_quota_us 25000
check_cg "Guaranteed: memory limit" memory "$G" memory.limit_in_bytes $((64 * 1024 * 1024))
check_cg "Burstable: cpu shares from requests" cpu "$B" cpu.shares 102
check_cg "Burstable: no cpu limit, no quota" cpu "$B" cpu.cfs_quota_us -1
check_cg "Burstable: memory limit (every container has one)" memory "$B" memory.limit_in_bytes $((128 * 1024 * 1024))
check_cg "BestEffort: minimum shares" cpu "$E" cpu.shares 2
check_cg "podPidsLimit on the pod cgroup" pids "$E" pids.max 256
# The sandbox and the container run in cgroups of their own below the pod's.
for p in "$G" "$B" "$E"; do
  n=$(cat "$CG/memory$p"/*/cgroup.procs 2>/dev/null | wc -l)
  [ "$n" -ge 2 ] && ok "the pod's processes are under $p ($n)" || fail "processes under $p" "$n"
done
[ -z "$(ls -d "$CG/memory$KUBEPODS"/*/pod"$(pod guaranteed .metadata.uid)" 2>/dev/null)" ] \
  && ok "Guaranteed pod only in kubepods itself" || fail "Guaranteed placement" "$(ls -d "$CG/memory$KUBEPODS"/*/pod*)"

# ---- OOMKilled ----
expect "a pod over its memory limit is OOMKilled" 30 hog '.status.containerStatuses[] | select(.name == "main") | .state.terminated.reason' OOMKilled
expect "... and has failed" 5 hog .status.phase Failed

# ---- restart: nothing restarts, the hierarchy is still there ----
before=$(cri ps -o json | jq -r --arg ns "$PODS_NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns) | .id] | sort | join(",")')
stop_agent TERM
# the restarted agent also moves itself into kubeletCgroups
KC_CG=/nanolet-e2e-kubelet
kc_remove() { pods_cleanup; for h in "$CG"/*/; do rmdir "$h${KC_CG#/}" 2>/dev/null; done; true; }
e2e_on_exit kc_remove
start_agent --kube-reserved memory=$RESERVED --pod-max-pids 256 --kubelet-cgroups $KC_CG || fail "agent restart" ""
sleep 4 # a relist, a few syncs and a housekeeping pass
after=$(cri ps -o json | jq -r --arg ns "$PODS_NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns) | .id] | sort | join(",")')
[ -n "$before" ] && [ "$before" = "$after" ] && ok "no container restarted across an agent restart" \
  || fail "containers across a restart" "before $before after $after"
expect "restart count still 0" 5 guaranteed '.status.containerStatuses[0].restartCount' 0
for p in "$G" "$B" "$E"; do
  [ -d "$CG/cpu$p" ] && [ -d "$CG/memory$p" ] && ok "pod cgroup $p kept" || fail "pod cgroup $p" "gone"
done
check_cg "limits kept after restart" memory "$G" memory.limit_in_bytes $((64 * 1024 * 1024))
for c in memory cpu pids; do
  grep -Eq "^[0-9]+:([a-z_]+,)*$c(,[a-z_]+)*:$KC_CG\$" /proc/$AGENT_PID/cgroup \
    && ok "kubeletCgroups: the agent is in $c:$KC_CG" || fail "kubeletCgroups $c" "$(cat /proc/$AGENT_PID/cgroup)"
done
# it started over by exec after the move: its whole memory is charged there
# (the anonymous memory it touched before the move would otherwise stay behind)
kc_rss=$(awk '$1 == "total_rss" {print $2}' "$CG/memory$KC_CG/memory.stat" 2>/dev/null)
anon=$(($(awk '/^RssAnon:/ {print $2}' /proc/$AGENT_PID/status) * 1024))
[ "${kc_rss:-0}" -ge $((anon * 9 / 10)) ] && ok "kubeletCgroups holds the agent's memory (rss $kc_rss of its $anon anonymous bytes)" \
  || fail "kubeletCgroups memory" "cgroup rss $kc_rss, the agent's RssAnon $anon"
[ "$(grep -c "in kubeletCgroups $KC_CG" "$E2E_TMP/agent.log")" = 2 ] && ok "kubeletCgroups: one exec, no loop" \
  || fail "kubeletCgroups starts" "$(grep -c "in kubeletCgroups" "$E2E_TMP/agent.log") starts logged"

# ---- a removed pod's cgroup goes ----
unput besteffort
wait_for 30 test ! -d "$CG/memory$E" && ok "removed pod's cgroup is gone" || fail "removed pod's cgroup" "$CG/memory$E still there"
# (a hybrid host's unified hierarchy included, where runc puts the containers too)
left=$(ls -d "$CG"/*"$E" 2>/dev/null)
[ -z "$left" ] && ok "... from every hierarchy" || fail "cgroup left" "$left"
