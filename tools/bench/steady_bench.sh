#!/usr/bin/env bash
# The steady state: what N running pods cost nanolet when nothing happens
# (docs/PERFORMANCE.md, "Steady state").
#
#   tools/bench/steady_bench.sh [BUILD_DIR=build] [PODS=110] [WINDOW_S=60]
#
# nanolet runs standalone on the fake CRI server (the helper process
# nanolet-fake-cri: its CPU is not nanolet's), or on the containerd that
# CRI_ENDPOINT names (a private one, as tools/bench/kubelet_bench.sh starts:
# its exec probes run real processes), with PODS static pods of one
# container each in staticPodPath. Once every container runs and a settle time
# has passed, it reports nanolet's CPU over WINDOW_S seconds (schedstat) and
# its RSS. Environment:
#   PROBE=none|exec|tcp|http  a readiness probe of that kind on every container,
#                             every PERIOD_S (10) seconds; tcp and http probe a
#                             listener of the script's own on 127.0.0.1
#   CALLGRIND=1               run nanolet under callgrind and print the
#                             instructions of the window (the counts are zeroed
#                             at its start and dumped at its end), with the
#                             top functions (inclusive) in $OUT.callgrind.txt
#   SETTLE_S=10               wait after the last container runs
#   OUT=/tmp/steady           prefix of the files kept (callgrind output)
set -uo pipefail
# shellcheck source=tools/bench/bench_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
BUILD=${1:-build}
PODS=${2:-110}
WINDOW=${3:-60}
PROBE=${PROBE:-none}
PERIOD_S=${PERIOD_S:-10}
SETTLE_S=${SETTLE_S:-10}
OUT=${OUT:-/tmp/steady}
NANOLET=$BUILD/agent/nanolet
FAKE=$BUILD/test/fakes/nanolet-fake-cri
NS=perf-steady
TMP=$(mktemp -d /tmp/nanolet-steady.XXXXXX)
SOCK=$TMP/cri.sock
EP=${CRI_ENDPOINT:-unix://$SOCK}
mkdir -p "$TMP/manifests"
PID= FPID= LPID=

cleanup() {
  if [ -n "$PID" ] && [ -n "${CRI_ENDPOINT:-}" ]; then # remove the pods from the real runtime
    rm -f "$TMP/manifests"/*.yaml
    end=$((SECONDS + 300))
    while [ "$(sandboxes)" != 0 ] && [ $SECONDS -lt $end ]; do sleep 2; done
  fi
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  [ -n "$FPID" ] && kill "$FPID" 2>/dev/null && wait "$FPID" 2>/dev/null
  [ -n "$LPID" ] && kill "$LPID" 2>/dev/null && wait "$LPID" 2>/dev/null
  bench_rm "$TMP" /var/log/pods/"${NS}"_*
}
trap cleanup EXIT

cpu_ns() { cat /proc/"$PID"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; } # all threads, ns
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
running() { "$NANOLET" cri -r "$EP" ps -o json 2>/dev/null | jq --arg ns "$NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns and .state == "CONTAINER_RUNNING")] | length'; }
sandboxes() { "$NANOLET" cri -r "$EP" pods -o json 2>/dev/null | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }

if [ -z "${CRI_ENDPOINT:-}" ]; then
  "$FAKE" --socket "$SOCK" --image localhost/busybox:1.36 >"$TMP/fake.log" 2>&1 &
  FPID=$!
  for _ in $(seq 1 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
fi

port=
if [ "$PROBE" = tcp ] || [ "$PROBE" = http ]; then
  port=$((20000 + RANDOM % 20000))
  python3 -m http.server --bind 127.0.0.1 "$port" >/dev/null 2>&1 &
  LPID=$!
  sleep 1
fi
case $PROBE in
  none) probe= ;;
  exec) probe="readinessProbe: {exec: {command: [\"true\"]}, periodSeconds: $PERIOD_S}" ;;
  tcp) probe="readinessProbe: {tcpSocket: {host: 127.0.0.1, port: $port}, periodSeconds: $PERIOD_S}" ;;
  http) probe="readinessProbe: {httpGet: {host: 127.0.0.1, port: $port, path: /}, periodSeconds: $PERIOD_S}" ;;
  *) echo "PROBE: none, exec, tcp or http" >&2; exit 2 ;;
esac
for i in $(seq 1 "$PODS"); do
  cat >"$TMP/manifests/p$i.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: steady-$i, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:1.36
    command: [sleep, "3600"]
    $probe
EOF
done

run=("$NANOLET" --healthz-port 0 --enable-server=false --pod-manifest-path "$TMP/manifests"
  --container-runtime-endpoint "$EP" --root-dir "$TMP/root" --hostname-override perf-steady
  --cgroups-per-qos=false --enforce-node-allocatable=)
if [ "${CALLGRIND:-}" = 1 ]; then
  valgrind --tool=callgrind --callgrind-out-file="$OUT.callgrind" "${run[@]}" >"$TMP/agent.log" 2>&1 &
else
  "${run[@]}" >"$TMP/agent.log" 2>&1 &
fi
PID=$!
end=$((SECONDS + 600))
until [ "$(running)" = "$PODS" ]; do
  kill -0 "$PID" 2>/dev/null || { echo "nanolet exited:"; tail "$TMP/agent.log"; exit 1; }
  [ $SECONDS -lt $end ] || { echo "not all $PODS pods run after 600 s"; tail "$TMP/agent.log"; exit 1; }
  sleep 1
done
sleep "$SETTLE_S"
[ "${CALLGRIND:-}" = 1 ] && callgrind_control -z "$PID" >/dev/null
c0=$(cpu_ns); t0=$(date +%s%N)
sleep "$WINDOW"
c1=$(cpu_ns); t1=$(date +%s%N)
echo "pods=$PODS probe=$PROBE window=${WINDOW}s cpu_ms=$(awk -v c=$((c1 - c0)) 'BEGIN {printf "%.1f", c / 1e6}')" \
  "share=$(awk -v c=$((c1 - c0)) -v t=$((t1 - t0)) 'BEGIN {printf "%.3f%%", 100 * c / t}')" \
  "rss_kib=$(rss_kib)"
if [ "${CALLGRIND:-}" = 1 ]; then
  callgrind_control -d "$PID" >/dev/null
  sleep 2
  f=$(ls -t "$OUT".callgrind.* 2>/dev/null | head -1)
  ir=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  echo "instructions in the window: $ir ($(awk -v i="$ir" -v w="$WINDOW" 'BEGIN {printf "%.0f", i / w}') per second)"
  callgrind_annotate --inclusive=yes "$f" 2>/dev/null | head -60 >"$OUT.callgrind.txt"
  echo "top functions: $OUT.callgrind.txt"
fi
