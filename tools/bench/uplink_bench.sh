#!/usr/bin/env bash
# What a joined, idle node costs on its uplink (docs/PERFORMANCE.md, "Uplink"):
# nanolet and then the upstream kubelet joined to the test control plane as the
# same node, each with the same API pods, idle; bytes counted by the kernel
# (tcp_info's bytes_sent and bytes_received, `ss -tin`) on every connection of
# the agent to the apiserver's port over a window, scaled to an hour.
#
#   tools/bench/uplink_bench.sh [BUILD_DIR=build] [WINDOW_S=120] [PODS=5]
#   ONLY=nanolet|kubelet  runs one of the two
#   NANOLET_FLAGS="--v=6"  more flags for nanolet; LOGS=DIR keeps the agents' logs there
#
# The kubelet is built from the control plane's pinned module
# (tools/testenv/k8s-build.sh kubelet, cached). Both run on a containerd of this
# script's own (tools/testenv/setup.sh with NANOLET_TESTENV_DIR
# /var/lib/nanolet-uplink-testenv, bridge nl-br9, 10.99.0.0/24), never on the
# shared one: the kubelet kills every pod of its runtime that is not its own.
# Each agent: joined with the node credential (system:node:NODE), Ready, PODS
# busybox pods bound to it by spec.nodeName (each with the default
# kube-api-access volume) all Running, 20 s to settle, then the window. Between
# the two the pods, the Node and its Lease are deleted. Node IP: the private
# bridge's address (the kubelet refuses a loopback one). Another test that stops
# the shared apiserver during a window spoils it: a connection closed in the
# window is taken again (up to 3 times).
set -uo pipefail
BUILD=${1:-build}
WINDOW=${2:-120}
PODS=${3:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
NANOLET=$BUILD/agent/nanolet
NODE=uplink-bench
NS=uplink-bench
PRIV=${NANOLET_UPLINK_TESTENV_DIR:-/var/lib/nanolet-uplink-testenv}
NODE_IP=10.99.0.1 # the private bridge's: the kubelet refuses a loopback node IP
TMP=$(mktemp -d /tmp/nanolet-uplink.XXXXXX)
PID=
. "$HERE/bench_lib.sh"
[ -z "${LOGS:-}" ] || mkdir -p "$LOGS"

env_file=$("$HERE/../testenv/controlplane.sh" up) || { echo "no control plane"; exit 1; }
# shellcheck source=/dev/null
. "$env_file"
kubectl() { "$NANOLET_TEST_KUBECTL" "$@"; }
KUBECONFIG_NODE=$("$HERE/../testenv/controlplane.sh" cert "$NODE" "system:node:$NODE" system:nodes) ||
  { echo "no node credential"; exit 1; }
APIPORT=${NANOLET_TEST_APISERVER##*:}
if [ "${ONLY:-}" != nanolet ]; then
  KBIN=$(nice "$HERE/../testenv/k8s-build.sh" kubelet) || { echo "cannot build the kubelet"; exit 1; }
fi
# Only the runtime is private: the control plane is the shared one.
NANOLET_TESTENV_DIR=$PRIV NANOLET_TESTENV_BRIDGE=nl-br9 NANOLET_TESTENV_SUBNET=10.99.0.0/24 \
  NANOLET_TESTENV_NO_REGISTRY=1 "$HERE/../testenv/setup.sh" >/dev/null 2>"$TMP/setup.log"
EP=unix://$PRIV/run/containerd.sock
[ -S "${EP#unix://}" ] || { echo "no private containerd:"; tail -3 "$TMP/setup.log"; exit 1; }

# conn_bytes: "LOCALADDR SENT RECEIVED" for each connection of $PID to the apiserver
conn_bytes() {
  ss -tinpH state established "( dport = :$APIPORT )" |
    awk -v p="pid=$PID," 'index($0, p) {l = $3; getline; s = 0; r = 0
      for (i = 1; i <= NF; i++) { split($i, a, ":")
        if (a[1] == "bytes_sent") s = a[2]; else if (a[1] == "bytes_received") r = a[2] }
      print l, s, r}'
}
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
pods_running() { [ "$(kubectl get pods -n "$NS" --field-selector status.phase=Running -o name 2>/dev/null | wc -l)" = "$PODS" ]; }
pods_gone() { [ "$(kubectl get pods -n "$NS" -o name 2>/dev/null | wc -l)" = 0 ]; }
forget_node() {
  kubectl delete pods -n "$NS" --all --grace-period=1 --wait=false >/dev/null 2>&1
  [ -z "$PID" ] || wait_until 120 pods_gone || echo "pods left in $NS"
  [ -z "$PID" ] || { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }
  PID=
  kubectl delete pods -n "$NS" --all --force --grace-period=0 >/dev/null 2>&1
  kubectl delete node "$NODE" --ignore-not-found >/dev/null 2>&1
  kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null 2>&1
}
cleanup() {
  forget_node
  [ -z "${LOGS:-}" ] || cp "$TMP"/*.log "$LOGS"/ 2>/dev/null
  kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1
  umount -R "$TMP/kubelet" 2>/dev/null # the kubelet bind-mounts its root onto itself
  rm -rf --one-file-system "$TMP"
}
trap cleanup EXIT

KPORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
kubelet_yaml "$EP" "$KPORT" >"$TMP/kubelet.yaml"

forget_node
ns_gone() { ! kubectl get namespace "$NS" -o jsonpath='{.status.phase}' 2>/dev/null | grep -q Terminating; }
wait_until 120 ns_gone || { echo "namespace $NS still terminating"; exit 1; }
kubectl get namespace "$NS" >/dev/null 2>&1 || kubectl create namespace "$NS" >/dev/null
sa() { kubectl get serviceaccount -n "$NS" default >/dev/null 2>&1; }
wait_until 60 sa || { echo "no default ServiceAccount in $NS"; exit 1; }

declare -A R
run() { # run NAME: one agent joined, its pods running, one idle window
  local name=$1 t0 t1 i
  if [ "$name" = nanolet ]; then
    "$NANOLET" --kubeconfig "$KUBECONFIG_NODE" --enable-server=false --healthz-port 0 \
      --container-runtime-endpoint "$EP" --root-dir "$TMP/nanolet" --hostname-override "$NODE" \
      --node-ip "$NODE_IP" --cgroups-per-qos=false --enforce-node-allocatable= ${NANOLET_FLAGS:-} \
      >"$TMP/$name.log" 2>&1 &
  else
    "$KBIN/kubelet" --config "$TMP/kubelet.yaml" --kubeconfig "$KUBECONFIG_NODE" --root-dir "$TMP/kubelet" \
      --hostname-override "$NODE" --node-ip "$NODE_IP" --v=0 >"$TMP/$name.log" 2>&1 &
  fi
  PID=$!
  wait_until 60 node_ready || { echo "$name: node not Ready"; tail -20 "$TMP/$name.log"; exit 1; }
  for i in $(seq 1 "$PODS"); do
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: idle-$i, namespace: $NS}
spec:
  nodeName: $NODE
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: localhost/busybox:1.36, imagePullPolicy: IfNotPresent, command: [sleep, "36000"]}]
---
EOF
  done | kubectl apply -f - >/dev/null
  wait_until 180 pods_running || { echo "$name: pods not Running"; tail -20 "$TMP/$name.log"; exit 1; }
  local try settle=20
  for try in 1 2 3; do
    sleep $settle
    settle=60
    conn_bytes >"$TMP/b0"; t0=$(date +%s%N)
    sleep "$WINDOW"
    conn_bytes >"$TMP/b1"; t1=$(date +%s%N)
    [ -z "${LOGS:-}" ] || echo "$t0 $t1" >"$LOGS/$name.window"
    kill -0 "$PID" 2>/dev/null || { echo "$name exited:"; tail -20 "$TMP/$name.log"; exit 1; }
    # Per connection, what moved in the window. One closed or opened in it
    # means the apiserver went away (another test's outage): the reconnect
    # re-lists everything, and the window is taken again after a minute.
    read -r R[$name.sent] R[$name.recv] R[$name.conns] R[$name.lost] < <(awk -v t=$((t1 - t0)) '
      NR == FNR {s0[$1] = $2; r0[$1] = $3; next}
      {s += $2 - s0[$1]; r += $3 - r0[$1]; n++; seen[$1] = 1; if (!($1 in s0)) lost++}
      END {for (k in s0) if (!(k in seen)) lost++
        printf "%.1f %.1f %d %d\n", s * 3.6e12 / t / 1000, r * 3.6e12 / t / 1000, n, lost}' \
      "$TMP/b0" "$TMP/b1")
    [ "${R[$name.lost]}" = 0 ] && break
    echo "$name: a connection closed in window $try (apiserver restarted?); measuring again"
  done
  echo "$name: sent ${R[$name.sent]} KB/h, received ${R[$name.recv]} KB/h on ${R[$name.conns]} connection(s)"
  forget_node
}

for a in nanolet kubelet; do
  [ -z "${ONLY:-}" ] || [ "$ONLY" = "$a" ] || continue
  run $a
done
printf '| agent | sent | received | total |\n| --- | --- | --- | --- |\n'
for a in nanolet kubelet; do
  [ -n "${R[$a.sent]:-}" ] || continue
  awk -v a="$a" -v s="${R[$a.sent]}" -v r="${R[$a.recv]}" \
    'BEGIN {printf "| %s | %.0f KB/h | %.0f KB/h | %.0f KB/h |\n", a, s, r, s + r}'
done
if [ -n "${R[nanolet.sent]:-}" ] && [ -n "${R[kubelet.sent]:-}" ]; then
  awk -v a="${R[nanolet.sent]}" -v b="${R[nanolet.recv]}" -v c="${R[kubelet.sent]}" -v d="${R[kubelet.recv]}" \
    'BEGIN {printf "nanolet / kubelet: %.2f\n", (a + b) / (c + d)}'
fi
