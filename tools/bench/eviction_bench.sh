#!/usr/bin/env bash
# The eviction manager's cost and speed (docs/PERFORMANCE.md, "Eviction and
# garbage collection"):
#   . tools/testenv/env.sh; tools/bench/eviction_bench.sh [BUILD_DIR] [WINDOW_S]
# 1. Idle CPU of the whole agent, standalone, with 0 and then 50 running
#    busybox pods: the eviction manager's 10 s rounds with upstream's default
#    thresholds, the memory threshold armed on the memory cgroup, the container
#    GC every minute. 15 s to settle, then a window of WINDOW_S seconds (60;
#    0 skips this part).
# 2. From crossing a memory threshold to the eviction: joined to the test
#    control plane as BENCH_NODE (default nanolet-evict-bench, its own
#    credential) with a BestEffort API pod in BENCH_NS (default evict-bench)
#    that writes 1000 MiB into a memory emptyDir (held until the eviction)
#    15 s after it starts (between the re-armings of the notification, every
#    10 s); the threshold is memory.available 600 MiB under what the node
#    has (a margin for the other processes of a shared machine). The crossing
#    is seen from outside (this script reads the root memory cgroup's
#    memory.usage_in_bytes every 5 ms against the usage the agent armed) and
#    the eviction is the agent's "evicting pod" line. With
#    kernelMemcgNotification (the default), then without it (polling every 10 s),
#    CROSSINGS times each (3).
set -uo pipefail
BUILD=${1:-build}
WINDOW=${2:-60}
: "${NANOLET_TEST_CRI_ENDPOINT:?. tools/testenv/env.sh first}"
NANOLET=$BUILD/agent/nanolet
NS=nanolet-e2e-evict-bench
BENCH_NS=${BENCH_NS:-evict-bench}
BENCH_NODE=${BENCH_NODE:-nanolet-evict-bench}
MEMCG=/sys/fs/cgroup/memory
TMP=$(mktemp -d /tmp/nanolet-bench.XXXXXX)
M=$TMP/manifests
mkdir -p "$M"
PID=

cri() { "$NANOLET" cri -r "$NANOLET_TEST_CRI_ENDPOINT" "$@"; }
count_ns() { # count_ns NS WHAT: running containers or sandboxes of NS
  if [ "$2" = containers ]; then
    cri ps -o json | jq --arg ns "$1" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns)] | length'
  else
    cri pods -o json | jq --arg ns "$1" '[.items[] | select(.metadata.namespace == $ns)] | length'
  fi
}
. "$(dirname "$0")/bench_lib.sh"
running_is() { [ "$(count_ns "$NS" containers)" = "$1" ]; }
clear_of() { [ "$(count_ns "$1" sandboxes)" = 0 ]; }
start() { # start LOGFILE FLAGS...
  local log=$1; shift
  "$NANOLET" --healthz-port 0 --enable-server=false --pod-manifest-path "$M" \
    --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" --root-dir "$TMP/root" \
    --hostname-override "$BENCH_NODE" --file-check-frequency 1s "$@" >"$log" 2>&1 &
  PID=$!
}
stop() { [ -n "$PID" ] && kill "$PID" && wait "$PID" 2>/dev/null; PID=; }
KC=
cleanup() {
  rm -f "$M"/*.yaml
  [ -n "$KC" ] && kubectl delete pods -n "$BENCH_NS" --all --grace-period=0 --force >/dev/null 2>&1
  [ -n "$PID" ] || start "$TMP/cleanup.log" ${KC:+--kubeconfig "$KC"}
  wait_until 120 clear_of "$NS"
  wait_until 60 clear_of "$BENCH_NS"
  stop
  if [ -n "$KC" ]; then
    kubectl delete ns "$BENCH_NS" --wait=false >/dev/null 2>&1
    kubectl delete node "$BENCH_NODE" --wait=false >/dev/null 2>&1
  fi
  bench_rm "$TMP"
}
trap cleanup EXIT

# ---- 1. idle CPU ----
cpu_ns() { awk '{print $1}' "/proc/$PID/schedstat"; }
window() { # window LABEL
  sleep 15
  local c0 t0 c1 t1
  c0=$(cpu_ns); t0=$(date +%s%N)
  sleep "$WINDOW"
  c1=$(cpu_ns); t1=$(date +%s%N)
  awk -v l="$1" -v c=$((c1 - c0)) -v t=$((t1 - t0)) \
    'BEGIN {printf "%-26s idle CPU %.3f %% of one core\n", l, 100 * c / t}'
}
if [ "$WINDOW" -gt 0 ]; then
  start "$TMP/idle.log"
  window "standalone, 0 pods"
  bench_pods "$M" 50 "$NS"
  wait_until 240 running_is 50 || echo "only $(count_ns "$NS" containers) of 50 pods running"
  window "standalone, 50 pods"
  grep -q "memory threshold notifications unavailable" "$TMP/idle.log" && echo "(memory threshold notifications unavailable: polling)"
  rm -f "$M"/*.yaml
  wait_until 120 clear_of "$NS" || echo "pods left in $NS"
  stop
fi

# ---- 2. from crossing a memory threshold to the eviction ----
env_file=$(tools/testenv/controlplane.sh up) || exit 1
# shellcheck source=/dev/null
. "$env_file"
kubectl() { "$NANOLET_TEST_KUBECTL" "$@"; }
KC=$(tools/testenv/controlplane.sh cert "$BENCH_NODE" "system:node:$BENCH_NODE" system:nodes) || exit 1
kubectl delete ns "$BENCH_NS" --ignore-not-found --timeout=90s >/dev/null 2>&1
kubectl create ns "$BENCH_NS" >/dev/null
# as the agent computes it: MemTotal - (root memcg usage - inactive file)
available_mib() {
  local total usage inactive
  total=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) * 1024))
  usage=$(cat "$MEMCG/memory.usage_in_bytes")
  inactive=$(awk '$1 == "total_inactive_file" {print $2}' "$MEMCG/memory.stat")
  echo $(((total - usage + inactive) / 1048576))
}
# ms LOG_TIME DATE_TIME: the milliseconds from HH:MM:SS.ffffff to the other
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN {split(a, x, ":"); split(b, y, ":");
  printf "%.0f", ((y[1] * 3600 + y[2] * 60 + y[3]) - (x[1] * 3600 + x[2] * 60 + x[3])) * 1000}'; }
evicted() { [ "$(kubectl get pod -n "$BENCH_NS" eater -o jsonpath='{.status.reason}' 2>/dev/null)" = Evicted ]; }
# crossing NOTIFY: one eviction; prints the figures
crossing() {
  local log=$TMP/cross-$1.log armed crossed_at evict_at thr total inactive
  thr=$(($(available_mib) - 600))
  cat >"$TMP/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard: {memory.available: "${thr}Mi"}
evictionPressureTransitionPeriod: 5s
kernelMemcgNotification: $1
EOF
  start "$log" --kubeconfig "$KC" --config "$TMP/kubelet.yaml" -v 3
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: eater, namespace: $BENCH_NS}
spec:
  nodeName: $BENCH_NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  volumes: [{name: mem, emptyDir: {medium: Memory}}]
  containers:
  - name: c
    image: localhost/busybox:1.36
    command: [sh, -c, "sleep 15; head -c 1000m /dev/zero >/mem/fill; sleep 3600"]
    volumeMounts: [{name: mem, mountPath: /mem}]
EOF
  # the usage the agent armed (with notifications), else the same formula
  [ "$1" = true ] && wait_until 20 grep -q "notifications armed" "$log"
  sleep 11 # past the first re-arming
  armed=$(grep -oE "notifications armed at [0-9]+ threshold\(s\), first [0-9]+" "$log" | tail -1 | awk '{print $NF}')
  if [ -z "$armed" ]; then
    total=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) * 1024))
    inactive=$(awk '$1 == "total_inactive_file" {print $2}' "$MEMCG/memory.stat")
    armed=$((total - thr * 1048576 + inactive))
  fi
  while [ "$(cat "$MEMCG/memory.usage_in_bytes")" -lt "$armed" ]; do sleep 0.005; done
  crossed_at=$(date +%T.%N)
  wait_until 60 evicted
  evict_at=$(grep -m1 "evicting pod $BENCH_NS/eater" "$log" | awk '{print $2}')
  local ms
  ms=$(ms_between "${crossed_at:0:15}" "$evict_at")
  if [ -z "$evict_at" ]; then
    echo "kernelMemcgNotification $1: not evicted within 60 s"
  elif [ "$ms" -lt 0 ]; then
    echo "kernelMemcgNotification $1: evicted before the crossing was seen (another process's memory): not counted"
  else
    local noticed round_at
    noticed=$(grep -m1 "memory eviction threshold crossed" "$log" | awk '{print $2}')
    round_at=$(grep -m1 "threshold memory.available hard met" "$log" | awk '{print $2}')
    printf 'kernelMemcgNotification %-5s crossing -> eviction %5s ms (notified %s ms, threshold met %s ms)\n' \
      "$1" "$ms" "${noticed:+$(ms_between "${crossed_at:0:15}" "$noticed")}" \
      "${round_at:+$(ms_between "${crossed_at:0:15}" "$round_at")}"
  fi
  kubectl delete pod -n "$BENCH_NS" eater --grace-period=0 --force >/dev/null 2>&1
  wait_until 60 clear_of "$BENCH_NS"
  stop
}
for notify in true false; do
  for _ in $(seq 1 "${CROSSINGS:-3}"); do crossing $notify; done
done
