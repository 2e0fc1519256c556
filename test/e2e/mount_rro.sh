#!/usr/bin/env bash
# Recursive read-only mounts (volumeMounts[].recursiveReadOnly), on the real
# control plane and containerd, as upstream's node specs "Mount recursive
# read-only" check them. The Node's status.runtimeHandlers is what the
# runtime's CRI Status lists (`nanolet cri info`): none on containerd 1.6, the
# default handler "" and runc with recursiveReadOnlyMounts on containerd 2.
# Upstream's pod: an init container mounts a tmpfs in an emptyDir through a
# Bidirectional mount, the next one mounts that emptyDir five ways (Enabled,
# IfPossible, Disabled, read-only, read-write) and touches a file in the tmpfs
# below each, the last unmounts it.
#  - runtime without support (1.6): a pod asking Enabled waits with
#    CreateContainerConfigError and upstream's message; without the Enabled
#    mount the pod succeeds, every touch succeeding (IfPossible is plain
#    read-only), its status' volumeMounts Disabled for each read-only mount
#    and without recursiveReadOnly for the read-write one;
#  - runtime with support (containerd 2): the touches below Enabled and
#    IfPossible fail with "Read-only file system", the others succeed, and
#    the statuses say Enabled, Enabled, Disabled, Disabled, none.
# A static pod asking recursiveReadOnly without readOnly is refused, the error
# naming the field. The node name and its kubeconfig come from
# NANOLET_E2E_RRO_NODE / NANOLET_E2E_RRO_KUBECONFIG.
PODS_NS=${NANOLET_E2E_RRO_NS:-nanolet-e2e-rro}
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_E2E_RRO_NODE:-nl-rro}
KC=${NANOLET_E2E_RRO_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
IMG=localhost/busybox:1.36
MSG='failed to resolve recursive read-only mode: volume "mnt" requested recursive read-only mode, but it is not supported by the runtime'

e2e_on_exit api_cleanup
fresh_ns "$PODS_NS"
sa_ready() { kubectl get sa default -n "$PODS_NS" >/dev/null 2>&1; }
wait_for 30 sa_ready || { fail "namespace" "no default ServiceAccount"; exit 1; }

start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1

# --- the Node says what the runtime says -------------------------------------------
CRI_HANDLERS=$(cri info | jq -cS '.runtimeHandlers')
node_handlers() { kubectl get node "$NODE" -o json 2>/dev/null | jq -cS '.status.runtimeHandlers // []'; }
node_says_cri() { [ "$(node_handlers)" = "$CRI_HANDLERS" ]; }
if wait_for 30 node_says_cri; then ok "the Node's runtimeHandlers are the runtime's: $CRI_HANDLERS"
else fail "runtimeHandlers" "node: $(node_handlers), CRI Status: $CRI_HANDLERS"; fi
# Reported once: a status round that finds them unchanged patches nothing
# (checked at the end, two rounds later at least); nor is a finished pod's
# status, its volumeMounts equal to the API's.
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
wait_for 30 node_ready
node_rv() { kubectl get node "$NODE" -o jsonpath='{.metadata.resourceVersion}'; }
RV0=$(node_rv) T0=$SECONDS
RT=$(kubectl get node "$NODE" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')
SUPPORTED=$(jq -r '[.[] | select(.name == "") | .features.recursiveReadOnlyMounts][0] // false' <<<"$CRI_HANDLERS")
case $RT in
  containerd://1.6.*) [ "$SUPPORTED" = false ] && ok "containerd 1.6: no recursive read-only support listed" ||
    fail "1.6 support" "$CRI_HANDLERS" ;;
  containerd://2.*) [ "$SUPPORTED" = true ] && ok "containerd 2: the default handler supports recursive read-only mounts" ||
    fail "containerd 2 support" "$CRI_HANDLERS" ;;
  *) fail "runtime" "unexpected runtime $RT" ;;
esac

# --- upstream's pod: a tmpfs below the mounts ---------------------------------------
if [ "$SUPPORTED" = true ]; then
  TEST='for f in rro rro-if-possible; do touch /mnt-$f/tmpfs/foo 2>&1 | grep "Read-only"; done
for f in rro-disabled ro rw; do touch /mnt-$f/tmpfs/foo; done'
  RRO_MOUNT='- {name: mnt, mountPath: /mnt-rro, readOnly: true, mountPropagation: None, recursiveReadOnly: Enabled}'
else
  TEST='for f in rro-if-possible rro-disabled ro rw; do touch /mnt-$f/tmpfs/foo; done'
  RRO_MOUNT=
fi
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: rro, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: mount
    image: $IMG
    command: [sh, -euxc, 'mkdir -p /mnt/tmpfs && mount -t tmpfs none /mnt/tmpfs']
    securityContext: {privileged: true}
    volumeMounts: [{name: mnt, mountPath: /mnt, mountPropagation: Bidirectional}]
  - name: test
    image: $IMG
    command:
    - sh
    - -euxc
    - |
$(sed 's/^/      /' <<<"$TEST")
    volumeMounts:
    $RRO_MOUNT
    - {name: mnt, mountPath: /mnt-rro-if-possible, readOnly: true, recursiveReadOnly: IfPossible}
    - {name: mnt, mountPath: /mnt-rro-disabled, readOnly: true, recursiveReadOnly: Disabled}
    - {name: mnt, mountPath: /mnt-ro, readOnly: true}
    - {name: mnt, mountPath: /mnt-rw}
  - name: unmount
    image: $IMG
    command: [umount, /mnt/tmpfs]
    securityContext: {privileged: true}
    volumeMounts: [{name: mnt, mountPath: /mnt, mountPropagation: Bidirectional}]
  containers:
  - {name: completion, image: $IMG, command: [echo, OK]}
  volumes: [{name: mnt, emptyDir: {}}]
EOF
phase() { kubectl get pod -n "$PODS_NS" "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
done_() { [[ $(phase "$1") =~ ^(Succeeded|Failed)$ ]]; }
wait_for 90 done_ rro
test_log() { kubectl logs -n "$PODS_NS" rro -c test 2>&1 | tail -20; }
if [ "$(phase rro)" = Succeeded ]; then ok "the pod succeeded: every touch in its test container went as expected"
else fail "rro pod" "phase $(phase rro); test: $(test_log)"; fi
if [ "$SUPPORTED" = true ]; then
  [ "$(test_log | grep -c '^touch: .*Read-only file system')" = 2 ] &&
    ok "below Enabled and IfPossible the tmpfs is read-only" || fail "read-only tmpfs" "$(test_log)"
fi
vm_status() {
  kubectl get pod -n "$PODS_NS" rro -o json | jq -c '[.status.initContainerStatuses[1].volumeMounts[]
    | select(.name == "mnt") | [.mountPath, (.readOnly // false), (.recursiveReadOnly // "-")]]'
}
if [ "$SUPPORTED" = true ]; then
  want='[["/mnt-rro",true,"Enabled"],["/mnt-rro-if-possible",true,"Enabled"],["/mnt-rro-disabled",true,"Disabled"],["/mnt-ro",true,"Disabled"],["/mnt-rw",false,"-"]]'
else
  want='[["/mnt-rro-if-possible",true,"Disabled"],["/mnt-rro-disabled",true,"Disabled"],["/mnt-ro",true,"Disabled"],["/mnt-rw",false,"-"]]'
fi
pod_rv() { kubectl get pod -n "$PODS_NS" rro -o jsonpath='{.metadata.resourceVersion}'; }
POD_RV=$(pod_rv)
got=$(vm_status)
[ "$got" = "$want" ] && ok "the test container's status volumeMounts: $got" || fail "volumeMounts" "got $got, want $want"
sa=$(kubectl get pod -n "$PODS_NS" rro -o json | jq -c '[.status.initContainerStatuses[1].volumeMounts[]
  | select(.name | startswith("kube-api-access-")) | [.mountPath, .readOnly, .recursiveReadOnly]]')
[ "$sa" = '[["/var/run/secrets/kubernetes.io/serviceaccount",true,"Disabled"]]' ] &&
  ok "the service account token mount is listed too (read-only, Disabled)" || fail "token mount status" "$sa"
comp=$(kubectl get pod -n "$PODS_NS" rro -o json | jq -c '[.status.containerStatuses[0].volumeMounts[].name | select(. == "mnt")]')
[ "$comp" = '[]' ] && ok "a container without the volume lists no mount of it" || fail "completion mounts" "$comp"

# --- Enabled -------------------------------------------------------------------------
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: enabled, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: busybox
    image: $IMG
    command: [sh, -c, 'touch /mnt/x 2>&1; echo done']
    volumeMounts: [{name: mnt, mountPath: /mnt, readOnly: true, recursiveReadOnly: Enabled}]
  volumes: [{name: mnt, emptyDir: {}}]
EOF
waiting() { kubectl get pod -n "$PODS_NS" enabled -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}' 2>/dev/null; }
config_error() { [ "$(waiting)" = CreateContainerConfigError ]; }
if [ "$SUPPORTED" = true ]; then
  if wait_for 60 done_ enabled && [ "$(phase enabled)" = Succeeded ]; then
    out=$(kubectl logs -n "$PODS_NS" enabled 2>&1)
    [[ $out == *"Read-only file system"* ]] && ok "Enabled: the container runs, its mount read-only" ||
      fail "Enabled mount" "$out"
  else fail "Enabled" "phase $(phase enabled), waiting $(waiting)"; fi
else
  if wait_for 60 config_error; then ok "Enabled without support: CreateContainerConfigError"
  else fail "Enabled" "waiting reason: $(waiting); phase $(phase enabled)"; fi
  m=$(kubectl get pod -n "$PODS_NS" enabled -o jsonpath='{.status.containerStatuses[0].state.waiting.message}')
  [ "$m" = "$MSG" ] && ok "its message is upstream's: $m" || fail "message" "$m"
  st=$(kubectl get pod -n "$PODS_NS" enabled -o jsonpath='{.status.containerStatuses[0].volumeMounts[0].recursiveReadOnly}')
  [ "$st" = Disabled ] && ok "its status says Disabled (as upstream: not resolvable)" || fail "Enabled status" "$st"
  ev=$(kubectl get events -n "$PODS_NS" --field-selector involvedObject.name=enabled -o json |
    jq -r '[.items[] | select(.reason == "Failed") | .message][0] // ""')
  [[ $ev == *"$MSG"* ]] && ok "a Failed event says so: $ev" || fail "event" "$ev"
fi

# --- a static pod from a file: the error names the field -----------------------------
put bad-rro <<EOF
apiVersion: v1
kind: Pod
metadata: {name: bad-rro, namespace: $PODS_NS}
spec:
  containers:
  - name: c
    image: $IMG
    volumeMounts: [{name: mnt, mountPath: /mnt, recursiveReadOnly: IfPossible}]
  volumes: [{name: mnt, emptyDir: {}}]
EOF
refused() { grep -q 'bad-rro.yaml: spec.containers\[0\].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when readOnly is true' "$E2E_TMP/agent.log"; }
if wait_for 15 refused; then ok "a static pod with recursiveReadOnly on a read-write mount is refused, naming the field"
else fail "static pod" "$(grep bad-rro "$E2E_TMP/agent.log" | tail -2)"; fi
unput bad-rro

# --- neither the Node nor the finished pod was patched again --------------------------
[ $((SECONDS - T0)) -lt 22 ] && sleep $((22 - (SECONDS - T0)))
[ "$(node_rv)" = "$RV0" ] && ok "no Node status patch in $((SECONDS - T0)) s: the handlers compare equal to the Node's" ||
  fail "Node patched" "resourceVersion $RV0 -> $(node_rv): $(kubectl get node "$NODE" -o json | jq -c '.status.runtimeHandlers')"
[ "$(pod_rv)" = "$POD_RV" ] && ok "the finished pod's status (its volumeMounts) was not patched again" ||
  fail "pod patched" "resourceVersion $POD_RV -> $(pod_rv)"
