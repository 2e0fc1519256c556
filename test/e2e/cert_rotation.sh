#!/usr/bin/env bash
# Certificate rotation on the real control plane, two nodes at once:
# - node A starts with client and serving certificates the test minted from the
#   cluster CA for one minute. Both rotate through CSRs (kube-controller-manager
#   approves the client one; the test approves the serving one with kubectl)
#   while the node stays Ready: the Lease keeps being renewed, the pod watch
#   opened before the rotation is not re-listed and still delivers the next pod,
#   and the minted files stay on disk beside the new ones.
# - node B reaches the API server through a TCP proxy that the test stops
#   during the rotation window and past the certificate's expiry. When the
#   proxy is back, the expired certificate is replaced through the bootstrap
#   kubeconfig, the node is Ready again and its pod was not disturbed.
#
# Node names: NANOLET_TEST_TLSBOOT_NODE (default nanolet-tlsboot) and
# NANOLET_TEST_TLSBOOT_NODE2 (default nanolet-tlsboot2); the credentials are
# minted here.
. "$(dirname "$0")/lib.sh"
: "${NANOLET_TEST_CRI_ENDPOINT:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
. "$(dirname "$0")/certs_lib.sh"
A=${NANOLET_TEST_TLSBOOT_NODE:-nanolet-tlsboot}
B=${NANOLET_TEST_TLSBOOT_NODE2:-nanolet-tlsboot2}
NS=tlsboot-e2e-rotation
IMG=localhost/busybox:1.36
declare -A PID HPORT
PROXY_PID=
APPROVER_PID=
SAMPLER_PID=
API_HOSTPORT=${NANOLET_TEST_APISERVER#https://}
PROXY_PORT=$(free_port)

# agent NODE FLAGS...: nanolet for NODE with its own root, ports and log.
agent() {
  local n=$1 r=$E2E_TMP/$1
  shift
  mkdir -p "$r/manifests"
  HPORT[$n]=$(free_port)
  "$NANOLET" --healthz-port "${HPORT[$n]}" --port "$(free_port)" --read-only-port 0 \
    --cert-dir "$r/pki" --root-dir "$r/root" --pod-manifest-path "$r/manifests" \
    --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" --hostname-override "$n" \
    --node-ip "$NODE_IP" "$@" >>"$r/agent.log" 2>&1 &
  PID[$n]=$!
  wait_for 10 healthz_ok "${HPORT[$n]}" || { echo "agent $n did not start:"; tail -20 "$r/agent.log"; }
}
stop() { [ -z "${PID[$1]:-}" ] || { kill "${PID[$1]}" 2>/dev/null; wait "${PID[$1]}" 2>/dev/null; PID[$1]=; }; }
# A TCP proxy to the API server on PROXY_PORT: the node's uplink.
proxy_up() {
  python3 - "$PROXY_PORT" "$API_HOSTPORT" >/dev/null 2>&1 <<'PY' &
import asyncio, sys
port = int(sys.argv[1]); host, up = sys.argv[2].rsplit(':', 1)
async def pipe(r, w):
    try:
        while data := await r.read(65536):
            w.write(data); await w.drain()
    except Exception: pass
    finally: w.close()
async def handle(r, w):
    try: ur, uw = await asyncio.open_connection(host, int(up))
    except Exception: w.close(); return
    await asyncio.gather(pipe(r, uw), pipe(ur, w))
async def main():
    s = await asyncio.start_server(handle, '127.0.0.1', port, reuse_address=True)
    async with s: await s.serve_forever()
asyncio.run(main())
PY
  PROXY_PID=$!
  wait_for 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT" 2>/dev/null
}
proxy_down() { [ -z "$PROXY_PID" ] || { kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null; PROXY_PID=; }; }
ready() { [ "$(kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
running() { [ "$(kubectl get pod -n "$NS" "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
current() { readlink "$E2E_TMP/$1/pki/kubelet-$2-current.pem"; }
ns_sandboxes() { "$NANOLET" cri -r "$NANOLET_TEST_CRI_ENDPOINT" pods -o json | jq --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns)] | length'; }
runtime_clear() { [ "$(ns_sandboxes)" = 0 ]; }
cleanup() {
  for p in "$APPROVER_PID" "$SAMPLER_PID"; do [ -z "$p" ] || kill "$p" 2>/dev/null; done
  [ -n "$PROXY_PID" ] || proxy_up
  kubectl delete pods -n "$NS" --all --grace-period=0 --force >/dev/null 2>&1
  wait_for 60 runtime_clear || fail "clean-up" "sandboxes left in $NS"
  stop "$A"; stop "$B"; proxy_down
  kubectl delete ns "$NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$A" "$B" --wait=false >/dev/null 2>&1
  kubectl get csr -o json 2>/dev/null | jq -r --arg a "system:node:$A" --arg b "system:node:$B" \
    --arg t "system:bootstrap:${TOKEN_ID:-none}" \
    '.items[] | select(.spec.username == $a or .spec.username == $b or .spec.username == $t) | .metadata.name' |
    xargs -r "$NANOLET_TEST_KUBECTL" delete csr >/dev/null 2>&1
  drop_token
  if [ -n "${E2E_KEEP:-}" ] || [ "$E2E_FAILED" -gt 0 ]; then
    for n in "$A" "$B"; do echo "--- $n log (last 30 lines) ---"; tail -30 "$E2E_TMP/$n/agent.log"; done
  fi
}
e2e_on_exit cleanup
[ -n "$NODE_IP" ] || { fail "node IP" "no non-loopback address (set NANOLET_TEST_NODE_IP)"; exit 1; }
kubectl delete node "$A" "$B" --ignore-not-found >/dev/null
fresh_ns "$NS"
cat >"$E2E_TMP/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
rotateCertificates: true
serverTLSBootstrap: true
EOF

# --- node A: one-minute certificates --------------------------------------------
mint "$E2E_TMP/a-client" "system:node:$A" system:nodes -5 55 clientAuth
mint "$E2E_TMP/a-server" "system:node:$A" system:nodes -5 55 serverAuth "DNS:$A,IP:$NODE_IP"
a_client=$(store_pair "$E2E_TMP/$A/pki" kubelet-client "$E2E_TMP/a-client")
a_server=$(store_pair "$E2E_TMP/$A/pki" kubelet-server "$E2E_TMP/a-server")
node_kubeconfig_at "$E2E_TMP/$A.conf" "$E2E_TMP/$A/pki/kubelet-client-current.pem"
a_expiry=$(not_after "$E2E_TMP/a-client.crt")

# --- node B: a 65-second certificate, a bootstrap token, and an uplink ----------
proxy_up
bootstrap_token "$E2E_TMP/boot.conf" "https://127.0.0.1:$PROXY_PORT" || { fail "bootstrap token" "cannot create the Secret"; exit 1; }
mint "$E2E_TMP/b-client" "system:node:$B" system:nodes -5 60 clientAuth
b_client=$(store_pair "$E2E_TMP/$B/pki" kubelet-client "$E2E_TMP/b-client")
node_kubeconfig_at "$E2E_TMP/$B.conf" "$E2E_TMP/$B/pki/kubelet-client-current.pem" "https://127.0.0.1:$PROXY_PORT"
b_expiry=$(not_after "$E2E_TMP/b-client.crt")

agent "$A" --config "$E2E_TMP/config.yaml" --kubeconfig "$E2E_TMP/$A.conf"
agent "$B" --rotate-certificates --kubeconfig "$E2E_TMP/$B.conf" --bootstrap-kubeconfig "$E2E_TMP/boot.conf"
# The operator's part: approve node A's serving CSRs as they come.
(while :; do
  kubectl get csr -o json 2>/dev/null | jq -r --arg u "system:node:$A" '.items[] |
    select(.spec.username == $u and .spec.signerName == "kubernetes.io/kubelet-serving" and
    ((.status.conditions // []) | length == 0)) | .metadata.name' |
    xargs -r "$NANOLET_TEST_KUBECTL" certificate approve >/dev/null 2>&1
  sleep 1
done) &
APPROVER_PID=$!
check "node A Ready with its minted certificate" wait_for 20 ready "$A"
check "node B Ready with its minted certificate" wait_for 20 ready "$B"
for p in a b; do
  n=$A; [ $p = b ] && n=$B
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $p, namespace: $NS}
spec:
  nodeName: $n
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: $IMG, command: [sleep, "3600"]}]
EOF
done
check "pods run on both nodes" wait_for 60 bash -c "$(declare -f running kubectl); NS=$NS NANOLET_TEST_KUBECTL=$NANOLET_TEST_KUBECTL; running a && running b"
b_cid=$(kubectl get pod -n "$NS" b -o jsonpath='{.status.containerStatuses[0].containerID}')
lists_a=$(grep -c "api source: .* pods bound" "$E2E_TMP/$A/agent.log")

# Samples node A once a second: Ready, and the Lease's renewTime.
(while :; do
  echo "$(date +%s) $(kubectl get node "$A" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) $(kubectl get lease -n kube-node-lease "$A" -o jsonpath='{.spec.renewTime}' 2>/dev/null)"
  sleep 1
done >"$E2E_TMP/samples") &
SAMPLER_PID=$!

# --- node B goes offline before its rotation window (70-90 % of 65 s) -----------
down_at=$((b_expiry - 25))
[ "$(date +%s)" -ge "$down_at" ] || sleep $((down_at - $(date +%s)))
check "node B: still on its minted certificate when the uplink goes down" [ "$(current "$B" client)" = "$b_client" ]
proxy_down
echo "uplink of $B down at $(date +%T) (certificate expires $(date -d @"$b_expiry" +%T))"

# --- node A rotates both certificates -------------------------------------------
t=$(date +%s)
rotated() { [ "$(current "$A" client)" != "$a_client" ] && [ "$(current "$A" server)" != "$a_server" ]; }
if wait_for $((a_expiry - t + 5)) rotated; then
  ok "node A: client and serving certificates rotated $(( $(date +%s) - (a_expiry - 60) )) s into their 60 s validity"
else
  fail "node A rotation" "$(grep -E 'kube-apiserver-client|kubelet-serving' "$E2E_TMP/$A/agent.log" | tail -6)"
fi
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: a2, namespace: $NS}
spec:
  nodeName: $A
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: $IMG, command: [sleep, "3600"]}]
EOF
check "node A: the pod watch opened before the rotation delivers the next pod" wait_for 20 running a2
check "node A: the watch was not re-listed across the rotation" \
  [ "$(grep -c "api source: .* pods bound" "$E2E_TMP/$A/agent.log")" = "$lists_a" ]
new=$(current "$A" client)
check "node A: the new client certificate is the cluster's, valid for more than a day" \
  [ "$(issuer_cn "$new") $(($(not_after "$new") - $(date +%s) > 86400))" = "nanolet-test-ca 1" ]
check "node A: the minted pairs stay on disk" [ -f "$a_client" -a -f "$a_server" ]
now=$(date +%s)
[ "$now" -gt "$((a_expiry + 3))" ] || sleep $((a_expiry + 3 - now))
check "node A: Ready after the minted certificates expired" ready "$A"
kill "$SAMPLER_PID"; SAMPLER_PID=
s=$(awk -v e="$a_expiry" '$1 >= e - 50' "$E2E_TMP/samples")
check "node A: Ready in every sample across the rotation" [ -z "$(awk '$2 != "True"' <<<"$s")" ]
renewals=$(awk '{print $3}' <<<"$s" | sort -u | wc -l)
check "node A: the Lease was renewed through the rotation ($renewals renewals)" [ "$renewals" -ge 4 ]
served_cert "$NODE_IP" "$(sed -n 's/.*serving on 0.0.0.0:\([0-9]*\) (TLS).*/\1/p' "$E2E_TMP/$A/agent.log" | tail -1)" >"$E2E_TMP/served.pem"
check "node A: the server presents the rotated serving certificate" \
  [ "$(openssl x509 -in "$E2E_TMP/served.pem" -noout -fingerprint)" = "$(openssl x509 -in "$(current "$A" server)" -noout -fingerprint)" ]

# --- node B comes back online past its certificate's expiry ---------------------
now=$(date +%s)
[ "$now" -gt "$((b_expiry + 3))" ] || sleep $((b_expiry + 3 - now))
check "node B: rotation failed while offline" grep -q "Failed while requesting a signed certificate" "$E2E_TMP/$B/agent.log"
proxy_up
echo "uplink of $B up at $(date +%T)"
t=$(date +%s)
b_rotated() { [ "$(current "$B" client)" != "$b_client" ]; }
if wait_for 45 b_rotated; then
  ok "node B: the expired certificate is replaced $(( $(date +%s) - t )) s after the uplink returned"
else
  fail "node B recovery" "$(grep -E 'kube-apiserver-client' "$E2E_TMP/$B/agent.log" | tail -6)"
fi
check "node B: through the bootstrap credentials" \
  [ "$(csrs_of "system:bootstrap:$TOKEN_ID" kubernetes.io/kube-apiserver-client-kubelet | jq length)" -ge 1 ]
check "node B: Ready again" wait_for 30 ready "$B"
check "node B: the pod was not disturbed" \
  [ "$(kubectl get pod -n "$NS" b -o jsonpath='{.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}')" = "$b_cid 0" ]
