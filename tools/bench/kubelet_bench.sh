#!/usr/bin/env bash
# nanolet beside the upstream kubelet (docs/PERFORMANCE.md, "Beside the
# upstream kubelet"): the same static pods on the same containerd, one agent
# after the other.
#
#   tools/bench/kubelet_bench.sh [BUILD_DIR=build] [N1=50] [N2=110] [IDLE_S=60]
#
# The kubelet is built from the test control plane's pinned module
# (tools/testenv/k8s-build.sh kubelet, cached). Both run on a containerd of
# this script's own (tools/testenv/setup.sh with NANOLET_TESTENV_DIR
# /var/lib/nanolet-perf-testenv, bridge nl-br7, 10.97.0.0/22), never on the
# shared one: the kubelet kills every pod of its runtime that is not its own.
# For each agent: RSS 20 s after start (0 pods); N1 manifests moved into
# staticPodPath at once, the time until the last container started
# (containerd's startedAt) and the agent's CPU from the move until 10 s after
# all run, per pod; RSS with N1; then N2 in all, RSS, and idle CPU over IDLE_S.
# Both with cgroupsPerQOS off and no node allocatable enforcement, one
# busybox `sleep` container per pod.
set -uo pipefail
BUILD=${1:-build}
N1=${2:-50}
N2=${3:-110}
IDLE=${4:-60}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
NANOLET=$BUILD/agent/nanolet
NS=perf-vs
export NANOLET_TESTENV_DIR=${NANOLET_PERF_TESTENV_DIR:-/var/lib/nanolet-perf-testenv}
export NANOLET_TESTENV_BRIDGE=nl-br7 NANOLET_TESTENV_SUBNET=10.97.0.0/22
TMP=$(mktemp -d /tmp/nanolet-vs.XXXXXX)
PID=

KBIN=$(nice "$HERE/../testenv/k8s-build.sh" kubelet) || { echo "cannot build the kubelet"; exit 1; }
"$HERE/../testenv/setup.sh" >/dev/null 2>"$TMP/setup.log"
EP=unix://$NANOLET_TESTENV_DIR/run/containerd.sock
[ -S "${EP#unix://}" ] || { echo "no private containerd:"; tail -3 "$TMP/setup.log"; exit 1; }

cri() { "$NANOLET" cri -r "$EP" "$@" 2>/dev/null; }
running() { cri ps -o json | jq --arg ns "$NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns and .state == "CONTAINER_RUNNING")] | length'; }
sandboxes() { cri pods -o json | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
last_started() {
  cri ps -o json | jq -r --arg ns "$NS" '.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns) | .id' |
    while read -r id; do cri inspect -o json "$id" | jq -r .status.startedAt; done | sort -n | tail -1
}
cpu_ns() { cat /proc/"$PID"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; } # all threads, ns
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
wait_for() { # wait_for SECONDS CMD VALUE (polls every 2 s)
  local end=$((SECONDS + $1))
  until [ "$($2)" = "$3" ]; do
    [ $SECONDS -lt $end ] || return 1
    sleep 2
  done
}
stop_agent() {
  rm -f "$TMP/manifests"/*.yaml
  wait_for 300 sandboxes 0
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  PID=
}
cleanup() {
  [ -n "$PID" ] && stop_agent
  # The kubelet bind-mounts its root directory onto itself (shared propagation).
  umount "$TMP/kubelet" 2>/dev/null
  bench_rm "$TMP" /var/log/pods/"${NS}"_*
}
trap cleanup EXIT

stage() { # stage FROM TO: manifests FROM..TO in the staging directory
  mkdir -p "$TMP/stage"
  rm -f "$TMP/stage"/*
  for i in $(seq "$1" "$2"); do
    cat >"$TMP/stage/p$i.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: vs-$i, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: localhost/busybox:1.36, imagePullPolicy: IfNotPresent, command: [sleep, "3600"]}]
EOF
  done
}

kubelet_yaml "$EP" "$(free_port)" "$TMP/manifests" >"$TMP/kubelet.yaml"

declare -A R
run() { # run NAME: one agent through the whole sequence
  local name=$1 c0 t0 c1 last
  mkdir -p "$TMP/manifests"
  if [ "$name" = nanolet ]; then
    "$NANOLET" --healthz-port 0 --enable-server=false --pod-manifest-path "$TMP/manifests" \
      --container-runtime-endpoint "$EP" --root-dir "$TMP/nanolet" --hostname-override perf-vs \
      --cgroups-per-qos=false --enforce-node-allocatable= >"$TMP/$name.log" 2>&1 &
  else
    "$KBIN/kubelet" --config "$TMP/kubelet.yaml" --root-dir "$TMP/kubelet" \
      --hostname-override perf-vs --v=0 >"$TMP/$name.log" 2>&1 &
  fi
  PID=$!
  sleep 20
  kill -0 "$PID" 2>/dev/null || { echo "$name exited:"; tail -20 "$TMP/$name.log"; exit 1; }
  R[$name.rss0]=$(rss_kib)
  stage 1 "$N1"
  c0=$(cpu_ns)
  t0=$(date +%s%N)
  mv "$TMP/stage"/*.yaml "$TMP/manifests/"
  wait_for 600 running "$N1" || { echo "$name did not start $N1 pods"; tail "$TMP/$name.log"; exit 1; }
  sleep 10
  c1=$(cpu_ns)
  last=$(last_started)
  R[$name.start]=$(awk -v a="$last" -v b="$t0" 'BEGIN {printf "%.0f", (a - b) / 1e6}')
  R[$name.cpu_pod]=$(awk -v c="$((c1 - c0))" -v n="$N1" 'BEGIN {printf "%.2f", c / 1e6 / n}')
  sleep 5
  R[$name.rss1]=$(rss_kib)
  stage $((N1 + 1)) "$N2"
  mv "$TMP/stage"/*.yaml "$TMP/manifests/"
  wait_for 600 running "$N2" || { echo "$name did not start $N2 pods"; tail "$TMP/$name.log"; exit 1; }
  sleep 20
  R[$name.rss2]=$(rss_kib)
  c0=$(cpu_ns); t0=$(date +%s%N)
  sleep "$IDLE"
  c1=$(cpu_ns); t1=$(date +%s%N)
  R[$name.idle]=$(awk -v c="$((c1 - c0))" -v t="$((t1 - t0))" 'BEGIN {printf "%.3f", 100 * c / t}')
  echo "$name: rss ${R[$name.rss0]} / ${R[$name.rss1]} / ${R[$name.rss2]} KiB at 0 / $N1 / $N2 pods," \
    "start $N1 pods ${R[$name.start]} ms, ${R[$name.cpu_pod]} ms CPU per pod, idle ${R[$name.idle]} % at $N2 pods"
  stop_agent
}

run nanolet
run kubelet
ratio() { awk -v a="${R[nanolet.$1]}" -v b="${R[kubelet.$1]}" 'BEGIN {printf "%.3f", a / b}'; }
printf '| what | nanolet | kubelet | nanolet / kubelet |\n| --- | --- | --- | --- |\n'
printf '| RSS, 0 pods (KiB) | %s | %s | %s |\n' "${R[nanolet.rss0]}" "${R[kubelet.rss0]}" "$(ratio rss0)"
printf '| RSS, %s pods (KiB) | %s | %s | %s |\n' "$N1" "${R[nanolet.rss1]}" "${R[kubelet.rss1]}" "$(ratio rss1)"
printf '| RSS, %s pods (KiB) | %s | %s | %s |\n' "$N2" "${R[nanolet.rss2]}" "${R[kubelet.rss2]}" "$(ratio rss2)"
printf '| idle CPU, %s pods (%% of one core) | %s | %s | %s |\n' "$N2" "${R[nanolet.idle]}" "${R[kubelet.idle]}" "$(ratio idle)"
printf '| time to start %s pods (ms) | %s | %s | %s |\n' "$N1" "${R[nanolet.start]}" "${R[kubelet.start]}" "$(ratio start)"
printf '| CPU per pod started (ms) | %s | %s | %s |\n' "${R[nanolet.cpu_pod]}" "${R[kubelet.cpu_pod]}" "$(ratio cpu_pod)"
