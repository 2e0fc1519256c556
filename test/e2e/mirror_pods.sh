#!/usr/bin/env bash
# A static pod on a node of the real control plane: its mirror pod appears in
# kubectl with the config.mirror annotation and an owner reference to the Node;
# its status there is the one nanolet computes (Running, Ready from a readiness
# probe, IPs, startTime, qosClass, container statuses; no observedGeneration);
# the container's log is linked from /var/log/containers; a mirror pod deleted
# with kubectl comes back; a manifest deleted and written again restarts the
# static pod under the same mirror pod; a changed manifest's pod waits for the
# old one's grace period, under the old mirror pod, then replaces both; removing
# the manifest deletes the mirror pod once its pod has terminated.
# NANOLET_E2E_NODE and NANOLET_E2E_NODE_KUBECONFIG choose the node (default: a
# node of its own, with a credential minted here).
PODS_NS=nanolet-e2e-mirror
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_E2E_NODE:-nl-podstatus}
KC=${NANOLET_E2E_NODE_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
IMG=localhost/busybox:1.36
MIRROR=web-$NODE
cleanup() {
  kubectl delete namespace "$PODS_NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  pods_cleanup
}
e2e_on_exit cleanup

mirror() { kubectl get pod -n "$PODS_NS" "$MIRROR" -o json 2>/dev/null; }
mq() { mirror | jq -r "$1" 2>/dev/null; }
mirror_is() { [ "$(mq "$1")" = "$2" ]; }
mirror_gone() { ! kubectl get pod -n "$PODS_NS" "$MIRROR" >/dev/null 2>&1; }

kubectl create namespace "$PODS_NS" >/dev/null 2>&1
kubectl delete node "$NODE" --ignore-not-found >/dev/null

put web <<EOF
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: $IMG
    command: [sleep, "3600"]
    readinessProbe: {exec: {command: ["true"]}, periodSeconds: 1}
EOF

t0=$(date +%s%N)
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP"
if wait_for 30 mirror_is .status.phase Running; then
  ok "the mirror pod is Running in kubectl $((($(date +%s%N) - t0) / 1000000)) ms after start"
else
  fail "mirror pod Running" "$(mirror | jq -c '{metadata: .metadata.name, status}')"
fi
hash=$(refresh_pods; pod web '.metadata.annotations["kubernetes.io/config.hash"]')
check "the config.mirror annotation is the static pod's hash" \
  [ "$(mq '.metadata.annotations["kubernetes.io/config.mirror"]')" = "$hash" ]
node_uid=$(kubectl get node "$NODE" -o jsonpath='{.metadata.uid}')
check "its owner is the Node" \
  [ "$(mq '.metadata.ownerReferences[0] | "\(.apiVersion)/\(.kind)/\(.name)/\(.uid)/\(.controller)"')" = "v1/Node/$NODE/$node_uid/true" ]
if wait_for 20 mirror_is '[.status.conditions[] | select(.type == "Ready" or .type == "ContainersReady") | .status] | join(",")' True,True; then
  ok "Ready and ContainersReady from the readiness probe"
else
  fail "Ready" "$(mq -c .status.conditions)"
fi
check "podIP is the sandbox's" [ "$(mq .status.podIP)" = "$(refresh_pods; pod web .status.podIP)" ]
check "hostIP is --node-ip" [ "$(mq .status.hostIP)" = "$NODE_IP" ]
check "startTime is set" [ "$(mq .status.startTime)" != null ]
check "qosClass" [ "$(mq .status.qosClass)" = BestEffort ]
check "container status: running, ready, started, ids" \
  [ "$(mq '.status.containerStatuses[0] | "\(.name) \(.ready) \(.started) \(.restartCount) \(.state.running != null) \(.containerID | startswith("containerd://")) \(.imageID != "")"')" = "c true true 0 true true true" ]

check "a static pod's status has no observedGeneration" [ "$(mq '.status.observedGeneration // "none"')" = none ]
cid=$(mq '.status.containerStatuses[0].containerID' | sed 's|^containerd://||')
link=/var/log/containers/${MIRROR}_${PODS_NS}_c-$cid.log
check "the container's log is linked from /var/log/containers" \
  [ "$(readlink "$link")" = "$LOGS/${PODS_NS}_${MIRROR}_$(refresh_pods; pod web .metadata.uid)/c/0.log" ]

old_uid=$(mq .metadata.uid)
kubectl delete pod -n "$PODS_NS" "$MIRROR" --wait=false >/dev/null
recreated() { uid=$(mq .metadata.uid); [ -n "$uid" ] && [ "$uid" != null ] && [ "$uid" != "$old_uid" ]; }
if wait_for 30 recreated; then ok "a mirror pod deleted with kubectl is recreated"; else fail "recreate" "$(mq .metadata)"; fi
if wait_for 30 mirror_is .status.phase Running; then ok "the new mirror pod gets the status"; else fail "status of the new mirror pod" "$(mq -c .status)"; fi
check "the static pod kept running (no restart)" [ "$(refresh_pods; pod web '.status.containerStatuses[0].restartCount')" = 0 ]

# The manifest deleted and written again before the file source reads it
# (upstream sees both events): the static pod restarts, its mirror stays.
uid=$(mq .metadata.uid)
cp "$MANIFESTS/web.yaml" "$E2E_TMP/web.yaml" && rm "$MANIFESTS/web.yaml" && cp "$E2E_TMP/web.yaml" "$MANIFESTS/web.yaml"
restarted() { [ "$(mq '.status.containerStatuses[0] | "\(.restartCount) \(.state.running != null)"')" = "1 true" ]; }
if wait_for 30 restarted; then ok "a manifest deleted and written again restarts its pod"; else fail "restart" "$(mq -c .status.containerStatuses)"; fi
check "... under the same mirror pod" [ "$(mq .metadata.uid)" = "$uid" ]

# A changed manifest whose old pod ignores SIGTERM for its 3 s grace period:
# the mirror pod keeps its uid meanwhile, and the new pod runs after it.
graceful() {
  put web <<EOF
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: $PODS_NS, labels: {v: "$1"}}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, 'trap "" TERM; while true; do sleep 1; done']
EOF
}
new_label() { mirror_is '.metadata.labels.v' "$1" && mirror_is .status.phase Running; }
same_uid() { [ "$(mq .metadata.uid)" = "$uid" ]; }
# kept_ms: how long the mirror pod keeps $uid (at most 10 s)
kept_ms() {
  local t0 ; t0=$(date +%s%N)
  while same_uid && [ $(($(date +%s%N) - t0)) -lt 10000000000 ]; do sleep 0.2; done
  echo $((($(date +%s%N) - t0) / 1000000))
}
graceful 1
wait_for 60 new_label 1 || fail "graceful pod" "$(mq -c '{metadata, status}')"
uid=$(mq .metadata.uid)
graceful 2
kept=$(kept_ms)
if [ "$kept" -ge 2500 ]; then ok "the mirror pod keeps its uid for the old pod's grace period (${kept} ms)"; else fail "mirror kept" "${kept} ms"; fi
if wait_for 30 new_label 2; then ok "then the new pod runs under a new mirror pod"; else fail "new mirror" "$(mq -c '{metadata, status}')"; fi

uid=$(mq .metadata.uid)
unput web
kept=$(kept_ms)
if [ "$kept" -ge 2500 ]; then ok "the manifest removed, the mirror pod stays while its pod terminates (${kept} ms)"; else fail "mirror kept on removal" "${kept} ms"; fi
if wait_for 30 mirror_gone; then ok "removing the manifest deletes the mirror pod"; else fail "mirror deleted" "$(mq .metadata)"; fi
