#!/usr/bin/env bash
# A real Prometheus (Debian's) scrapes a nanolet node the way clusters do: HTTPS
# to the kubelet port with the bearer token of a ServiceAccount bound to
# nodes/metrics on the real control plane and the kubelet's CA, jobs for
# /metrics, /metrics/cadvisor, /metrics/probes and /metrics/resource. After
# 105 s at a 5 s interval the kubelet and cAdvisor dashboards' queries
# answer through Prometheus's HTTP API; every endpoint passes `promtool check
# metrics` (upstream's own names accepted); a token without nodes/metrics gets
# 403; the busy container's cgroup and process series have the values its
# program gives them.
PODS_NS=nanolet-e2e-prom
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
command -v prometheus >/dev/null || { fail "prometheus" "not installed (tools/install-deps.sh --test)"; exit 1; }
NODE=nl-prom
KC=$("$E2E_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)
# NODE_IP: the one lib.sh gives, else the default route's source address
NODE_IP=${NODE_IP:-${NANOLET_TEST_NODE_IP:-$(ip -4 -o route get 192.0.2.255 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')}}
IMG=localhost/busybox:1.36
SA_NS=$PODS_NS-sa
PROM_PID=
SCRAPE_SECONDS=${NANOLET_TEST_PROM_SECONDS:-105}
# Its pods under a cgroup root of their own (pods_lib.sh): the series' ids
# start with it.
CGROUP_ROOT=/$NODE
cleanup() {
  [ -z "$PROM_PID" ] || { kill "$PROM_PID" 2>/dev/null; wait "$PROM_PID" 2>/dev/null; }
  kubectl delete ns "$SA_NS" --wait=false >/dev/null 2>&1
  kubectl delete clusterrolebinding "$SA_NS" >/dev/null 2>&1
  kubectl delete clusterrole "$SA_NS" >/dev/null 2>&1
  pods_cleanup
  cgroup_root_remove "$CGROUP_ROOT"
  if [ "$E2E_FAILED" -gt 0 ] && [ -f "$E2E_TMP/prom.log" ]; then
    echo "--- prometheus log (last 20 lines) ---"; tail -20 "$E2E_TMP/prom.log"
  fi
}
e2e_on_exit cleanup
[ -n "$NODE_IP" ] || { fail "node IP" "no non-loopback address (set NANOLET_TEST_NODE_IP)"; exit 1; }

# Two pods: one that burns a little CPU (a 100m limit: a CFS quota), one with
# a readiness probe (prober_probe_total).
put busy <<EOF
apiVersion: v1
kind: Pod
metadata: {name: busy, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: spin
    image: $IMG
    command: [sh, -c, 'while :; do :; done']
    resources: {limits: {cpu: 100m, memory: 32Mi}}
EOF
put probed <<EOF
apiVersion: v1
kind: Pod
metadata: {name: probed, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: $IMG
    command: [sh, -c, 'touch /tmp/ready; exec sleep 3600']
    readinessProbe: {exec: {command: [cat, /tmp/ready]}, periodSeconds: 2}
EOF
cgroup_root_make "$CGROUP_ROOT"
join_agent "$KC" --cgroup-root "$CGROUP_ROOT" ||
  { fail "agent start" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; }
ok "nanolet serves on $NODE_IP:$KPORT"

# The ServiceAccount Prometheus runs as in clusters: nodes/metrics (and the
# node objects), nothing else.
kubectl create ns "$SA_NS" >/dev/null
wait_for 30 kubectl get serviceaccount default -n "$SA_NS" -o name >/dev/null
kubectl -n "$SA_NS" create sa prometheus >/dev/null
kubectl -n "$SA_NS" create sa nobody >/dev/null
kubectl create clusterrole "$SA_NS" --verb=get --resource=nodes/metrics,nodes >/dev/null
kubectl create clusterrolebinding "$SA_NS" --clusterrole="$SA_NS" --serviceaccount="$SA_NS:prometheus" >/dev/null
kubectl -n "$SA_NS" create token prometheus --duration=1h >"$E2E_TMP/token"
CA=$ROOT/pki/kubelet.crt # the kubelet's own serving certificate, self-signed

# --- the endpoints, read with the token --------------------------------------
url=https://$NODE_IP:$KPORT
get() { curl -sS --cacert "$CA" -H "Authorization: Bearer $(cat "$E2E_TMP/token")" -o "$E2E_TMP/body" -w '%{http_code}' "$url$1"; }
has_pods() { get /metrics/cadvisor >/dev/null && grep -q "container_memory_working_set_bytes{container=\"spin\"" "$E2E_TMP/body"; }
check "/metrics/cadvisor lists the running container" wait_for 60 has_pods
for ep in /metrics /metrics/cadvisor /metrics/probes /metrics/resource; do
  c=$(get "$ep")
  # the linter with upstream's names accepted (test/unit/promtool_check.sh)
  if [ "$c" = 200 ] && out=$("$(dirname "$0")/../unit/promtool_check.sh" promtool cat "$E2E_TMP/body" 2>&1); then ok "promtool check metrics: $ep"
  else fail "promtool $ep" "$c $out $(head -c 300 "$E2E_TMP/body")"; fi
done
nobody=$(kubectl -n "$SA_NS" create token nobody)
c=$(curl -sS --cacert "$CA" -H "Authorization: Bearer $nobody" -o "$E2E_TMP/body" -w '%{http_code}' "$url/metrics/cadvisor")
want="Forbidden (user=system:serviceaccount:$SA_NS:nobody, verb=get, resource=nodes, subresource(s)=[metrics])"
if [ "$c" = 403 ] && [ "$(cat "$E2E_TMP/body")" = "$want" ]; then ok "a token without nodes/metrics: 403"
else fail "token without nodes/metrics" "$c $(head -c 300 "$E2E_TMP/body")"; fi
get /metrics/cadvisor >/dev/null
uid=$(uid_of busy)
check "the busy container's series: cgroup id, runtime id, image, pod and namespace" \
  grep -Eq "^container_cpu_usage_seconds_total\{container=\"spin\",cpu=\"total\",id=\"$CGROUP_ROOT/kubepods/(burstable/)?pod$uid/[0-9a-f]{64}\",image=\"$IMG\",name=\"[0-9a-f]{64}\",namespace=\"$PODS_NS\",pod=\"busy-$NODE\"\} " "$E2E_TMP/body"
check "its CFS quota (100m) and memory limit (32Mi) from its cgroup" \
  bash -c "grep -Eq '^container_spec_cpu_quota\{container=\"spin\".* 10000\$' '$E2E_TMP/body' && grep -Eq '^container_spec_memory_limit_bytes\{container=\"spin\".* 3.3554432e\+07\$' '$E2E_TMP/body'"
check "the pod cgroup's own series, and the sandbox's network" \
  bash -c "grep -Eq '^container_memory_working_set_bytes\{container=\"\",id=\"$CGROUP_ROOT/kubepods/(burstable/)?pod$uid\",image=\"\",name=\"\",namespace=\"$PODS_NS\",pod=\"busy-$NODE\"\} ' '$E2E_TMP/body' && grep -Eq '^container_network_receive_bytes_total\{container=\"\",id=\"$CGROUP_ROOT/kubepods/(burstable/)?pod$uid/[0-9a-f]{64}\",.*interface=\"eth0\",.*pod=\"busy-$NODE\"\} ' '$E2E_TMP/body'"

# The rest of cAdvisor's series (the cgroup files and the containers'
# processes), with the values a user would expect of the busy container.
# val FAMILY CONTAINER [LABEL-REGEX]: the first such series' value
val() { grep -E "^$1\{container=\"$2\"[^}]*$3[^}]*\} " "$E2E_TMP/body" | head -1 | awk '{print $2}'; }
# within FAMILY CONTAINER LO HI [LABEL-REGEX]: the value is present and in [LO, HI]
within() {
  local v; v=$(val "$1" "$2" "${5:-}")
  [ -n "$v" ] && awk -v v="$v" -v lo="$3" -v hi="$4" 'BEGIN { exit !(v + 0 >= lo && v + 0 <= hi) }' ||
    { echo "$1 of $2: '${v:-missing}', want [$3, $4]"; return 1; }
}
spin_busy() { get /metrics/cadvisor >/dev/null && within container_cpu_user_seconds_total spin 0.5 1e6; }
check "the spinning container's user CPU time (cpuacct.stat) grows past 0.5 s" wait_for 60 spin_busy
# the busy loop (a shell's builtins: no child; no probe execs into it, as
# into web, whose exec'd processes hold runc's sockets for a moment)
spin_procs() {
  within container_processes spin 1 1 && within container_threads spin 1 1 &&
    within container_file_descriptors spin 1 10 && within container_sockets spin 0 0 &&
    within container_ulimits_soft spin 1 1e10 'ulimit="max_open_files"' && within container_threads_max spin 0 1e9
}
check "the shell's one process and thread, its few open files and no socket; its open-files limit" spin_procs
spin_memory() {
  within container_memory_cache spin 0 33554432 && within container_memory_mapped_file spin 0 33554432 &&
    within container_memory_swap spin 0 0 && within container_memory_failcnt spin 0 0 &&
    within container_memory_max_usage_bytes spin 1 33554432 &&
    within container_memory_failures_total spin 1 1e9 'failure_type="pgfault".*scope="container"' &&
    within container_spec_memory_reservation_limit_bytes spin 0 0 &&
    within container_spec_memory_swap_limit_bytes spin 0 1e19 && within container_oom_events_total spin 0 0 &&
    within container_cpu_system_seconds_total spin 0 1e6
}
check "memory: cache, mapped files, no swap, no limit hit, peak within the 32Mi limit, no reservation, no OOM kill" spin_memory
check "the sandbox's packets received and sent (its /proc/<pid>/net/dev)" \
  grep -Eq "^container_network_(receive|transmit)_packets_total\{container=\"\",id=\"$CGROUP_ROOT/kubepods/(burstable/)?pod$uid/[0-9a-f]{64}\",.*interface=\"eth0\",.*pod=\"busy-$NODE\"\} [0-9]" "$E2E_TMP/body"
check "the root's filesystem: I/O time and inodes from /proc/diskstats and statfs(2)" \
  grep -Eq '^container_fs_io_time_seconds_total\{container="",device="[^"]+",id="/",.*\} [0-9]' "$E2E_TMP/body"

# --- Prometheus ----------------------------------------------------------------
PROM_PORT=$(free_port)
job() { # job NAME PATH
  cat <<EOF
- job_name: $1
  metrics_path: $2
  scheme: https
  authorization: {credentials_file: $E2E_TMP/token}
  tls_config: {ca_file: $CA}
  static_configs: [{targets: ['$NODE_IP:$KPORT']}]
EOF
}
{
  echo "global: {scrape_interval: 5s, scrape_timeout: 4s, evaluation_interval: 5s}"
  echo "scrape_configs:"
  job kubelet /metrics
  job cadvisor /metrics/cadvisor
  job probes /metrics/probes
  job resource /metrics/resource
} >"$E2E_TMP/prometheus.yml"
check "promtool check config" promtool check config "$E2E_TMP/prometheus.yml"
prometheus --config.file="$E2E_TMP/prometheus.yml" --storage.tsdb.path="$E2E_TMP/prom-data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$E2E_TMP/prom.log" 2>&1 &
PROM_PID=$!
api() { curl -sS -G "http://127.0.0.1:$PROM_PORT/api/v1/$1" "${@:2}"; }
all_up() { [ "$(api query --data-urlencode 'query=sum(up)' | jq -r '.data.result[0].value[1]' 2>/dev/null)" = 4 ]; }
check "Prometheus scrapes all four endpoints (up == 1)" wait_for 30 all_up
# The root cgroup's network is the host's interfaces but lo (cAdvisor's), and
# a quiet test machine may receive nothing on them for a minute: a connection
# attempt to the busy pod every 10 s brings its refusal in through the bridge.
POD_IP=$(kubectl get pod -n "$PODS_NS" "busy-$NODE" -o jsonpath='{.status.podIP}')
knock() { [ -z "$POD_IP" ] || curl -s -m 1 "http://$POD_IP:9/" >/dev/null 2>&1 || :; }
t0=$(date +%s)
# Scrape for the while a dashboard needs; fail early when a target goes down.
while [ $(($(date +%s) - t0)) -lt "$SCRAPE_SECONDS" ]; do
  knock
  sleep 10
  all_up || { fail "targets" "$(api targets | jq -c '[.data.activeTargets[] | {job: .labels.job, health, lastError}]')"; break; }
done
tgt=$(api targets | jq -c '[.data.activeTargets[] | select(.health != "up" or .lastError != "")] | length')
check "after ${SCRAPE_SECONDS}s every target is up, with no scrape error" [ "$tgt" = 0 ]
query() { api query --data-urlencode "query=$1" >"$E2E_TMP/q.json"; jq -e '.status == "success"' "$E2E_TMP/q.json" >/dev/null; }
q='sum by (pod) (rate(container_cpu_usage_seconds_total{container!=""}[1m]))'
query "$q"
check "$q: both pods" \
  jq -e --arg a "busy-$NODE" --arg b "probed-$NODE" '[.data.result[].metric.pod] | index($a) and index($b)' "$E2E_TMP/q.json"
# The resource job has the same series (as upstream's kubelet): the figure
# through the cadvisor job alone, as the dashboards select it.
query "sum by (pod) (rate(container_cpu_usage_seconds_total{job=\"cadvisor\",container!=\"\",pod=\"busy-$NODE\"}[1m]))"
busy=$(jq -r '.data.result[0].value[1]' "$E2E_TMP/q.json")
if awk -v v="$busy" 'BEGIN { exit !(v > 0.02 && v < 0.12) }'; then ok "the busy loop uses $busy cores (its limit: 0.1)"
else fail "busy rate" "$(cat "$E2E_TMP/q.json")"; fi
q='container_memory_working_set_bytes{container!=""}'
query "$q"
# (the cadvisor and resource jobs both have it, as with upstream's kubelet)
n=$(jq -c --arg ns "$PODS_NS" '[.data.result[] | select(.metric.namespace == $ns and (.value[1] | tonumber) > 0) | .metric.container] | unique' "$E2E_TMP/q.json")
check "$q: both containers $n" [ "$n" = '["spin","web"]' ]
# (at least: PLEG counts every sandbox of the shared test runtime, as upstream would)
query 'kubelet_running_pods'
check "kubelet_running_pods: at least the 2" [ "$(jq -r '.data.result[0].value[1]' "$E2E_TMP/q.json")" -ge 2 ]
query 'sum(kubelet_pod_start_duration_seconds_bucket{le="+Inf"})'
check "kubelet_pod_start_duration_seconds_bucket: both starts observed" \
  [ "$(jq -r '.data.result[0].value[1]' "$E2E_TMP/q.json")" -ge 2 ]
query "sum(increase(prober_probe_total{probe_type=\"Readiness\",result=\"successful\",pod=\"probed-$NODE\",container=\"web\"}[1m]))"
check "prober_probe_total: the readiness probe ran, successful" \
  awk -v v="$(jq -r '.data.result[0].value[1]' "$E2E_TMP/q.json")" 'BEGIN { exit !(v >= 10) }'
query 'machine_cpu_cores'
check "machine_cpu_cores: $(nproc)" [ "$(jq -r '.data.result[0].value[1]' "$E2E_TMP/q.json")" = "$(nproc)" ]
query 'sum(rate(container_network_receive_bytes_total{id="/"}[1m])) > 0'
check "the node's network through the root cgroup" [ "$(jq '.data.result | length' "$E2E_TMP/q.json")" = 1 ]
