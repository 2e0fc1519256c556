#!/usr/bin/env bash
# API volumes on the shared test control plane and containerd (docs/PERFORMANCE.md,
# "API volumes"):
#   . tools/testenv/env.sh; tools/bench/api_volumes_bench.sh [BUILD_DIR] [UPDATES] [PODS]
# - update: UPDATES (default 20) times, a ConfigMap's key is PATCHed (curl, the
#   admin's certificate) and the time from the request's send to the new content
#   in the volume file that the running container mounts is measured (polled
#   every 5 ms on the host: the bind mount shows the same file);
# - PODS (default 50) pods, each mounting a configMap volume, a secret volume and
#   the projected kube-api-access volume (token, kube-root-ca.crt, namespace):
#   nanolet's RSS once all run and 30 s later, and its idle CPU over 60 s after
#   that (schedstat), as a share of one core.
# PLAIN=1: pods p1.. without volumes (automountServiceAccountToken false), the
# baseline that the volumes' cost is read against.
# SPLIT=1: where the memory is at the end: the kernel's split of RSS (anonymous,
# file), glibc's heap (malloc_stats through gdb, into the agent's log) and the RSS
# after a malloc_trim(0) made through gdb (what glibc holds free but mapped).
# WRAP: a command to run nanolet under (valgrind --tool=massif ...; it must exec
# nanolet in the same process).
# Node nanolet-satoken-bench (NODE=...) with its own credential and namespace.
set -uo pipefail
# shellcheck source=tools/bench/bench_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
BUILD=${1:-build}
UPDATES=${2:-20}
PODS=${3:-50}
: "${NANOLET_TEST_CRI_ENDPOINT:?. tools/testenv/env.sh first}"
NANOLET=$BUILD/agent/nanolet
NODE=${NODE:-nanolet-satoken-bench}
NS=${NS:-satoken-api-volumes-bench}
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
cpu_ns() { awk '{print $1}' "/proc/$PID/schedstat"; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
wait_until() { local end=$((SECONDS + $1)); shift; until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.5; done; }
is() { [ "$("$1")" = "$2" ]; }
cleanup() {
  kubectl delete pods -n "$NS" --all --grace-period=0 --force >/dev/null 2>&1
  [ -n "$PID" ] && wait_until 180 is ns_sandboxes 0
  [ -n "$PID" ] && kill "$PID" && wait "$PID" 2>/dev/null
  kubectl delete ns "$NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  bench_rm "$TMP"
}
trap cleanup EXIT

pod() { # pod NAME: a pod with the three volumes (the token volume from admission)
  if [ -n "${PLAIN:-}" ] && [ "$1" != p0 ]; then
    cat <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "namespace": "$NS"},
 "spec": {"nodeName": "$NODE", "terminationGracePeriodSeconds": 1, "automountServiceAccountToken": false,
  "containers": [{"name": "c", "image": "localhost/busybox:1.36", "command": ["sleep", "3600"],
   "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}
EOF
    return
  fi
  cat <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "namespace": "$NS"},
 "spec": {"nodeName": "$NODE", "terminationGracePeriodSeconds": 1,
  "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}, {"name": "sec", "secret": {"secretName": "sec"}}],
  "containers": [{"name": "c", "image": "localhost/busybox:1.36", "command": ["sleep", "3600"],
   "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}, {"name": "sec", "mountPath": "/sec"}],
   "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}
EOF
}

kubectl delete ns "$NS" --ignore-not-found --wait=true >/dev/null 2>&1
kubectl create ns "$NS" >/dev/null
wait_until 60 kubectl get serviceaccount default -n "$NS" >/dev/null 2>&1
kubectl create configmap cfg -n "$NS" --from-literal=k=v0 >/dev/null
kubectl create secret generic sec -n "$NS" --from-literal=password=p >/dev/null
${WRAP:-} "$NANOLET" --kubeconfig "$KC" --hostname-override "$NODE" --node-ip "$NODE_IP" \
  --root-dir "$TMP/root" --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" \
  --healthz-port 0 --read-only-port 0 --port "$(free_port)" --cert-dir "$TMP/pki" >"$TMP/agent.log" 2>&1 &
PID=$!
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# --- update latency ---------------------------------------------------------------
pod p0 | kubectl apply -f - >/dev/null
wait_until 60 is ns_running 1 || { echo "p0 did not start"; tail "$TMP/agent.log"; exit 1; }
UID0=$(kubectl get pod -n "$NS" p0 -o jsonpath='{.metadata.uid}')
FILE=$TMP/root/pods/$UID0/volumes/kubernetes.io~configmap/cfg/k
for i in $(seq "$UPDATES"); do
  printf '{"data":{"k":"v%s"}}' "$i" >"$TMP/patch"
  launch=$(date +%s%N)
  curl --cacert "$NANOLET_TEST_K8S_CA" --cert "$ADMIN_CERT.crt" --key "$ADMIN_CERT.key" -fsS -o /dev/null \
    -w '%{time_pretransfer}\n' -X PATCH -H 'Content-Type: application/merge-patch+json' \
    --data-binary "@$TMP/patch" "$NANOLET_TEST_APISERVER/api/v1/namespaces/$NS/configmaps/cfg" >"$TMP/pt" &
  curl_pid=$!
  until [ "$(cat "$FILE" 2>/dev/null)" = "v$i" ]; do sleep 0.005; done
  seen=$(date +%s%N)
  wait "$curl_pid"
  awk -v l="$launch" -v s="$seen" '{printf "%.1f\n", (s - (l + $1 * 1e9)) / 1e6}' "$TMP/pt"
  sleep 0.5
done >"$TMP/lat"
sort -n "$TMP/lat" | awk '{a[NR] = $1} END {printf "ConfigMap update to the file in the container, %d updates: median %.0f ms, p90 %.0f ms, max %.0f ms\n", NR, a[int((NR + 1) / 2)], a[int(NR * 0.9 + 0.5)], a[NR]}'

# --- PODS pods: RSS and idle CPU -----------------------------------------------------
for i in $(seq 1 $((PODS - 1))); do pod "p$i"; done | kubectl apply -f - >/dev/null
wait_until 400 is ns_running "$PODS" || { echo "not all pods run: $(ns_running)"; exit 1; }
echo "$PODS pods running${PLAIN:+ (p1.. without volumes)}; RSS $(rss_kib) KiB"
sleep 30
echo "RSS after 30 s more: $(rss_kib) KiB"
c0=$(cpu_ns); t0=$(date +%s%N); sleep 60; c1=$(cpu_ns); t1=$(date +%s%N)
awk -v c="$((c1 - c0))" -v t="$((t1 - t0))" 'BEGIN {printf "idle CPU over %.0f s: %.3f %% of one core\n", t / 1e9, 100 * c / t}'
echo "RSS at the end: $(rss_kib) KiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${SPLIT:-}" ]; then
  grep -E '^(Rss|Anonymous|Pss_Anon|Pss_File|Shared_Clean|Private_Clean|Private_Dirty)' "/proc/$PID/smaps_rollup" | tr -s ' ' | paste -sd' '
  awk '/\[heap\]/ {h = 1; next} /^[0-9a-f]+-/ {h = 0} h && /^Rss/ {print "[heap] RSS: " $2 " KiB"}' "/proc/$PID/smaps"
  gdb -p "$PID" -batch -ex 'call (void)malloc_stats()' >/dev/null 2>&1
  awk '/^Arena 0:/ {s = ""} /^(Arena|system|in use|Total|max mmap)/ {s = s " " $0} END {print "malloc_stats:" s}' "$TMP/agent.log" | tr -s ' '
  gdb -p "$PID" -batch -ex 'call (int)malloc_trim(0)' >/dev/null 2>&1
  echo "RSS after malloc_trim(0): $(rss_kib) KiB"
fi
if [ -n "${HOLD:-}" ]; then # keep the agent running until $TMP/hold is removed
  touch "$TMP/hold"; echo "holding: agent $PID, rm $TMP/hold to end"
  while [ -e "$TMP/hold" ]; do sleep 1; done
fi
grep -c FailedMount "$TMP/agent.log" | sed 's/^/volume set-up failures logged: /'
