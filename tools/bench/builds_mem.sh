#!/usr/bin/env bash
# Idle memory of the three builds side by side (docs/PERFORMANCE.md, "Static
# build (musl)"): the Debian build (shared libraries), the self-contained build
# (libraries from Debian's sources linked in, glibc shared) and the static
# build (musl, -static). Each runs standalone with no pods on the same runtime,
# one after the other, RUNS (3) times in turn; SETTLE_S (15) seconds after it
# has met the runtime, RSS, PSS and anonymous memory are read from
# /proc/PID/smaps_rollup. Prints every run, then the median of each.
#
#   . tools/testenv/env.sh
#   tools/bench/builds_mem.sh [DEBIAN=build] [SELF_CONTAINED=build-sc] [STATIC=build-static]
#
# Build them first: tools/build.sh (or ninja -C build agent/nanolet);
# meson setup build-sc --native-file tools/self-contained.ini; tools/build.sh --static.
# Same flags as tools/bench/scale_bench.sh (no server, no QoS cgroups).
#
# JOINED=1: each build joined to the test control plane instead
# (tools/testenv/controlplane.sh up; a node credential of its own, node
# builds-mem), with PODS (20) static pods of one busybox container (so 20
# mirror pods in the API, a Lease, node status); read SETTLE_S after all of
# them run and their mirror pods exist. Targets: docs/PERFORMANCE.md.
set -uo pipefail
# shellcheck source=tools/bench/bench_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
cd "$(dirname "$0")/../.."
DIRS=("${1:-build}" "${2:-build-sc}" "${3:-build-static}")
NAMES=(debian self-contained static)
RUNS=${RUNS:-3}
SETTLE_S=${SETTLE_S:-15}
EP=${CRI_ENDPOINT:-${NANOLET_TEST_CRI_ENDPOINT:?. tools/testenv/env.sh, or set CRI_ENDPOINT}}
TMP=$(mktemp -d /tmp/nanolet-builds-mem.XXXXXX)
JOINED=${JOINED:-0}
PODS=${PODS:-20}
NODE=builds-mem
NS=perf-builds-mem
PID=
cri() { "${DIRS[0]}/agent/nanolet" cri -r "$EP" "$@" 2>/dev/null; }
sandboxes() { cri pods -o json | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
running() {
  cri ps -o json | jq --arg ns "$NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns and .state == "CONTAINER_RUNNING")] | length'
}
stop_agent() { # the pods go first, so that the next build starts from none
  rm -f "$TMP"/m/*.yaml
  local end=$((SECONDS + 120))
  while [ "$(sandboxes)" != 0 ] && [ $SECONDS -lt $end ]; do sleep 1; done
  kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  PID=
}
cleanup() {
  [ -z "$PID" ] || stop_agent
  if [ "$JOINED" = 1 ]; then
    kubectl delete node "$NODE" --ignore-not-found >/dev/null 2>&1
    kubectl delete ns "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
  fi
  bench_rm "$TMP" /var/log/pods/"${NS}"_*
}
trap cleanup EXIT
for d in "${DIRS[@]}"; do
  [ -x "$d/agent/nanolet" ] || { echo "no $d/agent/nanolet: build it first" >&2; exit 1; }
done

if [ "$JOINED" = 1 ]; then
  # shellcheck disable=SC1090
  . "$(tools/testenv/controlplane.sh up)" || exit 1
  KC=$(tools/testenv/controlplane.sh cert "$NODE" "system:node:$NODE" system:nodes) || exit 1
  # anew: an earlier run's, still terminating, refuses the mirror pods
  kubectl delete ns "$NS" --ignore-not-found --timeout=120s >/dev/null 2>&1
  kubectl create ns "$NS" >/dev/null || exit 1
  join=(--kubeconfig "$KC" --node-ip 192.0.2.2)
else
  join=()
fi
all_running() { [ "$(running)" = "$PODS" ]; }
all_mirrored() { [ "$(kubectl get pods -n "$NS" --no-headers 2>/dev/null | grep -c Running)" = "$PODS" ]; }
until_true() { # SECONDS WHAT CMD...: polls CMD until it succeeds
  local end=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    kill -0 "$PID" 2>/dev/null && [ $SECONDS -lt $end ] || { echo "$what:" >&2; tail -5 "$TMP/agent.log" >&2; exit 1; }
    sleep 0.5
  done
}
measure() { # BINARY -> "rss pss anon" in KiB
  local log=$TMP/agent.log i
  mkdir -p "$TMP/m" && : >"$log"
  if [ "$JOINED" = 1 ]; then
    for i in $(seq 1 "$PODS"); do
      printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: mem-%s, namespace: %s}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers: [{name: main, image: localhost/busybox:1.36, command: [sleep, "3600"]}]\n' \
        "$i" "$NS" >"$TMP/m/p$i.yaml"
    done
  fi
  "$1" --healthz-port 0 --enable-server=false --pod-manifest-path "$TMP/m" \
    --container-runtime-endpoint "$EP" --root-dir "$TMP/root" --hostname-override "$NODE" \
    --cgroups-per-qos=false --enforce-node-allocatable= "${join[@]}" >"$log" 2>&1 &
  PID=$!
  until_true 30 "$1 did not start" grep -q 'container runtime containerd' "$log"
  if [ "$JOINED" = 1 ]; then
    until_true 300 "$1: not all $PODS pods run" all_running
    until_true 120 "$1: not all $PODS mirror pods Running" all_mirrored
  fi
  sleep "$SETTLE_S"
  awk '/^Rss:/ {r = $2} /^Pss:/ {p = $2} /^Anonymous:/ {a = $2} END {print r, p, a}' "/proc/$PID/smaps_rollup"
  stop_agent
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "runtime $EP, $([ "$JOINED" = 1 ] && echo "joined, $PODS pods" || echo "standalone, no pods"), settle ${SETTLE_S}s, $RUNS runs, $(date -u +%Y-%m-%d), $(git rev-parse --short HEAD 2>/dev/null)"
printf '%-15s %-30s %4s %9s %9s %9s\n' build binary run "RSS KiB" "PSS KiB" "anon KiB"
for r in $(seq 1 "$RUNS"); do
  for i in 0 1 2; do
    measure "${DIRS[$i]}/agent/nanolet" >"$TMP/one" # not in a subshell: its exit and PID are ours
    read -r rss pss anon <"$TMP/one"
    printf '%-15s %-30s %4s %9s %9s %9s\n' "${NAMES[$i]}" "${DIRS[$i]}/agent/nanolet" "$r" "$rss" "$pss" "$anon"
    echo "$rss $pss $anon" >>"$TMP/${NAMES[$i]}"
  done
done
echo "median:"
for i in 0 1 2; do
  f=$TMP/${NAMES[$i]}
  needed=$(readelf -d "${DIRS[$i]}/agent/nanolet" 2>/dev/null | grep -c NEEDED)
  printf '%-15s %-30s %4s %9s %9s %9s\n' "${NAMES[$i]}" "($needed shared libraries)" "" \
    "$(cut -d' ' -f1 "$f" | median)" "$(cut -d' ' -f2 "$f" | median)" "$(cut -d' ' -f3 "$f" | median)"
done
