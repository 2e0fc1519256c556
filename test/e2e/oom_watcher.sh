#!/usr/bin/env bash
# The OOM watcher on the real containerd and kernel: a container that goes past
# its memory limit is OOM-killed by the kernel; its status says OOMKilled (exit
# code 137), and the agent read the kill from /dev/kmsg (the victim's memory
# cgroup and process). A memory cgroup's OOM is no system OOM: upstream records
# SystemOOM on the node only when the whole machine ran out (unit test
# managers_oom), so none is recorded here. Skipped checks fail: without a
# readable /dev/kmsg the agent must say so once at start.
PODS_NS=shutdown-e2e-oom
. "$(dirname "$0")/pods_lib.sh"
IMG=localhost/busybox:1.36
CFG=$E2E_TMP/config.yaml
cat >"$CFG" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# /pods on the read-only port without an API server
authentication: {webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
EOF
start_agent --config "$CFG" -v 2 || { fail "agent start" ""; exit 1; }
if grep -q 'OOM watcher: cannot read' "$E2E_TMP/agent.log"; then
  fail "/dev/kmsg" "$(grep 'OOM watcher' "$E2E_TMP/agent.log")"
  exit 1
fi
grep -q 'OOM watcher: reading /dev/kmsg' "$E2E_TMP/agent.log" && ok "the watcher reads /dev/kmsg" \
  || fail "watcher" "$(grep -i oom "$E2E_TMP/agent.log")"

# dd's 64 MiB buffer does not fit in 16 MiB.
put hog <<EOF
apiVersion: v1
kind: Pod
metadata: {name: hog, namespace: $PODS_NS}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: $IMG
    command: [dd, if=/dev/zero, of=/dev/null, bs=64M, count=1]
    resources: {limits: {memory: 16Mi}}
EOF
expect "the container is OOMKilled" 90 hog '.status.containerStatuses[0].state.terminated.reason' OOMKilled
expect "exit code 137" 5 hog '.status.containerStatuses[0].state.terminated.exitCode' 137
cid=$(pod hog '.status.containerStatuses[0].containerID' | sed 's|^containerd://||')
seen() { grep -q "OOM kill: process dd (pid [0-9]*) in .*$cid.*(CONSTRAINT_MEMCG)" "$E2E_TMP/agent.log"; }
wait_for 10 seen && ok "the kernel's OOM kill of dd, read from /dev/kmsg, names the container's cgroup" \
  || fail "kmsg" "$(grep 'OOM kill' "$E2E_TMP/agent.log" || echo none) (container $cid)"
grep -q 'SystemOOM' "$E2E_TMP/agent.log" && fail "no SystemOOM for a cgroup's limit" "$(grep SystemOOM "$E2E_TMP/agent.log")" \
  || ok "no SystemOOM for a cgroup's limit (as upstream)"
