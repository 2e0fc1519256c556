#!/usr/bin/env bash
# The kubelet server through the real apiserver, which reaches it with its
# kubelet-client certificate: /healthz, /configz and /containerLogs (tail,
# timestamps, since, limitBytes, follow, previous) through
# `kubectl get --raw /api/v1/nodes/<node>/proxy/...`; access control (no
# credentials 401, a ServiceAccount token without rights 403 decided by a
# SubjectAccessReview, an admin token 200); /debug/flags/v; and a flood of 500
# silent connections that locks out neither the apiserver nor the local
# /healthz.
#
# The node name and credential come from NANOLET_TEST_KSERVER_NODE and
# NANOLET_TEST_KSERVER_KUBECONFIG (default: nl-kserver, minted here). The
# apiserver proxies only to a non-loopback address (it prefers the InternalIP:
# tools/testenv/controlplane.sh), so the node runs with the host's own IP
# (NANOLET_TEST_NODE_IP).
PODS_NS=nanolet-e2e-kserver
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_TEST_KSERVER_NODE:-nl-kserver}
KC=${NANOLET_TEST_KSERVER_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
PKI=$(dirname "$NANOLET_TEST_K8S_CA")
IMG=localhost/busybox:1.36
SA_NS=$PODS_NS-sa
FLOOD_PID=
cleanup() {
  [ -z "$FLOOD_PID" ] || kill "$FLOOD_PID" 2>/dev/null
  kubectl delete ns "$SA_NS" --wait=false >/dev/null 2>&1
  kubectl delete clusterrolebinding "$SA_NS-admin" >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  pods_cleanup
}
e2e_on_exit cleanup
[ -n "$NODE_IP" ] || { fail "node IP" "no non-loopback address (set NANOLET_TEST_NODE_IP)"; exit 1; }

cat >"$E2E_TMP/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerLogMaxSize: 64Ki
containerLogMaxFiles: 3
authentication:
  x509: {clientCAFile: $NANOLET_TEST_K8S_CA}
EOF
put logger <<EOF
apiVersion: v1
kind: Pod
metadata: {name: logger, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: $IMG, command: [sh, -c, 'i=0; while :; do i=\$((i+1)); echo "line \$i"; sleep 0.2; done']}
EOF
put crasher <<EOF
apiVersion: v1
kind: Pod
metadata: {name: crasher, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: $IMG, command: [sh, -c, 'echo "attempt \$(cat /proc/uptime)"; sleep 4; exit 1']}
EOF
put chatter <<EOF
apiVersion: v1
kind: Pod
metadata: {name: chatter, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: $IMG, command: [sh, -c, 'i=0; while :; do for j in 0 1 2 3 4 5 6 7 8 9; do i=\$((i+1)); echo "chatter \$i xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; done; sleep 0.05; done']}
EOF
kubectl delete node "$NODE" --ignore-not-found >/dev/null
start_agent --config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --node-ip "$NODE_IP" ||
  { fail "agent start" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; }
ok "nanolet serves on port $KPORT"

raw() { kubectl get --raw "/api/v1/nodes/$NODE/proxy/$1" 2>&1; }
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
check "the node is Ready" wait_for 20 node_ready
check "the self-signed certificate names the node and its IP" \
  bash -c "openssl x509 -in '$ROOT/pki/kubelet.crt' -noout -ext subjectAltName | grep -q 'DNS:$NODE, IP Address:$NODE_IP'"
proxied_healthz() { [ "$(raw healthz)" = ok ]; }
check "kubectl get --raw .../proxy/healthz: ok" wait_for 10 proxied_healthz
out=$(raw configz)
check "/configz: the configuration, as upstream's {\"kubeletconfig\": ...}" \
  [ "$(jq -r '.kubeletconfig | "\(.port) \(.authentication.x509.clientCAFile) \(.authorization.mode) \(.authentication.webhook.cacheTTL)"' <<<"$out")" \
  = "$KPORT $NANOLET_TEST_K8S_CA Webhook 2m0s" ]

running() { raw "runningpods$1" | jq -e --arg n "logger-$NODE" --arg img "$IMG" \
  '.kind == "PodList" and ([.items[] | select(.metadata.name == $n) | .spec.containers[0] | "\(.name) \(.image)"] == ["c \($img)"])' >/dev/null; }
check "/runningpods/: the runtime's running pods and containers" wait_for 30 running /
check "/runningpods, without the slash, as upstream answers it" running ""

# --- access control ------------------------------------------------------------
url=https://127.0.0.1:$KPORT
code() { curl -sk -o "$E2E_TMP/body" -w '%{http_code}' "$@"; }
check "no credentials: 401 Unauthorized" \
  bash -c "[ \"\$(curl -sk -o '$E2E_TMP/b401' -w '%{http_code}' '$url/healthz')\" = 401 ] && [ \"\$(cat '$E2E_TMP/b401')\" = Unauthorized ]"
kubectl create ns "$SA_NS" >/dev/null
# Pods are refused until the controller made the default ServiceAccount.
wait_for 30 kubectl get serviceaccount default -n "$SA_NS" -o name >/dev/null
kubectl -n "$SA_NS" create sa nobody >/dev/null
kubectl -n "$SA_NS" create sa admin >/dev/null
kubectl create clusterrolebinding "$SA_NS-admin" --clusterrole=cluster-admin --serviceaccount="$SA_NS:admin" >/dev/null
tok=$(kubectl -n "$SA_NS" create token nobody)
c=$(code -H "Authorization: Bearer $tok" "$url/pods")
want="Forbidden (user=system:serviceaccount:$SA_NS:nobody, verb=get, resource=nodes, subresource(s)=[pods proxy])"
if [ "$c" = 403 ] && [ "$(cat "$E2E_TMP/body")" = "$want" ]; then ok "a token without rights: 403 from the SubjectAccessReview"
else fail "token without rights" "$c $(cat "$E2E_TMP/body") $(grep -i review "$E2E_TMP/agent.log" | tail -3)"; fi
tok=$(kubectl -n "$SA_NS" create token admin)
c=$(code -H "Authorization: Bearer $tok" "$url/pods")
if [ "$c" = 200 ] && [ "$(jq -r .kind "$E2E_TMP/body")" = PodList ]; then ok "an admin token: 200"
else fail "admin token" "$c $(head -c 200 "$E2E_TMP/body")"; fi
c=$(code -H "Authorization: Bearer not-a-token" "$url/healthz")
check "a bad token: 401" [ "$c" = 401 ]
cc=(--cert "$PKI/apiserver-kubelet-client.crt" --key "$PKI/apiserver-kubelet-client.key")
c=$(code "${cc[@]}" "$url/healthz")
check "the apiserver's client certificate: 200" [ "$c" = 200 ]

# --- /containerLogs ------------------------------------------------------------
logs="containerLogs/$PODS_NS/logger-$NODE/c"
has_lines() { [ "$(raw "$logs" | grep -c '^line ')" -ge 15 ]; }
check "the logger has written some lines" wait_for 30 has_lines
out=$(raw "$logs?tailLines=3")
n1=$(sed -n '1s/line //p' <<<"$out")
check "tailLines=3: the last three lines" \
  [ "$(wc -l <<<"$out") $(sed -n '3s/line //p' <<<"$out")" = "3 $((n1 + 2))" ]
check "timestamps=true: RFC 3339 before each line" \
  bash -c "raw() { '$NANOLET_TEST_KUBECTL' get --raw \"/api/v1/nodes/$NODE/proxy/\$1\"; }; raw '$logs?tailLines=2&timestamps=true' | grep -Ec '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9:]+) line [0-9]+\$' | grep -qx 2"
n=$(raw "$logs?sinceSeconds=2" | grep -c '^line ')
if [ "$n" -ge 5 ] && [ "$n" -le 16 ]; then ok "sinceSeconds=2: $n lines (one per 0.2 s)"; else fail "sinceSeconds" "$n lines"; fi
check "limitBytes=9: the first 9 bytes" [ "$(raw "$logs?limitBytes=9" | od -c)" = "$(raw "$logs" | head -c 9 | od -c)" ]
timeout 3 "$NANOLET_TEST_KUBECTL" get --raw "/api/v1/nodes/$NODE/proxy/$logs?follow=true&tailLines=0" >"$E2E_TMP/follow" 2>&1
n=$(grep -c '^line ' "$E2E_TMP/follow")
first=$(sed -n '1s/line //p' "$E2E_TMP/follow")
last=$(grep '^line ' "$E2E_TMP/follow" | tail -1 | sed 's/line //')
if [ "$n" -ge 8 ] && [ "$((last - first + 1))" = "$n" ]; then ok "follow=true: $n new lines in 3 s, none lost"
else fail "follow" "$n lines, $first..$last"; fi
# Restarted and running again (4 s of each 10, 20, 40 s back-off): the
# previous and the current instance.
restarted() { curl -fsS "http://127.0.0.1:$RO_PORT/pods" | jq -e --arg n "crasher-$NODE" '.items[] | select(.metadata.name == $n) | .status.containerStatuses[0] | .restartCount >= 1 and .state.running != null' >/dev/null; }
# When the instance has died by the time the logs are read, the current and
# the previous log are the same instance's (CI saw it so on a loaded
# machine): up to 3 tries, each with the container running again.
raw_prev_ok() {
  wait_for 90 restarted || return 1
  prev=$(raw "containerLogs/$PODS_NS/crasher-$NODE/c?previous=true")
  cur=$(raw "containerLogs/$PODS_NS/crasher-$NODE/c")
  grep -q '^attempt ' <<<"$prev" && [ "$prev" != "$cur" ]
}
if wait_for 90 restarted; then
  if raw_prev_ok || raw_prev_ok || raw_prev_ok; then ok "previous=true: the last instance's log"
  else fail "previous" "prev=$prev cur=$cur status=$(curl -fsS "http://127.0.0.1:$RO_PORT/pods" | jq -c --arg n "crasher-$NODE" '.items[] | select(.metadata.name == $n) | .status.containerStatuses[0]')"; fi
else
  fail "crasher restarted" "$(tail -3 "$E2E_TMP/agent.log")"
fi
# Its exits counted on /metrics (upstream's status manager counter), the
# crasher's being the only container that exits 1.
terminated=$(raw metrics | awk '$1 == "kubelet_terminated_containers_total{container_type=\"container\",exit_code=\"1\",reason=\"Error\"}" { print $2 }')
check "/metrics: kubelet_terminated_containers_total counts the crasher's exits (exit_code 1, Error): $terminated" \
  [ "${terminated:-0}" -ge 1 ]
c=$(code "${cc[@]}" "$url/containerLogs/$PODS_NS/nope/c")
check "an unknown pod: 404 as upstream" bash -c "[ $c = 404 ] && [ \"\$(cat '$E2E_TMP/body')\" = 'pod \"nope\" does not exist' ]"
c=$(code "${cc[@]}" "$url/containerLogs/$PODS_NS/logger-$NODE/x")
check "an unknown container: 404" [ "$c" = 404 ]
c=$(code "${cc[@]}" "$url/containerLogs/$PODS_NS/logger-$NODE/c?tailLines=-1")
check "tailLines=-1: 422" [ "$c" = 422 ]
c=$(code "${cc[@]}" "$url/containerLogs/$PODS_NS/logger-$NODE/c?previous=true")
check "previous of a container that never restarted: 400" \
  bash -c "[ $c = 400 ] && grep -q 'previous terminated container \"c\" in pod \"logger-$NODE\" not found' '$E2E_TMP/body'"

# --- kubectl logs on API pods ----------------------------------------------------------
kubectl apply -f - >/dev/null <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: talker, namespace: $SA_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: $IMG, command: [sh, -c, 'i=0; while :; do i=\$((i+1)); echo "talk \$i"; sleep 0.2; done']}
---
apiVersion: v1
kind: Pod
metadata: {name: crasher, namespace: $SA_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: $IMG, command: [sh, -c, 'echo "attempt \$(cat /proc/uptime)"; sleep 4; exit 1']}
EOF2
klogs() { kubectl logs -n "$SA_NS" "$@" 2>&1; }
talked() { [ "$(klogs talker | grep -c '^talk ')" -ge 15 ]; }
if wait_for 60 talked; then
  out=$(klogs talker --tail=3)
  check "kubectl logs --tail=3" [ "$(grep -c '^talk ' <<<"$out")" = 3 ]
  check "kubectl logs --timestamps" bash -c "grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9:]+) talk [0-9]+\$' <<<\"\$('$NANOLET_TEST_KUBECTL' logs -n '$SA_NS' talker --tail=1 --timestamps)\""
  n=$(klogs talker --since=2s | grep -c '^talk ')
  if [ "$n" -ge 5 ] && [ "$n" -le 16 ]; then ok "kubectl logs --since=2s: $n lines"; else fail "kubectl logs --since" "$n"; fi
  timeout 5 "$NANOLET_TEST_KUBECTL" logs -n "$SA_NS" talker -f --tail=0 >"$E2E_TMP/kfollow" 2>&1
  n=$(grep -c '^talk ' "$E2E_TMP/kfollow")
  first=$(grep -m1 '^talk ' "$E2E_TMP/kfollow" | cut -d' ' -f2)
  last=$(grep '^talk ' "$E2E_TMP/kfollow" | tail -1 | cut -d' ' -f2)
  if [ "$n" -ge 8 ] && [ "$((last - first + 1))" = "$n" ]; then ok "kubectl logs -f: $n new lines in 5 s"
  else fail "kubectl logs -f" "$n lines, $first..$last"; fi
else
  fail "kubectl logs" "$(klogs talker | tail -3)"
fi
again() { kubectl get pod -n "$SA_NS" crasher -o json 2>/dev/null |
  jq -e '.status.containerStatuses[0] | .restartCount >= 1 and .state.running != null' >/dev/null; }
# The same through kubectl, the same 3 tries.
prev_ok() {
  wait_for 90 again || return 1
  prev=$(klogs crasher --previous)
  cur=$(klogs crasher)
  grep -q '^attempt ' <<<"$prev" && [ "$prev" != "$cur" ]
}
if wait_for 90 again; then
  if prev_ok || prev_ok || prev_ok; then ok "kubectl logs --previous"
  else fail "kubectl logs --previous" "prev=$prev cur=$cur"; fi
else
  fail "crasher restarted (API pod)" "$(kubectl get pod -n "$SA_NS" crasher -o jsonpath='{.status.containerStatuses[0]}')"
fi
kubectl delete pod -n "$SA_NS" talker crasher --grace-period=0 --force >/dev/null 2>&1

# --- /debug/flags/v ----------------------------------------------------------------
c=$(code "${cc[@]}" -X PUT --data 5 "$url/debug/flags/v")
check "PUT /debug/flags/v 5" bash -c "[ $c = 200 ] && grep -qx 'successfully set klog.logging.verbosity to 5' '$E2E_TMP/body'"
lines=$(wc -l <"$E2E_TMP/agent.log")
raw healthz >/dev/null
v5() { tail -n +"$lines" "$E2E_TMP/agent.log" | grep -q 'GET /healthz'; }
check "  ... and -v=5 logging is on at once" wait_for 5 v5
code "${cc[@]}" -X PUT --data 2 "$url/debug/flags/v" >/dev/null
c=$(code "${cc[@]}" "$url/debug/flags/v")
check "GET /debug/flags/v: 406" [ "$c" = 406 ]

# --- follow across log rotation ---------------------------------------------------
# chatter writes ~25 KiB/s: containerLogMaxSize 64Ki rotates it at every 10 s
# round (the logger, at ~250 B/s, is never rotated during the test).
timeout 25 "$NANOLET_TEST_KUBECTL" get --raw "/api/v1/nodes/$NODE/proxy/containerLogs/$PODS_NS/chatter-$NODE/c?follow=true" >"$E2E_TMP/chatter" 2>&1
dir=$(ls -d "$LOGS/${PODS_NS}_chatter-${NODE}_"*/c 2>/dev/null | head -1)
rotated=$(ls "$dir" 2>/dev/null | grep -c '^0\.log\.[0-9]\{8\}-[0-9]\{6\}$')
if [ "$rotated" -ge 1 ] && [ "$rotated" -le 2 ]; then ok "containerLogMaxSize 64Ki, containerLogMaxFiles 3: $rotated rotated files beside 0.log"
else fail "rotation" "$(ls "$dir" 2>&1)"; fi
first=$(grep -m1 '^chatter ' "$E2E_TMP/chatter" | cut -d' ' -f2)
last=$(grep '^chatter ' "$E2E_TMP/chatter" | tail -1 | cut -d' ' -f2)
n=$(grep -c '^chatter ' "$E2E_TMP/chatter")
if [ -n "$first" ] && [ "$((last - first + 1))" = "$n" ] && [ "$n" -gt 1000 ]; then
  ok "follow=true across rotations: $n lines, none lost or repeated"
else
  fail "follow across rotation" "$n lines, $first..$last"
fi

# --- a flood of silent connections -------------------------------------------------
cat >"$E2E_TMP/flood.py" <<'EOF'
import resource, socket, sys, time
n = int(sys.argv[1]); ports = [int(p) for p in sys.argv[2:]]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
socks = []
for port in ports:
    for _ in range(n):
        s = socket.socket(); s.connect(("127.0.0.1", port)); socks.append(s)
print(len(socks), flush=True)
time.sleep(600)
EOF
python3 "$E2E_TMP/flood.py" 500 "$KPORT" "$PORT" >"$E2E_TMP/flood.out" 2>&1 &
FLOOD_PID=$!
flooded() { [ "$(cat "$E2E_TMP/flood.out")" = 1000 ]; }
if wait_for 20 flooded; then
  sleep 1
  check "500 silent connections on each port: the apiserver still gets /healthz" proxied_healthz
  check "  ... the local /healthz answers" healthz_ok "$PORT"
  check "  ... logs through the apiserver" bash -c "[ \"\$('$NANOLET_TEST_KUBECTL' get --raw '/api/v1/nodes/$NODE/proxy/$logs?tailLines=1' | grep -c '^line ')\" = 1 ]"
  check "  ... nanolet is alive" kill -0 "$AGENT_PID"
else
  fail "flood" "$(cat "$E2E_TMP/flood.out")"
fi
kill "$FLOOD_PID" 2>/dev/null
wait "$FLOOD_PID" 2>/dev/null
FLOOD_PID=
stop_agent TERM
check "the agent stops cleanly with log readers and flood gone" [ "$(grep -c 'loop closed with handles' "$E2E_TMP/agent.log")" = 0 ]

# --- its self-signed certificate damaged while it was down ------------------------
# (as a power cut in the middle of a write would, or a disk error): the agent
# makes a new one and serves, where upstream's kubelet would not start.
head -c 300 /dev/urandom >"$ROOT/pki/kubelet.crt"
start_agent --config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --node-ip "$NODE_IP" ||
  fail "agent start with a damaged certificate" "$(tail -5 "$E2E_TMP/agent.log")"
check "a damaged self-signed certificate: the agent says so and makes a new one" \
  grep -q "generating a new self-signed certificate" "$E2E_TMP/agent.log"
check "  ... which names the node, and serves TLS" bash -c "openssl x509 -in '$ROOT/pki/kubelet.crt' -noout -ext subjectAltName |
  grep -q 'DNS:$NODE' && [ \"\$(curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:$KPORT/healthz)\" = 401 ]"
check "  ... and no temporary file is left in the cert dir" bash -c "! ls '$ROOT/pki' | grep -q '\.tmp\$'"
stop_agent TERM
