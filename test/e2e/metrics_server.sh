#!/usr/bin/env bash
# metrics-server (built from its Go module: tools/testenv/tool-build.sh metrics-server)
# run the way clusters run it: an extension apiserver registered through the
# aggregation layer (APIService v1beta1.metrics.k8s.io; the apiserver's
# front-proxy client certificate and requestheader settings from
# tools/testenv/controlplane.sh), with its RBAC, scraping /metrics/resource
# on the node's InternalIP. `kubectl top node` and `kubectl top pod` answer,
# and their figures agree within 10 % with the kernel's: the root cgroup's CPU
# time (cadvisor's root container, as upstream's kubelet reports the node's)
# and /proc/meminfo for the node, the pod cgroups for a busy-loop pod (CPU) and a
# pod holding 24 MB (working set), sampled every 0.5 s over metrics-server's
# own window.
PODS_NS=nanolet-e2e-ms
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=nl-ms
KC=$("$E2E_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)
MS_USER=nanolet-e2e-metrics-server
MSKC=$("$E2E_CONTROLPLANE" cert "$MS_USER" "$MS_USER")
NODE_IP=${NODE_IP:-${NANOLET_TEST_NODE_IP:-$(ip -4 -o route get 192.0.2.255 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')}}
IMG=localhost/busybox:1.36
PY=/usr/bin/python3
MS_PID= SAMPLER_PID=
cleanup() {
  # the APIService first: while it names a server that is gone, every
  # client's discovery reports metrics.k8s.io as unavailable
  kubectl delete apiservice v1beta1.metrics.k8s.io --ignore-not-found >/dev/null 2>&1
  [ -z "$MS_PID" ] || { kill "$MS_PID" 2>/dev/null; wait "$MS_PID" 2>/dev/null; }
  [ -z "$SAMPLER_PID" ] || { kill "$SAMPLER_PID" 2>/dev/null; wait "$SAMPLER_PID" 2>/dev/null; }
  kubectl delete clusterrolebinding "$MS_USER" "$MS_USER-auth-delegator" >/dev/null 2>&1
  kubectl delete clusterrole "$MS_USER" >/dev/null 2>&1
  kubectl -n kube-system delete rolebinding "$MS_USER-auth-reader" >/dev/null 2>&1
  pods_cleanup
  if [ "$E2E_FAILED" -gt 0 ] && [ -f "$E2E_TMP/ms.log" ]; then
    echo "--- metrics-server log (last 20 lines) ---"; tail -20 "$E2E_TMP/ms.log"
  fi
}
e2e_on_exit cleanup
[ -n "$NODE_IP" ] || { fail "node IP" "no non-loopback address (set NANOLET_TEST_NODE_IP)"; exit 1; }
MS=$("$(dirname "$0")/../../tools/testenv/tool-build.sh" metrics-server) ||
  { fail "metrics-server" "tools/testenv/tool-build.sh metrics-server failed"; exit 1; }
if ! kubectl -n kube-system get configmap extension-apiserver-authentication \
  -o jsonpath='{.data.requestheader-client-ca-file}' | grep -q 'BEGIN CERTIFICATE'; then
  fail "aggregation layer" "the apiserver runs without --requestheader-client-ca-file: an older tools/testenv/controlplane.sh started it; its 'up' restarts it with the flags"
  exit 1
fi

# Two pods: a busy loop held at 150m by its CFS quota, and 24 MB held by a shell.
put spin <<EOF
apiVersion: v1
kind: Pod
metadata: {name: spin, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: spin, image: $IMG, command: [sh, -c, 'while :; do :; done'], resources: {limits: {cpu: 150m, memory: 32Mi}}}
EOF
put hold <<EOF
apiVersion: v1
kind: Pod
metadata: {name: hold, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: hold, image: $IMG, command: [sh, -c, 'x=\$(yes 0123456789abcdef | head -c 24000000); sleep 3600; echo \${#x}'], resources: {limits: {cpu: 100m, memory: 64Mi}}}
EOF
join_agent "$KC" ||
  { fail "agent start" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; }
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
check "the node is Ready, InternalIP $NODE_IP" wait_for 30 node_ready
both_run() { refresh_pods; [ "$(pod spin .status.phase)$(pod hold .status.phase)" = RunningRunning ]; }
check "both pods run" wait_for 60 both_run
cg() { # cg UID CONTROLLER: the pod's cgroup directory
  find "/sys/fs/cgroup/$2$KUBEPODS" -maxdepth 2 -type d -name "pod$1" 2>/dev/null | head -1
}
spin_uid=$(pod spin .metadata.uid) hold_uid=$(pod hold .metadata.uid)
for v in "spin cpuacct" "spin memory" "hold cpuacct" "hold memory"; do
  set -- $v
  uid_var=${1}_uid
  d=$(cg "${!uid_var}" "$2")
  [ -n "$d" ] || { fail "pod cgroup" "$1: no $2 cgroup for pod ${!uid_var}"; exit 1; }
  declare "${1}_${2}=$d"
done

# The kernel's figures every 0.5 s: time (ns), the node's busy CPU (ns, the
# root cgroup's: /proc/stat's also counts steal and interrupts, which no
# cgroup is charged for; a VM's steal under load was a fifth of its busy
# time), its working set (MemTotal - MemFree - Inactive(file)), and
# each pod cgroup's cpuacct.usage and working set (usage - total_inactive_file).
cat >"$E2E_TMP/sampler.py" <<'EOF'
import os, sys, time
out, cgs = sys.argv[1], sys.argv[2:]
def busy():
    try:
        return int(open("/sys/fs/cgroup/cpuacct/cpuacct.usage").read())
    except OSError:
        st = dict(l.split() for l in open("/sys/fs/cgroup/cpu.stat"))
        return int(st["usage_usec"]) * 1000
def node():
    m = {}
    for l in open("/proc/meminfo"):
        k, val = l.split(":")
        m[k] = int(val.split()[0]) * 1024
    return busy(), m["MemTotal"] - m["MemFree"] - m["Inactive(file)"]
def pod(cpu, mem):
    c = int(open(cpu + "/cpuacct.usage").read())
    u = int(open(mem + "/memory.usage_in_bytes").read())
    st = dict(l.split() for l in open(mem + "/memory.stat"))
    return c, max(0, u - int(st["total_inactive_file"]))
with open(out, "w", buffering=1) as o:
    while True:
        t = time.time_ns()
        row = [t, *node()]
        for i in range(0, len(cgs), 2):
            row += pod(cgs[i], cgs[i + 1])
        o.write(" ".join(str(int(x)) for x in row) + "\n")
        time.sleep(0.5)
EOF
"$PY" "$E2E_TMP/sampler.py" "$E2E_TMP/kernel" "$spin_cpuacct" "$spin_memory" "$hold_cpuacct" "$hold_memory" &
SAMPLER_PID=$!

# --- metrics-server, as its manifests install it -------------------------------
kubectl apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: $MS_USER}
rules:
- {apiGroups: [""], resources: [nodes/metrics], verbs: [get]}
- {apiGroups: [""], resources: [pods, nodes], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: $MS_USER}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: $MS_USER}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: $MS_USER}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: $MS_USER-auth-delegator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: $MS_USER}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: $MS_USER-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: $MS_USER}]
EOF
MS_PORT=$(free_port)
"$MS" --secure-port="$MS_PORT" --bind-address=127.0.0.1 --cert-dir="$E2E_TMP/ms-certs" \
  --kubeconfig="$MSKC" --authentication-kubeconfig="$MSKC" --authorization-kubeconfig="$MSKC" \
  --kubelet-preferred-address-types=InternalIP --kubelet-use-node-status-port \
  --kubelet-certificate-authority="$ROOT/pki/kubelet.crt" --metric-resolution=15s \
  >"$E2E_TMP/ms.log" 2>&1 &
MS_PID=$!
ms_ready() { [ "$(curl -sk "https://127.0.0.1:$MS_PORT/livez")" = ok ]; }
check "metrics-server serves on 127.0.0.1:$MS_PORT" wait_for 60 ms_ready
# The apiserver reaches it through a Service: an ExternalName one, as this
# test cluster has no kube-proxy to route a ClusterIP.
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: metrics-server, namespace: $PODS_NS}
spec: {type: ExternalName, externalName: localhost, ports: [{name: https, port: $MS_PORT}]}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  insecureSkipTLSVerify: true
  service: {namespace: $PODS_NS, name: metrics-server, port: $MS_PORT}
EOF
available() { [ "$(kubectl get apiservice v1beta1.metrics.k8s.io -o jsonpath='{.status.conditions[?(@.type=="Available")].status}')" = True ]; }
check "APIService v1beta1.metrics.k8s.io is Available" wait_for 60 available
top_pods() { kubectl top pod -n "$PODS_NS" --no-headers >"$E2E_TMP/top-pods" 2>&1 && grep -q "^spin-$NODE " "$E2E_TMP/top-pods" && grep -q "^hold-$NODE " "$E2E_TMP/top-pods"; }
check "kubectl top pod answers for both pods" wait_for 90 top_pods
top_node() { kubectl top node "$NODE" --no-headers >"$E2E_TMP/top-node" 2>&1 && grep -q "^$NODE " "$E2E_TMP/top-node"; }
check "kubectl top node answers" wait_for 60 top_node
sleep 1

# --- the figures against the kernel's -----------------------------------------
# Each check reads kubectl top and, for its time and window, the raw
# metrics.k8s.io object; the kernel's figures are interpolated at both ends.
cat >"$E2E_TMP/compare.py" <<'EOF'
import json, re, sys
from datetime import datetime, timezone
kind, top, raw, kernel = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), sys.argv[4]
rows = [[int(x) for x in l.split()] for l in open(kernel) if l.strip()]
col = {"node": (1, 2), "spin": (3, 4), "hold": (5, 6)}[kind]
def at(t, c):  # the column c at time t (ns), interpolated
    for a, b in zip(rows, rows[1:]):
        if a[0] <= t <= b[0]:
            return a[c] + (b[c] - a[c]) * (t - a[0]) / (b[0] - a[0])
    sys.exit("no kernel sample around %d (%d..%d)" % (t, rows[0][0], rows[-1][0]))
ts = datetime.strptime(raw["timestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
end = int(ts.timestamp() * 1e9) + 500_000_000  # the second is truncated: its middle
win = float(raw["window"].rstrip("s")) * 1e9
cpu_k = (at(end, col[0]) - at(end - win, col[0])) / win * 1000  # millicores
mem_k = at(end, col[1]) / 2**20                                 # MiB
f = top.split()
cpu_t = float(f[1].rstrip("m"))
mem_t = float(f[3 if kind == "node" else 2].rstrip("Mi"))
# the busy loop's CPU, the holder's memory, both of the node's
ok = (kind == "hold" or abs(cpu_t - cpu_k) <= 0.1 * cpu_k) and \
     (kind == "spin" or abs(mem_t - mem_k) <= 0.1 * mem_k)
print("%s cpu %gm (kernel %.0fm), memory %gMi (kernel %.1fMi), window %s at %s" % (
    "ok" if ok else "off", cpu_t, cpu_k, mem_t, mem_k, raw["window"], raw["timestamp"]))
sys.exit(0 if ok else 1)
EOF
compare() { # compare KIND TOP-LINE RAW-PATH
  kubectl get --raw "$3" >"$E2E_TMP/raw.json" || return 1
  "$PY" "$E2E_TMP/compare.py" "$1" "$2" "$E2E_TMP/raw.json" "$E2E_TMP/kernel"
}
top_node
r=$(compare node "$(head -1 "$E2E_TMP/top-node")" "/apis/metrics.k8s.io/v1beta1/nodes/$NODE" 2>&1)
if [ $? = 0 ]; then ok "kubectl top node: $r"; else fail "kubectl top node" "$(cat "$E2E_TMP/top-node"): $r"; fi
top_pods
for p in spin hold; do
  r=$(compare "$p" "$(grep "^$p-$NODE " "$E2E_TMP/top-pods")" \
    "/apis/metrics.k8s.io/v1beta1/namespaces/$PODS_NS/pods/$p-$NODE" 2>&1)
  if [ $? = 0 ]; then ok "kubectl top pod $p: $r"; else fail "kubectl top pod $p" "$(cat "$E2E_TMP/top-pods"): $r"; fi
done
