#!/usr/bin/env bash
# Hostile clients against the kubelet server's authentication (issue 23,
# findings 1, 2, 6, 7, 8), loopback only: nanolet on the real containerd with
# webhook authentication and authorization mode Webhook against the real test
# control plane (its node credential sends the TokenReviews and
# SubjectAccessReviews), and client certificates from a CA of this test
# (hostile_certs). Each attack is followed by a check that the agent is alive.
#   - a bearer token that is not UTF-8: 401 (it crashed the agent);
#   - a T61String CN "caf\xe9": decoded as Latin-1, 403 for user café (crashed);
#   - CN "USER\0evil" is not USER: 403 where USER gets 200;
#   - 300 distinct 15 KB rejected tokens: RSS grows less than 1 MiB;
#   - an intermediate restricted to serverAuth: 401 (through one for clientAuth:
#     200).
. "$(dirname "$0")/lib.sh"
: "${NANOLET_TEST_CRI_ENDPOINT:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
: "${HOSTILE_CERTS:?the hostile_certs tool (test/e2e/meson.build)}"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=nl-hostile-auth
U=nl-hostile-admin # the user bound to system:kubelet-api-admin
ROOT=$E2E_TMP/root
CERTS=$E2E_TMP/certs
AGENT_PID=
cleanup() {
  if [ -n "$AGENT_PID" ]; then
    kill "$AGENT_PID" 2>/dev/null
    wait "$AGENT_PID" 2>/dev/null
  fi
  kubectl delete clusterrolebinding "$NODE-admin" >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  if [ -n "${E2E_KEEP:-}" ] || [ "$E2E_FAILED" -gt 0 ]; then
    echo "--- agent log (last 30 lines) ---"; tail -30 "$E2E_TMP/agent.log"
  fi
}
e2e_on_exit cleanup

[ -n "$NODE_IP" ] || { fail "node IP" "no non-loopback address (tools/testenv/node-ip.sh)"; exit 1; }
mkdir -p "$ROOT" "$CERTS"
"$HOSTILE_CERTS" "$CERTS" "$U" || { fail "certificates" "hostile_certs failed"; exit 1; }
kubectl delete clusterrolebinding "$NODE-admin" --ignore-not-found >/dev/null
kubectl create clusterrolebinding "$NODE-admin" --clusterrole=system:kubelet-api-admin --user="$U" >/dev/null
# Bound before the agent asks: a denial would be cached for 30 s.
can_proxy() { [ "$(kubectl auth can-i get nodes --subresource=proxy --as "$U")" = yes ]; }
wait_for 20 can_proxy || { fail "binding" "$U cannot get nodes/proxy"; exit 1; }

cat >"$E2E_TMP/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true, cacheTTL: 2m}
  x509: {clientCAFile: $CERTS/ca.crt}
authorization:
  mode: Webhook
EOF
HPORT=$(free_port)
server_flags "$ROOT"
kubectl delete node "$NODE" --ignore-not-found >/dev/null
KC=$(node_kubeconfig "$NODE")
start() {
  # shellcheck disable=SC2086
  "$NANOLET" --config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --healthz-port "$HPORT" $SERVER_FLAGS \
    --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" --root-dir "$ROOT" \
    --hostname-override "$NODE" --node-ip "$NODE_IP" >>"$E2E_TMP/agent.log" 2>&1 &
  AGENT_PID=$!
  wait_for 10 healthz_ok "$HPORT"
}
alive() { kill -0 "$AGENT_PID" 2>/dev/null && healthz_ok "$HPORT"; }
# Each attack on an agent that is up: one that killed it (a failure already)
# does not hide what the next one does.
revive() {
  alive && return 0
  wait "$AGENT_PID" 2>/dev/null
  echo "note: the agent died ($(grep -m1 -E 'SIG|Sanitizer|Assert' "$E2E_TMP/agent.log")); starting it again"
  start
}
start || { fail "agent start" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; }
ok "nanolet serves on port $KPORT"

# A TLS client that sends raw bytes (curl refuses some of them) and prints the
# status and the body; "tokens N SIZE" sends N distinct tokens and prints how
# many of each status came back.
cat >"$E2E_TMP/client.py" <<'EOF'
import collections, os, socket, ssl, sys

port = int(sys.argv[1])

def req(headers=b"", cert=None, key=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert, key)
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with ctx.wrap_socket(s) as t:
            t.sendall(b"GET /pods HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + b"\r\n")
            while True:
                try:
                    chunk = t.recv(65536)
                except (OSError, ssl.SSLError):
                    break
                if not chunk:
                    break
                data += chunk
    if not data.startswith(b"HTTP/1.1 "):
        return 0, b""
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body

cmd = sys.argv[2]
if cmd == "bad-token":
    code, body = req(b"Authorization: Bearer \xff\xfe\r\n")
    print(code, body.decode("utf-8", "replace"))
elif cmd == "cert":
    code, body = req(cert=sys.argv[3], key=sys.argv[4])
    print(code, body.decode("utf-8", "replace"))
elif cmd == "tokens":
    n, size = int(sys.argv[3]), int(sys.argv[4])
    seen = collections.Counter()
    for i in range(n):
        tok = os.urandom(size // 2).hex().encode()
        seen[req(b"Authorization: Bearer " + tok + b"\r\n")[0]] += 1
    print(" ".join("%d:%d" % kv for kv in sorted(seen.items())))
EOF
client() { timeout 120 /usr/bin/python3 "$E2E_TMP/client.py" "$KPORT" "$@" 2>&1; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$AGENT_PID/status"; }

# --- 1: a bearer token that is not UTF-8 ------------------------------------------
out=$(client bad-token)
if [ "$out" = "401 Unauthorized" ] && alive; then ok "a token that is not UTF-8: 401, the agent alive"
else fail "token not UTF-8" "$out; alive: $(alive && echo yes || echo no)"; fi

# --- 2: a T61String CN --------------------------------------------------------------
revive
out=$(client cert "$CERTS/t61.crt" "$CERTS/t61.key")
want="403 Forbidden (user=café, verb=get, resource=nodes, subresource(s)=[pods proxy])"
if [ "$out" = "$want" ] && alive; then ok "a T61String CN caf\\xe9: decoded as café, 403, the agent alive"
else fail "T61String CN" "$out; alive: $(alive && echo yes || echo no)"; fi

# --- 7: a CN with an embedded NUL -----------------------------------------------------
revive
out=$(client cert "$CERTS/user.crt" "$CERTS/user.key")
check "CN $U: 200 (bound to system:kubelet-api-admin)" [ "${out%% *}" = 200 ]
out=$(client cert "$CERTS/nul.crt" "$CERTS/nul.key")
if [ "${out%% *}" = 403 ] && alive; then ok "CN $U\\0evil is not $U: 403"
else fail "CN with a NUL" "${out:0:200}"; fi

# --- 8: an intermediate CA restricted to serverAuth -------------------------------------
revive
out=$(client cert "$CERTS/cliint.crt" "$CERTS/cliint.key")
check "through an intermediate for clientAuth: 200" [ "${out%% *}" = 200 ]
out=$(client cert "$CERTS/srvint.crt" "$CERTS/srvint.key")
if [ "$out" = "401 Unauthorized" ] && alive; then ok "through an intermediate restricted to serverAuth: 401"
else fail "intermediate serverAuth" "${out:0:200}"; fi
grep -q 'x509: certificate specifies an incompatible key usage' "$E2E_TMP/agent.log" ||
  fail "intermediate serverAuth" "no 'incompatible key usage' in the log"

# --- 6: 300 distinct 15 KB tokens -----------------------------------------------------------
revive
out=$(client tokens 20 15000) # the allocator and the API connection warm up
before=$(rss_kib)
t0=$(date +%s)
out=$(client tokens 300 15000)
after=$(rss_kib)
echo "300 tokens of 15000 bytes in $(($(date +%s) - t0)) s: $out; RSS $before -> $after KiB"
if [ "$out" = "401:300" ] && [ $((after - before)) -lt 1024 ] && alive; then
  ok "300 distinct 15 KB tokens: all 401, RSS +$((after - before)) KiB (< 1 MiB)"
else
  fail "300 tokens" "$out; RSS $before -> $after KiB"
fi
