#!/usr/bin/env bash
# SupplementalGroupsPolicy (pod securityContext.supplementalGroupsPolicy) on
# the real control plane and containerd, as upstream's specs "Security
# Context SupplementalGroupsPolicy" check it, with an image of our own whose
# /etc/group puts its user 1000 in group 50000 (upstream's agnhost has the
# same). The pods run as 1000 with supplementalGroups [60000] and print
# `id -G`:
#  - the Node's status.features is what the runtime's CRI Status says
#    (`nanolet cri info`): supplementalGroupsPolicy true on containerd 2,
#    nothing on containerd 1.6, which reports no features;
#  - Merge, or no policy: 1000 50000 60000 (the image's group added);
#  - Strict, where the runtime supports it: 1000 60000; where it does not
#    (1.6), the pod is rejected: Failed, reason
#    SupplementalGroupsPolicyNotSupported, upstream's message;
#  - containerStatuses[].user is the runtime's (containerd 2): uid, gid and
#    every group of the process; none from 1.6;
#  - a static pod with a policy other than Merge or Strict is refused, the
#    error naming the field.
# The node name and its kubeconfig come from NANOLET_E2E_SGP_NODE /
# NANOLET_E2E_SGP_KUBECONFIG.
PODS_NS=${NANOLET_E2E_SGP_NS:-nanolet-e2e-sgp}
. "$(dirname "$0")/pods_lib.sh"
. "$(dirname "$0")/../../tools/testenv/oci_layout.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_E2E_SGP_NODE:-nl-sgp}
KC=${NANOLET_E2E_SGP_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
IMG=localhost/nanolet-e2e-groups:1

sgp_cleanup() {
  api_cleanup
  ctr --address "${NANOLET_TEST_CRI_ENDPOINT#unix://}" -n k8s.io images rm "$IMG" >/dev/null 2>&1
}
e2e_on_exit sgp_cleanup
fresh_ns "$PODS_NS"
sa_ready() { kubectl get sa default -n "$PODS_NS" >/dev/null 2>&1; }
wait_for 30 sa_ready || { fail "namespace" "no default ServiceAccount"; exit 1; }

# --- the image: a static busybox, user 1000 in group 50000 --------------------------
r=$E2E_TMP/rootfs
mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/proc" "$r/sys" "$r/dev"
cp /bin/busybox "$r/bin/busybox"
for a in sh id sleep cat; do ln -s busybox "$r/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nuser-in-image:x:1000:1000::/tmp:/bin/sh\n' >"$r/etc/passwd"
printf 'root:x:0:\nuser-in-image:x:1000:\ngroup-in-image:x:50000:user-in-image\n' >"$r/etc/group"
tar -C "$r" -cf "$E2E_TMP/layer.tar" .
oci_layout_init "$E2E_TMP/oci"
oci_image "$E2E_TMP/oci" "$E2E_TMP/layer.tar" 1 '{"Cmd":["sh"]}'
oci_layout_tar "$E2E_TMP/oci" "$E2E_TMP/image.tar"
ctr --address "${NANOLET_TEST_CRI_ENDPOINT#unix://}" -n k8s.io images import \
  ${CONTAINERD_SNAPSHOTTER:+--snapshotter "$CONTAINERD_SNAPSHOTTER"} \
  --base-name localhost/nanolet-e2e-groups "$E2E_TMP/image.tar" >/dev/null 2>"$E2E_TMP/import.log" ||
  { fail "import" "$(tail -3 "$E2E_TMP/import.log")"; exit 1; }

start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1

# --- the Node says what the runtime says ------------------------------------------
CRI_FEATURES=$(cri info | jq -c '.features.supplementalGroupsPolicy // "none"')
node_features() { kubectl get node "$NODE" -o json 2>/dev/null | jq -c '.status.features.supplementalGroupsPolicy // "none"'; }
node_says_cri() { [ "$(node_features)" = "$CRI_FEATURES" ]; }
if wait_for 30 node_says_cri; then ok "the Node's status.features.supplementalGroupsPolicy is the runtime's: $CRI_FEATURES"
else fail "features" "node: $(node_features), CRI Status: $CRI_FEATURES"; fi
RT=$(kubectl get node "$NODE" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')
case $RT in
  containerd://1.6.*) [ "$CRI_FEATURES" = '"none"' ] && ok "containerd 1.6 reports no features" ||
    fail "1.6 features" "$CRI_FEATURES" ;;
  containerd://2.*) [ "$CRI_FEATURES" = true ] && ok "containerd 2 supports SupplementalGroupsPolicy" ||
    fail "containerd 2 features" "$CRI_FEATURES" ;;
  *) fail "runtime" "unexpected runtime $RT" ;;
esac
SUPPORTED=false
[ "$CRI_FEATURES" = true ] && SUPPORTED=true

# --- three pods: no policy, Merge, Strict -------------------------------------------
sgp_pod() { # sgp_pod NAME [POLICY]
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  securityContext:
    runAsUser: 1000
    supplementalGroups: [60000]
    ${2:+supplementalGroupsPolicy: $2}
  containers:
  - name: c
    image: $IMG
    imagePullPolicy: Never
    command: [sh, -c, 'id -G; while :; do sleep 1; done']
EOF
}
sgp_pod nopolicy
sgp_pod merge Merge
sgp_pod strict Strict
phase() { kubectl get pod -n "$PODS_NS" "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
running() { [ "$(phase "$1")" = Running ]; }
user_of() { kubectl get pod -n "$PODS_NS" "$1" -o json | jq -cS '.status.containerStatuses[0].user // "none"'; }
expect_groups() { # expect_groups POD GROUPS...
  local pod=$1 want
  shift
  want="$*"
  if ! wait_for 60 running "$pod"; then fail "$pod" "phase $(phase "$pod")"; return; fi
  logs_are() { [ "$(kubectl logs -n "$PODS_NS" "$pod" 2>/dev/null)" = "$want" ]; }
  wait_for 20 logs_are && ok "$pod: its process' groups are $want" ||
    fail "$pod groups" "log: $(kubectl logs -n "$PODS_NS" "$pod" 2>&1 | head -3)"
  local got
  got=$(kubectl exec -n "$PODS_NS" "$pod" -- id -G 2>&1)
  [ "$got" = "$want" ] && ok "$pod: kubectl exec id -G says $want too" || fail "$pod exec" "$got"
  local user
  user=$(user_of "$pod")
  if [ "$SUPPORTED" = true ]; then
    local groups
    groups=$(printf '%s\n' "$@" | jq -sc .)
    [ "$user" = "{\"linux\":{\"gid\":1000,\"supplementalGroups\":$groups,\"uid\":1000}}" ] &&
      ok "$pod: its status' user is the runtime's: $user" || fail "$pod user" "$user"
  else
    [ "$user" = '"none"' ] && ok "$pod: no user in its status (the runtime reports none)" ||
      fail "$pod user" "$user"
  fi
}
expect_groups nopolicy 1000 50000 60000
expect_groups merge 1000 50000 60000
if [ "$SUPPORTED" = true ]; then
  expect_groups strict 1000 60000
else
  failed() { [ "$(phase strict)" = Failed ]; }
  if wait_for 30 failed; then ok "Strict on a runtime without support: the pod is rejected"
  else fail "strict" "phase $(phase strict)"; fi
  reason=$(kubectl get pod -n "$PODS_NS" strict -o jsonpath='{.status.reason}')
  msg=$(kubectl get pod -n "$PODS_NS" strict -o jsonpath='{.status.message}')
  [ "$reason" = SupplementalGroupsPolicyNotSupported ] && ok "its reason is upstream's: $reason" ||
    fail "reason" "$reason"
  [ "$msg" = "Pod was rejected: SupplementalGroupsPolicy=Strict is not supported in this node" ] &&
    ok "its message is upstream's: $msg" || fail "message" "$msg"
  [ "$(pod_containers "strict" | jq length)" = 0 ] && ok "nothing of it reached the runtime" ||
    fail "strict containers" "$(pod_containers strict)"
fi

# --- a static pod from a file: the error names the field -----------------------------
put bad-sgp <<EOF
apiVersion: v1
kind: Pod
metadata: {name: bad-sgp, namespace: $PODS_NS}
spec:
  securityContext: {supplementalGroupsPolicy: Union}
  containers: [{name: c, image: $IMG}]
EOF
refused() { grep -q 'bad-sgp.yaml: spec.securityContext.supplementalGroupsPolicy: Unsupported value: "Union": supported values: "Merge", "Strict"' "$E2E_TMP/agent.log"; }
if wait_for 15 refused; then ok "a static pod with supplementalGroupsPolicy Union is refused, naming the field"
else fail "static pod" "$(grep bad-sgp "$E2E_TMP/agent.log" | tail -2)"; fi
unput bad-sgp
