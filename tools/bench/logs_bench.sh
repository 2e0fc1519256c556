#!/usr/bin/env bash
# The kubelet server's log follows (docs/PERFORMANCE.md, "The kubelet server"):
#   . tools/testenv/env.sh; tools/bench/logs_bench.sh [BUILD_DIR] [FOLLOWS]
# nanolet standalone (no --config: anonymous requests allowed) with one pod
# writing ~20 lines/s; RSS and CPU without readers, then with FOLLOWS (20)
# clients on GET /containerLogs/...?follow=true over TLS for 30 s, checking
# that each reader got the lines written meanwhile.
set -uo pipefail
BUILD=${1:-build}
FOLLOWS=${2:-20}
: "${NANOLET_TEST_CRI_ENDPOINT:?. tools/testenv/env.sh first}"
NANOLET=$BUILD/agent/nanolet
NS=nanolet-e2e-logbench
TMP=$(mktemp -d /tmp/nanolet-bench.XXXXXX)
M=$TMP/manifests
mkdir -p "$M"
PID=
CURLS=()
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
cpu_ns() { awk '{print $1}' "/proc/$PID/schedstat"; }
cri() { "$NANOLET" cri -r "$NANOLET_TEST_CRI_ENDPOINT" "$@"; }
ns_sandboxes() { cri pods -o json | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
. "$(dirname "$0")/bench_lib.sh"
ns_clear() { [ "$(ns_sandboxes)" = 0 ]; }
cleanup() {
  for c in "${CURLS[@]}"; do kill "$c" 2>/dev/null; done
  rm -f "$M"/*.yaml
  [ -n "$PID" ] && wait_until 60 ns_clear
  [ -n "$PID" ] && kill "$PID" && wait "$PID" 2>/dev/null
  bench_rm "$TMP"
}
trap cleanup EXIT

cat >"$M/talker.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: talker, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: localhost/busybox:1.36, command: [sh, -c, 'i=0; while :; do i=\$((i+1)); echo "talk \$i"; sleep 0.05; done']}
YAML
KPORT=$(free_port)
"$NANOLET" --healthz-port 0 --port "$KPORT" --cert-dir "$TMP/pki" --pod-manifest-path "$M" \
  --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" --root-dir "$TMP/root" \
  --hostname-override bench-node >"$TMP/agent.log" 2>&1 &
PID=$!
url="https://127.0.0.1:$KPORT/containerLogs/$NS/talker-bench-node/c"
talking() { [ "$(curl -sk "$url?tailLines=1" | grep -c '^talk ')" = 1 ]; }
wait_until 60 talking || { echo "the pod did not start"; tail "$TMP/agent.log"; exit 1; }
sleep 10
echo "nanolet RSS with 1 pod, no readers: $(rss_kib) KiB"
c0=$(cpu_ns)
sleep 30
c1=$(cpu_ns)
echo "nanolet CPU over 30 s without readers: $(awk -v c="$((c1 - c0))" 'BEGIN {printf "%.1f ms", c / 1e6}')"
for i in $(seq "$FOLLOWS"); do
  curl -sk -N "$url?follow=true&tailLines=0" >"$TMP/follow.$i" 2>/dev/null &
  CURLS+=($!)
done
sleep 2
r0=$(rss_kib)
c0=$(cpu_ns)
sleep 30
c1=$(cpu_ns)
r1=$(rss_kib)
echo "nanolet RSS with $FOLLOWS follows: $r0 KiB after 2 s, $r1 KiB after 32 s"
echo "nanolet CPU over 30 s with $FOLLOWS follows: $(awk -v c="$((c1 - c0))" 'BEGIN {printf "%.1f ms", c / 1e6}')"
for c in "${CURLS[@]}"; do kill "$c" 2>/dev/null; done
wait "${CURLS[@]}" 2>/dev/null
CURLS=()
bad=0
for i in $(seq "$FOLLOWS"); do
  f=$TMP/follow.$i
  n=$(grep -c '^talk ' "$f")
  first=$(grep -m1 '^talk ' "$f" | cut -d' ' -f2)
  last=$(grep '^talk ' "$f" | tail -1 | cut -d' ' -f2)
  [ "$n" -gt 300 ] && [ "$((last - first + 1))" = "$n" ] || bad=$((bad + 1))
done
echo "readers with every line in order: $((FOLLOWS - bad))/$FOLLOWS ($(grep -c '^talk ' "$TMP/follow.1") lines each)"
sleep 2
echo "nanolet RSS after the readers left: $(rss_kib) KiB"
