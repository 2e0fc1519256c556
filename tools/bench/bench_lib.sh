# shellcheck shell=bash
# Shared by the benchmark scripts (sourced).

# free_port: a TCP port free now and outside the ephemeral range (benches never
# take the kubelet's well-known ports, which another agent on the machine may
# hold).
BENCH_FREE_PORT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../testenv" && pwd)/free-port.py
free_port() { "$BENCH_FREE_PORT"; }

# wait_until SECONDS CMD...: polls CMD every 200 ms; 1 when time ran out.
wait_until() {
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.2; done
}

# bench_pods DIR N NS: DIR's manifests replaced by N idle busybox pods,
# bench-1 .. bench-N in namespace NS.
bench_pods() {
  rm -f "$1"/*.yaml
  for i in $(seq 1 "$2"); do
    cat >"$1/p$i.yaml" <<EOP
apiVersion: v1
kind: Pod
metadata: {name: bench-$i, namespace: $3}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: localhost/busybox:1.36, command: [sleep, "3600"]}]
EOP
  done
}

# kubelet_yaml EP PORT [STATIC_POD_PATH]: the upstream kubelet's configuration
# for the side-by-side benches: runtime EP, server on PORT, no cgroups per QoS,
# no node allocatable enforcement, eviction and image GC out of the way;
# failCgroupV1 off for this machine's cgroup v1.
kubelet_yaml() {
  cat <<EOK
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
${3:+staticPodPath: $3}
containerRuntimeEndpoint: $1
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
port: $2
readOnlyPort: 0
healthzPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: /etc/resolv.conf
EOK
}
# bench_rm DIR: removes a bench's directory, after what is still mounted under
# it, deepest first: an agent's root dir is bind-mounted on itself at its
# start (made rshared, as upstream's kubelet does; docs/VOLUMES.md).
bench_rm() {
  local m
  awk -v d="$1/" '$5 == substr(d, 1, length(d) - 1) || index($5, d) == 1 {print $5}' /proc/self/mountinfo |
    sort -r | while read -r m; do umount -l "$(printf '%b' "$m")" 2>/dev/null || true; done
  rm -rf --one-file-system "$1"
}
