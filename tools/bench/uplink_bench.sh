#!/usr/bin/env bash
# What a joined, idle node costs on its uplink (docs/PERFORMANCE.md, "Uplink"):
# nanolet and then the upstream kubelet joined to the test control plane as the
# same node, each with the same API pods, idle; bytes counted by the kernel on
# the agent's connections to the apiserver's port over a window, scaled to an
# hour, two ways:
#   payload  tcp_info's bytes_sent and bytes_received (`ss -tino`): the TLS
#            records, as before;
#   wire     the IP packets, headers and pure ACKs included (what a bill
#            counts): per connection payload + segments x header, segs_out and
#            segs_in with a header of 20 (IPv4) or 40 (IPv6) + 20 (TCP) + 12
#            when the socket uses timestamps (ss's `ts`, shown with -o only);
#            and, where nft and a cgroup v2 hierarchy are there, counted
#            packet by packet by an nftables counter on the agent's own cgroup
#            (`socket cgroupv2`, both ways: a connection that opens or closes
#            in the window is counted too).
#
#   tools/bench/uplink_bench.sh [BUILD_DIR=build] [WINDOW_S=120] [PODS=5]
#   ONLY=nanolet|kubelet  runs one of the two
#   NANOLET_FLAGS="--v=6"  more flags for nanolet; LOGS=DIR keeps the agents' logs there
#
# The kubelet is built from the control plane's pinned module
# (tools/testenv/k8s-build.sh kubelet, cached). Both run on a containerd of this
# script's own (tools/testenv/setup.sh with NANOLET_TESTENV_DIR
# /var/lib/nanolet-uplink-testenv, bridge nl-br9, 10.99.0.0/24), never on the
# shared one: the kubelet kills every pod of its runtime that is not its own.
# Each agent: joined with the node credential (system:node:NODE), Ready, PODS
# busybox pods bound to it by spec.nodeName (each with the default
# kube-api-access volume) all Running, 20 s to settle, then the window. Between
# the two the pods, the Node and its Lease are deleted. Node IP: the private
# bridge's address (the kubelet refuses a loopback one). Another test that stops
# the shared apiserver during a window spoils it: a connection closed in the
# window is taken again (up to 3 times).
set -uo pipefail
BUILD=${1:-build}
WINDOW=${2:-120}
PODS=${3:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
NANOLET=$BUILD/agent/nanolet
NODE=uplink-bench
NS=uplink-bench
PRIV=${NANOLET_UPLINK_TESTENV_DIR:-/var/lib/nanolet-uplink-testenv}
NODE_IP=10.99.0.1 # the private bridge's: the kubelet refuses a loopback node IP
TMP=$(mktemp -d /tmp/nanolet-uplink.XXXXXX)
PID=
NFT=nanolet_uplink_$$ # the nftables table of this run's counters (when nft is there)
. "$HERE/bench_lib.sh"
[ -z "${LOGS:-}" ] || mkdir -p "$LOGS"

env_file=$("$HERE/../testenv/controlplane.sh" up) || { echo "no control plane"; exit 1; }
# shellcheck source=/dev/null
. "$env_file"
kubectl() { "$NANOLET_TEST_KUBECTL" "$@"; }
KUBECONFIG_NODE=$("$HERE/../testenv/controlplane.sh" cert "$NODE" "system:node:$NODE" system:nodes) ||
  { echo "no node credential"; exit 1; }
APIPORT=${NANOLET_TEST_APISERVER##*:}
if [ "${ONLY:-}" != nanolet ]; then
  KBIN=$(nice "$HERE/../testenv/k8s-build.sh" kubelet) || { echo "cannot build the kubelet"; exit 1; }
fi
# Only the runtime is private: the control plane is the shared one.
NANOLET_TESTENV_DIR=$PRIV NANOLET_TESTENV_BRIDGE=nl-br9 NANOLET_TESTENV_SUBNET=10.99.0.0/24 \
  NANOLET_TESTENV_NO_REGISTRY=1 "$HERE/../testenv/setup.sh" >/dev/null 2>"$TMP/setup.log"
EP=unix://$PRIV/run/containerd.sock
[ -S "${EP#unix://}" ] || { echo "no private containerd:"; tail -3 "$TMP/setup.log"; exit 1; }
# The node IP on the private bridge before its first pod: setup.sh makes the
# bridge bare, and the CNI plugin gives it this gateway address (the subnet's
# first) only with a pod, where both agents check their node IP at start.
ip -4 addr show dev nl-br9 2>/dev/null | grep -q "inet $NODE_IP/" ||
  ip addr add "$NODE_IP/24" dev nl-br9 || { echo "cannot give nl-br9 the node IP $NODE_IP"; exit 1; }

# conn_bytes: "LOCALADDR SENT RECEIVED SEGS_OUT SEGS_IN HEADER" for each
# connection of $PID to the apiserver: payload bytes, segments (pure ACKs
# included) and the IP+TCP header of each of its segments: 20 for IPv4 (an
# IPv4-mapped IPv6 socket sends IPv4) or 40 for IPv6, 20 for TCP, 12 more when
# the connection uses timestamps (`ts`, which ss prints with -o only).
conn_bytes() {
  ss -tinopH state established "( dport = :$APIPORT )" |
    awk -v p="pid=$PID," 'index($0, p) {l = $3; getline; s = 0; r = 0; so = 0; si = 0; ts = 0
      for (i = 1; i <= NF; i++) { if ($i == "ts") ts = 1; split($i, a, ":")
        if (a[1] == "bytes_sent") s = a[2]; else if (a[1] == "bytes_received") r = a[2]
        else if (a[1] == "segs_out") so = a[2]; else if (a[1] == "segs_in") si = a[2] }
      ip = (l ~ /^\[/ && l !~ /^\[::ffff:/) ? 40 : 20
      print l, s, r, so, si, ip + 20 + 12 * ts}'
}
# The kernel's own count of the agent's packets, both ways: an nftables
# counter on every packet of a socket of the agent's cgroup (v2) to or from
# the apiserver's port, IP length as sent (headers, pure ACKs, SYN/FIN and
# retransmissions included). Output: `socket cgroupv2` names the sending
# socket; input: it looks the receiving one up, so on loopback a packet of the
# agent's is counted once, leaving it. Connections opened or closed in the
# window are counted like the others (but for the last ACK of one the agent
# closed: TIME_WAIT's socket is no one's). The table has counters and no verdicts;
# it goes at exit. None of it without nft or a cgroup2 mount: ss's figures
# alone then.
CG2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
# agent_cgroup NAME: a cgroup v2 of NAME's own and its counters; prints the
# cgroup's directory (nothing when there is no counting)
agent_cgroup() {
  local name=$1 cg rel level c
  [ -n "$NFT" ] || return 0
  cg=$CG2/nanolet-uplink-$$-$name
  mkdir "$cg" || return 0
  # nft names a cgroup by its path under /sys/fs/cgroup (whichever hierarchy
  # is mounted there), and a socket's cgroup by its ancestor at LEVEL
  rel=${cg#/sys/fs/cgroup/}
  level=$(($(tr -cd / <<<"${cg#"$CG2"}" | wc -c)))
  for c in sent recv sent_big recv_big; do nft add counter inet "$NFT" "${name}_$c" || return 0; done
  nft add rule inet "$NFT" out tcp dport "$APIPORT" socket cgroupv2 level $level "\"$rel\"" counter name "${name}_sent" &&
    nft add rule inet "$NFT" out tcp dport "$APIPORT" meta length gt 1500 socket cgroupv2 level $level "\"$rel\"" counter name "${name}_sent_big" &&
    nft add rule inet "$NFT" in tcp sport "$APIPORT" socket cgroupv2 level $level "\"$rel\"" counter name "${name}_recv" &&
    nft add rule inet "$NFT" in tcp sport "$APIPORT" meta length gt 1500 socket cgroupv2 level $level "\"$rel\"" counter name "${name}_recv_big" &&
    echo "$cg"
}
# nft_count NAME: "PACKETS BYTES" of sent, recv, sent_big, recv_big (0 without counters)
nft_count() {
  [ -n "$NFT" ] || { echo 0 0 0 0 0 0 0 0; return; }
  nft list counters table inet "$NFT" 2>/dev/null | awk -v n="$1" '
    $1 == "counter" {c = $2} $1 == "packets" {p[c] = $2; b[c] = $4}
    END {printf "%d %d %d %d %d %d %d %d\n", p[n "_sent"], b[n "_sent"], p[n "_recv"], b[n "_recv"],
      p[n "_sent_big"], b[n "_sent_big"], p[n "_recv_big"], b[n "_recv_big"]}'
}
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
pods_running() { [ "$(kubectl get pods -n "$NS" --field-selector status.phase=Running -o name 2>/dev/null | wc -l)" = "$PODS" ]; }
pods_gone() { [ "$(kubectl get pods -n "$NS" -o name 2>/dev/null | wc -l)" = 0 ]; }
forget_node() {
  kubectl delete pods -n "$NS" --all --grace-period=1 --wait=false >/dev/null 2>&1
  [ -z "$PID" ] || wait_until 120 pods_gone || echo "pods left in $NS"
  [ -z "$PID" ] || { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }
  PID=
  kubectl delete pods -n "$NS" --all --force --grace-period=0 >/dev/null 2>&1
  kubectl delete node "$NODE" --ignore-not-found >/dev/null 2>&1
  kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null 2>&1
}
cleanup() {
  forget_node
  [ -z "${LOGS:-}" ] || cp "$TMP"/*.log "$LOGS"/ 2>/dev/null
  kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1
  umount -R "$TMP/kubelet" 2>/dev/null # the kubelet bind-mounts its root onto itself
  bench_rm "$TMP"
  [ -z "$NFT" ] || nft delete table inet "$NFT"
  local cg
  for cg in "$CG2"/nanolet-uplink-$$-*; do
    [ ! -d "$cg" ] || rmdir "$cg" 2>/dev/null || echo "cgroup $cg left (processes in it)"
  done
}
trap cleanup EXIT
# nft from Debian's nftables, as the test environment installs its packages
command -v nft >/dev/null || (. "$HERE/../testenv/common.sh" && install_packages nftables) || true
if command -v nft >/dev/null && [ -n "$CG2" ] && nft add table inet "$NFT" 2>/dev/null; then
  nft add chain inet "$NFT" out "{ type filter hook output priority 0; policy accept; }" &&
    nft add chain inet "$NFT" in "{ type filter hook input priority 0; policy accept; }" ||
    { nft delete table inet "$NFT"; NFT=; }
else
  echo "no nft or no cgroup2 mount: wire bytes from ss only"
  NFT=
fi

KPORT=$(free_port)
kubelet_yaml "$EP" "$KPORT" >"$TMP/kubelet.yaml"

forget_node
ns_gone() { ! kubectl get namespace "$NS" -o jsonpath='{.status.phase}' 2>/dev/null | grep -q Terminating; }
wait_until 120 ns_gone || { echo "namespace $NS still terminating"; exit 1; }
kubectl get namespace "$NS" >/dev/null 2>&1 || kubectl create namespace "$NS" >/dev/null
sa() { kubectl get serviceaccount -n "$NS" default >/dev/null 2>&1; }
wait_until 60 sa || { echo "no default ServiceAccount in $NS"; exit 1; }

declare -A R
run() { # run NAME: one agent joined, its pods running, one idle window
  local name=$1 t0 t1 i cg
  cg=$(agent_cgroup "$name")
  [ -n "$NFT" ] && [ -z "$cg" ] && echo "$name: no cgroup of its own: wire bytes from ss only"
  # The agent in its cgroup before it opens any socket (a socket keeps the
  # cgroup it was made in): the subshell moves itself, then becomes the agent.
  if [ "$name" = nanolet ]; then
    ([ -z "$cg" ] || echo "$BASHPID" >"$cg/cgroup.procs"
    exec "$NANOLET" --kubeconfig "$KUBECONFIG_NODE" --enable-server=false --healthz-port 0 \
      --container-runtime-endpoint "$EP" --root-dir "$TMP/nanolet" --hostname-override "$NODE" \
      --node-ip "$NODE_IP" --cgroups-per-qos=false --enforce-node-allocatable= ${NANOLET_FLAGS:-}) \
      >"$TMP/$name.log" 2>&1 &
  else
    ([ -z "$cg" ] || echo "$BASHPID" >"$cg/cgroup.procs"
    exec "$KBIN/kubelet" --config "$TMP/kubelet.yaml" --kubeconfig "$KUBECONFIG_NODE" --root-dir "$TMP/kubelet" \
      --hostname-override "$NODE" --node-ip "$NODE_IP" --v=0) >"$TMP/$name.log" 2>&1 &
  fi
  PID=$!
  in_cgroup() { grep -qx "$PID" "$cg/cgroup.procs"; }
  if [ -n "$cg" ] && ! wait_until 5 in_cgroup; then
    echo "$name: not in its cgroup: wire bytes from ss only"
    cg=
  fi
  wait_until 60 node_ready || { echo "$name: node not Ready"; tail -20 "$TMP/$name.log"; exit 1; }
  for i in $(seq 1 "$PODS"); do
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: idle-$i, namespace: $NS}
spec:
  nodeName: $NODE
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: localhost/busybox:1.36, imagePullPolicy: IfNotPresent, command: [sleep, "36000"]}]
---
EOF
  done | kubectl apply -f - >/dev/null
  wait_until 180 pods_running || { echo "$name: pods not Running"; tail -20 "$TMP/$name.log"; exit 1; }
  local try settle=20
  for try in 1 2 3; do
    sleep $settle
    settle=60
    conn_bytes >"$TMP/b0"; nft_count "$name" >"$TMP/n0"; t0=$(date +%s%N)
    sleep "$WINDOW"
    conn_bytes >"$TMP/b1"; nft_count "$name" >"$TMP/n1"; t1=$(date +%s%N)
    [ -z "${LOGS:-}" ] || echo "$t0 $t1" >"$LOGS/$name.window"
    kill -0 "$PID" 2>/dev/null || { echo "$name exited:"; tail -20 "$TMP/$name.log"; exit 1; }
    # Per connection, what moved in the window. One closed or opened in it
    # means the apiserver went away (another test's outage): the reconnect
    # re-lists everything, and the window is taken again after a minute.
    # On the wire by ss: per connection, the payload and each segment's
    # header; one that opened in the window from zero (its handshake's larger
    # SYN options aside), one that closed in it is lost (and the window taken
    # again). The nft counters need none of that.
    read -r R[$name.sent] R[$name.recv] R[$name.conns] R[$name.lost] \
      R[$name.wsent] R[$name.wrecv] R[$name.segout] R[$name.segin] R[$name.hdr] < <(awk -v t=$((t1 - t0)) '
      NR == FNR {s0[$1] = $2; r0[$1] = $3; o0[$1] = $4; i0[$1] = $5; next}
      {ds = $2 - s0[$1]; dr = $3 - r0[$1]; dso = $4 - o0[$1]; dsi = $5 - i0[$1]
        s += ds; r += dr; so += dso; si += dsi; ws += ds + dso * $6; wr += dr + dsi * $6
        h = h == "" || h == $6 ? $6 : h "/" $6
        n++; seen[$1] = 1; if (!($1 in s0)) lost++}
      END {for (k in s0) if (!(k in seen)) lost++; k = 3.6e12 / t
        printf "%.1f %.1f %d %d %.1f %.1f %.0f %.0f %s\n", s * k / 1000, r * k / 1000, n, lost,
          ws * k / 1000, wr * k / 1000, so * k, si * k, h == "" ? "-" : h}' \
      "$TMP/b0" "$TMP/b1")
    read -r R[$name.nsent] R[$name.nrecv] R[$name.npout] R[$name.npin] R[$name.big] < <(awk -v t=$((t1 - t0)) \
      -v h="${R[$name.hdr]}" '
      NR == 1 {split($0, a); next}
      {k = 3.6e12 / t; for (i = 1; i <= 8; i++) d[i] = ($i - a[i]) * k
        # Packets over 1500 bytes (loopback carries up to 64 KiB in one): on a
        # 1500-byte MTU each would go in segments of at most 1500 - H bytes of
        # payload, fewer than bytes / (1500 - H) more segments of H bytes of
        # headers (and at most as many ACKs back).
        if (h !~ /^[0-9]+$/) h = 52
        big = sprintf("%.0f/%.0f", d[5], d[7])
        ext = (d[6] + d[8]) / (1500 - h) * h / 1000
        printf "%.1f %.1f %.0f %.0f %s:%.1f\n", d[2] / 1000, d[4] / 1000, d[1], d[3], big, ext}' \
      "$TMP/n0" "$TMP/n1")
    [ "${R[$name.lost]}" = 0 ] && break
    echo "$name: a connection closed in window $try (apiserver restarted?); measuring again"
  done
  echo "$name: sent ${R[$name.sent]} KB/h, received ${R[$name.recv]} KB/h on ${R[$name.conns]} connection(s)"
  echo "$name: on the wire (ss: payload + segments x ${R[$name.hdr]}-byte headers): sent ${R[$name.wsent]} KB/h," \
    "received ${R[$name.wrecv]} KB/h; ${R[$name.segout]} segments/h out, ${R[$name.segin]} in"
  if [ -n "$cg" ]; then
    echo "$name: on the wire (nft, the agent's packets): sent ${R[$name.nsent]} KB/h (${R[$name.npout]} packets/h)," \
      "received ${R[$name.nrecv]} KB/h (${R[$name.npin]} packets/h); over 1500 bytes: ${R[$name.big]%%:*} packets/h out/in," \
      "on a 1500-byte MTU at most +${R[$name.big]##*:} KB/h of headers"
  else
    R[$name.nsent]= R[$name.nrecv]=
  fi
  forget_node
}

for a in nanolet kubelet; do
  [ -z "${ONLY:-}" ] || [ "$ONLY" = "$a" ] || continue
  run $a
done
printf '| agent | sent | received | total |\n| --- | --- | --- | --- |\n'
for a in nanolet kubelet; do
  [ -n "${R[$a.sent]:-}" ] || continue
  awk -v a="$a" -v s="${R[$a.sent]}" -v r="${R[$a.recv]}" \
    'BEGIN {printf "| %s | %.0f KB/h | %.0f KB/h | %.0f KB/h |\n", a, s, r, s + r}'
done
if [ -n "${R[nanolet.sent]:-}" ] && [ -n "${R[kubelet.sent]:-}" ]; then
  awk -v a="${R[nanolet.sent]}" -v b="${R[nanolet.recv]}" -v c="${R[kubelet.sent]}" -v d="${R[kubelet.recv]}" \
    'BEGIN {printf "nanolet / kubelet: %.2f\n", (a + b) / (c + d)}'
fi
# The same on the wire: the payload (as above), then ss's and nft's wire
# figures (nft's are the ones to quote when they are there).
printf '\n| agent | payload | wire (ss) sent | received | total | wire (nft) sent | received | total |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- |\n'
for a in nanolet kubelet; do
  [ -n "${R[$a.sent]:-}" ] || continue
  awk -v a="$a" -v s="${R[$a.sent]}" -v r="${R[$a.recv]}" -v ws="${R[$a.wsent]}" -v wr="${R[$a.wrecv]}" \
    -v ns="${R[$a.nsent]}" -v nr="${R[$a.nrecv]}" 'BEGIN {
      n = ns == "" ? "| - | - | - |" : sprintf("| %.1f KB/h | %.1f KB/h | %.1f KB/h |", ns, nr, ns + nr)
      printf "| %s | %.1f KB/h | %.1f KB/h | %.1f KB/h | %.1f KB/h %s\n", a, s + r, ws, wr, ws + wr, n}'
done
if [ -n "${R[nanolet.sent]:-}" ] && [ -n "${R[kubelet.sent]:-}" ]; then
  awk -v a="${R[nanolet.wsent]}" -v b="${R[nanolet.wrecv]}" -v c="${R[kubelet.wsent]}" -v d="${R[kubelet.wrecv]}" \
    -v e="${R[nanolet.nsent]}" -v f="${R[nanolet.nrecv]}" -v g="${R[kubelet.nsent]}" -v h="${R[kubelet.nrecv]}" \
    'BEGIN {printf "nanolet / kubelet on the wire: %.3f (ss)", (a + b) / (c + d)
      if (e != "" && g != "") printf ", %.3f (nft)", (e + f) / (g + h); print ""}'
fi
