#!/usr/bin/env bash
# Scale: 100 pods created through the API server in one `kubectl apply` all run
# and all reach Ready in `kubectl get pods` (100 Running 1/1); deleting them all
# removes every API object (nanolet deletes each after its graceful
# termination) and every sandbox. The times are printed. The node name and its
# kubeconfig come from NANOLET_E2E_SCALE_NODE / NANOLET_E2E_SCALE_KUBECONFIG
# (default: nl-apiscale, with a credential minted by the control plane script).
PODS_NS=nanolet-e2e-api-scale
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_E2E_SCALE_NODE:-nl-apiscale}
KC=${NANOLET_E2E_SCALE_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
N=${NANOLET_E2E_SCALE_PODS:-100}

scale_cleanup() {
  kubectl delete pods -n "$PODS_NS" --all --grace-period=0 --force >/dev/null 2>&1
  if [ -z "$AGENT_PID" ] || ! kill -0 "$AGENT_PID" 2>/dev/null; then
    AGENT_PID=
    start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" >/dev/null 2>&1
  fi
  wait_for 120 runtime_clear
  stop_agent TERM
  runtime_has_ns && fail "clean-up" "sandboxes left in $PODS_NS: $(ns_sandboxes | jq length)"
  kubectl delete ns "$PODS_NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  if [ -n "${E2E_KEEP:-}" ] || [ "$E2E_FAILED" -gt 0 ]; then
    echo "--- agent log (last 60 lines) ---"; tail -60 "$E2E_TMP/agent.log"
  fi
}
e2e_on_exit scale_cleanup

kubectl delete ns "$PODS_NS" --ignore-not-found --wait=true >/dev/null 2>&1
kubectl create ns "$PODS_NS" >/dev/null
# Pods are refused until the controller-manager has made the namespace's service account.
wait_for 30 kubectl get serviceaccount default -n "$PODS_NS" -o name >/dev/null
# -v=6: the API client logs each request (counted at the end).
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" -v=6 || exit 1
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
wait_for 30 node_ready || fail "node" "$NODE is not Ready"

# Polled every second at most: kubectl takes CPU from containerd on 2 cores.
count_ready() { # pods whose `kubectl get pods` line reads 1/1 Running
  kubectl get pods -n "$PODS_NS" --no-headers 2>/dev/null | awk '$2 == "1/1" && $3 == "Running"' | wc -l
}
all_ready() { [ "$(count_ready)" = "$N" ] || { sleep 0.9; return 1; }; }
api_empty() { [ "$(kubectl get pods -n "$PODS_NS" --no-headers 2>/dev/null | wc -l)" = 0 ] || { sleep 0.9; return 1; }; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# --- 100 pods in one apply -------------------------------------------------------
for i in $(seq "$N"); do
  cat <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: s$i, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1.36
    command: [sleep, "3600"]
    resources: {requests: {cpu: 1m, memory: 1Mi}}
---
EOF2
done >"$E2E_TMP/pods.yaml"
t0=$(now_ms)
kubectl apply -f "$E2E_TMP/pods.yaml" >/dev/null || fail "kubectl apply" "of $N pods failed"
if wait_for 150 all_ready; then
  ok "all $N pods Running and Ready (1/1) in kubectl get pods, $(($(now_ms) - t0)) ms after kubectl apply"
else
  fail "$N pods Ready" "$(count_ready) of $N read 1/1 Running"
  kubectl get pods -n "$PODS_NS" --no-headers | awk '$2 != "1/1" || $3 != "Running"' | head -5
fi
check "$N sandboxes in the runtime" [ "$(ns_sandboxes | jq '[.[] | select(.state == "SANDBOX_READY")] | length')" = "$N" ]
check "no pod restarted" [ "$(kubectl get pods -n "$PODS_NS" -o json | jq '[.items[].status.containerStatuses[]?.restartCount] | add')" = 0 ]
# Admission saw every pod: none was rejected, and /pods agrees with the API.
check "nanolet's /pods shows $N Running" [ "$(curl -fsS "http://127.0.0.1:$RO_PORT/pods" |
  jq --arg ns "$PODS_NS" '[.items[] | select(.metadata.namespace == $ns and .status.phase == "Running")] | length')" = "$N" ]

# --- delete them all -----------------------------------------------------------------
t0=$(now_ms)
kubectl delete pods -n "$PODS_NS" --all --wait=false >/dev/null
if wait_for 120 api_empty; then
  ok "kubectl delete --all: every API object is gone, $(($(now_ms) - t0)) ms after the delete"
else
  fail "API objects deleted" "$(kubectl get pods -n "$PODS_NS" --no-headers | wc -l) left"
fi
if wait_for 60 runtime_clear; then ok "every sandbox is removed, $(($(now_ms) - t0)) ms after the delete"
else fail "sandboxes removed" "$(ns_sandboxes | jq length) left"; fi
check "no request was refused with 429 Too Many Requests" bash -c "! grep -q ' 429 Too Many' '$E2E_TMP/agent.log'"
echo "API requests while the $N pods ran and went: $(grep -Ec "(GET|POST|PATCH|PUT|DELETE) https://[^ ]*/namespaces/$PODS_NS/" "$E2E_TMP/agent.log") in $PODS_NS"
