#!/usr/bin/env bash
# More watches than one HTTP/2 connection carries, on the real control plane
# (the API server allows 100 streams per connection): 150 ConfigMaps referenced
# by three pods on the node (50 envFrom each) are each watched (the audit log
# shows a watch per ConfigMap by name), the API client opens a second
# connection for them (ss), the pods run, and the node stays Ready with its
# Lease renewed while the watches hold their streams.
# MANY_WATCHES_NODE / MANY_WATCHES_KUBECONFIG: the node and its credential
# (default: a node of this test's own, credential minted with controlplane.sh
# cert); MANY_WATCHES_N: the number of ConfigMaps (150).
PODS_NS=kconn-e2e-watches
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${MANY_WATCHES_NODE:-nanolet-kconn}
KC=${MANY_WATCHES_KUBECONFIG:-$(node_kubeconfig "$NODE")}
N=${MANY_WATCHES_N:-150}
PER_POD=50
IMG=localhost/busybox:1.36
AUDIT=${NANOLET_TEST_AUDIT_LOG:-}
e2e_on_exit api_cleanup

fresh_ns "$PODS_NS"
audit_start=0
[ -r "$AUDIT" ] && audit_start=$(wc -l <"$AUDIT")
for i in $(seq 1 "$N"); do
  printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, namespace: %s}\ndata: {K%d: v%d}\n' \
    "$i" "$PODS_NS" "$i" "$i"
done | kubectl apply -f - >/dev/null || fail "ConfigMaps" "kubectl apply failed"

start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" -v=2 || { fail "agent start" ""; exit 1; }
node_ready() {
  [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
renew_time() { kubectl get lease -n kube-node-lease "$NODE" -o jsonpath='{.spec.renewTime}' 2>/dev/null; }
wait_for 30 node_ready || fail "node" "$NODE is not Ready before the watches"

# Pods 1..N/PER_POD, each with envFrom of PER_POD ConfigMaps.
npods=$(((N + PER_POD - 1) / PER_POD))
for p in $(seq 1 "$npods"); do
  printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: refs-%d, namespace: %s}\n' "$p" "$PODS_NS"
  printf 'spec:\n  nodeName: %s\n  automountServiceAccountToken: false\n  enableServiceLinks: false\n' "$NODE"
  printf '  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: %s\n' "$IMG"
  printf '    command: [sleep, "3600"]\n    envFrom:\n'
  for i in $(seq $(((p - 1) * PER_POD + 1)) $((p * PER_POD > N ? N : p * PER_POD))); do
    printf '    - configMapRef: {name: cm-%d}\n' "$i"
  done
done | kubectl apply -f - >/dev/null || fail "pods" "kubectl apply failed"

running() { [ "$(kubectl get pod -n "$PODS_NS" "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
all_running() { for p in $(seq 1 "$npods"); do running "refs-$p" || return 1; done; }
t0=$(date +%s)
if wait_for 60 all_running; then ok "$npods pods referencing $N ConfigMaps run ($(($(date +%s) - t0)) s)"
else fail "pods run" "$(kubectl get pods -n "$PODS_NS" --no-headers 2>&1 | tr '\n' ';')"; fi

# Every ConfigMap is watched by name (none is left to GETs).
watched() {
  tail -n +"$((audit_start + 1))" "$AUDIT" | jq -r --arg u "system:node:$NODE" --arg ns "$PODS_NS" '
    select(.user.username == $u and .verb == "watch" and .objectRef.resource == "configmaps"
           and .objectRef.namespace == $ns and .stage == "ResponseStarted")
    | .requestURI | capture("fieldSelector=metadata.name%3D(?<n>[^&]+)").n' | sort -u | wc -l
}
all_watched() { [ "$(watched)" -ge "$N" ]; }
if [ ! -r "$AUDIT" ]; then
  fail "audit log" "NANOLET_TEST_AUDIT_LOG not readable (tools/testenv/README.md)"
elif wait_for 30 all_watched; then ok "audit: each of the $N ConfigMaps is watched by name"
else fail "watches" "$(watched) of $N ConfigMaps watched"; fi
if ! grep -q "fetched with GETs until one is free" "$E2E_TMP/agent.log"; then
  ok "no ConfigMap is left to GETs for want of a watch"
else fail "watch bound" "$(grep -c "fetched with GETs" "$E2E_TMP/agent.log") objects polled"; fi

# The connections to the API server: the watches need a second one.
port=${NANOLET_TEST_APISERVER##*:}
conns() { ss -Htnp state established "( dport = :$port )" 2>/dev/null | grep -c "pid=$AGENT_PID,"; }
n=$(conns)
if [ "$n" -ge 2 ]; then ok "the API client holds $n connections to the API server (100 streams each)"
else fail "connections" "$n connection(s) to the API server"; fi
check "  opening another was logged" grep -q "have no free stream: opening another" "$E2E_TMP/agent.log"

# The Lease is renewed (every 10 s) and the node stays Ready with every watch open.
has_lease() { [ -n "$(renew_time)" ]; }
wait_for 20 has_lease || fail "Lease" "no Lease for $NODE"
r0=$(renew_time)
renewed() { local r; r=$(renew_time); [ -n "$r" ] && [ "$r" != "$r0" ]; }
if wait_for 25 renewed; then ok "the Lease is renewed while the watches hold their streams ($r0 -> $(renew_time))"
else fail "Lease" "renewTime stays $r0"; fi
if node_ready; then ok "the node is Ready"
else fail "node" "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")]}')"; fi
echo "  nanolet $(grep VmRSS "/proc/$AGENT_PID/status" 2>/dev/null | tr -s ' \t' ' ') with $N object watches"
