#!/usr/bin/env bash
# kubectl exec, attach and port-forward through the real apiserver and
# nanolet's kubelet server (the apiserver's kubelet-client certificate, SPDY
# towards nanolet, nanolet's proxy to containerd's streaming server);
# /stats/summary and /metrics/resource through the apiserver's node proxy;
# /metrics and /metrics/probes through promtool.
#
# The pod runs as a static pod; kubectl reaches it through its mirror pod. The
# node name and credential come from NANOLET_TEST_STREAMS_NODE and NANOLET_TEST_STREAMS_KUBECONFIG (default:
# nl-kstream, minted here). The apiserver proxies /api/v1/nodes/<node>/proxy/
# only to a non-loopback address, so the node runs with the host's own IP
# (NANOLET_TEST_NODE_IP).
PODS_NS=nanolet-e2e-streams
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_TEST_STREAMS_NODE:-nl-kstream}
KC=${NANOLET_TEST_STREAMS_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
IMG=localhost/busybox:1.36
POD=box-$NODE
PF_PID=
cleanup() {
  [ -z "$PF_PID" ] || kill "$PF_PID" 2>/dev/null
  kubectl delete ns "$PODS_NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  pods_cleanup
}
e2e_on_exit cleanup
[ -n "$NODE_IP" ] || { fail "node IP" "no non-loopback address (set NANOLET_TEST_NODE_IP)"; exit 1; }

cat >"$E2E_TMP/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  x509: {clientCAFile: $NANOLET_TEST_K8S_CA}
EOF
put box <<EOF
apiVersion: v1
kind: Pod
metadata: {name: box, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: sh, image: $IMG, command: [sh, -c, 'i=0; while :; do i=\$((i+1)); echo "tick \$i"; sleep 0.5; done']}
  - {name: web, image: $IMG, command: [httpd, -f, -p, "8080", -h, /etc]}
EOF
kubectl delete node "$NODE" --ignore-not-found >/dev/null
kubectl create ns "$PODS_NS" >/dev/null 2>&1 # for the mirror pod
start_agent --config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --node-ip "$NODE_IP" ||
  { fail "agent start" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; }
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
check "the node is Ready" wait_for 20 node_ready
check "the static pod runs" wait_for 60 pod_is box .status.phase Running

# kubectl needs the pod in the API: the static pod's mirror pod, Running.
mirror_running() { [ "$(kubectl get pod -n "$PODS_NS" "$POD" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
check "the static pod's mirror pod is Running" wait_for 30 mirror_running

kx() { kubectl exec -n "$PODS_NS" "$POD" -c sh "$@"; }
check "exec: stdout" [ "$(kx -- echo hello 2>&1)" = hello ]
kx -- sh -c 'exit 7'
check "exec: the exit code comes back" [ $? -eq 7 ]
check "exec: stderr apart" [ "$(kx -- sh -c 'echo oops >&2' 2>&1 >/dev/null)" = oops ]
check "exec -i: stdin reaches the process" [ "$(printf 'a\nb\n' | kx -i -- wc -l)" = 2 ]
want=$(kx -- sh -c 'head -c 10485760 /dev/urandom > /tmp/big; md5sum < /tmp/big' | cut -d' ' -f1)
got=$(kx -- cat /tmp/big | md5sum | cut -d' ' -f1)
check "exec: 10 MiB of output intact" [ -n "$want" -a "$want" = "$got" ]
got=$(head -c 10485760 /dev/zero | kx -i -- md5sum | cut -d' ' -f1)
check "exec -i: 10 MiB of input intact" [ "$got" = "$(head -c 10485760 /dev/zero | md5sum | cut -d' ' -f1)" ]
tty_out=$(script -qec "'$NANOLET_TEST_KUBECTL' --kubeconfig '$NANOLET_TEST_KUBECONFIG' exec -it -n $PODS_NS $POD -c sh -- tty" /dev/null | tr -d '\r')
check "exec -it: the process has a terminal" grep -q '/dev/pts/' <<<"$tty_out" || echo "tty: $tty_out"
kx -- nosuchcommand >/dev/null 2>&1
check "exec: a missing command fails" [ $? -ne 0 ]

out=$(timeout 4 "$NANOLET_TEST_KUBECTL" --kubeconfig "$NANOLET_TEST_KUBECONFIG" attach -n "$PODS_NS" "$POD" -c sh 2>/dev/null | head -2)
check "attach: the container's output" grep -q '^tick ' <<<"$out"

LPORT=$(free_port)
kubectl port-forward -n "$PODS_NS" "pod/$POD" "$LPORT:8080" >"$E2E_TMP/pf.log" 2>&1 &
PF_PID=$!
pf_up() { curl -fsS -o /dev/null "http://127.0.0.1:$LPORT/hostname"; }
wait_for 10 pf_up
check "port-forward: HTTP through the tunnel" [ "$(curl -fsS "http://127.0.0.1:$LPORT/hostname" 2>&1)" = "$(kx -- cat /etc/hostname)" ]
want=$(kubectl exec -n "$PODS_NS" "$POD" -c web -- sh -c 'head -c 4194304 /dev/urandom > /etc/big; md5sum < /etc/big' | cut -d' ' -f1)
curl -fsS -o "$E2E_TMP/big" "http://127.0.0.1:$LPORT/big" 2>"$E2E_TMP/curl.err"
got=$(md5sum <"$E2E_TMP/big" | cut -d' ' -f1)
check "port-forward: 4 MiB through the tunnel intact" [ -n "$want" -a "$want" = "$got" ] ||
  { cat "$E2E_TMP/curl.err"; tail -3 "$E2E_TMP/pf.log"; }
kill "$PF_PID" 2>/dev/null
PF_PID=

raw() { kubectl get --raw "/api/v1/nodes/$NODE/proxy/$1" 2>&1; }
summary=$(raw stats/summary)
check "stats/summary: parses and names the node" [ "$(jq -r .node.nodeName <<<"$summary")" = "$NODE" ]
check "stats/summary: the node's working set is plausible" \
  [ "$(jq '.node.memory.workingSetBytes > 10000000 and .node.memory.workingSetBytes < .node.memory.usageBytes + 1' <<<"$summary")" = true ]
check "stats/summary: the pod and its containers" \
  [ "$(jq -r --arg ns "$PODS_NS" '[.pods[] | select(.podRef.namespace == $ns) | .containers[].name] | sort | join(",")' <<<"$summary")" = sh,web ]
sleep 3 # rates are over at least 2 s
summary=$(raw stats/summary)
check "stats/summary: usageNanoCores from two samples" \
  [ "$(jq '.node.cpu.usageNanoCores > 0' <<<"$summary")" = true ]
# systemContainers: kubelet (nanolet's own cgroup), runtime (containerd's),
# pods (kubepods) and, on a host without systemd, misc; their cpu and memory
# from their cgroup files.
want_sys=kubelet,pods,runtime
[ -d /run/systemd/system ] || want_sys=kubelet,misc,pods,runtime
check "stats/summary: the system containers" \
  [ "$(jq -r '[.node.systemContainers[].name] | sort | join(",")' <<<"$summary")" = "$want_sys" ]
check "stats/summary: each system container's cpu and memory" \
  [ "$(jq '[.node.systemContainers[] | .cpu.usageCoreNanoSeconds > 0 and .memory.workingSetBytes > 0] | all' <<<"$summary")" = true ]
check "stats/summary: kubepods' memory under its limit" \
  [ "$(jq '.node.systemContainers[] | select(.name == "pods") | .memory.availableBytes > 0' <<<"$summary")" = true ]
# PSI (KubeletPSI): the node's from /proc/pressure, a pod's and a container's
# from their cgroups' pressure files (v2, or the unified hierarchy of a hybrid
# v1 host), with upstream's fields.
psi_ok='.psi.some.total >= 0 and .psi.some.avg10 >= 0 and .psi.some.avg60 >= 0 and .psi.some.avg300 >= 0 and .psi.full.total >= 0'
if [ -r /proc/pressure/cpu ]; then
  check "stats/summary: the node's cpu, memory and io pressure" \
    [ "$(jq "[.node.cpu, .node.memory, .node.io] | map($psi_ok) | all" <<<"$summary")" = true ]
fi
if [ -e /sys/fs/cgroup/cpu.pressure ] || [ -e /sys/fs/cgroup/unified/cpu.pressure ]; then
  check "stats/summary: the pod's and its containers' pressure" \
    [ "$(jq --arg ns "$PODS_NS" "[.pods[] | select(.podRef.namespace == \$ns) | (.cpu, .memory, .io, (.containers[] | .cpu, .memory))] | map($psi_ok) | all" <<<"$summary")" = true ]
fi
# what the pod and its containers use on disk: the log files, the
# container's start, the pod's ephemeral storage
check "stats/summary: the ticking container's log and start time" \
  [ "$(jq --arg ns "$PODS_NS" '.pods[] | select(.podRef.namespace == $ns) | .containers[] | select(.name == "sh") | .logs.usedBytes > 0 and (.startTime | length) > 0' <<<"$summary")" = true ]
check "stats/summary: the pod's ephemeral storage counts its logs" \
  [ "$(jq --arg ns "$PODS_NS" '.pods[] | select(.podRef.namespace == $ns) | .["ephemeral-storage"].usedBytes >= ([.containers[].logs.usedBytes] | add)' <<<"$summary")" = true ]
resource=$(raw metrics/resource)
check "/metrics/resource: the pod's working set" \
  grep -q "^pod_memory_working_set_bytes{namespace=\"$PODS_NS\",pod=\"$POD\"} " <<<"$resource"
check "/metrics/resource: no scrape error" grep -q '^resource_scrape_error 0$' <<<"$resource"
check "/metrics/resource: no deprecated scrape_error (hidden since 1.29)" \
  bash -c '! grep -q "^scrape_error" <<<"$1"' _ "$resource"
check "/metrics/resource: the families in upstream's order (by name)" \
  sort -c <<<"$(awk '/^# TYPE/ {print $3}' <<<"$resource")"
# the containers' start time: the summary's startTime (to the second), and no
# timestamp (upstream's)
start_ok() {
  local line want
  line=$(grep "^container_start_time_seconds{container=\"sh\",namespace=\"$PODS_NS\",pod=\"$POD\"} " <<<"$resource")
  want=$(jq -r --arg ns "$PODS_NS" '.pods[] | select(.podRef.namespace == $ns) | .containers[] | select(.name == "sh") | .startTime | fromdate' <<<"$summary")
  [ -n "$want" ] && [ "$(awk '{print NF}' <<<"$line")" = 2 ] &&
    [ "$(awk '{printf "%d", $2}' <<<"$line")" = "$want" ] || { echo "got: $line; want $want"; return 1; }
}
check "/metrics/resource: the container's start time is the summary's" start_ok
# swap: the node's as /proc/meminfo says (SwapTotal - SwapFree, within 64 MiB:
# it moves), the pod's and each container's from their cgroups
node_swap_ok() {
  local got want
  got=$(awk '/^node_swap_usage_bytes / {printf "%d", $2}' <<<"$resource")
  want=$(awk '/^SwapTotal:/ {t = $2} /^SwapFree:/ {f = $2} END {printf "%d", (t - f) * 1024}' /proc/meminfo)
  [ -n "$got" ] && [ $((got - want)) -le 67108864 ] && [ $((want - got)) -le 67108864 ] ||
    { echo "got $got, /proc/meminfo $want"; return 1; }
}
check "/metrics/resource: the node's swap usage" node_swap_ok
for c in sh web; do
  check "/metrics/resource: container $c's swap usage" \
    grep -Eq "^container_swap_usage_bytes\{container=\"$c\",namespace=\"$PODS_NS\",pod=\"$POD\"\} [0-9.e+]+ [0-9]+$" <<<"$resource"
done
check "/metrics/resource: the pod's swap usage" \
  grep -Eq "^pod_swap_usage_bytes\{namespace=\"$PODS_NS\",pod=\"$POD\"\} [0-9.e+]+ [0-9]+$" <<<"$resource"
check "stats/summary: the node's, the pod's and its containers' swap" \
  [ "$(jq --arg ns "$PODS_NS" '[.node.swap, (.pods[] | select(.podRef.namespace == $ns) | .swap, .containers[].swap) | .swapUsageBytes >= 0 and (.time | length) > 0] | (length == 4 and all)' <<<"$summary")" = true ]
metrics=$(raw metrics)
check "/metrics passes promtool check metrics" promtool check metrics <<<"$metrics"
check "/metrics: kubelet_node_name" grep -q "^kubelet_node_name{node=\"$NODE\"} 1$" <<<"$metrics"
check "/metrics: exec counted as a runtime operation" \
  grep -q '^kubelet_runtime_operations_total{operation_type="exec"} [1-9]' <<<"$metrics"
check "/metrics: running containers" \
  grep -q '^kubelet_running_containers{container_state="running"} [1-9]' <<<"$metrics"
check "/metrics/probes passes promtool" promtool check metrics <<<"$(raw metrics/probes)"

# STREAMS_BENCH=1: the throughput of `kubectl exec ... cat` of 100 MiB through
# nanolet's proxy, with the CPU nanolet and containerd spent on it
# (docs/PERFORMANCE.md).
if [ -n "${STREAMS_BENCH:-}" ]; then
  cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
  CTRD=$(pgrep -o -x containerd)
  kx -- sh -c 'head -c 104857600 /dev/urandom > /tmp/100m'
  for i in 1 2 3; do
    a0=$(cpu_ticks "$AGENT_PID"); c0=$(cpu_ticks "$CTRD"); t0=$(date +%s%N)
    n=$(kx -- cat /tmp/100m | wc -c)
    t1=$(date +%s%N); a1=$(cpu_ticks "$AGENT_PID"); c1=$(cpu_ticks "$CTRD")
    ms=$(((t1 - t0) / 1000000))
    echo "bench: exec cat: $n bytes in $ms ms = $((n * 1000 / ms / 1048576)) MiB/s;" \
      "nanolet CPU $(((a1 - a0) * 10)) ms, containerd CPU $(((c1 - c0) * 10)) ms"
  done
fi
