#!/usr/bin/env bash
# Memory of the ConfigMap and Secret managers on the shared test control plane
# and containerd (docs/PERFORMANCE.md, "ConfigMaps and Secrets"):
#   . tools/testenv/env.sh; tools/bench/objects_bench.sh [BUILD_DIR] [N] [STRATEGY]
# A joined nanolet runs N (default 50) API pods three times: twice pods that
# reference nothing (the second round is the baseline: the first leaves the
# heap grown by the pods' churn), then pods that each take their environment
# from a ConfigMap and a Secret of their own (envFrom, 2N objects, each with
# three keys of about 40 bytes). RSS is read once all are Running and 20 s
# later; the memory per object is the difference of the last two settled RSS
# divided by 2N. STRATEGY: configMapAndSecretChangeDetectionStrategy (default
# Watch). Node nanolet-objects-bench with its own credential and namespace.
set -uo pipefail
# shellcheck source=tools/bench/bench_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
BUILD=${1:-build}
N=${2:-50}
STRATEGY=${3:-Watch}
: "${NANOLET_TEST_CRI_ENDPOINT:?. tools/testenv/env.sh first}"
NANOLET=$BUILD/agent/nanolet
NODE=nanolet-objects-bench
NS=objects-bench
TMP=$(mktemp -d /tmp/nanolet-bench.XXXXXX)
env_file=$(tools/testenv/controlplane.sh up) || exit 1
# shellcheck source=/dev/null
. "$env_file"
NODE_IP=$(tools/testenv/node-ip.sh) || exit 1
kubectl() { "$NANOLET_TEST_KUBECTL" "$@"; }
KC=$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes) || exit 1
PID=

cri() { "$NANOLET" cri -r "$NANOLET_TEST_CRI_ENDPOINT" "$@"; }
ns_sandboxes() { cri pods -o json | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
running_count() { kubectl get pods -n "$NS" --no-headers 2>/dev/null | awk '$3 == "Running"' | wc -l; }
api_count() { kubectl get pods -n "$NS" --no-headers 2>/dev/null | wc -l; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
wait_until() { # wait_until SECONDS CMD... (polls every 500 ms)
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.5; done
}
is() { [ "$("$1")" = "$2" ]; }
cleanup() {
  kubectl delete pods -n "$NS" --all --grace-period=0 --force >/dev/null 2>&1
  [ -n "$PID" ] && wait_until 120 is ns_sandboxes 0
  [ -n "$PID" ] && kill "$PID" && wait "$PID" 2>/dev/null
  kubectl delete ns "$NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  bench_rm "$TMP"
}
trap cleanup EXIT

# pods WITH_OBJECTS: N pods (one kubectl apply); with objects, each takes its
# environment from ConfigMap cm-i and Secret s-i.
pods() {
  local i
  for i in $(seq 1 "$N"); do
    cat <<EOF
---
apiVersion: v1
kind: Pod
metadata: {name: p$i, namespace: $NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1.36
    command: [sleep, "3600"]
EOF
    [ "$1" = 1 ] && echo "    envFrom: [{configMapRef: {name: cm-$i}}, {secretRef: {name: s-$i}}]"
  done >"$TMP/pods.yaml"
  kubectl apply -f "$TMP/pods.yaml" >/dev/null
}
objects() {
  local i v=0123456789012345678901234567890123456789
  for i in $(seq 1 "$N"); do
    cat <<EOF
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-$i, namespace: $NS}
data: {A: "$v", B: "$v", C: "$v"}
---
apiVersion: v1
kind: Secret
metadata: {name: s-$i, namespace: $NS}
stringData: {A: "$v", B: "$v", C: "$v"}
EOF
  done >"$TMP/objects.yaml"
  kubectl apply -f "$TMP/objects.yaml" >/dev/null
}
# measure LABEL WITH_OBJECTS: prints "LABEL: RSS KiB at Running, after 20 s"; sets SETTLED
measure() {
  pods "$2"
  wait_until 300 is running_count "$N" || {
    echo "$1: $(running_count)/$N Running; agent log: ${KEEP_LOG:-/tmp/objects_bench.log}"
    cp "$TMP/agent.log" "${KEEP_LOG:-/tmp/objects_bench.log}"
    exit 1
  }
  local a
  a=$(rss_kib)
  sleep 20
  SETTLED=$(rss_kib)
  echo "$1: RSS $a KiB with $N pods Running, $SETTLED KiB 20 s later (load $(cut -d' ' -f1-3 /proc/loadavg))"
  kubectl delete pods -n "$NS" --all --wait=false >/dev/null
  wait_until 180 is api_count 0 && wait_until 60 is ns_sandboxes 0
}

kubectl delete ns "$NS" --ignore-not-found --wait=true >/dev/null 2>&1
kubectl create ns "$NS" >/dev/null
objects
printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nconfigMapAndSecretChangeDetectionStrategy: %s\n' \
  "$STRATEGY" >"$TMP/config.yaml"
"$NANOLET" --config "$TMP/config.yaml" --kubeconfig "$KC" --hostname-override "$NODE" \
  --node-ip "$NODE_IP" --root-dir "$TMP/root" --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" \
  --healthz-port 0 --port "$(free_port)" \
  >"$TMP/agent.log" 2>&1 &
PID=$!
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
wait_until 60 node_ready || { echo "node not Ready"; tail -20 "$TMP/agent.log"; exit 1; }
echo "RSS joined, no pods: $(rss_kib) KiB"
measure "pods without objects" 0
measure "pods without objects, again" 0
plain=$SETTLED
measure "pods with a ConfigMap and a Secret each ($STRATEGY)" 1
with=$SETTLED
echo "per object: $(((with - plain) * 1024 / (2 * N))) bytes ($((2 * N)) objects)"
