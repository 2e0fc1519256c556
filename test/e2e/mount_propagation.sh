#!/usr/bin/env bash
# Mount propagation, as upstream's kubelet gives it: at its start nanolet
# makes its root directory a shared mount (bind-mounted on itself when it is
# not on one; `findmnt` shows it), so that under it a Bidirectional mount's
# new mounts reach the host and the host's reach a HostToContainer mount.
# Three static pods share a hostPath in the root dir: "master"
# (Bidirectional, privileged) mounts a tmpfs there, which the host and
# "slave" (HostToContainer) see; the host mounts one, which master and slave
# see; "private" (None) sees neither, and its own tmpfs reaches nobody. The
# runtime's mounts carry the propagation the pods ask for.
PODS_NS=nanolet-e2e-propagation
. "$(dirname "$0")/pods_lib.sh"
IMG=localhost/busybox:1.36
SHARED=$ROOT/propagation

prop_pod() { # prop_pod NAME PROPAGATION PRIVILEGED (mount(8) in the pod needs it)
  put "$1" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: $IMG
    command: [sh, -c, 'mkdir -p /mnt/test/$1; sleep 3600']
    securityContext: {privileged: $3}
    volumeMounts: [{name: shared, mountPath: /mnt/test, mountPropagation: $2}]
  volumes: [{name: shared, hostPath: {path: $SHARED, type: DirectoryOrCreate}}]
EOF
}
cid() { pod_containers "$1-$NODE" | jq -r '[.[] | select(.state == "CONTAINER_RUNNING") | .id][0] // ""'; }
running() { [ -n "$(cid "$1")" ]; }
inside() { local id; id=$(cid "$1"); shift; [ -n "$id" ] && cri exec "$id" "$@" 2>&1; }
# sees POD NAME: POD reads NAME's file through its mount.
sees() { [ "$(inside "$1" cat "/mnt/test/$2/file")" = "$2" ]; }

unmount_all() {
  local m
  for m in master private host; do umount -l "$SHARED/$m" 2>/dev/null; done
  pods_cleanup
}
e2e_on_exit unmount_all

start_agent || { fail "agent start" ""; exit 1; }
prop=$(findmnt -n -o PROPAGATION --target "$ROOT" 2>&1)
[[ $prop == shared* ]] && ok "the root dir is on a shared mount at start ($prop)" ||
  fail "rshared root" "findmnt says: $prop"

prop_pod master Bidirectional true
prop_pod slave HostToContainer false
prop_pod private None true
for p in master slave private; do
  if wait_for 60 running "$p"; then ok "pod $p runs"
  else fail "pod $p" "$(grep -E "$p" "$E2E_TMP/agent.log" | tail -3)"; fi
done
modes=$(for p in master slave private; do cri inspect "$(cid "$p")" |
  jq -r '.status.mounts[]? | select(.containerPath == "/mnt/test") | .propagation'; done | tr '\n' ' ')
[ "$modes" = "PROPAGATION_BIDIRECTIONAL PROPAGATION_HOST_TO_CONTAINER PROPAGATION_PRIVATE " ] &&
  ok "the runtime's mounts carry the propagation asked for: $modes" || fail "CRI propagation" "$modes"

# Each pod mounts a tmpfs in its own directory; the host one of its own.
for p in master private; do
  out=$(inside "$p" sh -c "mount -t tmpfs e2e-$p /mnt/test/$p && echo $p > /mnt/test/$p/file")
  [ -z "$out" ] || fail "mount in $p" "$out"
done
mkdir -p "$SHARED/host"
mount -t tmpfs e2e-host "$SHARED/host" && echo host >"$SHARED/host/file"

[ "$(cat "$SHARED/master/file" 2>&1)" = master ] &&
  ok "the host sees the tmpfs the Bidirectional pod mounted" ||
  fail "master -> host" "$(cat "$SHARED/master/file" 2>&1)"
check "the HostToContainer pod sees the Bidirectional pod's mount" sees slave master
check "the HostToContainer pod sees the host's mount" sees slave host
check "the Bidirectional pod sees the host's mount" sees master host
sees private master && fail "private" "sees master's mount" ||
  ok "the private pod does not see the Bidirectional pod's mount"
sees private host && fail "private" "sees the host's mount" || ok "the private pod does not see the host's"
[ -e "$SHARED/private/file" ] && fail "private -> host" "the host sees the private pod's mount" ||
  ok "the host does not see the private pod's mount"
sees slave private && fail "private -> slave" "the slave sees it" ||
  ok "nor does the HostToContainer pod"
