#!/usr/bin/env bash
# Scale: nanolet's RSS with 0..N running static pods, its cost per pod, and
# pod churn (docs/PERFORMANCE.md, "Scale").
#
#   tools/bench/scale_bench.sh [BUILD_DIR=build] [COUNTS="0 50 110 250"] [CHURN_ROUNDS=20]
#
# nanolet runs standalone with one-container static pods (busybox sleep) in its
# own namespace perf-scale. Pods are added to reach each count in turn; at each
# one, once every container runs and SETTLE_S (15) seconds have passed, its RSS
# is read. Then the per-pod cost (least squares over the counts). Then churn,
# on a new agent: CHURN_PODS (50) pods created and deleted CHURN_ROUNDS times,
# RSS after each round; the last against the first must stay within 5 %.
# Runtime: the fake CRI server (the helper process nanolet-fake-cri) unless
# CRI_ENDPOINT names a containerd (e.g. a private one from
# tools/testenv/setup.sh, as test/e2e/reboot.sh makes).
set -uo pipefail
# shellcheck source=tools/bench/bench_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
BUILD=${1:-build}
COUNTS=${2:-0 50 110 250}
ROUNDS=${3:-20}
CHURN_PODS=${CHURN_PODS:-50}
SETTLE_S=${SETTLE_S:-15}
NANOLET=$BUILD/agent/nanolet
FAKE=$BUILD/test/fakes/nanolet-fake-cri
NS=perf-scale
TMP=$(mktemp -d /tmp/nanolet-scale.XXXXXX)
M=$TMP/manifests
mkdir -p "$M"
PID= FPID=
EP=${CRI_ENDPOINT:-}

cleanup() {
  rm -f "$M"/*.yaml
  if [ -n "$PID" ]; then
    end=$((SECONDS + 300))
    while [ "$(sandboxes)" != 0 ] && [ $SECONDS -lt $end ]; do sleep 1; done
    kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  fi
  [ -n "$FPID" ] && kill "$FPID" 2>/dev/null && wait "$FPID" 2>/dev/null
  bench_rm "$TMP" /var/log/pods/"${NS}"_*
}
trap cleanup EXIT

cri() { "$NANOLET" cri -r "$EP" "$@" 2>/dev/null; }
running() { cri ps -o json | jq --arg ns "$NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns and .state == "CONTAINER_RUNNING")] | length'; }
sandboxes() { cri pods -o json | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
wait_for() { # wait_for SECONDS CMD VALUE
  local end=$((SECONDS + $1))
  until [ "$($2)" = "$3" ]; do
    kill -0 "$PID" 2>/dev/null || { echo "nanolet exited:"; tail "$TMP/agent.log"; exit 1; }
    [ $SECONDS -lt $end ] || { echo "$2 is $($2), not $3, after $1 s"; tail "$TMP/agent.log"; exit 1; }
    sleep 1
  done
}
manifest() { # manifest PREFIX I
  cat >"$TMP/$1-$2.tmp" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1-$2, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: localhost/busybox:1.36, command: [sleep, "3600"]}]
EOF
  mv "$TMP/$1-$2.tmp" "$M/$1-$2.yaml"
}

if [ -z "$EP" ]; then
  EP=unix://$TMP/cri.sock
  "$FAKE" --socket "$TMP/cri.sock" --image localhost/busybox:1.36 >"$TMP/fake.log" 2>&1 &
  FPID=$!
  for _ in $(seq 1 50); do [ -S "$TMP/cri.sock" ] && break; sleep 0.1; done
  runtime="fake CRI"
else
  runtime=$EP
fi
start_agent() {
  "$NANOLET" --healthz-port 0 --enable-server=false --pod-manifest-path "$M" \
    --container-runtime-endpoint "$EP" --root-dir "$TMP/root" --hostname-override perf-scale \
    --max-pods 300 --cgroups-per-qos=false --enforce-node-allocatable= >>"$TMP/agent.log" 2>&1 &
  PID=$!
}
start_agent
echo "runtime: $runtime"

have=0
points=()
for n in $COUNTS; do
  while [ "$have" -lt "$n" ]; do have=$((have + 1)); manifest scale "$have"; done
  wait_for 900 running "$n"
  sleep "$SETTLE_S"
  r=$(rss_kib)
  echo "pods=$n rss_kib=$r"
  points+=("$n $r")
done
printf '%s\n' "${points[@]}" | awk '{n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2}
  END {if (n > 1) {b = (n * sxy - sx * sy) / (n * sxx - sx * sx); a = (sy - b * sx) / n;
       printf "per pod: %.1f KiB (fit: %.0f KiB + %.1f KiB x pods)\n", b, a, b}}'
rm -f "$M"/scale-*.yaml
wait_for 900 sandboxes 0

[ "$ROUNDS" -gt 0 ] || exit 0
# Churn on an agent of its own, so that the pages the scale run touched do not
# hide growth.
kill "$PID" && wait "$PID" 2>/dev/null
start_agent
sleep 5
first=
for r in $(seq 1 "$ROUNDS"); do
  for i in $(seq 1 "$CHURN_PODS"); do manifest churn "$i"; done
  wait_for 900 running "$CHURN_PODS"
  rm -f "$M"/churn-*.yaml
  wait_for 900 sandboxes 0
  sleep 3
  rss=$(rss_kib)
  [ -n "$first" ] || first=$rss
  echo "churn round $r: rss_kib=$rss"
done
awk -v a="$first" -v b="$rss" 'BEGIN {d = 100 * (b - a) / a; printf "churn: first %d KiB, last %d KiB, %+.1f %% (%s)\n", a, b, d, (d <= 5 ? "ok" : "over 5 %")}'
