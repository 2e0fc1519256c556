#!/usr/bin/env bash
# TLS bootstrap on the real control plane: a node that starts with only a
# bootstrap kubeconfig (a bootstrap token) gets its client certificate through
# a CSR that kube-controller-manager approves and signs, writes the pair in
# certDir (kubelet-client-<time>.pem and the -current.pem link) and a kubeconfig
# that points at it, registers, becomes Ready and runs a pod from the API,
# without a restart. Its serving CSR (serverTLSBootstrap) waits for an
# operator: a denied one is reported and retried with back-off, and once one
# is approved `kubectl logs` reaches the node over a certificate the cluster CA
# signed. A node whose client certificate has expired, with the bootstrap
# kubeconfig still valid, recovers by itself at start-up.
#
# The node name comes from NANOLET_TEST_TLSBOOT_NODE (default nanolet-tlsboot);
# its credential is what the test makes. The apiserver reaches the kubelet
# server only on a non-loopback address (NANOLET_TEST_NODE_IP, as kserver.sh).
PODS_NS=tlsboot-e2e-bootstrap
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
. "$(dirname "$0")/certs_lib.sh"
NODE=${NANOLET_TEST_TLSBOOT_NODE:-nanolet-tlsboot}
IMG=localhost/busybox:1.36
KC=$E2E_TMP/kubelet.conf
BOOT=$E2E_TMP/bootstrap-kubelet.conf
PKI=$ROOT/pki
LOG=$E2E_TMP/agent.log
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
log_has() { grep -q -- "$1" "$LOG"; }
cleanup() {
  kubectl delete pods -n "$PODS_NS" --all --grace-period=0 --force >/dev/null 2>&1
  if [ -n "$AGENT_PID" ] && kill -0 "$AGENT_PID" 2>/dev/null; then wait_for 60 runtime_clear; fi
  stop_agent TERM
  kubectl delete ns "$PODS_NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  kubectl get csr -o json 2>/dev/null | jq -r --arg n "system:node:$NODE" --arg b "system:bootstrap:${TOKEN_ID:-none}" \
    '.items[] | select(.spec.username == $n or .spec.username == $b) | .metadata.name' |
    xargs -r "$NANOLET_TEST_KUBECTL" delete csr >/dev/null 2>&1
  drop_token
  pods_cleanup
}
e2e_on_exit cleanup
[ -n "$NODE_IP" ] || { fail "node IP" "no non-loopback address (set NANOLET_TEST_NODE_IP)"; exit 1; }
kubectl delete node "$NODE" --ignore-not-found >/dev/null
fresh_ns "$PODS_NS"
bootstrap_token "$BOOT" || { fail "bootstrap token" "cannot create the Secret"; exit 1; }
cat >"$E2E_TMP/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
rotateCertificates: true
serverTLSBootstrap: true
authentication:
  x509: {clientCAFile: $NANOLET_TEST_K8S_CA}
EOF

# --- enrolment ------------------------------------------------------------------
t0=$(date +%s%N)
start_agent --config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --bootstrap-kubeconfig "$BOOT" \
  --node-ip "$NODE_IP"
if wait_for 30 node_ready; then
  ok "enrolment: the node is Ready $((($(date +%s%N) - t0) / 1000000)) ms after a start with only a bootstrap token"
else
  fail "enrolment: node Ready" "$(grep -E 'kube-apiserver-client|bootstrap' "$LOG" | tail -5)"
fi
csr=$(csrs_of "system:bootstrap:$TOKEN_ID" kubernetes.io/kube-apiserver-client-kubelet)
check "enrolment: one CSR from the bootstrap token, approved and issued" \
  [ "$(jq -r 'length, (.[0].status.conditions[0].type), (.[0].status.certificate | length > 0)' <<<"$csr" | tr '\n' ' ')" = "1 Approved true " ]
check "enrolment: the CSR asks for upstream's usages" \
  [ "$(jq -r '.[0].spec.usages | join(",")' <<<"$csr")" = "digital signature,key encipherment,client auth" ]
cur=$(readlink "$PKI/kubelet-client-current.pem")
check "store: kubelet-client-current.pem links to kubelet-client-<time>.pem" \
  bash -c "[[ '$cur' =~ ^$PKI/kubelet-client-[0-9]{4}(-[0-9]{2}){5}\.pem$ ]]"
check "store: the pair file is private (0600)" [ "$(stat -c %a "$cur")" = 600 ]
check "store: certificate and key in one file" \
  bash -c "grep -q 'BEGIN CERTIFICATE' '$cur' && grep -q 'BEGIN EC PRIVATE KEY' '$cur'"
check "certificate: O=system:nodes, CN=system:node:$NODE, from the cluster CA" \
  [ "$(subject_of "$cur") / $(issuer_cn "$cur")" = "/O=system:nodes/CN=system:node:$NODE / nanolet-test-ca" ]
check "kubeconfig: written, pointing at kubelet-client-current.pem" \
  [ "$(grep -c "\"$PKI/kubelet-client-current.pem\"" "$KC")" = 2 ]
check "kubeconfig: kubectl can use it as the node" \
  bash -c "'$NANOLET_TEST_KUBECTL' --kubeconfig '$KC' auth whoami -o jsonpath='{.status.userInfo.username}' | grep -qx 'system:node:$NODE'"
check "no restart: one process start in the log" [ "$(grep -c 'nanolet .* starting' "$LOG")" = 1 ]

kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: $IMG, command: [sh, -c, 'while :; do echo "hello from web"; sleep 1; done']}]
EOF
pod_running() { [ "$(kubectl get pod -n "$PODS_NS" "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
if wait_for 60 pod_running web; then
  ok "enrolment: a pod from the API runs"
else
  fail "pod from the API" "$(kubectl get pod -n "$PODS_NS" web -o jsonpath='{.status}')"
fi

# --- the serving certificate ----------------------------------------------------------
serving_csrs() { csrs_of "system:node:$NODE" kubernetes.io/kubelet-serving; }
pending_serving() { serving_csrs | jq -r '[.[] | select((.status.conditions // []) | length == 0)][0].metadata.name // empty'; }
has_pending_serving() { [ -n "$(pending_serving)" ]; }
n_serving() { serving_csrs | jq length; }
served_by_ca() {
  served_cert "$NODE_IP" "$KPORT" >"$E2E_TMP/served.pem" &&
    openssl verify -CAfile "$NANOLET_TEST_K8S_CA" "$E2E_TMP/served.pem" >/dev/null 2>&1
}
wait_for 10 has_pending_serving
first=$(pending_serving)
if [ -n "$first" ]; then
  ok "serving: a kubelet-serving CSR waits for approval"
  check "serving: the CSR names the node's addresses" \
    bash -c "'$NANOLET_TEST_KUBECTL' get csr '$first' -o jsonpath='{.spec.request}' | base64 -d | openssl req -noout -text | grep -q 'DNS:$NODE, IP Address:$NODE_IP'"
else
  fail "serving: a pending kubelet-serving CSR" "$(serving_csrs | jq -c '[.[].metadata.name]')"
fi
if served_by_ca; then
  fail "serving: before approval" "the server already presents a CA-signed certificate"
else
  ok "serving: until approved, the server keeps its self-signed certificate"
fi
kubectl certificate deny "$first" >/dev/null
if wait_for 10 log_has "certificate signing request $first is denied"; then
  ok "serving: a denied CSR is reported"
else
  fail "serving: denied CSR in the log" "$(grep kubelet-serving "$LOG" | tail -3)"
fi
t_deny=$(date +%s%N)
n2() { [ "$(n_serving)" -ge 2 ] && has_pending_serving; }
wait_for 15 n2
second=$(pending_serving)
if [ -n "$second" ] && [ "$second" != "$first" ]; then
  ok "serving: a new CSR follows $((($(date +%s%N) - t_deny) / 1000000)) ms after the denial (back-off)"
else
  fail "serving: retry after the denial" "$(serving_csrs | jq -c '[.[] | {n: .metadata.name, c: .status.conditions}]')"
fi
kubectl certificate approve "$second" >/dev/null
if wait_for 15 served_by_ca; then
  ok "serving: after approval the server presents a certificate the cluster CA signed"
else
  fail "serving: CA-signed serving certificate" "$(openssl x509 -in "$E2E_TMP/served.pem" -noout -issuer 2>&1)"
fi
check "serving: kubelet-server-current.pem in certDir" [ -L "$PKI/kubelet-server-current.pem" ]
check "serving: kubectl logs reaches the node" \
  bash -c "'$NANOLET_TEST_KUBECTL' logs -n $PODS_NS web --tail 1 | grep -q 'hello from web'"

# --- recovery: an expired client certificate ---------------------------------------
cid=$(kubectl get pod -n "$PODS_NS" web -o jsonpath='{.status.containerStatuses[0].containerID}')
stop_agent TERM
mint "$E2E_TMP/expired" "system:node:$NODE" system:nodes -7200 -3600 clientAuth
old=$(store_pair "$PKI" kubelet-client "$E2E_TMP/expired")
n_before=$(csrs_of "system:bootstrap:$TOKEN_ID" kubernetes.io/kube-apiserver-client-kubelet | jq length)
start_agent --config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --bootstrap-kubeconfig "$BOOT" \
  --node-ip "$NODE_IP"
replaced() { [ "$(readlink "$PKI/kubelet-client-current.pem")" != "$old" ]; }
if wait_for 15 replaced; then
  ok "recovery: an expired client certificate is replaced through the bootstrap token"
else
  fail "recovery" "$(grep -E 'kube-apiserver-client|expired' "$LOG" | tail -5)"
fi
check "recovery: the CSR came from the bootstrap credentials" \
  [ "$(csrs_of "system:bootstrap:$TOKEN_ID" kubernetes.io/kube-apiserver-client-kubelet | jq length)" -gt "$n_before" ]
check "recovery: the start-up log says why" log_has "is expired"
check "recovery: the node is Ready" wait_for 20 node_ready
check "recovery: the pod was not disturbed" \
  [ "$(kubectl get pod -n "$PODS_NS" web -o jsonpath='{.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}')" = "$cid 0" ]
check "recovery: the expired pair stays on disk" [ -f "$old" ]
