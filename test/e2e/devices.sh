#!/usr/bin/env bash
# Device plugins end to end: upstream's sample device plugin
# (k8s.io/kubernetes/test/images/sample-device-plugin, built by
# tools/testenv/k8s-build.sh) against nanolet joined to the test control plane,
# everything seen as a user sees it with kubectl: the Node's capacity and
# allocatable of example.com/resource within seconds of the plugin's start; a
# pod asking for 1 runs and its container has the device's mount (/tmp/Dev-N,
# the sample's Allocate answer); a pod asking for 3 is Failed with upstream's
# UnexpectedAdmissionError and message, the first undisturbed; an agent
# restart keeps the running container (same ID, no restart) and allocates
# nothing again; a plugin killed and started again registers again and its
# devices come back; a plugin offering GetPreferredAllocation chooses a pod's
# device, and an answer that cannot be taken leaves the agent's choice.
#
# The sample hard-codes /var/lib/kubelet/device-plugins/kubelet.sock. The agent
# (with a private --root-dir) and the plugin run in a mount namespace of their
# own (unshare -m, private propagation) where the root dir is bind-mounted over
# /var/lib/kubelet: the machine's /var/lib/kubelet is never touched. The pods
# here have no volumes (the agent's tmpfs volumes would stay in that namespace).
#
# On containerd 2 (NANOLET_TEST_RUNTIME=containerd2, tools/e2e-runtime.sh) the
# sample runs with CDI_ENABLED=1: it writes its CDI spec to the machine's
# /var/run/cdi/example.com.json (where containerd 2 reads specs; the namespace
# shares the host's /var/run) and answers Allocate with the CDI name
# example.com/resource=CDI-Dev-N too; the agent passes it in the CRI's
# cdi_devices and containerd applies the spec's edits: the container has
# CDI_DEVICE=CDI-Dev-N in its environment and the block device node
# /tmp/CDI-Dev-N (1:N-1). The spec file is removed at the end (the test
# refuses to start if one is there already: it is another run's).
PODS_NS=nanolet-e2e-devices
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_TEST_DEVICES_NODE:-nl-devices}
KC=$(node_kubeconfig "$NODE")
IMG=localhost/busybox:1.36
RES=example.com/resource
REAL_NANOLET=$NANOLET
NS_PID=
PLUGIN_PID=
FAKE_PID=
PICK_PID=
PTY_PID=
PLUGIN_LOG=$E2E_TMP/plugin.log
CDI= CDI_SPEC=/var/run/cdi/example.com.json CDI_DIR_MADE=
[ "${NANOLET_TEST_RUNTIME:-containerd}" != containerd2 ] || CDI=1

# Clean-up at exit: the pods force-deleted and, when their sandboxes are still
# there, removed by the agent (started again if it is not running); then the
# plugin, the namespace, the Node and its Lease, the mount namespace.
devices_cleanup() {
  api_pods_clear
  stop_plugin TERM
  [ -z "$FAKE_PID" ] || { kill "$FAKE_PID" 2>/dev/null; wait "$FAKE_PID" 2>/dev/null; }
  [ -z "$PICK_PID" ] || { kill "$PICK_PID" 2>/dev/null; wait "$PICK_PID" 2>/dev/null; }
  [ -z "$PTY_PID" ] || { kill "$PTY_PID" 2>/dev/null; wait "$PTY_PID" 2>/dev/null; }
  kubectl delete ns "$PODS_NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$NODE" --ignore-not-found >/dev/null 2>&1
  kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null 2>&1
  [ -z "$NS_PID" ] || { kill "$NS_PID" 2>/dev/null; wait "$NS_PID" 2>/dev/null; }
  # the sample's CDI spec (it removes it itself only on a clean exit)
  if [ -n "$CDI" ]; then
    rm -f "$CDI_SPEC"
    [ -z "$CDI_DIR_MADE" ] || rmdir "$(dirname "$CDI_SPEC")" 2>/dev/null
  fi
  # the sample's Allocate makes its fake device files in the host's /tmp
  rm -f /tmp/Dev-1 /tmp/Dev-2
  if [ -n "${E2E_KEEP:-}" ] || [ "$E2E_FAILED" -gt 0 ]; then
    echo "--- agent log (last 40 lines) ---"; tail -40 "$E2E_TMP/agent.log"
    echo "--- plugin log (last 20 lines) ---"; tail -20 "$PLUGIN_LOG"
    echo "--- fake plugin log ---"; cat "$E2E_TMP/fake-plugin.log" 2>/dev/null
    echo "--- preferring plugin log ---"; cat "$E2E_TMP/pick-plugin.log" 2>/dev/null
  fi
}
e2e_on_exit devices_cleanup
[ -n "$NODE_IP" ] || { fail "node IP" "no non-loopback address (set NANOLET_TEST_NODE_IP)"; exit 1; }
command -v unshare >/dev/null && command -v nsenter >/dev/null ||
  { fail "tools" "unshare and nsenter (util-linux) are needed"; exit 1; }
PLUGIN_DIR=$("$(dirname "$0")/../../tools/testenv/k8s-build.sh" sample-device-plugin) ||
  { fail "sample device plugin" "tools/testenv/k8s-build.sh sample-device-plugin failed"; exit 1; }
PLUGIN_BIN=$PLUGIN_DIR/sample-device-plugin
if [ -n "$CDI" ]; then
  # The sample writes its spec without making the directory.
  if [ -e "$CDI_SPEC" ]; then
    CDI= # not ours: left alone
    fail "CDI spec" "$CDI_SPEC is there already (another sample plugin with CDI_ENABLED?)"
    exit 1
  fi
  [ -d "$(dirname "$CDI_SPEC")" ] || { mkdir -p "$(dirname "$CDI_SPEC")" && CDI_DIR_MADE=1; }
fi

# --- the mount namespace -----------------------------------------------------
# A process that only holds the namespace; the agent and the plugin enter it
# with nsenter (which execs: their PIDs are the processes' own). Where the host
# has no /var/lib/kubelet to mount over (a fresh machine), a tmpfs over
# /var/lib (in the namespace only) gives one, with the host's entries of
# /var/lib bound back in place: the test runtime's and control plane's among
# them.
mkdir -p "$ROOT" "$E2E_TMP/varlib"
unshare -m --propagation private sh -c "
  set -e
  if [ ! -d /var/lib/kubelet ]; then
    mount --rbind /var/lib '$E2E_TMP/varlib'
    mount -t tmpfs -o mode=0755 tmpfs /var/lib
    for e in '$E2E_TMP'/varlib/* '$E2E_TMP'/varlib/.[!.]*; do
      [ -e \"\$e\" ] || continue
      n=/var/lib/\${e##*/}
      if [ -d \"\$e\" ]; then mkdir \"\$n\"; else touch \"\$n\"; fi
      mount --rbind \"\$e\" \"\$n\"
    done
    mkdir /var/lib/kubelet
  fi
  mount --bind '$ROOT' /var/lib/kubelet
  touch '$E2E_TMP/ns-ready'
  exec sleep infinity" &
NS_PID=$!
wait_for 5 test -e "$E2E_TMP/ns-ready" || { fail "mount namespace" "unshare -m did not come up"; exit 1; }
printf '#!/bin/sh\nexec nsenter -t %s -m -- %s "$@"\n' "$NS_PID" "$REAL_NANOLET" >"$E2E_TMP/nanolet-in-ns"
chmod +x "$E2E_TMP/nanolet-in-ns"
NANOLET=$E2E_TMP/nanolet-in-ns # start_agent runs the agent in the namespace
check "the namespace's /var/lib/kubelet is the agent's root dir, the host's untouched" \
  nsenter -t "$NS_PID" -m -- test "$ROOT" -ef /var/lib/kubelet

start_plugin() {
  nsenter -t "$NS_PID" -m -- env ${CDI:+CDI_ENABLED=1} "$PLUGIN_BIN" >>"$PLUGIN_LOG" 2>&1 &
  PLUGIN_PID=$!
}
stop_plugin() {
  [ -n "$PLUGIN_PID" ] || return 0
  kill -"${1:-TERM}" "$PLUGIN_PID" 2>/dev/null
  wait "$PLUGIN_PID" 2>/dev/null
  PLUGIN_PID=
}
allocates() { grep -c '"Allocate"' "$PLUGIN_LOG"; }
registrations() { grep -c 'Device Plugin registered with the Kubelet' "$PLUGIN_LOG"; }
regs_above() { [ "$(registrations)" -gt "$1" ]; }
node_res() { # node_res capacity|allocatable: the Node's count of $RES ("" when none)
  kubectl get node "$NODE" -o json 2>/dev/null | jq -r --arg r "$RES" --arg f "$1" '.status[$f][$r] // ""'
}
res_is() { [ "$(node_res capacity)/$(node_res allocatable)" = "$1" ]; }
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
kpod() { kubectl get pod -n "$PODS_NS" "$1" -o json 2>/dev/null; }
kpod_is() { [ "$(kpod "$1" | jq -r "$2")" = "$3" ]; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# devpod NAME COUNT [RESOURCE]: a pod on this node whose container asks for
# COUNT devices of RESOURCE (default $RES), prints "ids $DEVICE_IDS" and sleeps.
devpod() {
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, 'echo "ids \$DEVICE_IDS"; trap "exit 0" TERM; while true; do sleep 0.2; done']
    resources: {limits: {${3:-$RES}: "$2"}}
EOF
}

# --- the plugin registers: capacity and allocatable --------------------------
kubectl delete lease -n kube-node-lease "$NODE" --ignore-not-found >/dev/null 2>&1
join_agent "$KC" --v 2 || { fail "agent start" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; }
check "the node is Ready" wait_for 20 node_ready
check "without a plugin the Node has no $RES" res_is /
t0=$(now_ms)
start_plugin
if wait_for 10 res_is 2/2; then
  ok "kubectl: the Node shows $RES capacity 2, allocatable 2, $(($(now_ms) - t0)) ms after the plugin's start"
else
  fail "capacity after the plugin's start" "capacity/allocatable $(node_res capacity)/$(node_res allocatable)"
fi
check "the agent logs the plugin's registration" \
  grep -q "got registration request from device plugin with resource name \"$RES\"" "$E2E_TMP/agent.log"

# --- a pod asking for 1 --------------------------------------------------------
devpod one 1
if wait_for 60 kpod_is one .status.phase Running; then ok "kubectl: the pod asking for 1 $RES is Running"
else fail "pod one" "phase $(kpod one | jq -c .status)"; fi
check "the plugin was asked to Allocate once" [ "$(allocates)" = 1 ]
devs=$(kubectl exec -n "$PODS_NS" one -- sh -c 'ls /tmp/Dev-* 2>/dev/null' 2>&1)
check "kubectl exec: the container sees one device file of the plugin's Allocate ($devs)" \
  bash -c "[[ '$devs' =~ ^/tmp/Dev-[12]\$ ]]"
mnt=$(kubectl exec -n "$PODS_NS" one -- cat /proc/self/mountinfo 2>&1 | awk '$5 ~ "^/tmp/Dev-" {print $5}')
check "kubectl exec: $devs is a mount in the container (the Allocate answer's Mount)" [ "$mnt" = "$devs" ]
ID1=$(kpod one | jq -r '.status.containerStatuses[0].containerID')
if [ -n "$CDI" ]; then
  # containerd 2 applied the CDI spec's edits for the device the pod got.
  cdi=CDI-${devs#/tmp/}
  check "CDI: the plugin wrote its spec ($CDI_SPEC) naming $cdi" grep -q "\"$cdi\"" "$CDI_SPEC"
  check "CDI: kubectl exec: CDI_DEVICE=$cdi in the container's environment (the spec's env edit)" \
    test "$(kubectl exec -n "$PODS_NS" one -- sh -c 'echo "$CDI_DEVICE"' 2>&1)" = "$cdi"
  minor=$((${devs#/tmp/Dev-} - 1))
  check "CDI: kubectl exec: /tmp/$cdi is the spec's block device 1:$minor (its deviceNodes edit)" \
    test "$(kubectl exec -n "$PODS_NS" one -- stat -c '%F %t:%T' "/tmp/$cdi" 2>&1)" = "block special file 1:$(printf %x "$minor")"
fi

# --- a pod asking for 3 ----------------------------------------------------------
devpod three 3
MSG="Pod was rejected: Allocate failed due to requested number of devices unavailable for $RES. Requested: 3, Available: 1, which is unexpected"
if wait_for 20 kpod_is three .status.phase Failed; then ok "kubectl: the pod asking for 3 is Failed"
else fail "pod three" "$(kpod three | jq -c .status)"; fi
check "its reason is UnexpectedAdmissionError" kpod_is three .status.reason UnexpectedAdmissionError
check "its message is upstream's ($(kpod three | jq -r .status.message))" kpod_is three .status.message "$MSG"
check "no container was made for it" [ "$(pod_containers three | jq length)" = 0 ]
check "the first pod is undisturbed (same container, 0 restarts)" \
  kpod_is one '"\(.status.phase) \(.status.containerStatuses[0].containerID) \(.status.containerStatuses[0].restartCount)"' "Running $ID1 0"
check "allocatable stays 2 (both devices healthy)" res_is 2/2

# --- an agent restart ----------------------------------------------------------------
regs=$(registrations)
stop_agent TERM
start_agent --config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --node-ip "$NODE_IP" --v 2 ||
  { fail "agent restart" "$(tail -5 "$E2E_TMP/agent.log")"; exit 1; }
# The sample registers again when kubelet.sock is made anew (10 s after it,
# the stub's retry period).
if wait_for 30 regs_above "$regs"; then ok "after the agent's restart the plugin registers again"
else fail "registration after the agent's restart" "$(tail -3 "$PLUGIN_LOG")"; fi
check "after the agent's restart: capacity and allocatable 2" wait_for 10 res_is 2/2
sleep 3 # time for a wrong re-allocation or container restart to show
check "after the agent's restart: the pod keeps its container (same ID, 0 restarts)" \
  kpod_is one '"\(.status.phase) \(.status.containerStatuses[0].containerID) \(.status.containerStatuses[0].restartCount)"' "Running $ID1 0"
check "after the agent's restart: nothing allocated again (Allocate asked once in all)" [ "$(allocates)" = 1 ]
check "after the agent's restart: the container still sees $devs" \
  test "$(kubectl exec -n "$PODS_NS" one -- sh -c 'ls /tmp/Dev-*' 2>&1)" = "$devs"
check "after the agent's restart: the refused pod stays Failed" kpod_is three .status.reason UnexpectedAdmissionError

# --- a plugin restart ----------------------------------------------------------------
stop_plugin KILL
check "the plugin killed: allocatable 0, capacity still 2 (the grace period)" wait_for 10 res_is 2/0
check "the agent's log (-v 2) names the lost connection as the plugin's" \
  grep -q "device plugin $RES ($ROOT/device-plugins/dp\.[0-9]*): connection lost" "$E2E_TMP/agent.log"
regs=$(registrations)
t0=$(now_ms)
start_plugin
if wait_for 15 res_is 2/2; then ok "the plugin started again: allocatable 2 again, $(($(now_ms) - t0)) ms after its start"
else fail "plugin restart" "capacity/allocatable $(node_res capacity)/$(node_res allocatable)"; fi
check "the plugin started again registered once more" [ "$(registrations)" = $((regs + 1)) ]
check "after the plugin's restart: the pod keeps its container" \
  kpod_is one '"\(.status.phase) \(.status.containerStatuses[0].containerID) \(.status.containerStatuses[0].restartCount)"' "Running $ID1 0"
check "after the plugin's restart: nothing allocated again" [ "$(allocates)" = 1 ]

# --- a device a workload uses: a pty through a plugin of the tests' own ----------
# nanolet-fake-device-plugin (test/fakes) registers nanolet.test/pty and answers
# Allocate with the host's pty slave as /dev/ttyTEST. The test holds the pty's
# master: the container says "ping" through the device, the host answers
# "pong" through the master, the container reads it. The answer has the slave
# twice: as a DeviceSpec (runc makes the node and the device cgroup allows it)
# and as a Mount on the same path, because a pty slave opens only through its
# devpts (a node made with mknod elsewhere gives EIO) and runc keeps a mount
# it finds where it would make the node.
FAKE_LOG=$E2E_TMP/fake-plugin.log
PTY_DIR=$E2E_TMP/pty
mkdir -p "$PTY_DIR"
python3 - "$PTY_DIR" <<'PY' &
import os, select, sys, tty
d = sys.argv[1]
m, s = os.openpty()
tty.setraw(s)  # bytes cross as they are: no echo, no line discipline
with open(d + "/name.tmp", "w") as f:
    f.write(os.ttyname(s))
os.rename(d + "/name.tmp", d + "/name")
got = b""
out = open(d + "/read", "ab", buffering=0)
while True:
    if select.select([m], [], [], 1)[0]:
        data = os.read(m, 4096)
        out.write(data)
        got += data
        while b"\n" in got:
            line, got = got.split(b"\n", 1)
            if line.startswith(b"ping "):
                os.write(m, b"pong " + line[5:] + b"\n")
PY
PTY_PID=$!
if wait_for 5 test -s "$PTY_DIR/name"; then
  PTS=$(cat "$PTY_DIR/name")
  "$NANOLET_FAKE_DEVICE_PLUGIN" --resource nanolet.test/pty --device "$PTS:/dev/ttyTEST:rw" --mount "$PTS:/dev/ttyTEST" \
    "$ROOT/device-plugins" >>"$FAKE_LOG" 2>&1 &
  FAKE_PID=$!
  pty_res_is() { [ "$(kubectl get node "$NODE" -o json 2>/dev/null | jq -r '"\(.status.capacity["nanolet.test/pty"]) \(.status.allocatable["nanolet.test/pty"])"')" = "1 1" ]; }
  check "kubectl: the Node shows nanolet.test/pty capacity 1, allocatable 1" wait_for 10 pty_res_is
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: pty, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, 'exec 3<>/dev/ttyTEST || exit 1; echo "ping \$DEVICE_IDS" >&3; read -r line <&3; echo "got: \$line"; trap "exit 0" TERM; while true; do sleep 0.2; done']
    resources: {limits: {nanolet.test/pty: "1"}}
EOF
  if wait_for 60 kpod_is pty .status.phase Running; then ok "kubectl: the pod asking for nanolet.test/pty is Running"
  else fail "pty pod" "$(kpod pty | jq -c .status) $(kubectl logs -n "$PODS_NS" pty 2>&1)"; fi
  check "the container's bytes reach the pty's master on the host" wait_for 10 grep -qx 'ping dev-1' "$PTY_DIR/read"
  pty_logs() { kubectl logs -n "$PODS_NS" pty 2>/dev/null | grep -qx 'got: pong dev-1'; }
  check "kubectl logs: the host's answer through the master reached the container" wait_for 10 pty_logs
  st=$(stat -c '%t:%T' "$PTS")
  check "kubectl exec: /dev/ttyTEST is the host's $PTS (char device $st)" \
    test "$(kubectl exec -n "$PODS_NS" pty -- stat -c '%F %t:%T' /dev/ttyTEST 2>&1)" = "character special file $st"
  check "the plugin was asked to Allocate once for it" [ "$(grep -c '^allocate dev-1$' "$FAKE_LOG")" = 1 ]
  # ResourceHealthStatus: the device's health in the container's status,
  # following the plugin's list (SIGUSR1 turns it over)
  pty_health_is() { [ "$(kpod pty | jq -c '.status.containerStatuses[0].allocatedResourcesStatus')" = "[{\"name\":\"nanolet.test/pty\",\"resources\":[{\"health\":\"$1\",\"resourceID\":\"dev-1\"}]}]" ]; }
  check "kubectl: the container's allocatedResourcesStatus shows dev-1 Healthy" wait_for 10 pty_health_is Healthy
  kill -USR1 "$FAKE_PID"
  check "the plugin's list says dev-1 is Unhealthy: the pod's status says so within 5 s" wait_for 5 pty_health_is Unhealthy
  pty_sick() { [ "$(kubectl get node "$NODE" -o json 2>/dev/null | jq -r '"\(.status.capacity["nanolet.test/pty"]) \(.status.allocatable["nanolet.test/pty"])"')" = "1 0" ]; }
  check "kubectl: the Node's nanolet.test/pty allocatable is 0, capacity 1" wait_for 10 pty_sick
  check "kubectl: the pod keeps running" kpod_is pty .status.phase Running
  kill -USR1 "$FAKE_PID"
  check "healthy again: the pod's status says so" wait_for 5 pty_health_is Healthy
else
  fail "pty" "python3 did not open a pty pair"
fi

# --- GetPreferredAllocation: the plugin chooses -----------------------------------
# A plugin of the tests' own offering GetPreferredAllocation that always
# answers dev-3: the first pod gets dev-3 (not dev-1, the agent's own first
# choice); for the second, dev-3 is taken: the answer is refused, the agent
# says why and the pod gets the agent's choice.
PICK_LOG=$E2E_TMP/pick-plugin.log
"$NANOLET_FAKE_DEVICE_PLUGIN" --resource nanolet.test/pick --count 4 --preferred dev-3 \
  "$ROOT/device-plugins" >>"$PICK_LOG" 2>&1 &
PICK_PID=$!
pick_res_is() { [ "$(kubectl get node "$NODE" -o json 2>/dev/null | jq -r '.status.allocatable["nanolet.test/pick"]')" = 4 ]; }
check "kubectl: the Node shows nanolet.test/pick allocatable 4" wait_for 10 pick_res_is
pick_logs() { kubectl logs -n "$PODS_NS" "$1" 2>/dev/null | grep -qx "ids $2"; }
devpod pick1 1 nanolet.test/pick
check "kubectl logs: the first pod got dev-3, the plugin's choice" wait_for 60 pick_logs pick1 dev-3
check "the plugin was asked with every free device, nothing to keep, size 1" \
  grep -qx 'preferred available=dev-1,dev-2,dev-3,dev-4 must= size=1' "$PICK_LOG"
devpod pick2 1 nanolet.test/pick
check "kubectl logs: the second pod got dev-1 (dev-3 is taken)" wait_for 60 pick_logs pick2 dev-1
check "the agent's log says why it kept its own choice" \
  grep -q 'GetPreferredAllocation of nanolet.test/pick .*device "dev-3" is not available; keeping nanolet.s choice dev-1' "$E2E_TMP/agent.log"
kill "$PICK_PID" 2>/dev/null; wait "$PICK_PID" 2>/dev/null; PICK_PID=

# --- clean-up ------------------------------------------------------------------------
kubectl delete pods -n "$PODS_NS" --all --grace-period=0 --force >/dev/null 2>&1
check "the pods deleted: their sandboxes are removed" wait_for 60 runtime_clear
stop_agent TERM
stop_plugin TERM
kubectl delete node "$NODE" >/dev/null 2>&1
kubectl delete lease -n kube-node-lease "$NODE" >/dev/null 2>&1
if [ -n "$CDI" ]; then
  rm -f "$CDI_SPEC"
  [ -z "$CDI_DIR_MADE" ] || rmdir "$(dirname "$CDI_SPEC")" 2>/dev/null
  check "clean-up: no CDI spec left in the machine's $(dirname "$CDI_SPEC")" test ! -e "$CDI_SPEC"
fi
check "clean-up: no pods, Node or Lease left" \
  test "$(kubectl get pods -n "$PODS_NS" -o name 2>/dev/null)$(kubectl get node "$NODE" -o name 2>/dev/null)$(kubectl get lease -n kube-node-lease "$NODE" -o name 2>/dev/null)" = ""
