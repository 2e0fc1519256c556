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
set -uo pipefail
cd "$(dirname "$0")/../.."
DIRS=("${1:-build}" "${2:-build-sc}" "${3:-build-static}")
NAMES=(debian self-contained static)
RUNS=${RUNS:-3}
SETTLE_S=${SETTLE_S:-15}
EP=${CRI_ENDPOINT:-${NANOLET_TEST_CRI_ENDPOINT:?. tools/testenv/env.sh, or set CRI_ENDPOINT}}
TMP=$(mktemp -d /tmp/nanolet-builds-mem.XXXXXX)
PID=
cleanup() {
  [ -z "$PID" ] || { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }
  rm -rf "$TMP"
}
trap cleanup EXIT
for d in "${DIRS[@]}"; do
  [ -x "$d/agent/nanolet" ] || { echo "no $d/agent/nanolet: build it first" >&2; exit 1; }
done

measure() { # BINARY -> "rss pss anon" in KiB
  local log=$TMP/agent.log
  mkdir -p "$TMP/m" && : >"$log"
  "$1" --healthz-port 0 --enable-server=false --pod-manifest-path "$TMP/m" \
    --container-runtime-endpoint "$EP" --root-dir "$TMP/root" --hostname-override builds-mem \
    --cgroups-per-qos=false --enforce-node-allocatable= >"$log" 2>&1 &
  PID=$!
  local end=$((SECONDS + 30))
  until grep -q 'container runtime containerd' "$log"; do
    kill -0 "$PID" 2>/dev/null && [ $SECONDS -lt $end ] || { echo "$1 did not start:" >&2; tail -5 "$log" >&2; exit 1; }
    sleep 0.2
  done
  sleep "$SETTLE_S"
  awk '/^Rss:/ {r = $2} /^Pss:/ {p = $2} /^Anonymous:/ {a = $2} END {print r, p, a}' "/proc/$PID/smaps_rollup"
  kill "$PID" && wait "$PID"
  PID=
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "runtime $EP, settle ${SETTLE_S}s, $RUNS runs, $(date -u +%Y-%m-%d), $(git rev-parse --short HEAD 2>/dev/null)"
printf '%-15s %-30s %4s %9s %9s %9s\n' build binary run "RSS KiB" "PSS KiB" "anon KiB"
for r in $(seq 1 "$RUNS"); do
  for i in 0 1 2; do
    read -r rss pss anon < <(measure "${DIRS[$i]}/agent/nanolet")
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
