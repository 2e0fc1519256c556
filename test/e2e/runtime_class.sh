#!/usr/bin/env bash
# RuntimeClass on the real control plane and containerd: a joined nanolet
# watches the RuntimeClasses; a pod naming a class whose handler is runc runs,
# its sandbox made with handler runc (the runtime's own listing says so) while
# a pod without a class gets the default handler ""; a class whose handler the
# runtime does not have leaves its pod Pending with a FailedCreatePodSandBox
# event naming the handler and no sandbox; a class deleted before the node
# sees its pod leaves the pod Pending with the event `runtimeclass.node.k8s.io
# "NAME" not found`, and once the class exists again the pod starts (the
# failed sync is retried). The API server's RuntimeClass admission refuses a
# pod naming a class that does not exist, hence the deletion.
# RTCLASS_NODE / RTCLASS_KUBECONFIG: the node and its credential (default: a
# node of this test's own, credential minted with controlplane.sh cert).
PODS_NS=nanolet-e2e-rtclass
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${RTCLASS_NODE:-nl-rtclass}
KC=${RTCLASS_KUBECONFIG:-$(node_kubeconfig "$NODE")}
IMG=localhost/busybox:1.36
RC=nanolet-e2e-rtc # the classes' prefix (they are cluster-scoped)
HANDLER=nanolet-e2e-no-such-handler
cleanup() {
  kubectl delete runtimeclass "$RC-runc" "$RC-unknown" "$RC-late" --ignore-not-found \
    --wait=false >/dev/null 2>&1
  api_cleanup
}
e2e_on_exit cleanup

runtimeclass() { # runtimeclass NAME HANDLER
  kubectl apply -f - >/dev/null <<EOF2
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: $1}
handler: $2
EOF2
}
sleeper() { # sleeper NAME [CLASS]
  api_pod "$1" 1 ${2:+"runtimeClassName: $2"} \
    "containers: [{name: c, image: $IMG, command: [sleep, '3600']}]"
}
# sandbox_handler POD: the runtime handler of the pod's sandbox, as the
# runtime lists it ("none" without a sandbox).
sandbox_handler() {
  cri pods -o json | jq -r --arg ns "$PODS_NS" --arg n "$1" \
    '[.items[] | select(.metadata.namespace == $ns and .metadata.name == $n)] |
     if length == 0 then "none" else .[0].runtimeHandler end'
}
handler_is() { [ "$(sandbox_handler "$1")" = "$2" ]; }
# event_message POD: the messages of the pod's FailedCreatePodSandBox events.
event_message() {
  kubectl get events -n "$PODS_NS" -o json \
    --field-selector "involvedObject.kind=Pod,involvedObject.name=$1,reason=FailedCreatePodSandBox" |
    jq -r '.items[].message'
}
event_has() { event_message "$1" | grep -qF -- "$2"; }
AGENT_FLAGS=()

kubectl delete runtimeclass "$RC-runc" "$RC-unknown" "$RC-late" --ignore-not-found >/dev/null 2>&1
runtimeclass "$RC-runc" runc
runtimeclass "$RC-unknown" "$HANDLER"
join_agent "$KC" || { fail "agent start" ""; exit 1; }
AGENT_FLAGS=(--config "$E2E_TMP/config.yaml" --kubeconfig "$KC" --node-ip "$NODE_IP")

sleeper classed "$RC-runc"
sleeper plain
expect_api "a pod with RuntimeClass $RC-runc (handler runc) runs" 60 classed .status.phase Running
check "  its sandbox has runtime handler runc" handler_is classed runc
expect_api "a pod without a RuntimeClass runs" 60 plain .status.phase Running
check "  its sandbox has the default runtime handler \"\"" handler_is plain ""

sleeper unknown "$RC-unknown"
if wait_for 60 event_has unknown "$HANDLER"; then
  ok "a handler the runtime does not have: FailedCreatePodSandBox naming it"
else
  fail "a handler the runtime does not have: FailedCreatePodSandBox naming it" \
    "events: $(event_message unknown)"
fi
check "  the event says 'Failed to create pod sandbox: '" event_has unknown "Failed to create pod sandbox: "
check "  the pod stays Pending" jget_is unknown .status.phase Pending
check "  and has no sandbox" handler_is unknown none

# A class gone before the node sees the pod: stopped, the node misses the pod's
# creation and the class's deletion.
stop_agent TERM
runtimeclass "$RC-late" runc
sleeper late "$RC-late"
kubectl delete runtimeclass "$RC-late" --wait=true >/dev/null
start_agent "${AGENT_FLAGS[@]}" || { fail "agent restart" ""; exit 1; }
want="Failed to create pod sandbox: runtimeclass.node.k8s.io \"$RC-late\" not found"
if wait_for 60 event_has late "$want"; then
  ok "a RuntimeClass not found: FailedCreatePodSandBox '$want'"
else
  fail "a RuntimeClass not found: FailedCreatePodSandBox '$want'" "events: $(event_message late)"
fi
sleep 3
check "  the pod stays Pending" jget_is late .status.phase Pending
check "  and has no sandbox" handler_is late none
check "  the running pods carry on" jget_is classed .status.phase Running
runtimeclass "$RC-late" runc
expect_api "the class created: the pod starts (its sync retried)" 90 late .status.phase Running
check "  its sandbox has runtime handler runc" handler_is late runc

