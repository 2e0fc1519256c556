#!/usr/bin/env bash
# The footprint's four figures against a real containerd, in one run
# (docs/PERFORMANCE.md, headline table):
#
#   tools/bench/footprint_bench.sh [BUILD_DIR=build] [WINDOW_S=60]
#
#   1. RSS idle: nanolet standalone, no pods, SETTLE_S after its start;
#   2. RSS with 20 pods, and 3. with 110 (one busybox `sleep` container each,
#      static pods), SETTLE_S after the last container runs; with 110, the
#      agent's CPU share over WINDOW_S, all threads (schedstat);
#   4. the 110 pods replaced by pods with an exec readiness probe (`true`,
#      every 10 s: 11 ExecSync a second): the agent's CPU over WINDOW_S less
#      the idle share of the same window, divided by the probes the agent
#      counted in it (prober_probe_total on its /metrics/probes).
#
# Every feature is on: the server (its own port, anonymous with AlwaysAllow,
# to read /metrics/probes), cgroups per QoS under a cgroup root of its own, the
# eviction manager, log rotation, image and container GC. Only the healthz
# port is off (another agent may hold 10248).
#
# Runtime: CRI_ENDPOINT, else a containerd of the bench's own (Debian's 1.6:
# tools/testenv/setup.sh with NANOLET_TESTENV_DIR /var/lib/nanolet-perf-testenv,
# bridge nl-br7, as tools/bench/kubelet_bench.sh), so that no other agent's
# pods change the lists this agent relists every second. Quiet machine wanted:
# the figures are the agent's own CPU, but a loaded machine makes every
# wake-up dearer; the load average is printed.
set -uo pipefail
BUILD=${1:-build}
WINDOW=${2:-60}
SETTLE_S=${SETTLE_S:-15}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/bench/bench_lib.sh
. "$here/bench_lib.sh"
NANOLET=$BUILD/agent/nanolet
NS=perf-footprint
TMP=$(mktemp -d /tmp/nanolet-footprint.XXXXXX)
M=$TMP/manifests
CG=/nl-footprint-bench
mkdir -p "$M"
PID=
if [ -n "${CRI_ENDPOINT:-}" ]; then
  EP=$CRI_ENDPOINT
else
  EP=$(NANOLET_TESTENV_DIR=${NANOLET_PERF_TESTENV_DIR:-/var/lib/nanolet-perf-testenv} \
    NANOLET_TESTENV_BRIDGE=nl-br7 NANOLET_TESTENV_SUBNET=10.97.0.0/22 NANOLET_TESTENV_NO_REGISTRY=1 \
    "$here/../testenv/setup.sh" 2>"$TMP/setup.log" | tail -1) || { cat "$TMP/setup.log"; exit 1; }
fi

cri() { "$NANOLET" cri -r "$EP" "$@" 2>/dev/null; }
sandboxes() { cri pods -o json | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
cleanup() {
  rm -f "$M"/*.yaml
  if [ -n "$PID" ]; then
    local end=$((SECONDS + 300))
    while [ "$(sandboxes)" != 0 ] && [ $SECONDS -lt $end ]; do sleep 1; done
    kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  fi
  bench_rm "$TMP" /var/log/pods/"${NS}"_*
}
trap cleanup EXIT

# running [PROBED]: the namespace's running containers (with PROBED, only
# those of the probed pods, named probed-*)
running() {
  cri ps -o json | jq --arg ns "$NS" --arg p "${1:-}" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns
    and .state == "CONTAINER_RUNNING" and ($p == "" or (.labels["io.kubernetes.pod.name"] | startswith("probed-"))))] | length'
}
cpu_ns() { cat /proc/"$PID"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
probes() { # probes counted so far (every result)
  curl -sk "https://127.0.0.1:$PORT/metrics/probes" |
    awk '/^prober_probe_total\{/ {s += $NF} END {printf "%.0f\n", s}'
}
wait_running() { # wait_running N [PROBED]
  local end=$((SECONDS + 900))
  until [ "$(running "${2:-}")" = "$1" ]; do
    kill -0 "$PID" 2>/dev/null || { echo "footprint: nanolet exited:"; tail "$TMP/agent.log"; exit 1; }
    [ $SECONDS -lt $end ] || { echo "footprint: $(running "${2:-}") of $1 running after 900 s"; tail "$TMP/agent.log"; exit 1; }
    sleep 1
  done
}
pod() { # pod NAME [PROBE]
  cat >"$M/.$1.tmp" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:1.36
    command: [sleep, "36000"]
    ${2:-}
EOF
  mv "$M/.$1.tmp" "$M/$1.yaml"
}
# window: CPU share of the agent over WINDOW seconds; sets CPU_NS, WALL_NS
window() {
  local c0 t0
  c0=$(cpu_ns) t0=$(date +%s%N)
  sleep "$WINDOW"
  CPU_NS=$(($(cpu_ns) - c0)) WALL_NS=$(($(date +%s%N) - t0))
}

for c in /sys/fs/cgroup/*/; do [ -L "${c%/}" ] || mkdir -p "${c}${CG#/}"; done
PORT=$(free_port)
"$NANOLET" --healthz-port 0 --port "$PORT" --read-only-port 0 --cert-dir "$TMP/pki" \
  --anonymous-auth=true --authorization-mode AlwaysAllow --pod-manifest-path "$M" \
  --container-runtime-endpoint "$EP" --root-dir "$TMP/root" --hostname-override perf-footprint \
  --cgroup-root "$CG" --enforce-node-allocatable= >"$TMP/agent.log" 2>&1 &
PID=$!
echo "footprint: $(git -C "$here" rev-parse --short HEAD 2>/dev/null), runtime $EP, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
sleep "$SETTLE_S"
echo "rss_idle_kib=$(rss_kib)"
for i in $(seq 1 20); do pod "idle-$i"; done
wait_running 20
sleep "$SETTLE_S"
echo "rss_20_kib=$(rss_kib)"
for i in $(seq 21 110); do pod "idle-$i"; done
wait_running 110
sleep "$SETTLE_S"
echo "rss_110_kib=$(rss_kib)"
window
idle_share=$(awk -v c="$CPU_NS" -v t="$WALL_NS" 'BEGIN {printf "%.6f", c / t}')
echo "idle_cpu_110=$(awk -v s="$idle_share" 'BEGIN {printf "%.3f%%", 100 * s}') ($(awk -v c="$CPU_NS" 'BEGIN {printf "%.1f", c / 1e6}') ms in ${WINDOW} s)"

rm -f "$M"/idle-*.yaml
for i in $(seq 1 110); do pod "probed-$i" 'readinessProbe: {exec: {command: ["true"]}, periodSeconds: 10}'; done
wait_running 110 probed
end=$((SECONDS + 300))
until [ "$(sandboxes)" = 110 ]; do
  [ $SECONDS -lt $end ] || { echo "footprint: the idle pods are not all gone"; exit 1; }
  sleep 1
done
sleep "$SETTLE_S"
p0=$(probes)
window
n=$(($(probes) - p0))
[ "$n" -gt 0 ] || { echo "footprint: no probe counted in the window"; exit 1; }
awk -v c="$CPU_NS" -v t="$WALL_NS" -v s="$idle_share" -v n="$n" -v w="$WINDOW" 'BEGIN {
  printf "exec_probe_us=%.1f (%d probes in %d s, %.1f ms of agent CPU over the idle share)\n",
    (c - s * t) / n / 1e3, n, w, (c - s * t) / 1e6 }'
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
