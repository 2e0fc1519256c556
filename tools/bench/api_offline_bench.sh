#!/usr/bin/env bash
# The offline start (docs/PERFORMANCE.md, "API pods"): time from nanolet's start
# until the checkpointed API pods run again when the API server cannot be
# reached, with their containers still in the runtime (an agent restart; the
# reboot case, where the runtime starts them anew, adds the runtime's own time).
#   . tools/testenv/env.sh; tools/bench/api_offline_bench.sh [BUILD_DIR] [N_PODS] [ROUNDS]
# Uses the shared test control plane with its own node (nl-apisrc-bench) and
# namespace; the apiserver is made unreachable for this node only (a copy of
# its kubeconfig pointing at a closed port). Prints, per round, the time until
# /pods shows every pod Running and whether any container id changed.
set -uo pipefail
# shellcheck source=tools/bench/bench_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
BUILD=${1:-build}
N=${2:-10}
ROUNDS=${3:-5}
: "${NANOLET_TEST_CRI_ENDPOINT:?. tools/testenv/env.sh first}"
NANOLET=$BUILD/agent/nanolet
NODE=nl-apisrc-bench
NS=nanolet-e2e-api-bench
TMP=$(mktemp -d /tmp/nanolet-bench.XXXXXX)
env_file=$(tools/testenv/controlplane.sh up) || exit 1
# shellcheck source=/dev/null
. "$env_file"
NODE_IP=$(tools/testenv/node-ip.sh) || exit 1
kubectl() { "$NANOLET_TEST_KUBECTL" "$@"; }
KC=$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes) || exit 1
sed 's#^\( *server:\).*#\1 https://127.0.0.1:1#' "$KC" >"$TMP/dead.kubeconfig"
PORT=$((20000 + RANDOM % 20000)) KPORT=$((PORT + 1)) RO_PORT=$((PORT + 2))
PID=
start() { # start KUBECONFIG
  "$NANOLET" --kubeconfig "$1" --hostname-override "$NODE" --node-ip "$NODE_IP" \
    --root-dir "$TMP/root" --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" \
    --healthz-port "$PORT" --port "$KPORT" --read-only-port "$RO_PORT" --cert-dir "$TMP/pki" \
    >>"$TMP/agent.log" 2>&1 &
  PID=$!
}
stop() { [ -z "$PID" ] || { kill "$PID"; wait "$PID" 2>/dev/null; PID=; }; }
running() { curl -fsS "http://127.0.0.1:$RO_PORT/pods" 2>/dev/null |
  jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns and .status.phase == "Running")] | length'; }
ids() { "$NANOLET" cri -r "$NANOLET_TEST_CRI_ENDPOINT" ps -o json |
  jq -c --arg ns "$NS" '[.containers[] | select(.labels["io.kubernetes.pod.namespace"] == $ns) | .id] | sort'; }
sandboxes() { "$NANOLET" cri -r "$NANOLET_TEST_CRI_ENDPOINT" pods -o json |
  jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
cleanup() { # the pods go from the API, then nanolet stops and removes them
  kubectl delete pods -n "$NS" --all --grace-period=0 --force >/dev/null 2>&1
  stop; start "$KC"
  for _ in $(seq 120); do [ "$(sandboxes)" = 0 ] && break; sleep 0.5; done
  stop
  kubectl delete ns "$NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  bench_rm "$TMP"
}
trap cleanup EXIT

kubectl create ns "$NS" >/dev/null 2>&1
for i in $(seq "$N"); do
  cat <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: p$i, namespace: $NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: localhost/busybox:1.36, command: [sleep, "36000"]}]
---
EOF2
done | kubectl apply -f - >/dev/null
start "$KC"
for _ in $(seq 300); do [ "$(running)" = "$N" ] && break; sleep 0.2; done
[ "$(running)" = "$N" ] || { echo "pods did not start"; exit 1; }
sleep 2 # the checkpoint is written
stop
before=$(ids)
for r in $(seq "$ROUNDS"); do
  t0=$(date +%s%N)
  start "$TMP/dead.kubeconfig"
  until [ "$(running)" = "$N" ]; do sleep 0.02; done
  t=$((($(date +%s%N) - t0) / 1000000))
  same=yes; [ "$(ids)" = "$before" ] || same=no
  echo "round $r: $N checkpointed pods Running ${t} ms after start, same containers: $same"
  stop
done
