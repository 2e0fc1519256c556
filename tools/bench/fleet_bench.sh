#!/usr/bin/env bash
# A fleet on one control plane (docs/PERFORMANCE.md, "Fleet"): N agents joined
# to a control plane of the bench's own, each with PODS API pods, idle; what
# they cost the API server, per node, beside the same N of kubemark's hollow
# node (the upstream kubelet's code on a fake runtime).
#
#   tools/bench/fleet_bench.sh N [AGENT=both]      # AGENT: nanolet, hollow or both
#
# Environment: BUILD (build), PODS (5), BASE_S (90), SETTLE_S (60), WINDOW_S
# (300: a node's 5-minute status report falls in it once), RESULTS (a file
# to append each run's figures to, one JSON line each), NANOLET_FLAGS (more
# flags for every nanolet, e.g. --v=4; the tables name them).
#
# For each agent in turn: a fresh control plane (tools/testenv/controlplane.sh
# as k8s-fleet, ports +300, etcd emptied by `down` between agents, down at the
# end), 30 s for its controllers to settle, a baseline window of BASE_S with no
# node, then N agents joined as fleet-001 .. fleet-N, each with a client
# certificate for system:node:NAME (group system:nodes) from the control
# plane's CA, a root dir and kubelet port of its own, PODS busybox pods bound to
# it by spec.nodeName (each with the default kube-api-access volume, so its
# ServiceAccount token and kube-root-ca.crt), all Running, SETTLE_S to settle,
# then the measuring window of WINDOW_S. nanolet runs on the fake CRI
# (nanolet-fake-cri, one per agent as each real node has a runtime of its own:
# a shared one would answer each agent's relist with the whole fleet's pods);
# the hollow node on its own in-process fake runtime and fake image service
# (--use-host-image-service=false).
#
# Per node, over the window: requests per hour by verb and resource, from the
# apiserver's audit log (NANOLET_TESTENV_K8S_AUDIT_NODES=1: every request of
# group system:nodes, counted when complete as apiserver_request_total counts;
# the controllers' requests are not the nodes'), checked against the requests
# its flow control dispatched for the nodes (flow schemas system-node*);
# watches held open (apiserver_longrunning_requests{verb="WATCH"} at the
# window's end less at the baseline's end); the apiserver's CPU (utime + stime
# from /proc, ms/s, less the baseline window's) and RSS growth (VmRSS at the
# window's end less at the baseline's end, the nodes' and pods' objects
# included). Bytes: the kernel's tcp_info (`ss -ti`: bytes_sent and
# bytes_received, TLS payload) of every connection of the agents' processes to
# the apiserver's port, i.e. what the apiserver received and sent on them.
#
# Everything the bench starts runs at nice 10 (control plane) and 15 (agents),
# so that it yields to other work on the machine.
set -uo pipefail
N=${1:?usage: fleet_bench.sh N [nanolet|hollow|both]}
AGENT=${2:-both}
BUILD=${BUILD:-build}
PODS=${PODS:-5}
BASE_S=${BASE_S:-90}
SETTLE_S=${SETTLE_S:-60}
WINDOW_S=${WINDOW_S:-300}
RESULTS=${RESULTS:-}
HERE=$(cd "$(dirname "$0")" && pwd)
NANOLET=$BUILD/agent/nanolet
FAKE=$BUILD/test/fakes/nanolet-fake-cri
NS=fleet
PY=/usr/bin/python3
export NANOLET_TESTENV_K8S_NAME=k8s-fleet NANOLET_TESTENV_K8S_PORT_OFFSET=300 NANOLET_TESTENV_K8S_AUDIT_NODES=1
STATE=${NANOLET_TESTENV_DIR:-/var/lib/nanolet-testenv}/k8s-fleet
CPCTL=$HERE/../testenv/controlplane.sh
TMP=$(mktemp -d /tmp/nanolet-fleet.XXXXXX)
PIDS=()  # every process we started: agents and fake CRIs
APIDS=() # the agents alone
. "$HERE/bench_lib.sh"

case $AGENT in nanolet | hollow) AGENTS=("$AGENT") ;; both) AGENTS=(nanolet hollow) ;;
  *) echo "AGENT is nanolet, hollow or both: $AGENT"; exit 2 ;; esac
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive number: $N"; exit 2; }
if [[ " ${AGENTS[*]} " == *" nanolet "* ]]; then
  [ -x "$NANOLET" ] && [ -x "$FAKE" ] || { echo "build $NANOLET and $FAKE first"; exit 1; }
fi
if [[ " ${AGENTS[*]} " == *" hollow "* ]]; then
  KBIN=$(nice -n 10 "$HERE/../testenv/k8s-build.sh" kubemark) || { echo "cannot build kubemark"; exit 1; }
fi

stop_agents() {
  local p alive
  [ ${#PIDS[@]} -gt 0 ] || return 0
  kill -TERM "${PIDS[@]}" 2>/dev/null
  for _ in $(seq 1 50); do
    alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1 && break; done
    [ $alive = 1 ] || break
    sleep 0.2
  done
  kill -KILL "${PIDS[@]}" 2>/dev/null
  wait "${PIDS[@]}" 2>/dev/null
  PIDS=() APIDS=()
  # nanolet's projected volumes are tmpfs mounts under its root dir.
  awk -v t="$TMP/" 'index($2, t) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m"; done
}
cleanup() {
  stop_agents
  nice -n 10 "$CPCTL" down >/dev/null 2>&1
  bench_rm "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

node_name() { printf 'fleet-%03d' "$1"; }

# The node credentials: kept in the control plane's state dir (`down` keeps
# its PKI), so a second run reuses them.
credentials() {
  local i name kc
  for i in $(seq 1 "$N"); do
    name=$(node_name "$i")
    kc=$CP/extra/$name.kubeconfig
    if [ -s "$kc" ] && openssl x509 -checkend 86400 -noout -in "$CP/extra/$name.crt" >/dev/null 2>&1; then
      continue
    fi
    nice -n 10 "$CPCTL" cert "$name" "system:node:$name" system:nodes >/dev/null 2>&1 ||
      { echo "no credential for $name"; exit 1; }
  done
}

admin_curl() { curl -fsS --max-time 20 --cacert "$NANOLET_TEST_K8S_CA" --cert "$CP/pki/admin.crt" --key "$CP/pki/admin.key" "$NANOLET_TEST_APISERVER$1"; }
apiserver_pid() { cat "$CP/run/kube-apiserver.pid"; }
# snap NAME: the apiserver's /metrics, CPU ticks, RSS and the agents'
# connection bytes at one instant, in $TMP/NAME.*
snap() {
  local p
  p=$(apiserver_pid)
  date +%s.%N >"$TMP/$1.t"
  awk '{print $14 + $15}' "/proc/$p/stat" >"$TMP/$1.cpu"
  awk '/^VmRSS/ {print $2}' "/proc/$p/status" >"$TMP/$1.rss"
  admin_curl /metrics >"$TMP/$1.prom" || echo "cannot read the apiserver's /metrics"
  conn_bytes >"$TMP/$1.conns"
}
# conn_bytes: "LOCAL SENT RECEIVED" for each connection of an agent process to
# the apiserver's port.
conn_bytes() {
  printf '%s\n' "${APIDS[@]}" >"$TMP/pids"
  ss -tinpH state established "( dport = :$APIPORT )" |
    awk -v pf="$TMP/pids" 'BEGIN {while ((getline l < pf) > 0) want[l] = 1}
      {l = $3; keep = 0; s = $0
       while (match(s, /pid=[0-9]+/)) { if (substr(s, RSTART + 4, RLENGTH - 4) in want) keep = 1; s = substr(s, RSTART + RLENGTH) }
       getline; if (!keep) next; sent = 0; recv = 0
       for (i = 1; i <= NF; i++) { split($i, a, ":")
         if (a[1] == "bytes_sent") sent = a[2]; else if (a[1] == "bytes_received") recv = a[2] }
       print l, sent, recv}'
}

kubectl() { "$NANOLET_TEST_KUBECTL" "$@"; }
nodes_ready() {
  [ "$(kubectl get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null |
    grep -c True)" -ge "$N" ]
}
pods_running() {
  [ "$(kubectl get pods -n "$NS" --field-selector status.phase=Running -o name 2>/dev/null | wc -l)" -ge $((N * PODS)) ]
}
agents_alive() {
  local p
  for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || { echo "process $p exited"; return 1; }; done
}

start_nanolet() { # start_nanolet I
  local name d port
  name=$(node_name "$1")
  d=$TMP/$name
  mkdir -p "$d"
  nice -n 15 "$FAKE" --socket "$d/cri.sock" --image localhost/busybox:1.36 >"$d/fake.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 50); do [ -S "$d/cri.sock" ] && break; sleep 0.1; done
  port=$(free_port)
  # shellcheck disable=SC2086
  nice -n 15 "$NANOLET" --kubeconfig "$CP/extra/$name.kubeconfig" --hostname-override "$name" \
    --container-runtime-endpoint "unix://$d/cri.sock" --root-dir "$d/root" \
    --port "$port" --read-only-port 0 --healthz-port 0 \
    --cgroups-per-qos=false --enforce-node-allocatable= ${NANOLET_FLAGS:-} >"$d/agent.log" 2>&1 &
  PIDS+=($!) APIDS+=($!)
}
start_hollow() { # start_hollow I
  local name d port
  name=$(node_name "$1")
  d=$TMP/$name
  mkdir -p "$d"
  port=$(free_port)
  # TMPDIR: the hollow kubelet makes its root dir and its fake runtime's
  # socket there.
  TMPDIR=$d nice -n 15 "$KBIN/kubemark" --morph=kubelet --name="$name" \
    --kubeconfig="$CP/extra/$name.kubeconfig" --kubelet-port="$port" --kubelet-read-only-port=0 \
    --use-host-image-service=false --v=0 >"$d/agent.log" 2>&1 &
  PIDS+=($!) APIDS+=($!)
}

pods_yaml() {
  local i j name
  for i in $(seq 1 "$N"); do
    name=$(node_name "$i")
    for j in $(seq 1 "$PODS"); do
      cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $name-$j, namespace: $NS}
spec:
  nodeName: $name
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: localhost/busybox:1.36, imagePullPolicy: IfNotPresent, command: [sleep, "36000"]}]
---
EOF
    done
  done
}

run() { # run AGENT
  local agent=$1 env_file i mem_kb
  nice -n 10 "$CPCTL" down >/dev/null 2>&1
  rm -f "$STATE"/audit*.log
  env_file=$(nice -n 10 "$CPCTL" up 2>"$TMP/cp.log") || { echo "no control plane:"; tail -5 "$TMP/cp.log"; exit 1; }
  # shellcheck source=/dev/null
  . "$env_file"
  CP=$(dirname "$env_file")
  APIPORT=${NANOLET_TEST_APISERVER##*:}
  credentials
  kubectl create namespace "$NS" >/dev/null
  sa() { kubectl get serviceaccount -n "$NS" default >/dev/null 2>&1; }
  wait_until 60 sa || { echo "no default ServiceAccount in $NS"; exit 1; }
  sleep 30
  snap "$agent-b0"
  sleep "$BASE_S"
  snap "$agent-b1"
  if [ "$agent" = hollow ]; then
    # About 85 MB each, measured (RSS); leave 2 GB to the rest of the machine.
    mem_kb=$(awk '/^MemAvailable/ {print $2}' /proc/meminfo)
    if [ "$mem_kb" -lt $(((N * 85 + 2048) * 1024)) ]; then
      echo "$agent: N=$N skipped: $((mem_kb / 1024)) MB available, $((N * 85 + 2048)) MB needed"
      return 0
    fi
  fi
  for i in $(seq 1 "$N"); do "start_$agent" "$i"; sleep 0.2; done
  wait_until $((120 + 3 * N)) nodes_ready || { echo "$agent: not all $N nodes Ready"; kubectl get nodes; exit 1; }
  pods_yaml | kubectl apply -f - >/dev/null || { echo "cannot create the pods"; exit 1; }
  wait_until $((180 + 3 * N)) pods_running || { echo "$agent: not all $((N * PODS)) pods Running"; exit 1; }
  sleep "$SETTLE_S"
  snap "$agent-w0"
  sleep "$WINDOW_S"
  snap "$agent-w1"
  agents_alive || { echo "$agent: an agent died in the window"; exit 1; }
  ps -o rss= -p "$(printf '%s,' "${APIDS[@]}" | sed 's/,$//')" | awk '{s += $1} END {print s}' >"$TMP/$agent.agent_rss"
  stop_agents
  cp "$CP"/audit*.log "$TMP/"
  nice -n 10 "$CPCTL" down >/dev/null 2>&1
  "$PY" - "$TMP" "$agent" "$N" "$PODS" "$(getconf CLK_TCK)" "$TMP/results" <<'PY'
import datetime, glob, json, os, re, sys
tmp, agent, n, pods, hz, results = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
line = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ([^ ]+)')
lab = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
def prom(name):
    out = []
    for l in open(f"{tmp}/{name}.prom"):
        m = line.match(l)
        if m:
            out.append((m.group(1), dict(lab.findall(m.group(2) or "")), float(m.group(3))))
    return out
def one(name, f):
    return float(open(f"{tmp}/{name}.{f}").read().split()[0])
def sums(name, metric, key, where=lambda l: True):
    d = {}
    for m, l, v in prom(name):
        if m == metric and where(l):
            k = key(l)
            d[k] = d.get(k, 0) + v
    return d
def rate(a, b, metric, key, where=lambda l: True):
    x, y = sums(a, metric, key, where), sums(b, metric, key, where)
    dt = one(b, "t") - one(a, "t")
    return {k: (y.get(k, 0) - x.get(k, 0)) / dt for k in set(x) | set(y)}, dt
# The nodes' requests from the audit log (every request of group
# system:nodes), counted when complete, as apiserver_request_total counts.
t0, t1 = one(f"{agent}-w0", "t"), one(f"{agent}-w1", "t")
dt = t1 - t0
verbs = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT",
         "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETE"}
count, users = {}, set()
for path in glob.glob(f"{tmp}/audit*.log"):
    for l in open(path):
        e = json.loads(l)
        if e.get("stage") != "ResponseComplete" or "system:nodes" not in e["user"].get("groups", []):
            continue
        ts = datetime.datetime.strptime(e["stageTimestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
        ts = ts.replace(tzinfo=datetime.timezone.utc).timestamp()
        if not t0 <= ts < t1:
            continue
        o = e.get("objectRef")
        what = (o["resource"] + ("/" + o["subresource"] if o.get("subresource") else "")) if o else e["requestURI"].split("?")[0]
        k = (verbs.get(e["verb"], e["verb"].upper()), what)
        count[k] = count.get(k, 0) + 1
        users.add(e["user"]["username"])
per_h = {k: v * 3600 / dt / n for k, v in count.items()}
nodes = lambda l: l.get("flow_schema", "").startswith("system-node")
fc, _ = rate(f"{agent}-w0", f"{agent}-w1", "apiserver_flowcontrol_dispatched_requests_total", lambda l: l["flow_schema"], nodes)
watch = lambda name: sums(name, "apiserver_longrunning_requests", lambda l: l.get("resource", ""), lambda l: l.get("verb") == "WATCH")
wb, ww = watch(f"{agent}-b1"), watch(f"{agent}-w1")
watches = {k: (ww.get(k, 0) - wb.get(k, 0)) / n for k in set(wb) | set(ww)}
watches = {k: v for k, v in watches.items() if abs(v) > 0.001}
cpu = lambda a, b: (one(b, "cpu") - one(a, "cpu")) * 1000 / hz / (one(b, "t") - one(a, "t"))
cpu_base, cpu_win = cpu(f"{agent}-b0", f"{agent}-b1"), cpu(f"{agent}-w0", f"{agent}-w1")
rss_growth = one(f"{agent}-w1", "rss") - one(f"{agent}-b1", "rss")
def conns(name):
    d = {}
    for l in open(f"{tmp}/{name}.conns"):
        f = l.split()
        d[f[0]] = (int(f[1]), int(f[2]))
    return d
c0, c1 = conns(f"{agent}-w0"), conns(f"{agent}-w1")
sent = sum(v[0] - c0.get(k, (0, 0))[0] for k, v in c1.items())
recv = sum(v[1] - c0.get(k, (0, 0))[1] for k, v in c1.items())
changed = len(set(c0) ^ set(c1))
r = {
    "agent": agent + (f" {os.environ['NANOLET_FLAGS']}" if agent == "nanolet" and os.environ.get("NANOLET_FLAGS") else ""),
    "n": n, "pods": pods, "window_s": round(dt),
    "requests_per_h": {f"{v} {k}": round(x, 1) for (v, k), x in sorted(per_h.items())},
    "requests_per_h_total": round(sum(per_h.values()), 1), "nodes_heard": len(users),
    "node_flow_requests_per_h": round(sum(fc.values()) * 3600 / n, 1),
    "kb_per_h_apiserver_received": round(sent * 3600 / dt / n / 1000, 1),
    "kb_per_h_apiserver_sent": round(recv * 3600 / dt / n / 1000, 1),
    "connections_per_node": round(len(c1) / n, 2), "connections_changed": changed,
    "watches": {k: round(v, 2) for k, v in sorted(watches.items())},
    "watches_total": round(sum(watches.values()), 2),
    "apiserver_cpu_ms_s": {"baseline": round(cpu_base, 1), "window": round(cpu_win, 1),
                           "per_node": round((cpu_win - cpu_base) / n, 2)},
    "apiserver_rss_growth_kib": {"total": int(rss_growth), "per_node": round(rss_growth / n, 1)},
    "agent_rss_kib_per_node": round(one(agent, "agent_rss") / n),
}
print(json.dumps(r))
with open(results, "a") as f:
    f.write(json.dumps(r) + "\n")
PY
}

for a in "${AGENTS[@]}"; do run "$a"; done
[ -s "$TMP/results" ] || exit 1
[ -z "$RESULTS" ] || cat "$TMP/results" >>"$RESULTS"
# The side-by-side tables, per node.
"$PY" - "$TMP/results" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
n = rs[0]["n"]
print(f"\nper node, N={n}, {rs[0]['pods']} pods each, {rs[0]['window_s']} s window:\n")
print("| requests/h | " + " | ".join(r["agent"] for r in rs) + " |")
print("| --- |" + " --- |" * len(rs))
for k in sorted(set().union(*(r["requests_per_h"] for r in rs))):
    print(f"| {k} | " + " | ".join(f"{r['requests_per_h'].get(k, 0):.0f}" for r in rs) + " |")
print("| **in all** | " + " | ".join(f"**{r['requests_per_h_total']:.0f}** ({r['node_flow_requests_per_h']:.0f} by flow control)" for r in rs) + " |")
print()
print("| agent | N | requests/h | KB/h to the apiserver | KB/h from it | KB/h in all | watches | apiserver CPU | apiserver RSS growth | agent RSS |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rs:
    b = r["kb_per_h_apiserver_received"] + r["kb_per_h_apiserver_sent"]
    c = r["apiserver_cpu_ms_s"]
    print(f"| {r['agent']} | {r['n']} | {r['requests_per_h_total']:.0f} | {r['kb_per_h_apiserver_received']:.0f} | "
          f"{r['kb_per_h_apiserver_sent']:.0f} | {b:.0f} | {r['watches_total']:g} ({', '.join(r['watches'])}) | "
          f"{c['per_node']:.2f} ms/s | {r['apiserver_rss_growth_kib']['per_node'] / 1024:.2f} MiB | "
          f"{r['agent_rss_kib_per_node'] / 1024:.1f} MiB |")
PY
