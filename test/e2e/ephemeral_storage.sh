#!/usr/bin/env bash
# Local storage limits (LocalStorageCapacityIsolation) on the real containerd
# and control plane, checked with kubectl as a user would: API pods that write
# past an ephemeral-storage limit or an emptyDir sizeLimit become Failed with
# reason Evicted, upstream's message and an Evicted event, within a few
# eviction periods (10 s, plus the runtime's own 10 s of writable layer
# figures); pods within their limits, and a memory emptyDir (a tmpfs of its
# sizeLimit, which a write cannot exceed), keep running. No node threshold is
# set (evictionHard memory.available<1Mi): these evictions come from the
# limits alone. Static pods are critical and never evicted (upstream), hence
# API pods. Node and credential: NANOLET_E2E_EPHEMERAL_NODE /
# NANOLET_E2E_EPHEMERAL_KUBECONFIG (default nanolet-ephemeral, minted by the
# control plane script); namespace: NANOLET_E2E_EPHEMERAL_NS.
PODS_NS=${NANOLET_E2E_EPHEMERAL_NS:-ephemeral-e2e}
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_E2E_EPHEMERAL_NODE:-nanolet-ephemeral}
KC=${NANOLET_E2E_EPHEMERAL_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
IMG=localhost/busybox:1.36
CONF=$E2E_TMP/kubelet.yaml
cat >"$CONF" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard: {memory.available: "1Mi"}
authentication:
  x509: {clientCAFile: $NANOLET_TEST_K8S_CA}
EOC
e2e_on_exit api_cleanup
fresh_ns "$PODS_NS"

# pod NAME VOLUME CONTAINER_LINES...: one pod on this node with volume "scratch"
pod() {
  local name=$1 vol=$2
  shift 2
  api_pod "$name" 30 "restartPolicy: OnFailure" "volumes: [{name: scratch, $vol}]" containers: "$@"
}
# ctr NAME LIMIT SCRIPT: a container with an ephemeral-storage limit ("" none)
ctr() {
  local res=""
  [ -n "$2" ] && res="resources: {limits: {ephemeral-storage: $2}}"
  printf -- '- {name: %s, image: %s, command: [sh, -c, "%s"], volumeMounts: [{name: scratch, mountPath: /scratch}], %s}' \
    "$1" "$IMG" "$3" "$res"
}
WRITE="sleep 3; dd if=/dev/zero of=FILE bs=1M count=MB; sleep 3600"
writes() { local w=${WRITE/FILE/$1}; echo "${w/MB/$2}"; }
api() { kubectl get pod -n "$PODS_NS" "$1" -o jsonpath="$2" 2>/dev/null; }
api_is() { [ "$(api "$1" "$2")" = "$3" ]; }

start_agent --kubeconfig "$KC" --config "$CONF" --node-ip "$NODE_IP" --node-status-update-frequency 2s \
  || { fail "agent start" ""; exit 1; }
# over: the writable layer (the pod's total, one container), an emptyDir
# without a sizeLimit (the same), an emptyDir's sizeLimit, one container of two
# over its own limit (the pod within its total)
pod layer 'emptyDir: {}' "$(ctr c 5Mi "$(writes /file 10)")"
pod vol 'emptyDir: {}' "$(ctr c 5Mi "$(writes /scratch/file 10)")"
pod sized 'emptyDir: {sizeLimit: 5Mi}' "$(ctr c "" "$(writes /scratch/file 10)")"
pod two 'emptyDir: {}' "$(ctr c1 5Mi "$(writes /file 8)")" "$(ctr c2 100Mi 'sleep 3600')"
# within: under the container's limit; a memory emptyDir written past its size
pod under 'emptyDir: {}' "$(ctr c 20Mi "$(writes /scratch/file 5)")"
pod memory 'emptyDir: {medium: Memory, sizeLimit: 5Mi}' "$(ctr c "" "$(writes /scratch/file 10)")"

# evicted NAME MESSAGE: Failed, Evicted, the message, one Evicted event with it
evicted() {
  if ! wait_for 90 api_is "$1" '{.status.reason}' Evicted; then
    fail "$1 evicted" "$(api "$1" '{.status}'); $(grep -i evict "$E2E_TMP/agent.log" | tail -3)"
    return
  fi
  api_is "$1" '{.status.phase}' Failed && ok "$1: Failed, Evicted" || fail "$1 phase" "$(api "$1" '{.status.phase}')"
  local msg
  msg=$(api "$1" '{.status.message}')
  [ "$msg" = "$2" ] && ok "  ... upstream's message ($msg)" || fail "$1 message" "got '$msg', want '$2'"
  local ev
  ev=$(kubectl get events -n "$PODS_NS" --field-selector "involvedObject.name=$1,reason=Evicted" \
    -o jsonpath='{range .items[*]}{.type}/{.message}{"\n"}{end}' 2>/dev/null)
  [ "$ev" = "Warning/$2" ] && ok "  ... one Warning event Evicted with it" || fail "$1 event" "$ev"
}
t0=$(date +%s)
for p in layer vol sized two under memory; do
  wait_for 60 api_is $p '{.status.phase}' Running || fail "$p Running" "$(api $p '{.status}')"
done
evicted layer 'Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. '
evicted vol 'Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. '
evicted sized 'Usage of EmptyDir volume "scratch" exceeds the limit "5Mi". '
evicted two 'Container c1 exceeded its local ephemeral storage limit "5Mi". '
echo "# evictions within $(($(date +%s) - t0)) s of the pods running"
# the evicted pods' containers are gone and never restarted (restartPolicy OnFailure)
gone() { [ -z "$(api "$1" '{.status.containerStatuses[*].state.running}')" ]; }
for p in layer vol sized two; do
  wait_for 30 gone $p && ok "$p: its containers stopped" || fail "$p containers" "$(api $p '{.status.containerStatuses}')"
done
# the pods within their limits run on, a few periods after the evictions
sleep 25
for p in under memory; do
  api_is $p '{.status.phase}' Running && [ -z "$(api $p '{.status.reason}')" ] \
    && ok "$p: within its limits, still Running" || fail "$p running" "$(api $p '{.status}')"
done
df_mem=$(kubectl exec -n "$PODS_NS" memory -- df -k /scratch 2>/dev/null | awk 'NR == 2 {print $2}')
[ "$df_mem" = 5120 ] && ok "the memory emptyDir is a tmpfs of its 5Mi" || fail "memory emptyDir size" "$df_mem"
m=$(curl -fsS "http://127.0.0.1:$RO_PORT/metrics")
for s in ephemeralpodfs.limit:2 emptydirfs.limit:1 ephemeralcontainerfs.limit:1; do
  grep -qx "kubelet_evictions{eviction_signal=\"${s%:*}\"} ${s#*:}" <<<"$m" \
    && ok "kubelet_evictions{eviction_signal=\"${s%:*}\"} ${s#*:}" || fail "kubelet_evictions $s" "$(grep evictions <<<"$m")"
done
node_cond() { kubectl get node "$NODE" -o jsonpath="{.status.conditions[?(@.type==\"$1\")].status}" 2>/dev/null; }
[ "$(node_cond DiskPressure)" = False ] && ok "no DiskPressure: the limits are the pods' own" \
  || fail "DiskPressure" "$(node_cond DiskPressure)"
stop_agent TERM
