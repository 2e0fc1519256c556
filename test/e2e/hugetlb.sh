#!/usr/bin/env bash
# A pod's hugetlb limits on the kernel (upstream's ResourceConfigForPod with
# maybeSetHugetlb): its cgroup gets, for each of the node's huge page sizes,
# the pod's hugepages-<size> request, 0 for a size it does not ask for.
#
# A cgroup v1 host may mount no hugetlb hierarchy (this machine's does not;
# the kernel has the controller): the script then runs itself in a mount
# namespace of its own whose /sys/fs/cgroup has the host's hierarchies again
# and the hugetlb one. The hierarchy is the kernel's, mounted only there, but
# while it exists every process's /proc/PID/cgroup lists it, and a runtime
# that loads a new container's cgroups from there (containerd's runc shim)
# finds no mount for it and keeps no cgroup: that container has no stats for
# its life. So the test runs alone (meson suite e2e-alone; tools/test.sh runs
# it after the other lanes), and it ends only once the kernel has dropped the
# hierarchy: the kernel does so at the last unmount only when no cgroup is
# left in it, and one just removed may still be dying then.
set -u
hugetlb_hierarchy() { awk '$1 == "hugetlb" {print $2}' /proc/cgroups; }
if [ ! -f /sys/fs/cgroup/cgroup.controllers ] && [ ! -d /sys/fs/cgroup/hugetlb ] &&
  [ -z "${E2E_HUGETLB_NS:-}" ]; then
  [ "$(hugetlb_hierarchy)" = 0 ] ||
    { echo "FAIL: a hugetlb hierarchy is there already, not mounted under /sys/fs/cgroup"; exit 1; }
  env E2E_HUGETLB_NS=1 unshare -m --propagation private bash "$0" "$@"
  rc=$?
  # (the kernel drops it after the unmount, not at once: 5 s for that, then
  # mounted again, emptied and unmounted, a few times)
  dropped() { for _ in $(seq 50); do [ "$(hugetlb_hierarchy)" = 0 ] && return 0; sleep 0.1; done; return 1; }
  for _ in 1 2 3 4 5; do
    dropped && exit "$rc"
    unshare -m --propagation private sh -c 'd=$(mktemp -d) && mount -t cgroup -o hugetlb hugetlb "$d" &&
      find "$d" -mindepth 1 -depth -type d -exec rmdir {} + ; umount "$d"; rmdir "$d"'
  done
  echo "FAIL: the hugetlb hierarchy is left in the kernel (/proc/cgroups: $(hugetlb_hierarchy))"
  exit 1
fi
if [ -n "${E2E_HUGETLB_NS:-}" ]; then
  # name (under /sys/fs/cgroup), type and options of each hierarchy, then
  # the same again on a tmpfs of this namespace's, with hugetlb
  mapfile -t HIER < <(awk '$2 ~ "^/sys/fs/cgroup/" && ($3 == "cgroup" || $3 == "cgroup2") {
    n = split($4, o, ","); opts = ""
    for (i = 1; i <= n; i++) if (o[i] !~ /^(rw|relatime|nosuid|nodev|noexec|release_agent=.*)$/) opts = opts (opts ? "," : "") o[i]
    sub("^/sys/fs/cgroup/", "", $2); print $2 " " $3 " " (opts ? opts : "-") }' /proc/self/mounts)
  mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup || { echo "FAIL: tmpfs on /sys/fs/cgroup"; exit 1; }
  for h in "${HIER[@]}" "hugetlb cgroup hugetlb"; do
    read -r name type opts <<<"$h"
    mkdir -p "/sys/fs/cgroup/$name"
    if [ "$opts" = - ]; then mount -t "$type" "$name" "/sys/fs/cgroup/$name"
    else mount -t "$type" -o "$opts" "$name" "/sys/fs/cgroup/$name"; fi ||
      { echo "FAIL: mount $type $opts on /sys/fs/cgroup/$name"; exit 1; }
  done
fi
PODS_NS=nanolet-e2e-hugetlb
. "$(dirname "$0")/pods_lib.sh"
IMG=localhost/busybox:1.36
ROOT_CG=/nanolet-e2e-hugetlb
UID_=5e2e0000-0000-4000-8000-00000000cafe
cleanup() {
  pods_cleanup
  cgroup_root_remove "$ROOT_CG"
}
e2e_on_exit cleanup

# the node's page sizes as the controller names them: 2048kB -> 2MB
sizes=()
for d in /sys/kernel/mm/hugepages/hugepages-*kB; do
  kb=${d##*hugepages-}; kb=${kb%kB}
  if [ $((kb % 1048576)) = 0 ]; then sizes+=("$((kb / 1048576))GB")
  elif [ $((kb % 1024)) = 0 ]; then sizes+=("$((kb / 1024))MB")
  else sizes+=("${kb}KB"); fi
done
[[ " ${sizes[*]} " == *" 2MB "* ]] || { fail "page sizes" "no 2 MiB huge pages on this kernel: ${sizes[*]}"; exit 1; }
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  POD_CG=/sys/fs/cgroup$ROOT_CG/kubepods/burstable/pod$UID_
  limit() { cat "$POD_CG/hugetlb.$1.max" 2>/dev/null; }
else
  POD_CG=/sys/fs/cgroup/hugetlb$ROOT_CG/kubepods/burstable/pod$UID_
  limit() { cat "$POD_CG/hugetlb.$1.limit_in_bytes" 2>/dev/null; }
fi

cgroup_root_make "$ROOT_CG"
start_agent --cgroup-root "$ROOT_CG" || { fail "agent start" ""; exit 1; }
put huge <<EOF
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: $PODS_NS, uid: $UID_}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: $IMG
    command: [sleep, "3600"]
    resources: {limits: {memory: 64Mi, hugepages-2Mi: 6Mi}}
EOF
expect "a pod asking for 6Mi of 2 MiB pages runs" 30 huge .status.phase Running
for s in "${sizes[@]}"; do
  want=0
  [ "$s" = 2MB ] && want=$((6 << 20))
  if [ "$(limit "$s")" = "$want" ]; then ok "its cgroup's hugetlb.$s limit is $want"
  else fail "hugetlb.$s" "$POD_CG: $(limit "$s"), want $want"; fi
done
