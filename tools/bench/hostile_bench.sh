#!/usr/bin/env bash
# Hostile clients against one agent (fake CRI, the kubelet server with a
# client CA, the local /healthz): the RSS that an idle TCP connection and a
# stalled TLS handshake cost, and the latency of an authenticated /pods
# (p50/p99, sequential curl calls) with no flood and during each flood of
# test/e2e/hostile_floods.sh. Loopback only; bounded in time (about 2 min).
#   tools/bench/hostile_bench.sh [BUILD_DIR]    (docs/PERFORMANCE.md, "Hostile clients")
set -uo pipefail
# shellcheck source=tools/bench/bench_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
NANOLET=$BUILD/agent/nanolet
FAKE_CRI=$BUILD/test/fakes/nanolet-fake-cri
PY=/usr/bin/python3
HOSTILE=test/e2e/hostile_client.py
. test/e2e/hostile_lib.sh
TLSFIX=$PWD/test/fixtures/tls
SECS=${HOSTILE_BENCH_SECS:-10}
N=${HOSTILE_BENCH_CONNS:-120} # under the 128 unproven connections a listener keeps
ulimit -n 8192
T=$(mktemp -d /tmp/nanolet-hostile.XXXXXX)
cleanup() {
  kill "${AGENT:-}" "${CRI:-}" 2>/dev/null
  wait 2>/dev/null
  bench_rm "$T"
}
trap cleanup EXIT

"$FAKE_CRI" --socket "$T/cri.sock" >/dev/null 2>&1 &
CRI=$!
for _ in $(seq 50); do [ -S "$T/cri.sock" ] && break; sleep 0.1; done
hostile_config "$T/config.yaml" "$TLSFIX/ca.crt"
KPORT=$(free_port); HPORT=$(free_port)
mkdir -p "$T/manifests"
"$NANOLET" --config "$T/config.yaml" --healthz-port "$HPORT" --port "$KPORT" --read-only-port 0 \
  --cert-dir "$T/pki" --pod-manifest-path "$T/manifests" \
  --container-runtime-endpoint "unix://$T/cri.sock" --root-dir "$T/root" \
  --hostname-override hostile-bench >"$T/agent.log" 2>&1 &
AGENT=$!
for _ in $(seq 100); do [ "$(curl -s "http://127.0.0.1:$HPORT/healthz")" = ok ] && break; sleep 0.1; done
rss() { awk '/^VmRSS/ {print $2}' "/proc/$AGENT/status"; }
pods() {
  curl -sk --max-time 5 --cert "$TLSFIX/client.crt" --key "$TLSFIX/client.key" -o /dev/null \
    -w '%{http_code} %{time_total}\n' "https://127.0.0.1:$KPORT/pods"
}
# latency LABEL SECONDS: sequential /pods for SECONDS; prints p50/p99 in ms.
latency() {
  local end=$((SECONDS + $2)) f="$T/lat"
  : >"$f"
  while [ $SECONDS -lt $end ]; do pods >>"$f"; done
  sort -k2 -n "$f" | awk -v l="$1" '$1 == 200 {t[n++] = $2 * 1000} $1 != 200 {bad++}
    END {printf "%-58s %5d calls  p50 %6.1f ms  p99 %6.1f ms  failed %d\n", l, n,
         t[int(n * 0.5)], t[int(n * 0.99)], bad + 0}'
}
held() { ss -Htn state established "( sport = :$KPORT )" | wc -l; }
# Idle sockets, each from an address of its own (under the 32 unproven
# connections an address keeps): what each adds to the RSS, held for 4 s.
per_conn() {
  local label=$1 ntcp=$2 ntls=$3 r0 r1 n
  sleep 11 # a heap trim (every 10 s) first
  r0=$(rss)
  HOSTILE_SOURCES=$((ntcp + ntls)) "$PY" "$HOSTILE" idle "$KPORT" "$ntcp" "$ntls" 4 >/dev/null &
  local a=$!
  sleep 3
  r1=$(rss)
  n=$(held)
  wait "$a"
  awk -v l="$label" -v a="$r0" -v b="$r1" -v n="$n" \
    'BEGIN {printf "%-58s %5d held  RSS %d -> %d KiB: %.1f KiB each\n", l, n, a, b, (b - a) / n}'
}
echo "nanolet $("$NANOLET" --version) | $(nproc) cores | $(date -u +%F)"
sleep 2
echo "start RSS $(rss) KiB"
per_conn "idle TCP connection (kubelet port, TLS not begun)" "$N" 0
per_conn "stalled TLS handshake (a ClientHello cut short)" 0 "$N"
latency "authenticated /pods, no flood" 5
during() {
  local label=$1; shift
  "$PY" "$HOSTILE" "$@" >"$T/attack" 2>&1 &
  local a=$!
  sleep 1
  latency "$label" $((SECS - 2))
  wait "$a"
  echo "    $(cat "$T/attack"); RSS now $(rss) KiB"
}
# The floods come from one address, except the slowloris and the idle sockets
# on the kubelet port: 64 addresses (the bound of 128 unproven connections
# applies, not only the 32 per address).
during "during pipelining, 8 MiB, never reading (kubelet port)" pipeline "$KPORT" 1 8 "$SECS"
during "during pipelining, 8 MiB, never reading (/healthz)" pipeline "$HPORT" 0 8 "$SECS"
during "during 64 POSTs of 1 MiB without credentials" bodies "$KPORT" 1 64 "$SECS"
"$PY" "$HOSTILE" slowloris "$HPORT" 0 160 "$SECS" >/dev/null 2>&1 &
L=$!
HOSTILE_SOURCES=64 during "during slowloris, 1024 kubelet port (64 addresses) + 160 /healthz" slowloris "$KPORT" 1 1024 "$SECS"
wait "$L"
HOSTILE_SOURCES=64 during "during 500 idle TCP + 200 stalled TLS (64 addresses)" idle "$KPORT" 500 200 "$SECS"
