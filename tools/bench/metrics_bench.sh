#!/usr/bin/env bash
# The kubelet server's metrics endpoints with 110 pods: nanolet's CPU per
# scrape of /metrics, /metrics/cadvisor, /metrics/probes, /metrics/resource and
# /stats/summary over HTTPS (one kept-alive connection, as Prometheus scrapes),
# then its RSS while all four metrics endpoints are scraped every 15 s
# (docs/PERFORMANCE.md, "Metrics, stats and streaming").
#
#   tools/bench/metrics_bench.sh [BUILD_DIR=build] [PODS=110] [N=50] [RSS_ROUNDS=8]
#
# nanolet runs standalone on the fake CRI server (nanolet-fake-cri) with
# one-container static pods, each with a readiness probe, and pod cgroups under
# a cgroupRoot of its own (/nl-metrics-bench), so that /metrics/cadvisor reads
# real pod cgroup files (the fake's containers have no cgroups of their own).
# Authentication is anonymous and authorization AlwaysAllow: the webhooks'
# answers are cached between scrapes anyway. CPU is nanolet's utime + stime
# (/proc/PID/stat) over N scrapes, less its idle CPU over the same time.
set -uo pipefail
# shellcheck source=tools/bench/bench_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
BUILD=${1:-build}
PODS=${2:-110}
N=${3:-50}
RSS_ROUNDS=${4:-8}
NANOLET=$BUILD/agent/nanolet
FAKE=$BUILD/test/fakes/nanolet-fake-cri
NS=perf-metrics
TMP=$(mktemp -d /tmp/nanolet-metrics.XXXXXX)
M=$TMP/manifests
mkdir -p "$M"
PID= FPID=
KPORT=$(free_port)

cleanup() {
  rm -f "$M"/*.yaml
  if [ -n "$PID" ]; then
    end=$((SECONDS + 120))
    while [ "$(sandboxes)" != 0 ] && [ $SECONDS -lt $end ]; do sleep 1; done
    kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  fi
  [ -n "$FPID" ] && kill "$FPID" 2>/dev/null && wait "$FPID" 2>/dev/null
  bench_rm "$TMP" /var/log/pods/"${NS}"_*
  for c in /sys/fs/cgroup/*/nl-metrics-bench /sys/fs/cgroup/unified/nl-metrics-bench; do
    [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
  done
}
trap cleanup EXIT

cri() { "$NANOLET" cri -r "unix://$TMP/cri.sock" "$@" 2>/dev/null; }
running() { cri ps -o json | jq --arg ns "$NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns and .state == "CONTAINER_RUNNING")] | length'; }
sandboxes() { cri pods -o json | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
hz=$(getconf CLK_TCK)

"$FAKE" --socket "$TMP/cri.sock" --image localhost/busybox:1.36 >"$TMP/fake.log" 2>&1 &
FPID=$!
for _ in $(seq 1 50); do [ -S "$TMP/cri.sock" ] && break; sleep 0.1; done
for i in $(seq 1 "$PODS"); do
  cat >"$M/web-$i.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: web-$i, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:1.36
    command: [sleep, "3600"]
    resources: {limits: {cpu: 50m, memory: 16Mi}}
    readinessProbe: {exec: {command: ["true"]}, periodSeconds: 10}
EOF
done
for c in /sys/fs/cgroup/*/; do [ -L "${c%/}" ] || mkdir -p "${c}nl-metrics-bench"; done
"$NANOLET" --healthz-port 0 --port "$KPORT" --read-only-port 0 --cert-dir "$TMP/pki" \
  --anonymous-auth=true --authorization-mode AlwaysAllow --pod-manifest-path "$M" \
  --container-runtime-endpoint "unix://$TMP/cri.sock" --root-dir "$TMP/root" \
  --hostname-override perf-metrics --max-pods 300 --cgroup-root /nl-metrics-bench \
  --enforce-node-allocatable= >>"$TMP/agent.log" 2>&1 &
PID=$!
end=$((SECONDS + 300))
until [ "$(running)" = "$PODS" ]; do
  kill -0 "$PID" 2>/dev/null || { echo "nanolet exited:"; tail "$TMP/agent.log"; exit 1; }
  [ $SECONDS -lt $end ] || { echo "not all $PODS pods run: $(running)"; tail "$TMP/agent.log"; exit 1; }
  sleep 1
done
sleep 15 # probes and PLEG settle; every pod's start is observed
url=https://127.0.0.1:$KPORT
echo "pods: $PODS running (fake CRI), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

t0=$(ticks) s0=$(date +%s.%N)
sleep 10
idle=$(awk -v a="$t0" -v b="$(ticks)" -v s="$s0" -v e="$(date +%s.%N)" -v hz="$hz" \
  'BEGIN {print (b - a) / hz / (e - s)}')
echo "idle: $(awk -v i="$idle" 'BEGIN {printf "%.2f", i * 1000}') ms CPU per second"

for ep in /metrics /metrics/cadvisor /metrics/probes /metrics/resource /stats/summary; do
  urls=()
  for _ in $(seq 1 "$N"); do urls+=("$url$ep"); done
  curl -sk -o "$TMP/one" "$url$ep"
  bytes=$(wc -c <"$TMP/one")
  t0=$(ticks) s0=$(date +%s.%N)
  curl -sk "${urls[@]}" >/dev/null
  t1=$(ticks) s1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" -v s="$s0" -v e="$s1" -v hz="$hz" -v i="$idle" -v n="$N" -v ep="$ep" -v by="$bytes" \
    'BEGIN {cpu = (b - a) / hz - i * (e - s); printf "%-18s %7d bytes  %.2f ms CPU per scrape  %.1f ms wall\n", ep, by, cpu * 1000 / n, (e - s) * 1000 / n}'
done

r0=$(rss_kib)
echo "rss before scraping: $r0 KiB"
max=$r0
for r in $(seq 1 "$RSS_ROUNDS"); do
  curl -sk "$url/metrics" "$url/metrics/cadvisor" "$url/metrics/probes" "$url/metrics/resource" >/dev/null
  sleep 1
  rss=$(rss_kib)
  [ "$rss" -gt "$max" ] && max=$rss
  echo "scrape round $r: rss $rss KiB"
  [ "$r" -lt "$RSS_ROUNDS" ] && sleep 14
done
echo "rss under a 15 s scrape: before $r0 KiB, after $RSS_ROUNDS rounds $rss KiB, max $max KiB"
