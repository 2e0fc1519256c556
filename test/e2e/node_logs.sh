#!/usr/bin/env bash
# The node's logs through the real apiserver, as an operator reads them with
# kubectl: a node whose enableSystemLogQuery is on and whose output goes to a
# file under /var/log (as the sysvinit and OpenRC scripts send it to
# /var/log/nanolet.log) answers `kubectl get --raw
# /api/v1/nodes/N/proxy/logs/?query=kubelet` with its own log, filtered by
# tailLines, pattern, sinceTime, untilTime and boot; `?query=/FILE` and
# /logs/FILE give a file of /var/log, /logs/ lists it; nothing outside /var/log
# is served (`..`, a link out), and an empty query, a bad option or an unsafe
# service name are refused with upstream's messages.
PODS_NS=nanolet-e2e-nodelogs
# The agent's own log, one per run: the query must find this node's lines.
AGENT_LOG=/var/log/nanolet-e2e-nodelogs-$$.log
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_TEST_NODELOGS_NODE:-nl-nodelogs}
KC=$(node_kubeconfig "$NODE")
LINK=/var/log/nanolet-e2e-nodelogs-$$.link
cleanup() {
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  pods_cleanup # (it may start the agent again, to remove what is left)
  stop_agent
  rm -f "$AGENT_LOG" "$LINK"
}
e2e_on_exit cleanup
[ -n "$NODE_IP" ] || { fail "node IP" "no non-loopback address (set NANOLET_TEST_NODE_IP)"; exit 1; }

cat >"$E2E_TMP/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
enableSystemLogQuery: true
authentication:
  x509: {clientCAFile: $NANOLET_TEST_K8S_CA}
EOF
: >"$AGENT_LOG"
kubectl delete node "$NODE" --ignore-not-found >/dev/null
start_agent --config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --node-ip "$NODE_IP" ||
  { fail "agent start" "$(tail -5 "$AGENT_LOG")"; exit 1; }
wait_for 20 node_ready || { fail "node Ready" "$NODE is not Ready"; exit 1; }
ok "node $NODE is Ready, logging to $AGENT_LOG"

raw() { kubectl get --raw "/api/v1/nodes/$NODE/proxy/logs/$1" 2>&1; }
out=$E2E_TMP/out

# The query finds the agent's own log by the kubelet's name and by its own.
STARTED="nanolet [^ ]* starting, node name $NODE\$"
raw "?query=kubelet" >"$out"
check "?query=kubelet: this node's own log, from its first line" grep -q "$STARTED" "$out"
check "?query=kubelet: the whole file, as it was then" \
  bash -c "[ \$(wc -l <'$out') -ge 10 ] && cmp -s '$out' <(head -c \$(stat -c %s '$out') '$AGENT_LOG')"
check "?query=nanolet: the same log" bash -c "kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query=nanolet' | grep -q '$STARTED'"
check "?query=kubelet&boot=0: this boot's lines" bash -c "kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query=kubelet&boot=0' | grep -q '$STARTED'"

raw "?query=kubelet&tailLines=3" >"$out"
check "tailLines=3: three lines" test "$(wc -l <"$out")" -eq 3
check "tailLines=3: the file's last lines" bash -c "grep -qxF \"\$(tail -1 '$out')\" '$AGENT_LOG'"
check "tailLines=3: not the first line" bash -c "! grep -q '$STARTED' '$out'"

raw "?query=kubelet&pattern=starting,%20node%20name%20$NODE\$" >"$out"
check "pattern: only the matching line" bash -c "[ \$(wc -l <'$out') -eq 1 ] && grep -q '$STARTED' '$out'"

later=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
earlier=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)
check "sinceTime an hour ahead: no line" test -z "$(raw "?query=kubelet&sinceTime=$later")"
check "sinceTime an hour ago: the first line" bash -c "kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query=kubelet&sinceTime=$earlier' | grep -q '$STARTED'"
check "untilTime an hour ago: no line" test -z "$(raw "?query=kubelet&untilTime=$earlier")"

# Files of /var/log, by query and by path; its listing.
base=$(basename "$AGENT_LOG")
check "?query=/$base: the file" bash -c "kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query=/$base' | grep -q '$STARTED'"
check "/logs/$base: the file" bash -c "kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/$base' | grep -q '$STARTED'"
check "/logs/: /var/log listed" bash -c "kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/' | grep -qF '<a href=\"$base\">'"
check "?query=nothing-here: upstream's answer for a service without a log" \
  bash -c "kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query=nothing-here' | grep -qx 'log not found for nothing-here'"

# Nothing outside /var/log: "..", a link out.
ln -sfn /etc/passwd "$LINK"
check "?query=/../etc/passwd: refused" bash -c "! kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query=/../etc/passwd' 2>&1 | grep -q root:"
check "/logs/%2E%2E/etc/passwd: refused" bash -c "! kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/%2E%2E/etc/passwd' 2>&1 | grep -q root:"
check "a link to /etc/passwd: refused" bash -c "! kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/$(basename "$LINK")' 2>&1 | grep -q root:"
check "a link to /etc/passwd by query: refused" bash -c "! kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query=/$(basename "$LINK")' 2>&1 | grep -q root:"
# ... for the reasons the agent gives (its log), not by chance.
check "the agent refused \"..\" in a query" \
  grep -qF 'logs: 406 query: Invalid value: []string{"/../etc/passwd"}: Permission denied' "$AGENT_LOG"
check "the agent refused the link in a query" \
  grep -qF "logs: 406 query: Invalid value: []string{\"/$(basename "$LINK")\"}: Too many levels of symbolic links" "$AGENT_LOG"
check "the agent refused the link by path" grep -qF 'logs: 403 403 Forbidden' "$AGENT_LOG"

# Bad queries: kubectl fails, with upstream's message.
check "?query (empty): an error" bash -c "! kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query' >/dev/null 2>&1"
check "an unsafe service name: refused" bash -c "! kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query=kubelet%20-x' >/dev/null 2>&1"
check "tailLines=-1: refused" bash -c "! kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query=kubelet&tailLines=-1' >/dev/null 2>&1"
check "boot=1: refused" bash -c "! kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query=kubelet&boot=1' >/dev/null 2>&1"
check "the agent logged why: upstream's field error" grep -q 'logs: 406 boot: Invalid value: "1": must be less than 1' "$AGENT_LOG"
check "the agent is still serving" bash -c "kubectl get --raw '/api/v1/nodes/$NODE/proxy/logs/?query=kubelet&tailLines=1' | grep -q ."
