#!/usr/bin/env bash
# A joined node behind a slow, lossy uplink, and the uplink down. toxiproxy
# (tools/testenv/tool-build.sh toxiproxy) sits between nanolet and the real
# control plane: 300 ms +- 100 ms of latency and 64 kbit/s (8 KB/s) each way.
#
# The impaired link (UPLINK_IMPAIRED_SECS, default 120 s, with a connection
# reset every UPLINK_RESET_EVERY_SECS, default 45 s): the Node stays Ready
# and every Lease renewal lands within leaseDurationSeconds (both as the API
# server has them, polled straight from it by uplink_watch.py); no watch is
# re-listed but after a 410; a pod created with kubectl runs and is reported
# Running, and one deleted with kubectl goes; each reset is survived, and a
# second node (no pods, a proxy of its own with the same toxics), cut off at
# the same instant, does not dial again in step with the first (the back-offs are jittered: a fleet that
# lost its links at once must not come back in one burst).
#
# The link down (UPLINK_DOWN_SECS, default 60 s; the proxy disabled, so
# connections are refused): the pods keep running with the same containers;
# within 30 s of the link's return the node is Ready with a renewed Lease and a
# pod created while it was down runs and is reported Running. The bytes of
# each phase are printed (toxiproxy's counters and the kernel's).
#
# tools/bench/uplink_soak.sh runs this with a 30-minute soak and a 10-minute
# outage.
PODS_NS=${UPLINK_NS:-nanolet-e2e-uplink}
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${UPLINK_NODE:-e2e-uplink}
KC0=$(node_kubeconfig "$NODE") ||
  { fail "node credential" "controlplane.sh cert failed"; exit 1; }
# a second node, without pods, behind a proxy of its own
NODE2=$NODE-2
LOG2=$E2E_TMP/agent2.log
ROOT2=$E2E_TMP/root2
KC2=$E2E_TMP/uplink2.kubeconfig
IMPAIRED_S=${UPLINK_IMPAIRED_SECS:-120}
RESET_EVERY_S=${UPLINK_RESET_EVERY_SECS:-45}
DOWN_S=${UPLINK_DOWN_SECS:-60}
IMG=localhost/busybox:1.36
LOG=$E2E_TMP/agent.log
POLLS=$E2E_TMP/polls
WATCH=$(dirname "$0")/uplink_watch.py
TOXI=$("$(dirname "$0")/../../tools/testenv/tool-build.sh" toxiproxy) ||
  { fail "toxiproxy" "tools/testenv/tool-build.sh toxiproxy failed"; exit 1; }
TOXI_PID=
POLL_PID=
AGENT2_PID=
# The node's pods under a cgroup root of their own (pods_lib.sh).
CGROUP_ROOT=/$NODE

TPORT=$(free_port)
LPORT=$(free_port)  # the first node's proxy, "uplink"
LPORT2=$(free_port) # the second's, "uplink2"
toxi() { # toxi METHOD PATH [JSON]: toxiproxy's HTTP API
  curl -fsS -X "$1" "http://127.0.0.1:$TPORT$2" ${3:+-H 'Content-Type: application/json' -d "$3"} >/dev/null
}
# The first node's bytes through its proxy so far, "SENT RECEIVED" as the
# agent's (to the API server, from it): toxiproxy counts a connection's bytes
# when it closes, the kernel those of the agent's open connections (TLS payload).
proxy_bytes() {
  { curl -fsS "http://127.0.0.1:$TPORT/metrics" | awk '
      /^toxiproxy_proxy_received_bytes_total\{.*direction="upstream".*proxy="uplink"/ {print "s", $NF}
      /^toxiproxy_proxy_received_bytes_total\{.*direction="downstream".*proxy="uplink"/ {print "r", $NF}'
    ss -tinH state established "( dst 127.0.0.1:$LPORT )" |
      grep -oE 'bytes_(acked|received):[0-9]+' | sed 's/bytes_acked:/s /; s/bytes_received:/r /'
  } | awk '$1 == "s" {s += $2} $1 == "r" {r += $2} END {printf "%d %d\n", s, r}'
}
uplink_cleanup() {
  # The clean-up's agent goes through the proxy: the link back, unimpaired.
  if [ -n "$TOXI_PID" ]; then
    for t in latency_upstream latency_downstream bandwidth_upstream bandwidth_downstream; do
      toxi DELETE "/proxies/uplink/toxics/$t" 2>/dev/null
    done
    toxi POST /proxies/uplink '{"enabled": true}' 2>/dev/null
    toxi POST /proxies/uplink2 '{"enabled": true}' 2>/dev/null
  fi
  [ -z "$POLL_PID" ] || kill "$POLL_PID" 2>/dev/null
  [ -z "$AGENT2_PID" ] || { kill "$AGENT2_PID" 2>/dev/null; wait "$AGENT2_PID" 2>/dev/null; }
  kubectl delete node "$NODE2" --wait=false >/dev/null 2>&1
  kubectl delete lease -n kube-node-lease "$NODE2" --ignore-not-found >/dev/null 2>&1
  api_cleanup
  kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null 2>&1
  [ -z "$TOXI_PID" ] || { kill "$TOXI_PID" 2>/dev/null; wait "$TOXI_PID" 2>/dev/null; }
  cgroup_root_remove "$CGROUP_ROOT"
  cgroup_root_remove "$CGROUP_ROOT-2"
}
e2e_on_exit uplink_cleanup

"$TOXI" -host 127.0.0.1 -port "$TPORT" -proxy-metrics >"$E2E_TMP/toxiproxy.log" 2>&1 &
TOXI_PID=$!
wait_for 10 curl -fsS -o /dev/null "http://127.0.0.1:$TPORT/version" ||
  { fail "toxiproxy starts" "$(tail -5 "$E2E_TMP/toxiproxy.log")"; exit 1; }
for p in "uplink $LPORT" "uplink2 $LPORT2"; do
  read -r name port <<<"$p"
  toxi POST /proxies "{\"name\": \"$name\", \"listen\": \"127.0.0.1:$port\",
    \"upstream\": \"127.0.0.1:${NANOLET_TEST_APISERVER##*:}\", \"enabled\": true}"
  for s in upstream downstream; do
    toxi POST "/proxies/$name/toxics" "{\"name\": \"latency_$s\", \"type\": \"latency\",
      \"stream\": \"$s\", \"attributes\": {\"latency\": 300, \"jitter\": 100}}"
    toxi POST "/proxies/$name/toxics" "{\"name\": \"bandwidth_$s\", \"type\": \"bandwidth\",
      \"stream\": \"$s\", \"attributes\": {\"rate\": 8}}"
  done
done
# The node's credential, its server the proxy (127.0.0.1 is in the API
# server's certificate).
KC=$E2E_TMP/uplink.kubeconfig
sed "s#^\( *server:\).*#\1 https://127.0.0.1:$LPORT#" "$KC0" >"$KC"

# What the API server sees, polled straight from it with the admin credential.
admin_file() { sed -n "s#^ *$1: *##p" "$NANOLET_TEST_KUBECONFIG" | head -1; }
python3 "$WATCH" poll "$NANOLET_TEST_APISERVER" "$NANOLET_TEST_K8S_CA" \
  "$(admin_file client-certificate)" "$(admin_file client-key)" "$NODE" "$POLLS" &
POLL_PID=$!

cgroup_root_make "$CGROUP_ROOT"
kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null 2>&1
join_agent "$KC" --cgroup-root "$CGROUP_ROOT" -v=4 || { fail "agent starts" ""; exit 1; }
t_start=$(date +%s.%N)
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
phase() { kubectl get pod -n "$PODS_NS" "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
pod_running() { [ "$(phase "$1")" = Running ]; }
pod_gone() { ! kubectl get pod -n "$PODS_NS" "$1" >/dev/null 2>&1; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }
# A pod whose container sleeps and leaves at once on SIGTERM.
# The pods tolerate an unreachable node for good, as an edge operator's do:
# without it the taint eviction controller deletes them 300 s into an outage
# (DefaultTolerationSeconds), and the node kills them when the link returns.
sleeper() {
  api_pod "$1" 5 'tolerations: [{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute}]' \
    'containers:' "- {name: c, image: $IMG, command: [sh, -c, \"trap 'exit 0' TERM; while true; do sleep 1; done\"]}"
}
running_id() {
  cri ps -o json | jq -r --arg n "$1" --arg ns "$PODS_NS" '[.containers[]
    | select(.labels["io.kubernetes.pod.name"] == $n and .labels["io.kubernetes.pod.namespace"] == $ns)
    | .id][0] // ""'
}
# Log times (klog's "I1126 22:34:12.123456") as seconds of the day.
log_secs() { awk '{split($2, t, ":"); printf "%.3f\n", t[1] * 3600 + t[2] * 60 + t[3]}'; }

if wait_for 90 node_ready; then
  ok "the node joins through the impaired link (Ready $(since "$t_start") s after the agent answered /healthz)"
else
  fail "node Ready through the proxy" "$(tail -5 "$LOG")"; exit 1
fi
# A second node, without pods, through its own proxy: cut off with the first,
# it must not dial again in step with it.
KC2_0=$(node_kubeconfig "$NODE2") ||
  { fail "node credential" "controlplane.sh cert failed"; exit 1; }
sed "s#^\( *server:\).*#\1 https://127.0.0.1:$LPORT2#" "$KC2_0" >"$KC2"
kubectl delete node "$NODE2" --ignore-not-found >/dev/null
mkdir -p "$ROOT2"
cgroup_root_make "$CGROUP_ROOT-2"
"$NANOLET" --healthz-port "$(free_port)" --port "$(free_port)" --read-only-port 0 \
  --cert-dir "$ROOT2/pki" --root-dir "$ROOT2" --hostname-override "$NODE2" --kubeconfig "$KC2" \
  --node-ip "$NODE_IP" --cgroup-root "$CGROUP_ROOT-2" \
  --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" -v=4 >"$LOG2" 2>&1 &
AGENT2_PID=$!
wait_for 60 grep -q 'kube: connected to ' "$LOG2" || fail "second node connects" "$(tail -3 "$LOG2")"
read -r s0 r0 <<<"$(proxy_bytes)"
echo "# joining: $s0 bytes sent, $r0 received through the proxy"

# --- the impaired link ---------------------------------------------------------
t_a=$(date +%s.%N)
sleeper up-deleted
sleeper up-kept
t=$(date +%s.%N)
if wait_for 90 pod_running up-deleted && wait_for 30 pod_running up-kept; then
  ok "pods created with kubectl run and are reported Running ($(since "$t") s)"
else
  fail "pods Running" "up-deleted $(phase up-deleted), up-kept $(phase up-kept)"
fi

LOST='kube: connection to [^ ]* closed: '
losses() { grep -c "$LOST" "$1"; }
renewals() { grep -c ": Update -> Idle$" "$LOG"; }
DELAYS=()
DELAYS2=()
APART=()
# redial LOG N0 WHO: waits for WHO's (LOG's) loss after its N0 earlier ones and
# the connection made after it; prints the times of day of the loss and of the
# first dial after it.
# (On failure, the reason on stdout and status 1.)
redial() {
  local lost
  wait_for 10 bash -c "[ \$(grep -c '$LOST' '$1') -gt $2 ]"
  lost=$(grep "$LOST" "$1" | sed -n "$(($2 + 1))p")
  [ -n "$lost" ] || { echo "$3 lost no connection"; return 1; }
  wait_for 30 bash -c "grep -A100000 -F '$lost' '$1' | grep -q 'kube: connected to '" ||
    { echo "$3 did not connect again in 30 s: $(tail -1 "$1")"; return 1; }
  printf '%s\n%s\n' "$lost" "$(grep -A100000 -F "$lost" "$1" | grep -m1 'kube: connecting to ')" |
    log_secs | tr '\n' ' '
}
# reset: the proxy drops every connection of both agents (disabled, enabled
# again at once), as a server restart or a NAT timeout would, just after a
# Lease renewal of the first (a renewal cut off is retried at once, as
# upstream's: its dial says nothing of the back-off).
reset() {
  local r0 n1 n2
  r0=$(renewals)
  wait_for 15 bash -c "[ \$(grep -c ': Update -> Idle$' '$LOG') -gt $r0 ]"
  n1=$(losses "$LOG")
  n2=$(losses "$LOG2")
  toxi POST /proxies/uplink '{"enabled": false}'
  toxi POST /proxies/uplink2 '{"enabled": false}'
  toxi POST /proxies/uplink '{"enabled": true}'
  toxi POST /proxies/uplink2 '{"enabled": true}'
  local one two lost1 dial1 lost2 dial2
  one=$(redial "$LOG" "$n1" "$NODE") || { fail "reset $((${#DELAYS[@]} + 1))" "$one"; return; }
  two=$(redial "$LOG2" "$n2" "$NODE2") || { fail "reset $((${#DELAYS[@]} + 1))" "$two"; return; }
  read -r lost1 dial1 <<<"$one"
  read -r lost2 dial2 <<<"$two"
  DELAYS+=("$(awk -v a="$lost1" -v b="$dial1" 'BEGIN {printf "%d", (b - a) * 1000}')")
  DELAYS2+=("$(awk -v a="$lost2" -v b="$dial2" 'BEGIN {printf "%d", (b - a) * 1000}')")
  APART+=("$(awk -v a="${DELAYS[-1]}" -v b="${DELAYS2[-1]}" 'BEGIN {d = b - a; printf "%d", (d < 0 ? -d : d)}')")
  ok "reset ${#DELAYS[@]}: the nodes dialled again ${DELAYS[-1]} and ${DELAYS2[-1]} ms after their loss; both connected"
}

t_end=$(awk -v a="$t_a" -v d="$IMPAIRED_S" 'BEGIN {printf "%d", a + d}')
next_reset=$(awk -v a="$t_a" -v d="$RESET_EVERY_S" 'BEGIN {printf "%d", a + d}')
deleted=
while [ "$(date +%s)" -lt "$t_end" ]; do
  if [ "$(date +%s)" -ge "$next_reset" ]; then
    reset
    next_reset=$((next_reset + RESET_EVERY_S))
  fi
  if [ -z "$deleted" ] && [ "${#DELAYS[@]}" -ge 1 ]; then
    # a pod deleted with kubectl after the first reset goes
    deleted=1
    t=$(date +%s.%N)
    kubectl delete pod -n "$PODS_NS" up-deleted --wait=false >/dev/null
    if wait_for 60 pod_gone up-deleted && [ -z "$(running_id up-deleted)" ]; then
      ok "a pod deleted with kubectl goes, container and all ($(since "$t") s)"
    else
      fail "pod deleted" "phase $(phase up-deleted), container $(running_id up-deleted)"
    fi
  fi
  sleep 1
done
t_a_end=$(date +%s.%N)
[ -n "$deleted" ] || fail "pod deleted" "no reset within the impaired phase (UPLINK_IMPAIRED_SECS too short)"
read -r polls_n notready errors renewals maxgap duration excused <<<"$(python3 "$WATCH" check "$POLLS" "$t_a" "$t_a_end" |
  awk '{print $2, $4, $6, $8, $10, $12, $14}')"
echo "# impaired link, $IMPAIRED_S s: $polls_n polls ($errors failed: the API server unreachable), $renewals Lease renewals, longest gap $maxgap s ($excused gaps with the API server unreachable left out)"
check "the node stays Ready on the impaired link ($notready of $polls_n polls not Ready)" [ "$notready" = 0 ]
check "every Lease renewal lands within its duration (longest gap $maxgap s, duration $duration s)" \
  awk -v g="$maxgap" -v d="$duration" 'BEGIN {exit !(d > 0 && g <= d)}'
# Without jitter both would dial again within a few ms of the same delay each time.
if [ "${#APART[@]}" -ge 2 ]; then
  apart=$(printf '%s\n' "${APART[@]}" | sort -n | tail -1)
  check "two nodes cut off together do not dial again in step (delays ${APART[*]} ms apart)" [ "$apart" -ge 30 ]
else
  fail "two resets or more" "only ${#DELAYS[@]} in $IMPAIRED_S s (UPLINK_RESET_EVERY_SECS $RESET_EVERY_S)"
fi
# Each reflector lists once at its start; any later list must follow a 410.
lists=$(grep -c ' -> listing$' "$LOG")
paths=$(grep ' -> listing$' "$LOG" | sed 's/.*reflector \([^ ]*\): .*/\1/' | sort -u | wc -l)
gone=$(grep -cE '; re-listing$|; listing from storage$' "$LOG")
check "no watch is re-listed without a 410 ($((lists - paths)) re-lists, $gone 410s)" [ "$((lists - paths))" -le "$gone" ]
read -r s1 r1 <<<"$(proxy_bytes)"
echo "# impaired link, $IMPAIRED_S s: $((s1 - s0)) bytes sent, $((r1 - r0)) received ($(((s1 - s0 + r1 - r0) * 3600 / IMPAIRED_S / 1024)) KB/h)"

# --- the link down -------------------------------------------------------------
kept=$(running_id up-kept)
check "up-kept runs before the link goes down" [ -n "$kept" ]
toxi POST /proxies/uplink '{"enabled": false}'
t_down=$(date +%s.%N)
sleeper up-while-down
sleep "$DOWN_S"
check "with the link down $DOWN_S s, up-kept runs on with the same container" [ "$(running_id up-kept)" = "$kept" ]
check "nothing of up-while-down reached the node while the link was down" [ -z "$(running_id up-while-down)" ]
read -r s2 r2 <<<"$(proxy_bytes)"
toxi POST /proxies/uplink '{"enabled": true}'
t_up=$(date +%s.%N)
echo "# the link was down $(since "$t_down") s"
renewed_since_up() { # the Lease's renewTime (as epoch seconds) after the link came back
  local rt
  rt=$(kubectl get lease -n kube-node-lease "$NODE" -o jsonpath='{.spec.renewTime}') &&
    [ "$(date -d "$rt" +%s)" -ge "${t_up%.*}" ]
}
node_back() { renewed_since_up && node_ready; }
if wait_for 30 node_back; then
  ok "within 30 s of the link's return the Lease is renewed and the node Ready ($(since "$t_up") s)"
else
  fail "node back" "Ready $(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'), Lease $(kubectl get lease -n kube-node-lease "$NODE" -o jsonpath='{.spec.renewTime}')"
fi
left=$(awk -v a="$t_up" -v b="$(date +%s.%N)" 'BEGIN {d = 30 - (b - a); printf "%d", (d > 1 ? d : 1)}')
if wait_for "$left" pod_running up-while-down; then
  ok "within 30 s of the link's return a pod created while it was down is Running ($(since "$t_up") s)"
else
  fail "pod created while the link was down" "phase $(phase up-while-down) after $(since "$t_up") s"
fi
back=$(grep -A100000 -F "$(grep 'kube: connection to [^ ]* closed: ' "$LOG" | tail -1)" "$LOG" | grep -m1 'kube: connected to ')
echo "# the agent connected again $(printf '%s\n' "$back" | log_secs | awk -v up="$(date -d "@$t_up" +%T.%N)" \
  '{split(up, t, ":"); printf "%.1f", $1 - (t[1] * 3600 + t[2] * 60 + t[3])}') s after the link's return"
check "up-kept keeps its container after the link's return" [ "$(running_id up-kept)" = "$kept" ]
read -r s3 r3 <<<"$(proxy_bytes)"
echo "# catching up after $DOWN_S s down ($(since "$t_up") s since the link's return): $((s3 - s2)) bytes sent, $((r3 - r2)) received"
