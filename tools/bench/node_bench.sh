#!/usr/bin/env bash
# A joined node at the cost of a standalone one (docs/PERFORMANCE.md, "Joined node").
#   . tools/testenv/env.sh; tools/bench/node_bench.sh [BUILD_DIR] [WINDOW_S]
# Brings up the test control plane (tools/testenv/controlplane.sh) and runs
# nanolet standalone, then joined with the node credential, each with 0 and then
# 50 running busybox pods. For each: RSS once settled and the CPU share over an
# idle window of WINDOW_S seconds (default 60). Joined, also what it sends the
# apiserver: bytes both ways on its one connection (the kernel's tcp_info, `ss`)
# and, in a second run at -v=6 where the client logs each request, the requests
# by verb and resource, both scaled to an hour.
set -uo pipefail
BUILD=${1:-build}
WINDOW=${2:-60}
: "${NANOLET_TEST_CRI_ENDPOINT:?. tools/testenv/env.sh first}"
NANOLET=$BUILD/agent/nanolet
NS=nanolet-e2e-bench
TMP=$(mktemp -d /tmp/nanolet-bench.XXXXXX)
M=$TMP/manifests
mkdir -p "$M"
PID=
env_file=$(tools/testenv/controlplane.sh up) || exit 1
# shellcheck source=/dev/null
. "$env_file"
NODE=$NANOLET_TEST_NODE_NAME
kubectl() { "$NANOLET_TEST_KUBECTL" "$@"; }

cri() { "$NANOLET" cri -r "$NANOLET_TEST_CRI_ENDPOINT" "$@"; }
ns_running() { cri ps -o json | jq --arg ns "$NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns)] | length'; }
ns_sandboxes() { cri pods -o json | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
cpu_ns() { awk '{print $1}' "/proc/$PID/schedstat"; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
# RSS split: anonymous (the agent's own heap and stacks) and clean file pages
# (code of the binary and its libraries, shared and reclaimable), and PSS.
mem_split() { awk '/^(Anonymous|Shared_Clean|Pss):/ {printf " %s %d", tolower($1), $2}' "/proc/$PID/smaps_rollup"; }
. "$(dirname "$0")/bench_lib.sh"
n_running_is() { [ "$(ns_running)" = "$1" ]; }
ns_clear() { [ "$(ns_sandboxes)" = 0 ]; }
# bytes_sent and bytes_received of nanolet's connection to the apiserver
conn_bytes() {
  ss -tinpH state established "( dport = :${NANOLET_TEST_APISERVER##*:} )" |
    awk -v p="pid=$PID," 'index($0, p) {getline; for (i = 1; i <= NF; i++) if ($i ~ /^bytes_(sent|received):/) {split($i, a, ":"); s = s " " a[2]}} END {print s}'
}
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
start() { # start LOGFILE FLAGS...
  local log=$1; shift
  "$NANOLET" --healthz-port 0 --enable-server=false --pod-manifest-path "$M" --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" \
    --root-dir "$TMP/root" --hostname-override "$NODE" --file-check-frequency 1s "$@" >"$log" 2>&1 &
  PID=$!
}
stop() { [ -n "$PID" ] && kill "$PID" && wait "$PID" 2>/dev/null; PID=; }
cleanup() {
  rm -f "$M"/*.yaml
  [ -n "$PID" ] || start "$TMP/cleanup.log"
  wait_until 120 ns_clear
  stop
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  bench_rm "$TMP"
}
trap cleanup EXIT
# window LABEL JOINED: settles 15 s, then one idle window
window() {
  sleep 15
  local r0 c0 t0 b0 c1 t1 b1
  r0=$(rss_kib); c0=$(cpu_ns); t0=$(date +%s%N); b0=$([ "$2" = 1 ] && conn_bytes)
  sleep "$WINDOW"
  c1=$(cpu_ns); t1=$(date +%s%N); b1=$([ "$2" = 1 ] && conn_bytes)
  printf '%-22s RSS %5d KiB (%s ) idle CPU %.3f %% of one core' "$1" "$(rss_kib)" "$(mem_split)" \
    "$(awk -v c=$((c1 - c0)) -v t=$((t1 - t0)) 'BEGIN {print 100 * c / t}')"
  if [ "$2" = 1 ]; then
    read -r s0 v0 <<<"$b0"; read -r s1 v1 <<<"$b1"
    awk -v s=$((s1 - s0)) -v v=$((v1 - v0)) -v t=$((t1 - t0)) \
      'BEGIN {printf "  to apiserver %.0f B/h, from it %.0f B/h", s * 3.6e12 / t, v * 3.6e12 / t}'
  fi
  echo " (RSS at window start $r0 KiB)"
}

for joined in 0 1; do
  flags=()
  [ $joined = 1 ] && flags=(--kubeconfig "$NANOLET_TEST_NODE_KUBECONFIG")
  label=$([ $joined = 1 ] && echo joined || echo standalone)
  rm -f "$M"/*.yaml
  start "$TMP/$label.log" "${flags[@]}"
  [ $joined = 1 ] && { wait_until 30 node_ready || echo "node not Ready"; }
  window "$label, 0 pods" $joined
  bench_pods "$M" 50 "$NS"
  wait_until 180 n_running_is 50 || echo "only $(ns_running) of 50 pods running"
  window "$label, 50 pods" $joined
  rm -f "$M"/*.yaml # the next run starts on an empty runtime
  wait_until 120 ns_clear || echo "pods left in $NS"
  stop
done

# Requests: the same joined node with 50 pods at -v=6, where the API client logs
# one line per request ("GET https://... 200 OK in N milliseconds").
start "$TMP/v6.log" --kubeconfig "$NANOLET_TEST_NODE_KUBECONFIG" -v 6
wait_until 180 n_running_is 50
sleep 15
l0=$(wc -l <"$TMP/v6.log"); t0=$(date +%s%N)
sleep "$WINDOW"
t1=$(date +%s%N)
echo "requests per hour, joined with 50 pods:"
tail -n +"$((l0 + 1))" "$TMP/v6.log" | grep -oE '\] (GET|PUT|PATCH|POST|DELETE) https://[^ ]+ [0-9]{3}' |
  sed -E 's/^\] //; s|https://[^/]+||; s/\?.*( [0-9]{3})$/\1/; s|/(nodes\|leases)/[^/ ]+|/\1/NAME|' | sort | uniq -c |
  awk -v t=$((t1 - t0)) '{n = $1; $1 = ""; printf "  %6.0f %s\n", n * 3.6e12 / t, $0; total += n}
    END {printf "  %6.0f in all\n", total * 3.6e12 / t}'
