#!/usr/bin/env bash
# Service environment variables on the real control plane: a joined nanolet
# watches Services; a static pod in a namespace with a Service gets that
# Service's Docker-link variables and the master service's
# (KUBERNETES_SERVICE_HOST, ...), and with enableServiceLinks: false only the
# latter. Standalone, pods get none.
# SVCENV_NODE / SVCENV_KUBECONFIG: the node and its credential (default: a node
# of this test's own, credential minted with controlplane.sh cert).
PODS_NS=nanolet-e2e-svcenv
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${SVCENV_NODE:-nl-events}
KC=${SVCENV_KUBECONFIG:-$(node_kubeconfig "$NODE")}
IMG=localhost/busybox:1.36
cleanup() {
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  pods_cleanup
  kubectl delete ns "$PODS_NS" --wait=false >/dev/null 2>&1
}
e2e_on_exit cleanup

fresh_ns "$PODS_NS"
kubectl apply -f - >/dev/null <<EOF2
apiVersion: v1
kind: Service
metadata: {name: my-db, namespace: $PODS_NS}
spec:
  ports: [{name: pg, port: 5432, protocol: TCP}, {name: metrics, port: 9187, protocol: UDP}]
EOF2
ip=$(kubectl get svc -n "$PODS_NS" my-db -o jsonpath='{.spec.clusterIP}')
kip=$(kubectl get svc -n default kubernetes -o jsonpath='{.spec.clusterIP}')
kport=$(kubectl get svc -n default kubernetes -o jsonpath='{.spec.ports[0].port}')

envpod() { # envpod NAME LINKS
  put "$1" <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PODS_NS}
spec:
  enableServiceLinks: $2
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: $IMG, command: [sh, -c, "env | sort; sleep 3600"]}]
EOF2
}
logged() { # logged POD LINE: the container's log has the line
  local f=$LOGS/${PODS_NS}_$1-${NODE}_$(uid_of "$1")/c/0.log
  grep -q " stdout F $2\$" "$f" 2>/dev/null
}

start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || { fail "agent start" ""; exit 1; }
envpod links true
envpod nolinks false
expect "a pod with service links runs" 30 links .status.phase Running
check "  KUBERNETES_SERVICE_HOST" wait_for 5 logged links "KUBERNETES_SERVICE_HOST=$kip"
check "  KUBERNETES_SERVICE_PORT" logged links "KUBERNETES_SERVICE_PORT=$kport"
check "  KUBERNETES_PORT" logged links "KUBERNETES_PORT=tcp://$kip:$kport"
check "  MY_DB_SERVICE_HOST" logged links "MY_DB_SERVICE_HOST=$ip"
check "  MY_DB_SERVICE_PORT (the first port)" logged links "MY_DB_SERVICE_PORT=5432"
check "  MY_DB_SERVICE_PORT_METRICS (a named port)" logged links "MY_DB_SERVICE_PORT_METRICS=9187"
check "  MY_DB_PORT_9187_UDP" logged links "MY_DB_PORT_9187_UDP=udp://$ip:9187"
check "  MY_DB_PORT_5432_TCP_ADDR" logged links "MY_DB_PORT_5432_TCP_ADDR=$ip"
expect "a pod without service links runs" 30 nolinks .status.phase Running
check "  it has KUBERNETES_SERVICE_HOST" wait_for 5 logged nolinks "KUBERNETES_SERVICE_HOST=$kip"
check "  and no MY_DB_ variables" bash -c "! grep -q MY_DB_ '$LOGS/${PODS_NS}_nolinks-${NODE}_$(uid_of nolinks)/c/0.log'"
stop_agent TERM
unput links
unput nolinks

start_agent || { fail "agent start" ""; exit 1; }
envpod alone true
expect "standalone: the pod runs" 30 alone .status.phase Running
sleep 1
check "standalone: no service variables" bash -c "! grep -q _SERVICE_HOST '$LOGS/${PODS_NS}_alone-${NODE}_$(uid_of alone)/c/0.log'"
