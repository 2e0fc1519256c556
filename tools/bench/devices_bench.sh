#!/usr/bin/env bash
# Devices: nanolet's memory with 4 device plugins (64 devices) and 20 pods
# holding one device each, and its idle CPU with all of it running
# (docs/PERFORMANCE.md, "Devices: 4 plugins, 64 devices, 20 device pods").
#
#   tools/bench/devices_bench.sh [BUILD_DIR=build] [WINDOW_S=60]
#
# nanolet runs standalone with static pods (as scale_bench.sh: server off,
# healthz port 0, so it takes no port; its own --root-dir) on the test
# containerd: CRI_ENDPOINT, else NANOLET_TEST_CRI_ENDPOINT (tools/testenv/env.sh),
# else the one tools/testenv/setup.sh sets up. Four nanolet-fake-device-plugin
# (test/fakes) register nanolet.test/dev-a .. dev-d, 16 devices each, on
# <root-dir>/device-plugins/kubelet.sock. Then 20 static pods (busybox sleep)
# in namespace perf-devices, each asking for one device, 5 of each resource.
# RSS, PSS and anonymous memory (/proc/PID/smaps_rollup) are read SETTLE_S (15)
# seconds after each step: the agent alone, with the plugins registered, with
# the 20 pods Running; then the agent's CPU over WINDOW_S seconds (schedstat,
# all threads) as a share of one core. Every pod must have got a device of
# its own (the DEVICE_IDS the fake's Allocate puts in the container's env).
# Clean-up: the pods removed (sandboxes gone), the agent and plugins stopped,
# the temporary directory and the pods' logs removed.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-build}
WINDOW_S=${2:-60}
SETTLE_S=${SETTLE_S:-15}
PLUGINS=(a b c d)
PER_PLUGIN=16
PODS=20
NANOLET=$BUILD/agent/nanolet
FAKE=$BUILD/test/fakes/nanolet-fake-device-plugin
NS=perf-devices
. "$HERE/bench_lib.sh"
[ -x "$NANOLET" ] && [ -x "$FAKE" ] || { echo "no $NANOLET or $FAKE (build first)"; exit 1; }
EP=${CRI_ENDPOINT:-${NANOLET_TEST_CRI_ENDPOINT:-}}
if [ -z "$EP" ]; then
  EP=$("$HERE/../testenv/setup.sh" 2>/tmp/nanolet-devices-setup.log) ||
    { tail -5 /tmp/nanolet-devices-setup.log; exit 1; }
fi
TMP=$(mktemp -d /tmp/nanolet-devices.XXXXXX)
M=$TMP/manifests
ROOT=$TMP/root
DP=$ROOT/device-plugins
mkdir -p "$M"
PID=
FPIDS=()

cri() { "$NANOLET" cri -r "$EP" "$@" 2>/dev/null; }
running() { cri ps -o json | jq --arg ns "$NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns and .state == "CONTAINER_RUNNING")] | length'; }
sandboxes() { cri pods -o json | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
is() { [ "$($1)" = "$2" ]; }
cpu_ns() { cat /proc/"$PID"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; } # all threads, ns
mem() { # RSS (status), PSS and anonymous (smaps_rollup), KiB
  printf 'rss_kib=%s pss_kib=%s anon_kib=%s' "$(awk '/^VmRSS/ {print $2}' "/proc/$PID/status")" \
    "$(awk '/^Pss:/ {print $2}' "/proc/$PID/smaps_rollup")" "$(awk '/^Anonymous:/ {print $2}' "/proc/$PID/smaps_rollup")"
}
alive() { kill -0 "$PID" 2>/dev/null || { echo "nanolet exited:"; tail "$TMP/agent.log"; exit 1; }; }
step() { # step NAME: settle, then the memory figures
  sleep "$SETTLE_S"
  alive
  echo "$1: $(mem)"
}

cleanup() {
  rm -f "$M"/*.yaml
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    wait_until 300 is sandboxes 0 || echo "clean-up: sandboxes of $NS left"
    kill "$PID" && wait "$PID" 2>/dev/null
  fi
  local f
  for f in "${FPIDS[@]}"; do kill "$f" 2>/dev/null && wait "$f" 2>/dev/null; done
  [ -n "${KEEP:-}" ] && echo "kept $TMP" || bench_rm "$TMP"
  rm -rf /var/log/pods/"${NS}"_*
}
trap cleanup EXIT

"$NANOLET" --healthz-port 0 --enable-server=false --pod-manifest-path "$M" \
  --container-runtime-endpoint "$EP" --root-dir "$ROOT" --hostname-override perf-devices \
  --cgroups-per-qos=false --enforce-node-allocatable= >>"$TMP/agent.log" 2>&1 &
PID=$!
echo "runtime: $EP; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
wait_until 10 test -S "$DP/kubelet.sock" || { echo "no $DP/kubelet.sock"; tail "$TMP/agent.log"; exit 1; }
step "agent alone"

for r in "${PLUGINS[@]}"; do
  "$FAKE" --resource "nanolet.test/dev-$r" --count "$PER_PLUGIN" "$DP" >"$TMP/plugin-$r.log" 2>&1 &
  FPIDS+=($!)
done
watching() { # every plugin has the agent's ListAndWatch stream
  local r
  for r in "${PLUGINS[@]}"; do grep -qx watch "$TMP/plugin-$r.log" || return 1; done
}
wait_until 20 watching || { echo "plugins not watched:"; tail -n 3 "$TMP"/plugin-*.log; tail "$TMP/agent.log"; exit 1; }
step "${#PLUGINS[@]} plugins, $((${#PLUGINS[@]} * PER_PLUGIN)) devices"

for i in $(seq 1 "$PODS"); do
  r=${PLUGINS[$(((i - 1) % ${#PLUGINS[@]}))]}
  cat >"$TMP/dev-$i.tmp" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: dev-$i, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:1.36
    command: [sleep, "3600"]
    resources: {limits: {nanolet.test/dev-$r: "1"}}
EOF
  mv "$TMP/dev-$i.tmp" "$M/dev-$i.yaml"
done
t0=$SECONDS
wait_until 600 is running "$PODS" || { echo "running: $(running) of $PODS"; tail "$TMP/agent.log"; exit 1; }
echo "$PODS device pods Running after $((SECONDS - t0)) s"
# Each container's DEVICE_IDS (the fake's Allocate answer): one device each,
# no device twice within a resource.
ids=$(cri ps -o json | jq -r --arg ns "$NS" '.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns) | .id' |
  while read -r id; do
    cri inspect -o json "$id" | jq -r '.info.config.envs[]? | select(.key == "DEVICE_IDS") | .value' | head -1
  done)
allocs=$(cat "$TMP"/plugin-*.log | grep -c '^allocate ')
echo "Allocate calls: $allocs; containers with DEVICE_IDS: $(grep -c . <<<"$ids")"
[ "$allocs" = "$PODS" ] || { echo "expected $PODS Allocate calls"; exit 1; }
[ "$(grep -c '^dev-[0-9]*$' <<<"$ids")" = "$PODS" ] || { echo "expected one device in each of $PODS containers: $ids"; exit 1; }
for r in "${PLUGINS[@]}"; do
  n=$(grep -c '^allocate ' "$TMP/plugin-$r.log")
  u=$(grep '^allocate ' "$TMP/plugin-$r.log" | sort -u | wc -l)
  [ "$n" = "$u" ] || { echo "nanolet.test/dev-$r: a device allocated twice"; exit 1; }
done
step "$PODS device pods"

c0=$(cpu_ns)
sleep "$WINDOW_S"
c1=$(cpu_ns)
alive
awk -v d=$((c1 - c0)) -v w="$WINDOW_S" 'BEGIN {printf "idle CPU over %d s, all threads: %.3f %% of a core (%.1f ms)\n", w, d / (w * 1e7), d / 1e6}'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$M"/*.yaml
wait_until 300 is sandboxes 0 || { echo "sandboxes of $NS left after 300 s"; exit 1; }
echo "pods removed"
