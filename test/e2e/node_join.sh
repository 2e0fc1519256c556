#!/usr/bin/env bash
# nanolet joins the real control plane with the node credential, as an operator
# runs it: the Node shows Ready within seconds with the capacity, allocatable,
# addresses, nodeInfo, labels and taints it was given; the Lease is renewed every
# ~10 s, and a holder someone else writes into it is taken back; an apiserver
# outage of 60 s disturbs nothing local and the node is Ready again afterwards;
# a deleted Node is registered again; and a kubeconfig that cannot work says
# why.
PODS_NS=nanolet-e2e-node-join
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=$NANOLET_TEST_NODE_NAME
IMG=localhost/busybox:1.36
LOG=$E2E_TMP/agent.log
jp() { kubectl get "$@" 2>/dev/null; }
node_json() { kubectl get node "$NODE" -o json 2>/dev/null; }
node_ready() { [ "$(jp node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
renew_time() { jp lease -n kube-node-lease "$NODE" -o jsonpath='{.spec.renewTime}'; }
renewed_since() { [ "$(renew_time)" \> "$1" ]; }
node_uid() { jp node "$NODE" -o jsonpath='{.metadata.uid}'; }
# The apiserver must always be back, whatever happens to this test.
cleanup() {
  "$NANOLET_TEST_CONTROLPLANE" up >/dev/null 2>&1
  pods_cleanup
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  kubectl delete namespace "$PODS_NS" --wait=false >/dev/null 2>&1
}
e2e_on_exit cleanup

kubectl delete node "$NODE" --ignore-not-found >/dev/null
kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null
kubectl create namespace "$PODS_NS" >/dev/null 2>&1 # for the static pod's mirror pod

put sleeper <<EOF
apiVersion: v1
kind: Pod
metadata: {name: sleeper, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: $IMG, command: [sleep, "3600"]}]
EOF

# --- joining -----------------------------------------------------------------
t0=$(date +%s%N)
start_agent --kubeconfig "$NANOLET_TEST_NODE_KUBECONFIG" --node-ip "$NODE_IP" \
  --node-labels site=lab,tier=edge --register-with-taints edge=gateway:NoSchedule \
  --kube-reserved memory=100Mi,cpu=100m --system-reserved memory=50Mi \
  --eviction-hard 'memory.available<100Mi,nodefs.available<10%' --max-pods 50
if wait_for 10 node_ready; then
  ok "the node is Ready $((($(date +%s%N) - t0) / 1000000)) ms after start"
else
  fail "node Ready" "$(node_json | jq -c '.status.conditions')"
fi
n=$(node_json)
field() { jq -r "$1" <<<"$n"; }
check "kubectl get nodes shows the node and its version" \
  bash -c "'$NANOLET_TEST_KUBECTL' get nodes --no-headers | grep -Eq '^$NODE +Ready +<none> +[0-9a-z]+ +v1\.36\.3\+nanolet\.'"
check "capacity: cpu is the host's" [ "$(field .status.capacity.cpu)" = "$(nproc)" ]
mem_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
check "capacity: memory is MemTotal" [ "$(field .status.capacity.memory)" = "${mem_kib}Ki" ]
check "capacity: pods is --max-pods" [ "$(field .status.capacity.pods)" = 50 ]
check "capacity: ephemeral-storage is set" [ "$(field '.status.capacity["ephemeral-storage"]')" != null ]
# allocatable memory = capacity - kubeReserved - systemReserved - evictionHard
want=$(((mem_kib - (100 + 50 + 100) * 1024)))Ki
check "allocatable: memory less reservations and evictionHard" [ "$(field .status.allocatable.memory)" = "$want" ]
check "allocatable: cpu less kubeReserved" [ "$(field .status.allocatable.cpu)" = "$(($(nproc) * 1000 - 100))m" ]
check "addresses: InternalIP from --node-ip and Hostname" \
  [ "$(field '[.status.addresses[] | "\(.type)=\(.address)"] | join(",")')" = "InternalIP=$NODE_IP,Hostname=$NODE" ]
check "nodeInfo: bootID is the host's" [ "$(field .status.nodeInfo.bootID)" = "$(cat /proc/sys/kernel/random/boot_id)" ]
check "nodeInfo: machineID is the host's" [ "$(field .status.nodeInfo.machineID)" = "$(cat /etc/machine-id)" ]
check "nodeInfo: kernel" [ "$(field .status.nodeInfo.kernelVersion)" = "$(uname -r)" ]
# runtimeName://runtimeVersion of the runtime's Version answer (containerd 1.6 or 2)
rt=$(cri version -o json | jq -r '"\(.runtimeName)://\(.runtimeVersion)"')
check "nodeInfo: containerRuntimeVersion from CRI ($rt)" \
  bash -c "[[ '$rt' == containerd://[12].* ]] && [ '$(field .status.nodeInfo.containerRuntimeVersion)' = '$rt' ]"
check "nodeInfo: kubeletVersion" bash -c "[[ '$(field .status.nodeInfo.kubeletVersion)' == v1.36.3+nanolet.* ]]"
check "nodeInfo: linux/amd64-style names" [ "$(field .status.nodeInfo.operatingSystem)/$(field '.metadata.labels["kubernetes.io/arch"]')" = "linux/$(dpkg --print-architecture)" ]
check "labels: hostname, os and --node-labels" \
  [ "$(field '.metadata.labels | "\(.["kubernetes.io/hostname"]) \(.["kubernetes.io/os"]) \(.site) \(.tier)"')" = "$NODE linux lab edge" ]
check "taints: --register-with-taints" \
  [ "$(field '[.spec.taints[] | select(.key == "edge") | "\(.value):\(.effect)"] | join(",")')" = "gateway:NoSchedule" ]
check "daemonEndpoints: the kubelet port (--port)" [ "$(field .status.daemonEndpoints.kubeletEndpoint.Port)" = "$KPORT" ]
check "images: the runtime's images are listed" \
  [ "$(field "[.status.images[].names[]? | select(startswith(\"$IMG\"))] | length")" -ge 1 ]

# --- the Lease ---------------------------------------------------------------
lease=$(kubectl get lease -n kube-node-lease "$NODE" -o json)
check "lease: held by the node, 40 s" [ "$(jq -r '"\(.spec.holderIdentity) \(.spec.leaseDurationSeconds)"' <<<"$lease")" = "$NODE 40" ]
check "lease: owned by the Node" [ "$(jq -r '.metadata.ownerReferences[0] | "\(.kind) \(.name) \(.uid)"' <<<"$lease")" = "Node $NODE $(node_uid)" ]
r1=$(renew_time)
node_rv() { jp node "$NODE" -o jsonpath='{.metadata.resourceVersion}'; }
rv1=$(node_rv)
sleep 11
r2=$(renew_time)
# The runtime's images include untagged ones here, and this VM has no system
# UUID: fields the API server leaves out, once patched every round.
check "an idle node does not patch its status between reports (11 s)" [ "$(node_rv)" = "$rv1" ]
if [ -n "$r1" ] && [ "$r2" \> "$r1" ]; then
  gap=$(($(date -d "$r2" +%s%N) - $(date -d "$r1" +%s%N)))
  if [ $gap -ge 8000000000 ] && [ $gap -le 12000000000 ]; then ok "lease renewed every ~10 s ($((gap / 1000000)) ms)"; else fail "lease period" "$r1 -> $r2"; fi
else
  fail "lease renewed" "renewTime $r1 -> $r2"
fi
# Someone else takes the Lease: the next renewal's test of the holder fails
# (422), nanolet reads the Lease and writes its own holder back (docs/NODE.md).
holder() { jp lease -n kube-node-lease "$NODE" -o jsonpath='{.spec.holderIdentity}'; }
holder_is_node() { [ "$(holder)" = "$NODE" ]; }
t_taken=$(date +%s%N)
kubectl patch lease -n kube-node-lease "$NODE" --type merge -p '{"spec":{"holderIdentity":"someone-else"}}' >/dev/null
if [ "$(holder)" = someone-else ] && wait_for 25 holder_is_node; then
  ok "a holder someone else wrote is taken back in $((($(date +%s%N) - t_taken) / 1000000)) ms"
else
  fail "holder taken back" "holder $(holder); $(grep -i 'lease' "$LOG" | tail -3)"
fi
check "the agent says who held the Lease" grep -q "node lease $NODE: held by \"someone-else\"" "$LOG"
check "the agent says the renewal was refused" grep -q "node lease $NODE: changed by someone else, reading it again" "$LOG"
r1=$(renew_time)
check "renewed again after taking it back" wait_for 15 renewed_since "$r1"
check "still held by the node" holder_is_node

# --- an apiserver outage of 60 s -----------------------------------------------
wait_for 30 pod_is sleeper .status.phase Running || fail "static pod running" "$(pod sleeper .status.phase)"
mirror_running() { [ "$(kubectl get pod -n "$PODS_NS" "sleeper-$NODE" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
check "the static pod's mirror pod shows Running in kubectl" wait_for 20 mirror_running
before=$(pod_containers sleeper-"$NODE" | jq -r '.[0].id')
lines_before=$(wc -l <"$LOG")
"$NANOLET_TEST_CONTROLPLANE" stop kube-apiserver
outage_ok=1
for _ in $(seq 12); do
  sleep 5
  kill -0 "$AGENT_PID" 2>/dev/null || { outage_ok=0; fail "alive during the outage" "nanolet exited"; break; }
  healthz_ok "$PORT" || { outage_ok=0; fail "/healthz during the outage" "$(curl -sS "http://127.0.0.1:$PORT/healthz")"; break; }
done
[ $outage_ok = 1 ] && ok "nanolet alive and /healthz ok through 60 s without the apiserver"
after=$(pod_containers sleeper-"$NODE" | jq -r '.[0].id + " " + .[0].state')
check "the static pod's container kept running" [ "$after" = "$before CONTAINER_RUNNING" ]
logged=$(($(wc -l <"$LOG") - lines_before))
if [ "$logged" -le 12 ]; then ok "the outage logged $logged lines in 60 s"; else fail "log rate" "$logged lines in 60 s"; tail -20 "$LOG"; fi
back=$(date -u +%Y-%m-%dT%H:%M:%S)
"$NANOLET_TEST_CONTROLPLANE" up >/dev/null
check "after the outage: the Lease is renewed again" wait_for 20 renewed_since "$back"
check "after the outage: the node is Ready" wait_for 20 node_ready

# --- a deleted Node is registered again -------------------------------------------
uid1=$(node_uid)
kubectl delete node "$NODE" --wait=false >/dev/null
new_uid() { local u; u=$(node_uid); [ -n "$u" ] && [ "$u" != "$uid1" ]; }
check "kubectl delete node: the node registers again" wait_for 25 new_uid
check "kubectl delete node: Ready again" wait_for 15 node_ready
stop_agent TERM

# --- nodeLeaseDurationSeconds sets the renewal period -----------------------------
# Upstream's one setting for it: a quarter of the duration, 4 s at 16 s.
cat >"$E2E_TMP/lease16.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
nodeLeaseDurationSeconds: 16
EOF
start_agent --config "$E2E_TMP/lease16.yaml" --kubeconfig "$NANOLET_TEST_NODE_KUBECONFIG" --node-ip "$NODE_IP"
lease_duration() { jp lease -n kube-node-lease "$NODE" -o jsonpath='{.spec.leaseDurationSeconds}'; }
duration_16() { [ "$(lease_duration)" = 16 ]; }
check "nodeLeaseDurationSeconds: 16: the Lease says 16 s" wait_for 10 duration_16
r1=$(renew_time)
wait_for 10 renewed_since "$r1"
r1=$(renew_time)
wait_for 10 renewed_since "$r1"
r2=$(renew_time)
gap=$((($(date -d "$r2" +%s%N) - $(date -d "$r1" +%s%N)) / 1000000))
check "nodeLeaseDurationSeconds: 16: renewed every ~4 s ($gap ms)" [ "$gap" -ge 3500 -a "$gap" -le 5000 ]
stop_agent TERM

# --- kubeconfigs that cannot work -------------------------------------------------
# Each runs a short-lived agent and looks for the cause in what it says.
probe_agent() { # probe_agent KUBECONFIG SECONDS: runs and prints the log
  local out=$E2E_TMP/probe.log
  server_flags "$E2E_TMP/probe-root"
  # shellcheck disable=SC2086
  timeout --preserve-status -s TERM "$2" "$NANOLET" --kubeconfig "$1" --hostname-override "$NODE" --healthz-port 0 $SERVER_FLAGS \
    --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" --root-dir "$E2E_TMP/probe-root" >"$out" 2>&1
  echo "rc=$?"
  cat "$out"
}
out=$("$NANOLET" --kubeconfig "$E2E_TMP/missing.kubeconfig" 2>&1); rc=$?
check "missing kubeconfig: exit 2 naming the file" \
  bash -c "[ $rc = 2 ] && grep -q 'kubeconfig $E2E_TMP/missing.kubeconfig: No such file or directory' <<<'$out'"
sed "s|certificate-authority: .*|certificate-authority: $(cd "$(dirname "$0")/../fixtures/tls" && pwd)/other-ca.crt|" \
  "$NANOLET_TEST_NODE_KUBECONFIG" >"$E2E_TMP/wrong-ca.kubeconfig"
out=$(probe_agent "$E2E_TMP/wrong-ca.kubeconfig" 4)
check "wrong CA: the log says the certificate is not trusted" grep -q 'x509: certificate signed by unknown authority' <<<"$out"
kc401=$("$NANOLET_TEST_CONTROLPLANE" cert --foreign e2e-foreign "system:node:$NODE" system:nodes)
out=$(probe_agent "$kc401" 4)
check "rejected certificate (401): the log says Unauthorized" grep -qi 'unauthorized\|provide credentials' <<<"$out"
kc403=$("$NANOLET_TEST_CONTROLPLANE" cert e2e-nobody nobody)
out=$(probe_agent "$kc403" 4)
check "user without rights (403): the log says forbidden" grep -q 'forbidden' <<<"$out"
sed "s|server: .*|server: https://127.0.0.1:1|" "$NANOLET_TEST_NODE_KUBECONFIG" >"$E2E_TMP/down.kubeconfig"
out=$(probe_agent "$E2E_TMP/down.kubeconfig" 12)
n_err=$(grep -c 'connection refused' <<<"$out")
# Each component that talks to the API server (node, Lease, API source, Services,
# mirror pods, events) says so when its failures start, then at most once a
# minute: no more than one line a second in all.
if [ "$n_err" -ge 1 ] && [ "$n_err" -le 12 ]; then
  ok "unreachable server: retried, $n_err log lines in 12 s"
else
  fail "unreachable server" "$n_err lines saying connection refused in 12 s"
fi
check "unreachable server: stops cleanly on SIGTERM" grep -q '^rc=0' <<<"$out"
