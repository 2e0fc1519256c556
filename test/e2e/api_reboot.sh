#!/usr/bin/env bash
# A reboot with the uplink down, for API pods: nanolet runs pods from the API
# server and checkpoints them; then a power cut (nanolet, containerd, the shims
# and the pods' processes killed with SIGKILL; the runtime's run directory
# unmounted and removed, as a reboot empties /run); containerd starts again,
# then nanolet with the API server unreachable for it (a copy of its kubeconfig
# pointing at a closed port; the shared API server is never touched). Every
# checkpointed pod must run again, in new sandboxes, within 5 s beyond the
# runtime's own time for the same pods (pods_floor straight through the CRI, on
# the same containerd, measured after nanolet so nanolet pays the cold start).
# Then, with the API server back, the pods are deleted through it and go.
#
# It runs on a containerd of its own (tools/testenv/setup.sh with its own
# NANOLET_TESTENV_DIR, bridge and subnet), never on the shared one, and purges
# it at the end. Node and kubeconfig: NANOLET_E2E_REBOOT_NODE /
# NANOLET_E2E_REBOOT_KUBECONFIG (default nl-apiscale, credential minted here).
PODS_NS=nanolet-e2e-api-reboot
N=${NANOLET_E2E_REBOOT_PODS:-10}
# The endpoint is this script's own containerd, set up below.
NANOLET_TEST_CRI_ENDPOINT=unset
. "$(dirname "$0")/pods_lib.sh"
e2e_on_exit
# The shared control plane first: its scripts must not see the private state dir.
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
REBOOT_NODE=${NANOLET_E2E_REBOOT_NODE:-nl-apiscale}
KC=${NANOLET_E2E_REBOOT_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$REBOOT_NODE" "system:node:$REBOOT_NODE" system:nodes)}
TESTENV=$(cd "$(dirname "$0")/../../tools/testenv" && pwd)
. "$(dirname "$0")/private_testenv.sh"
private_testenv "${NANOLET_API_REBOOT_TESTENV_DIR:-/var/lib/nanolet-api-reboot-testenv}" nl-br2 10.87.0.0/24 ||
  { fail "containerd 2" "tools/testenv/tool-build.sh containerd2 failed"; exit 1; }
RUNDIR=$PRIVATE_DIR/run
# (a containerd that started without its CRI plugin is purged, as reboot.sh)
NANOLET_TEST_CRI_ENDPOINT=$(private "$TESTENV/setup.sh" 2>"$E2E_TMP/setup.log") || {
  fail "setup.sh" "$(tail -5 "$E2E_TMP/setup.log")"
  private "$TESTENV/teardown.sh" --purge >/dev/null 2>&1; exit 1
}
export NANOLET_TEST_CRI_ENDPOINT
NODE=$REBOOT_NODE
FLOOR=$(dirname "$NANOLET")/../tools/bench/pods_floor
DEAD_KC=$E2E_TMP/dead.kubeconfig
sed 's#^\( *server:\).*#\1 https://127.0.0.1:1#' "$KC" >"$DEAD_KC"

reboot_cleanup() {
  stop_agent KILL
  kubectl delete pods -n "$PODS_NS" --all --grace-period=0 --force >/dev/null 2>&1
  kubectl delete ns "$PODS_NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  if [ -n "${E2E_KEEP:-}" ] || [ "$E2E_FAILED" -gt 0 ]; then
    echo "--- agent log (last 40 lines) ---"; tail -40 "$E2E_TMP/agent.log"
  fi
  private "$TESTENV/teardown.sh" --purge >/dev/null 2>&1
}
e2e_on_exit reboot_cleanup

# Every container of the namespace's pods is running (N of them).
all_running() { [ "$(cri ps -o json | jq --arg ns "$PODS_NS" '[.containers[]
  | select(.labels["io.kubernetes.pod.namespace"] == $ns and .state == "CONTAINER_RUNNING")] | length')" = "$N" ]; }
ready_ids() { ns_sandboxes | jq -r '[.[] | select(.state == "SANDBOX_READY") | .id] | sort | join(" ")'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

kubectl delete ns "$PODS_NS" --ignore-not-found --wait=true >/dev/null 2>&1
kubectl create ns "$PODS_NS" >/dev/null
# Pods are refused until the controller-manager has made the namespace's service account.
wait_for 30 kubectl get serviceaccount default -n "$PODS_NS" -o name >/dev/null
for i in $(seq "$N"); do
  cat <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: r$i, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: localhost/busybox:1.36, command: [sleep, "3600"]}]
---
EOF2
done | kubectl apply -f - >/dev/null
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1
wait_for 60 all_running && ok "before: $N API pods run" || fail "before" "$(cri ps -o json | jq '.containers | length') containers"
checkpointed() { [ "$(grep -o '"name":"r[0-9]*"' "$ROOT/api-pods.checkpoint" 2>/dev/null | sort -u | wc -l)" = "$N" ]; }
check "the checkpoint holds the $N pods" wait_for 10 checkpointed
before=$(ready_ids)

# --- the power cut -----------------------------------------------------------
shims=$(pgrep -f "containerd-shim-runc-v2 .*-address $RUNDIR/containerd.sock")
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
victims=$(for s in $shims; do echo "$s"; descendants "$s"; done)
disown "$AGENT_PID" # no "Killed" line from the shell
# shellcheck disable=SC2086
kill -KILL "$AGENT_PID" "$(cat "$RUNDIR/containerd.pid")" $victims
victims="$victims $AGENT_PID"; AGENT_PID=
wait_for 10 sh -c "! kill -0 $(tr '\n' ' ' <<<"$victims") 2>/dev/null"
awk -v d="$RUNDIR" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
  while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
rm -rf --one-file-system "$RUNDIR"
[ ! -e "$RUNDIR" ] && ok "power cut: nanolet, containerd, $(wc -w <<<"$shims") shims and the pods killed; the run directory is gone" \
  || fail "power cut" "$RUNDIR is still there"

# --- the boot, with the API server unreachable ----------------------------------
private "$TESTENV/setup.sh" >/dev/null 2>>"$E2E_TMP/setup.log" && ok "containerd started" \
  || fail "containerd start" "$(tail -3 "$E2E_TMP/setup.log")"
check "no pod runs before nanolet" [ -z "$(ready_ids)" ]
t0=$(now_ms)
start_agent --kubeconfig "$DEAD_KC" --node-ip "$NODE_IP"
if wait_for 60 all_running; then
  took=$(($(now_ms) - t0))
  ok "every checkpointed pod runs again, ${took} ms after nanolet's start"
else
  took=
  fail "after the reboot" "$(cri ps -o json | jq '.containers | length') containers running"
fi
after=$(ready_ids)
[ -n "$after" ] && [ "$after" != "$before" ] && ok "in new sandboxes" || fail "sandboxes" "before $before, after $after"
check "nanolet says it runs the checkpoint because the API server cannot be reached" \
  grep -Eq "cannot be reached .*: running the $N pods of the checkpoint" "$E2E_TMP/agent.log"
# The runtime's own time for the same pods, on this containerd.
stop_agent TERM
if [ -n "$took" ] && out=$("$FLOOR" run "$N" "$PODS_NS-floor"); then
  floor=${out%% *}
  "$FLOOR" clean "$PODS_NS-floor" >/dev/null
  rm -rf /var/log/pods/"$PODS_NS"-floor_*
  echo "api reboot: $N checkpointed pods running ${took} ms after nanolet's start; the runtime alone: ${floor} ms"
  if awk -v t="$took" -v f="$floor" 'BEGIN {exit !(t - f <= 5000)}'; then
    ok "within 5 s beyond the runtime's own time ($took ms against $floor ms)"
  else
    fail "offline start" "$took ms, the runtime alone $floor ms"
  fi
fi

# --- the API server back: deleted through it, the pods go ---------------------------
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP"
check "the API server answers again: the same sandboxes carry on" [ "$(ready_ids)" = "$after" ]
kubectl delete pods -n "$PODS_NS" --all --wait=false >/dev/null
api_empty() { [ "$(kubectl get pods -n "$PODS_NS" --no-headers 2>/dev/null | wc -l)" = 0 ]; }
if wait_for 60 api_empty && wait_for 30 runtime_clear; then ok "deleted through the API: objects and sandboxes gone"
else fail "delete" "$(kubectl get pods -n "$PODS_NS" --no-headers | wc -l) objects, $(ns_sandboxes | jq length) sandboxes left"; fi
stop_agent TERM
