#!/usr/bin/env bash
# The node's Lease and Node travel as protobuf, upstream's default contentType:
# the Lease is created as application/vnd.kubernetes.protobuf, its first
# renewal (a JSON merge patch, docs/NODE.md) is answered so, and so are the
# Node's status patches (strategic merge patches, in JSON, as upstream's), both
# asking for the answer's metadata only (PartialObjectMetadata); the Lease's
# managedFields are reset by the first renewal and stay empty; every later
# renewal (a JSON patch that tests holder and duration, then replaces
# renewTime) and every status patch is answered with its status alone (no body
# crosses the link: docs/KUBE.md, "Status-only answers"); the Lease keeps
# being renewed and the node Ready. --kube-api-content-type=application/json turns
# it off. The agent's -v=7 request log (content types and sizes, as client-go
# logs headers) says what went out; the bytes per renewal are printed.
PODS_NS=nanolet-e2e-api-protobuf
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=e2e-protobuf
KC=$(node_kubeconfig "$NODE") || { fail "node credential" "controlplane.sh cert failed"; exit 1; }
LOG=$E2E_TMP/agent.log
PB=application/vnd.kubernetes.protobuf
META=";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
cleanup() {
  stop_agent
  pods_cleanup
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null 2>&1
}
e2e_on_exit cleanup
kubectl delete node "$NODE" --ignore-not-found >/dev/null
kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null

node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
renew_time() { kubectl get lease -n kube-node-lease "$NODE" -o jsonpath='{.spec.renewTime}' 2>/dev/null; }
# The -v=7 lines of one kind of request: METHOD PATH-SUFFIX
reqs() { grep -E " $1 https://[^ ]*$2: Accept: " "$LOG"; }
renewals() { reqs PATCH "/leases/$NODE" | wc -l; }
# first_bytes METHOD SUFFIX: "<request bytes> <response bytes>" of the first such
# request (a Lease's first renewal is the one answered with a body: the
# metadata)
first_bytes() {
  reqs "$1" "$2" | head -1 | sed -E 's/.*\(([0-9]+) bytes\); response .*\(([0-9]+) bytes\)$/\1 \2/'
}

# --- protobuf, the default ------------------------------------------------------
# The Node's status is patched when it changes, else every
# nodeStatusReportFrequency (5 min by default): 10 s here, so that a patch goes
# out during the test on a node whose status stays the same (it changed at
# every update on the shared containerd 1.6, busy with other tests' pods and
# images; on containerd 2's quiet instance it does not change).
cat >"$E2E_TMP/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
nodeStatusReportFrequency: 10s
EOF
start_agent --config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --node-ip "$NODE_IP" -v=7
wait_for 15 node_ready && ok "the node is Ready" || fail "node Ready" "$(tail -5 "$LOG")"
# The first renewal comes 10 s (a quarter of 40 s) after the Lease is made.
if wait_for 30 bash -c "[ \$(grep -cE ' PATCH https://[^ ]*/leases/$NODE: Accept: ' '$LOG') -ge 2 ]"; then
  ok "the Lease is renewed"
else
  fail "Lease renewals" "$(grep -i lease "$LOG" | tail -5)"
fi
want="Accept: $PB, application/json, Content-Type: $PB \\([0-9]+ bytes\\); response Content-Type: $PB \\("
renewal="Accept: $PB$META, application/json$META, application/json, Content-Type: application/merge-patch\\+json \\([0-9]+ bytes\\); response Content-Type: $PB \\("
tested="Accept: $PB$META, application/json$META, application/json, Content-Type: application/json-patch\\+json \\([0-9]+ bytes\\); response Content-Type: $PB \\(0 bytes\\)\$"
check "the Lease's first renewal is a JSON merge patch answered in protobuf, metadata only" \
  bash -c "grep -E ' PATCH https://[^ ]*/leases/$NODE: ' '$LOG' | head -1 | grep -qE '$renewal'"
check "every later renewal is a JSON patch (test, test, replace) answered with its status alone" \
  bash -c "l=\$(grep -E ' PATCH https://[^ ]*/leases/$NODE: ' '$LOG' | tail -n +2); [ -n \"\$l\" ] && [ \$(grep -cE '$tested' <<<\"\$l\") -eq \$(wc -l <<<\"\$l\") ]"
check "the Lease is created as protobuf" \
  bash -c "grep -qE ' POST https://[^ ]*/namespaces/kube-node-lease/leases: $want' '$LOG'"
check "the Node's status patches are JSON patches answered in protobuf, metadata only" wait_for 15 \
  bash -c "grep -qE ' PATCH https://[^ ]*/nodes/$NODE/status: Accept: $PB$META, application/json$META, application/json, Content-Type: application/strategic-merge-patch\\+json \\([0-9]+ bytes\\); response Content-Type: $PB ' '$LOG'"
r1=$(renew_time)
sleep 11
r2=$(renew_time)
check "the renewTime written through protobuf advances ($r1 -> $r2)" [ -n "$r1" -a "$r2" \> "$r1" ]
check "the Node's status patches are answered with their status alone (no body)" \
  bash -c "l=\$(grep -E ' PATCH https://[^ ]*/nodes/$NODE/status: ' '$LOG'); [ -n \"\$l\" ] && ! grep -vqE '\\(0 bytes\\)\$' <<<\"\$l\""
check "the node stays Ready" node_ready
check "the Lease carries no managedFields after its renewals" \
  bash -c "[ -z \"\$(kubectl get lease -n kube-node-lease '$NODE' --show-managed-fields -o jsonpath='{.metadata.managedFields}')\" ]"
check "the agent logs no decoding failure" bash -c "! grep -q 'does not decode' '$LOG'"
read -r pq pr <<<"$(first_bytes PATCH "/leases/$NODE")"
echo "# the Lease's first renewal, protobuf: $pq bytes request body, $pr bytes response body ($(renewals) renewals)"
read -r tq tr <<<"$(reqs PATCH "/leases/$NODE" | sed -n 2p | sed -E 's/.*\(([0-9]+) bytes\); response .*\(([0-9]+) bytes\)$/\1 \2/')"
echo "# a later renewal (the JSON patch): $tq bytes request body, $tr bytes response body"
stop_agent

# --- --kube-api-content-type=application/json -----------------------------------
mv "$LOG" "$E2E_TMP/agent-protobuf.log"
kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" -v=7 --kube-api-content-type=application/json
if wait_for 30 bash -c "[ \$(grep -cE ' PATCH https://[^ ]*/leases/$NODE: Accept: ' '$LOG') -ge 1 ]"; then
  check "with application/json the Lease renewal comes back as JSON" \
    bash -c "grep -qE ' PATCH https://[^ ]*/leases/$NODE: Accept: application/json$META, application/json, Content-Type: application/merge-patch\\+json \\([0-9]+ bytes\\); response Content-Type: application/json ' '$LOG'"
  read -r jq_ jr <<<"$(first_bytes PATCH "/leases/$NODE")"
  echo "# the Lease's first renewal, JSON: $jq_ bytes request body, $jr bytes response body"
  check "the first renewal's answer is smaller in protobuf ($pr bytes) than in JSON ($jr)" \
    [ "${pr:-0}" -gt 0 -a "${pr:-0}" -lt "${jr:-0}" ]
else
  fail "Lease renewals with JSON" "$(grep -i lease "$LOG" | tail -5)"
fi
check "the node stays Ready with JSON" node_ready
