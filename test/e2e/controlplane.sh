#!/usr/bin/env bash
# The test control plane (tools/testenv/controlplane.sh) is the real thing, set
# up as production clusters are: the pinned version, the system namespaces,
# the controllers that nodes rely on (service accounts, the root CA ConfigMap,
# CSR signing), the Node authorizer and NodeRestriction for the node
# credential, 401 for a certificate from another CA and 403 for a user
# without rights.
. "$(dirname "$0")/lib.sh"

k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed: see the messages above"; exit 1; }
NODE=$NANOLET_TEST_NODE_NAME
OTHER=$NODE-other
nodectl() { kubectl --kubeconfig "$NANOLET_TEST_NODE_KUBECONFIG" "$@"; }
cleanup() {
  kubectl delete node "$NODE" "$OTHER" --ignore-not-found >/dev/null
  kubectl delete csr nanolet-e2e-csr --ignore-not-found >/dev/null
}
cleanup
e2e_on_exit cleanup

[ "$(realpath "$NANOLET_TEST_KUBECTL")" = "$(realpath "$NANOLET_TEST_K8S_BIN/kubectl")" ] &&
  ok "kubectl is the one built with the control plane" || fail "kubectl" "$NANOLET_TEST_KUBECTL"
v=$(kubectl version -o json)
[ "$(jq -r .clientVersion.gitVersion <<<"$v")" = v1.36.3 ] && [ "$(jq -r .serverVersion.gitVersion <<<"$v")" = v1.36.3 ] &&
  ok "kubectl and the apiserver are v1.36.3" || fail "version" "$v"

# Other tests add namespaces of their own: the system ones must be there.
ns=$(kubectl get namespaces -o name | grep -xE 'namespace/(default|kube-node-lease|kube-public|kube-system)' | sort | tr '\n' ' ')
[ "$ns" = "namespace/default namespace/kube-node-lease namespace/kube-public namespace/kube-system " ] &&
  ok "system namespaces" || fail "namespaces" "$ns"

wait_for 30 kubectl get serviceaccount default -n default -o name >/dev/null &&
  ok "the controller-manager made ServiceAccount default" || fail "ServiceAccount default"
if wait_for 30 kubectl get configmap kube-root-ca.crt -n default -o name >/dev/null &&
  [ "$(kubectl get configmap kube-root-ca.crt -n default -o jsonpath='{.data.ca\.crt}')" = "$(cat "$NANOLET_TEST_K8S_CA")" ]; then
  ok "kube-root-ca.crt in default holds the cluster CA"
else
  fail "kube-root-ca.crt"
fi

node_yaml() { printf 'apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n' "$1"; }
who=$(nodectl auth whoami -o json)
[ "$(jq -r .status.userInfo.username <<<"$who")" = "system:node:$NODE" ] &&
  jq -e '.status.userInfo.groups | index("system:nodes")' <<<"$who" >/dev/null &&
  ok "the node credential is system:node:$NODE in system:nodes" || fail "node identity" "$who"
kubectl delete node "$NODE" --ignore-not-found >/dev/null # left by an agent run before
node_yaml "$NODE" | nodectl create -f - >/dev/null && nodectl get node "$NODE" -o name >/dev/null &&
  ok "the node credential registers and reads its own Node" || fail "own Node"
nodectl label node "$NODE" nanolet.test/label=yes >/dev/null &&
  ok "the node credential labels its own Node" || fail "own label"
out=$(nodectl label node "$NODE" node-role.kubernetes.io/worker= 2>&1)
grep -q 'Forbidden.*is not allowed to modify labels: node-role.kubernetes.io/worker' <<<"$out" &&
  ok "NodeRestriction refuses a node-role label" || fail "node-role label" "$out"
out=$(node_yaml "$OTHER" | nodectl create -f - 2>&1)
grep -q "Forbidden.*node \"$NODE\" is not allowed to modify node \"$OTHER\"" <<<"$out" &&
  ok "NodeRestriction refuses another node's Node" || fail "create other Node" "$out"
node_yaml "$OTHER" | kubectl create -f - >/dev/null
out=$(nodectl get node "$OTHER" 2>&1)
grep -q "Forbidden.*cannot read '$OTHER', only its own Node object" <<<"$out" &&
  ok "the Node authorizer hides another node's Node" || fail "read other Node" "$out"
out=$(nodectl delete node "$OTHER" 2>&1)
grep -q 'Forbidden' <<<"$out" && ok "the node credential cannot delete another Node" || fail "delete other Node" "$out"

# Certificates from `controlplane.sh cert`, straight through curl.
code() { curl -sS -o /dev/null -w '%{http_code}' --cacert "$NANOLET_TEST_K8S_CA" \
  --cert "${1%.kubeconfig}.crt" --key "${1%.kubeconfig}.key" "$NANOLET_TEST_APISERVER/api/v1/namespaces"; }
kc=$("$NANOLET_TEST_CONTROLPLANE" cert --foreign e2e-foreign nanolet-e2e-foreign)
c=$(code "$kc")
out=$(kubectl --kubeconfig "$kc" get namespaces 2>&1)
[ "$c" = 401 ] && grep -q 'Unauthorized' <<<"$out" &&
  ok "a certificate from a foreign CA gets 401" || fail "foreign CA" "HTTP $c: $out"
kc=$("$NANOLET_TEST_CONTROLPLANE" cert e2e-nobody nanolet-e2e-nobody)
c=$(code "$kc")
out=$(kubectl --kubeconfig "$kc" get namespaces 2>&1)
[ "$c" = 403 ] && grep -q 'Forbidden.*User "nanolet-e2e-nobody" cannot list resource "namespaces"' <<<"$out" &&
  ok "a user without rights gets 403" || fail "user without rights" "HTTP $c: $out"

# CSR signing, as TLS bootstrap will use it: approved by hand, signed by the
# controller-manager with the cluster CA.
openssl req -new -newkey rsa:2048 -nodes -keyout "$E2E_TMP/csr.key" -out "$E2E_TMP/csr.pem" \
  -subj "/O=system:nodes/CN=system:node:$NODE" 2>/dev/null
kubectl create -f - >/dev/null <<EOF
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: nanolet-e2e-csr}
spec:
  request: $(base64 -w0 "$E2E_TMP/csr.pem")
  signerName: kubernetes.io/kube-apiserver-client-kubelet
  usages: [digital signature, client auth]
EOF
kubectl certificate approve nanolet-e2e-csr >/dev/null
signed() { kubectl get csr nanolet-e2e-csr -o jsonpath='{.status.certificate}' | grep -q .; }
if wait_for 30 signed; then
  kubectl get csr nanolet-e2e-csr -o jsonpath='{.status.certificate}' | base64 -d >"$E2E_TMP/csr.crt"
  openssl verify -CAfile "$NANOLET_TEST_K8S_CA" "$E2E_TMP/csr.crt" >/dev/null &&
    ok "the controller-manager signs an approved CSR with the cluster CA" || fail "CSR certificate"
else
  fail "CSR signing" "$(kubectl get csr nanolet-e2e-csr -o yaml)"
fi
