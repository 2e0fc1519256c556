#!/usr/bin/env bash
# Disk reclaimed per garbage collection round (docs/PERFORMANCE.md, "Eviction
# and garbage collection"):
#   tools/bench/gc_bench.sh [BUILD_DIR] [IMAGES] [MIB]
# On a containerd of its own (tools/testenv/setup.sh with its own state dir,
# bridge and subnet, its root on a 1 GiB tmpfs; purged at the end), like
# test/e2e/gc.sh: IMAGES unused images (default 8) of MIB MiB of random data
# (default 16) and a static pod whose container writes MIB MiB into its
# writable layer and fails three times, then runs. The agent is restarted with
# --maximum-dead-containers-per-container 0, then again with
# imageGCHighThresholdPercent 1 and imageGCLowThresholdPercent 0: the rounds at
# start free the dead containers, then every unused image. For each: the bytes
# the filesystem got back (statfs) and how long the round took.
set -uo pipefail
BUILD=$(cd "${1:-build}" && pwd)
N=${2:-8}
MIB=${3:-16}
cd "$(dirname "$0")/../.."
. tools/bench/bench_lib.sh
NANOLET=$BUILD/agent/nanolet
TESTENV=$PWD/tools/testenv
DIR=/var/lib/nanolet-gc-bench-testenv
NS=nanolet-e2e-gc-bench
TMP=$(mktemp -d /tmp/nanolet-bench.XXXXXX)
M=$TMP/manifests
mkdir -p "$M" "$DIR/root"
PID=
private() {
  NANOLET_TESTENV_DIR=$DIR NANOLET_TESTENV_BRIDGE=nl-br4 NANOLET_TESTENV_SUBNET=10.85.0.0/24 \
    NANOLET_TESTENV_NO_REGISTRY=1 "$@"
}
start() { # start LOGFILE FLAGS...
  local log=$1; shift
  "$NANOLET" --healthz-port 0 --enable-server=false --pod-manifest-path "$M" \
    --container-runtime-endpoint "$EP" --root-dir "$TMP/root" --hostname-override gc-bench \
    --file-check-frequency 1s "$@" >"$log" 2>&1 &
  PID=$!
}
stop() { [ -n "$PID" ] && kill "$PID" && wait "$PID" 2>/dev/null; PID=; }
cleanup() {
  rm -f "$M"/*.yaml
  if [ -n "${EP:-}" ]; then
    [ -n "$PID" ] || start "$TMP/cleanup.log"
    wait_until 60 no_sandboxes
    stop
  fi
  private "$TESTENV/teardown.sh" --purge >/dev/null 2>&1
  umount "$DIR/root" 2>/dev/null
  bench_rm "$TMP"
}
trap cleanup EXIT
mountpoint -q "$DIR/root" || mount -t tmpfs -o size=1g nanolet-gc-bench "$DIR/root" || exit 1
EP=$(private "$TESTENV/setup.sh" 2>"$TMP/setup.log") || { tail -5 "$TMP/setup.log"; exit 1; }
cri() { "$NANOLET" cri -r "$EP" "$@"; }
no_sandboxes() { [ "$(cri pods -o json | jq '.items | length')" = 0 ]; }
used() { df -B1 --output=used "$DIR/root" | tail -1; }

# ---- the unused images ----
. "$TESTENV/gc_fixtures.sh"
random_images "$TMP/images.tar" "$N" "$MIB" u "$TMP"
ctr --address "${EP#unix://}" -n k8s.io images import --snapshotter "$(cat "$DIR/snapshotter")" \
  --base-name localhost/gcbench "$TMP/images.tar" >/dev/null || exit 1

# ---- dead containers with MIB MiB each in their writable layer ----
failing_pod writer "$NS" "$MIB" >"$M/w.yaml"
dead_is() { [ "$(cri ps -a -o json | jq '[.containers[] | select(.state == "CONTAINER_EXITED")] | length')" = "$1" ]; }
start "$TMP/fill.log" --maximum-dead-containers-per-container=-1
wait_until 120 dead_is 3 || echo "dead containers: not 3"
stop

# round LABEL FLAGS...: the restart, the bytes back and the time they took
round() {
  local label=$1 u0 t0 u1 t1 log=$TMP/$1.log; shift
  sync
  u0=$(used); t0=$(date +%s%N)
  start "$log" -v 3 "$@"
  # done when the usage stops falling for a second
  local last=$u0 still=0
  while [ $still -lt 10 ]; do
    sleep 0.1
    u1=$(used)
    if [ "$u1" -lt "$last" ]; then last=$u1; t1=$(date +%s%N); still=0; else still=$((still + 1)); fi
  done
  stop
  printf '%-16s %5d MiB back in %5d ms (usage %d -> %d MiB)\n' "$label" $(((u0 - last) >> 20)) \
    $(((${t1:-$t0} - t0) / 1000000)) $((u0 >> 20)) $((last >> 20))
  grep -hoE "container GC: removing [0-9]+ containers|image GC: removed images of [0-9]+ bytes" "$log" | sed 's/^/  /'
}
cat >"$TMP/images.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 1
imageGCLowThresholdPercent: 0
imageMinimumGCAge: 0s
evictionHard: {memory.available: "1Mi"}
EOF
round containers --maximum-dead-containers-per-container 0
round images --config "$TMP/images.yaml" --maximum-dead-containers-per-container 0
