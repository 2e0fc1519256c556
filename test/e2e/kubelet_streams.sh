#!/usr/bin/env bash
# kubectl exec, attach and port-forward through the real apiserver and
# nanolet's kubelet server, /stats/summary through the apiserver's node proxy,
# /metrics through promtool.
#
# Needs: the kubelet server on --port with the streaming, stats and metrics
# routes (agent/kserver_stream.h, agent/stats.h, agent/kubelet_metrics.h), and
# the API pod source (pods created with kubectl run on this node).
#
# Variables: NODE (default nl-kstream), NODE_KUBECONFIG (default: minted with
# the control plane's `cert`), KUBELET_PORT (default 10450), NODE_IP (default:
# the host's first non-loopback address — the apiserver refuses to proxy
# /api/v1/nodes/<node>/proxy/... to a loopback address: "address not allowed").
PODS_NS=nanolet-e2e-streams
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NODE:-nl-kstream}
KUBELET_PORT=${KUBELET_PORT:-10450}
NODE_IP=${NODE_IP:-$(hostname -I | tr ' ' '\n' | grep -v '^127\.' | grep -v : | head -1)}
NODE_KUBECONFIG=${NODE_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
IMG=localhost/busybox:1.36
trap 'kubectl delete ns "$PODS_NS" --wait=false >/dev/null 2>&1; kubectl delete node "$NODE" --wait=false >/dev/null 2>&1; stop_agent; pods_cleanup; e2e_finish; exit $?' EXIT

kubectl create ns "$PODS_NS" >/dev/null 2>&1
start_agent --kubeconfig "$NODE_KUBECONFIG" --node-ip "$NODE_IP" --port "$KUBELET_PORT" \
  --address "$NODE_IP"
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
wait_for 15 node_ready || fail "node Ready" "$(tail -5 "$E2E_TMP/agent.log")"

kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: box, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - {name: sh, image: $IMG, command: [sh, -c, 'while true; do echo tick; sleep 1; done']}
  - {name: web, image: $IMG, command: [httpd, -f, -p, "8080", -h, /etc]}
EOF
running() { [ "$(kubectl get pod -n "$PODS_NS" box -o jsonpath='{.status.phase}')" = Running ]; }
wait_for 60 running || fail "pod Running" "$(kubectl get pod -n "$PODS_NS" box -o yaml | tail -20)"
kx() { kubectl exec -n "$PODS_NS" box -c sh "$@"; }

# exec: exit codes, stdout, stderr, stdin, a large output intact
check "exec: stdout" [ "$(kx -- echo hello)" = hello ]
kx -- sh -c 'exit 7'
check "exec: the exit code comes back" [ $? -eq 7 ]
check "exec: stderr" [ "$(kx -- sh -c 'echo oops >&2' 2>&1 >/dev/null)" = oops ]
check "exec -i: stdin reaches the process" [ "$(printf 'a\nb\n' | kx -i -- wc -l)" = 2 ]
want=$(kx -- sh -c 'head -c 10485760 /dev/urandom > /tmp/big; md5sum < /tmp/big' | cut -d' ' -f1)
got=$(kx -- cat /tmp/big | md5sum | cut -d' ' -f1)
check "exec: 10 MiB of output intact" [ -n "$want" -a "$want" = "$got" ]
got=$(head -c 10485760 /dev/zero | kx -i -- md5sum | cut -d' ' -f1)
check "exec -i: 10 MiB of input intact" [ "$got" = "$(head -c 10485760 /dev/zero | md5sum | cut -d' ' -f1)" ]
check "exec -it: a tty" [ "$(script -qc "'$NANOLET_TEST_KUBECTL' exec -it -n $PODS_NS box -c sh -- tty" /dev/null | tr -d '\r')" != "not a tty" ]
kx -- nosuchcommand >/dev/null 2>&1
check "exec: a missing command fails" [ $? -ne 0 ]

# attach: the running process's output
out=$(timeout 4 "$NANOLET_TEST_KUBECTL" attach -n "$PODS_NS" box -c sh 2>/dev/null | head -2)
check "attach: the container's output" grep -q tick <<<"$out"

# port-forward: real TCP traffic to the pod's port
LPORT=$(free_port)
kubectl port-forward -n "$PODS_NS" pod/box "$LPORT:8080" >"$E2E_TMP/pf.log" 2>&1 &
PF=$!
wait_for 10 curl -fsS -o /dev/null "http://127.0.0.1:$LPORT/hostname"
check "port-forward: HTTP through the tunnel" [ "$(curl -fsS "http://127.0.0.1:$LPORT/hostname")" = box ]
kill "$PF" 2>/dev/null

# stats and metrics through the apiserver's node proxy
summary=$(kubectl get --raw "/api/v1/nodes/$NODE/proxy/stats/summary")
check "stats/summary: parses, names the node" [ "$(jq -r .node.nodeName <<<"$summary")" = "$NODE" ]
check "stats/summary: node memory working set is plausible" \
  [ "$(jq '.node.memory.workingSetBytes > 10000000' <<<"$summary")" = true ]
check "stats/summary: the pod and its containers" \
  [ "$(jq --arg ns "$PODS_NS" '[.pods[] | select(.podRef.namespace == $ns and .podRef.name == "box") | .containers[].name] | sort | join(",")' -r <<<"$summary")" = sh,web ]
sleep 11
summary=$(kubectl get --raw "/api/v1/nodes/$NODE/proxy/stats/summary")
check "stats/summary: usageNanoCores from two samples" \
  [ "$(jq '.node.cpu.usageNanoCores > 0' <<<"$summary")" = true ]
metrics=$(kubectl get --raw "/api/v1/nodes/$NODE/proxy/metrics")
check "/metrics passes promtool check metrics" promtool check metrics <<<"$metrics"
check "/metrics: kubelet_node_name" grep -q "^kubelet_node_name{node=\"$NODE\"} 1$" <<<"$metrics"
check "/metrics: runtime operations counted" grep -q '^kubelet_runtime_operations_total{operation_type="exec"}' <<<"$metrics"
resource=$(kubectl get --raw "/api/v1/nodes/$NODE/proxy/metrics/resource")
check "/metrics/resource: the pod's working set" \
  grep -q "^pod_memory_working_set_bytes{namespace=\"$PODS_NS\",pod=\"box\"} " <<<"$resource"
check "/metrics/resource passes promtool" promtool check metrics <<<"$resource"
