#!/usr/bin/env bash
# API pods on the shared test control plane and containerd (docs/PERFORMANCE.md,
# "API pods"):
#   . tools/testenv/env.sh; tools/bench/api_start_bench.sh [BUILD_DIR] [REPS]
# - pod start: for N = 1, 10, 50, the time from the POSTs of N pods (one curl,
#   HTTP/2, all in flight) to the last container's startedAt (containerd's
#   clock), against pods_floor starting N pods straight through the CRI;
# - requests: the API requests per pod lifecycle (create, Running and Ready,
#   delete, gone) from nanolet's -v=6 request log, and the bytes of its
#   connection to the API server (the kernel's tcp_info, `ss`);
# - memory: RSS with 110 API pods running, after settling;
# - update: the CPU nanolet spends on one watch event of a running pod: EVENTS
#   (default 200) MODIFIED events of each kind made by admin PATCHes, one at a
#   time, nanolet's CPU (schedstat) over them less its idle CPU, per event:
#   status-only (a condition of a type nanolet does not own changes its
#   message) and metadata (an annotation changes: the pod worker syncs).
# Node nl-apiscale-bench (BENCH_NODE) with its own credential and namespace (BENCH_NS). PARTS (default
# "start requests memory update") picks the parts to run.
set -uo pipefail
# shellcheck source=tools/bench/bench_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
PARTS=${PARTS:-start requests memory update}
# CALLGRIND=1 (update only): nanolet runs under callgrind, which dumps its
# instruction counts at the start and end of each kind of events
# (${TMPDIR:-/tmp}/nanolet-callgrind.<pid>.out.<n>; callgrind_annotate them).
CALLGRIND=${CALLGRIND:-}
WRAP=
[ -n "$CALLGRIND" ] && WRAP="valgrind --tool=callgrind --callgrind-out-file=${TMPDIR:-/tmp}/nanolet-callgrind.%p.out"
mark() { [ -z "$CALLGRIND" ] || callgrind_control -d "$1" "$PID" >/dev/null 2>&1; }
EVENTS=${EVENTS:-200}
part() { [[ " $PARTS " == *" $1 "* ]]; }
BUILD=${1:-build}
REPS=${2:-5}
: "${NANOLET_TEST_CRI_ENDPOINT:?. tools/testenv/env.sh first}"
NANOLET=$BUILD/agent/nanolet
FLOOR=$BUILD/tools/bench/pods_floor
NODE=${BENCH_NODE:-nl-apiscale-bench}
NS=${BENCH_NS:-nanolet-e2e-api-start-bench}
TMP=$(mktemp -d /tmp/nanolet-bench.XXXXXX)
env_file=$(tools/testenv/controlplane.sh up) || exit 1
# shellcheck source=/dev/null
. "$env_file"
NODE_IP=$(tools/testenv/node-ip.sh) || exit 1
kubectl() { "$NANOLET_TEST_KUBECTL" "$@"; }
KC=$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes) || exit 1
ADMIN_CERT=$(dirname "$NANOLET_TEST_KUBECONFIG")/pki/admin
PID=

cri() { "$NANOLET" cri -r "$NANOLET_TEST_CRI_ENDPOINT" "$@"; }
ns_sandboxes() { cri pods -o json | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
ns_running() { cri ps -o json | jq --arg ns "$NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns)] | length'; }
last_started() { # max startedAt (ns) of the namespace's containers
  cri ps -o json | jq -r --arg ns "$NS" '.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns) | .id' |
    while read -r id; do cri inspect -o json "$id" | jq -r .status.startedAt; done | sort -n | tail -1
}
api_count() { kubectl get pods -n "$NS" --no-headers 2>/dev/null | wc -l; }
ready_count() { kubectl get pods -n "$NS" --no-headers 2>/dev/null | awk '$2 == "1/1" && $3 == "Running"' | wc -l; }
cpu_ns() { awk '{print $1}' "/proc/$PID/schedstat"; } # time on CPU, ns
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
wait_until() { # wait_until SECONDS CMD... (polls every 500 ms)
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.5; done
}
is() { [ "$("$1")" = "$2" ]; }
# bytes_sent and bytes_received of nanolet's connection to the API server
conn_bytes() {
  ss -tinpH state established "( dport = :${NANOLET_TEST_APISERVER##*:} )" |
    awk -v p="pid=$PID," 'index($0, p) {getline; for (i = 1; i <= NF; i++) if ($i ~ /^bytes_(sent|received):/) {split($i, a, ":"); s = s " " a[2]}} END {print s}'
}
cleanup() {
  kubectl delete pods -n "$NS" --all --grace-period=0 --force >/dev/null 2>&1
  [ -n "$PID" ] && wait_until 120 is ns_sandboxes 0
  [ -n "$PID" ] && kill "$PID" && wait "$PID" 2>/dev/null
  "$FLOOR" clean "$NS" >/dev/null 2>&1
  kubectl delete ns "$NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  bench_rm "$TMP" /var/log/pods/"${NS}"_floor-*
}
trap cleanup EXIT

# post FIRST LAST: POST pods pFIRST..pLAST at once (HTTP/2, one connection);
# prints the wall clock (ns) at which curl was ready to send the first one
# (connected, TLS done: curl's time_pretransfer after its launch; the exec of
# curl, a few ms, is left in nanolet's time).
post() {
  local args=() i
  for i in $(seq "$1" "$2"); do
    cat >"$TMP/p$i.json" <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p$i", "namespace": "$NS"},
 "spec": {"nodeName": "$NODE", "automountServiceAccountToken": false, "terminationGracePeriodSeconds": 1,
  "containers": [{"name": "c", "image": "localhost/busybox:1.36", "command": ["sleep", "3600"],
   "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}
EOF
    [ "$i" = "$1" ] || args+=(--next)
    args+=(--cacert "$NANOLET_TEST_K8S_CA" --cert "$ADMIN_CERT.crt" --key "$ADMIN_CERT.key" -fsS -o /dev/null
      -w '%{time_pretransfer}\n' -H 'Content-Type: application/json' --data-binary "@$TMP/p$i.json"
      "$NANOLET_TEST_APISERVER/api/v1/namespaces/$NS/pods")
  done
  local launch
  launch=$(date +%s%N)
  curl --http2 --parallel --parallel-max 100 "${args[@]}" >"$TMP/curl.out" 2>"$TMP/curl.err" ||
    { cat "$TMP/curl.err" >&2; return 1; }
  sort -n "$TMP/curl.out" | awk -v l="$launch" 'NR == 1 {printf "%.0f\n", l + $1 * 1e9}'
}
delete_all() { # graceful delete, then wait until nanolet deleted every object and sandbox
  kubectl delete pods -n "$NS" --all --wait=false >/dev/null
  wait_until 120 is api_count 0 && wait_until 60 is ns_sandboxes 0
}

kubectl delete ns "$NS" --ignore-not-found --wait=true >/dev/null 2>&1
kubectl create ns "$NS" >/dev/null
$WRAP "$NANOLET" --kubeconfig "$KC" --hostname-override "$NODE" --node-ip "$NODE_IP" -v=6 \
  --root-dir "$TMP/root" --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" \
  --healthz-port 0 >>"$TMP/agent.log" 2>&1 & # appends: the log is emptied below
PID=$!
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
wait_until 60 node_ready || { echo "node not Ready"; exit 1; }
wait_until 60 kubectl get serviceaccount default -n "$NS" >/dev/null 2>&1
sleep 5
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# --- pod start -------------------------------------------------------------------
declare -A SETTLE=([1]=2 [10]=5 [50]=20)
med() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for n in 1 10 50; do
  part start || break
  reps=$REPS; [ "$n" = 50 ] && reps=$(((REPS + 1) / 2))
  rows=()
  for r in $(seq 1 "$reps"); do
    out=$("$FLOOR" run "$n" "$NS") || { echo "floor failed"; exit 1; }
    f=${out%% *}
    "$FLOOR" clean "$NS" >/dev/null
    rm -rf /var/log/pods/"${NS}"_floor-*
    sleep 3
    t0=$(date +%s%N)
    sent=$(post 1 "$n") || { echo "POST failed"; exit 1; }
    sleep "${SETTLE[$n]}" # nobody polls while nanolet works (see pods_bench.sh)
    wait_until 120 is ns_running "$n" || { echo "nanolet did not start $n pods"; tail "$TMP/agent.log"; exit 1; }
    last=$(last_started)
    nl=$(awk -v a="$last" -v b="$t0" 'BEGIN {printf "%.1f", (a - b) / 1e6}')
    nm=$(awk -v a="$last" -v b="$sent" 'BEGIN {printf "%.1f", (a - b) / 1e6}')
    ratio=$(awk -v a="$nm" -v b="$f" 'BEGIN {printf "%.2f", a / b}')
    echo "N=$n run $r: floor $f ms, nanolet (API) $nm ms from the first request sent ($nl ms from curl's launch)," \
      "ratio $ratio, load $(cut -d' ' -f1 /proc/loadavg)"
    rows+=("$ratio $f $nm $nl")
    delete_all || { echo "pods not deleted"; exit 1; }
    sleep 3
  done
  mf=$(printf '%s\n' "${rows[@]}" | awk '{print $2}' | med)
  mn=$(printf '%s\n' "${rows[@]}" | awk '{print $3}' | med)
  mr=$(printf '%s\n' "${rows[@]}" | awk '{print $1}' | med)
  ml=$(printf '%s\n' "${rows[@]}" | awk '{print $4}' | med)
  echo "N=$n medians of ${#rows[@]}: floor $mf ms, nanolet $mn ms, ratio of medians $(awk -v a="$mn" -v b="$mf" \
    'BEGIN {printf "%.2f", a / b}'), median ratio $mr; from curl's launch $ml ms, ratio $(awk -v a="$ml" -v b="$mf" \
    'BEGIN {printf "%.2f", a / b}'); load $(cut -d' ' -f1-3 /proc/loadavg)"
done

# --- requests and bytes per pod lifecycle ------------------------------------------
if part requests; then
n=10
sleep 12 # past a full status reconcile
: >"$TMP/agent.log"
b0=$(conn_bytes)
post 1 "$n" >/dev/null
wait_until 120 is ready_count "$n"
delete_all
sleep 2
b1=$(conn_bytes)
grep -aE 'request.c:[0-9]+\] (GET|POST|PUT|PATCH|DELETE) https://' "$TMP/agent.log" |
  awk -v ns="$NS" '{for (i = 1; i < NF; i++) if ($i ~ /^(GET|POST|PUT|PATCH|DELETE)$/) break
    u = $(i + 1); sub(/^https:\/\/[^\/]*/, "", u); sub(/\?.*/, "", u)
    gsub(/\/pods\/p[0-9]+/, "/pods/NAME", u); gsub(ns, "NS", u); print $i, u, $(i + 2)}' | sort | uniq -c | sort -rn >"$TMP/requests"
echo "requests while $n pods were created, ran Ready, were deleted and went (per pod = /$n):"
cat "$TMP/requests"
awk -v n="$n" '$3 ~ /NS/ {s += $1} END {printf "requests naming the pods or their namespace: %d (%.1f per pod)\n", s, s / n}' "$TMP/requests"
read -r s0 r0 <<<"$b0"; read -r s1 r1 <<<"$b1"
echo "connection bytes: sent $((s1 - s0)) ($(((s1 - s0) / n)) per pod), received $((r1 - r0)) ($(((r1 - r0) / n)) per pod)" \
  "(includes the node's lease and status in those seconds)"
fi

# --- memory with 110 pods ---------------------------------------------------------
if part memory; then
  post 1 110 >/dev/null
  wait_until 300 is ready_count 110 || { echo "110 pods not Ready: $(ready_count)"; exit 1; }
  echo "110 pods Ready; RSS $(rss_kib) KiB"
  sleep 30
  echo "RSS with 110 API pods after 30 s more: $(rss_kib) KiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
  delete_all
fi

# --- one watch event ---------------------------------------------------------------
part update || exit 0
# patches KIND: EVENTS patches of p1 in one curl (HTTP/2, one at a time)
patches() {
  local args=() i sub ctype
  for i in $(seq "$EVENTS"); do
    if [ "$1" = status ]; then
      sub=/status ctype=application/strategic-merge-patch+json
      printf '{"status":{"conditions":[{"type":"example.com/Bench","status":"True","message":"m%s"}]}}' "$i" >"$TMP/u$i"
    else
      sub= ctype=application/merge-patch+json
      printf '{"metadata":{"annotations":{"example.com/bench":"a%s"}}}' "$i" >"$TMP/u$i"
    fi
    [ "$i" = 1 ] || args+=(--next)
    args+=(--cacert "$NANOLET_TEST_K8S_CA" --cert "$ADMIN_CERT.crt" --key "$ADMIN_CERT.key" -fsS -o /dev/null
      -X PATCH -H "Content-Type: $ctype" --data-binary "@$TMP/u$i"
      "$NANOLET_TEST_APISERVER/api/v1/namespaces/$NS/pods/p1$sub")
  done
  curl --http2 "${args[@]}"
}
post 1 1 >/dev/null
wait_until 120 is ready_count 1 || { echo "pod not Ready"; exit 1; }
sleep 12 # past a status reconcile
c0=$(cpu_ns); t0=$(date +%s%N); sleep 10; c1=$(cpu_ns); t1=$(date +%s%N)
idle=$(awk -v c="$((c1 - c0))" -v t="$((t1 - t0))" 'BEGIN {print c / t}') # CPU s per s
echo "idle: $(awk -v i="$idle" 'BEGIN {printf "%.3f", i * 100}') % of one core; load $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in status metadata; do
  mark "before-$kind"
  c0=$(cpu_ns); t0=$(date +%s%N)
  patches "$kind" || { echo "PATCH failed"; exit 1; }
  sleep "${SETTLE:-3}" # the last events handled (and the syncs they cause)
  mark "$kind"
  c1=$(cpu_ns); t1=$(date +%s%N)
  awk -v c="$((c1 - c0))" -v t="$((t1 - t0))" -v i="$idle" -v n="$EVENTS" -v k="$kind" \
    'BEGIN {printf "%s: %d events in %.1f s, nanolet CPU %.1f ms, %.1f us per event (idle deducted)\n", k, n, t / 1e9, c / 1e6, (c - i * t) / 1e3 / n}'
  sleep 12
done
delete_all
