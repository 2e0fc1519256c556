#!/usr/bin/env bash
# Events on the real control plane, as upstream's kubelet sends them: a joined
# nanolet reports node events (Starting, NodeHasSufficientMemory, NodeReady) on
# the Node and pod events (Pulled, Created, Started, BackOff, image pull
# failures, FailedMount, Killing) on static pods and their containers, with
# fieldPath, source and reporting fields; a repeat is the same Event with its
# count raised. Standalone, events
# only go to the log at -v=3.
# EVENTS_NODE / EVENTS_KUBECONFIG: the node and its credential (default: a node
# of this test's own, credential minted with controlplane.sh cert).
PODS_NS=nanolet-e2e-events
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${EVENTS_NODE:-nl-events}
KC=${EVENTS_KUBECONFIG:-$(node_kubeconfig "$NODE")}
IMG=localhost/busybox:1.36
LOG=$E2E_TMP/agent.log
cleanup() {
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  kubectl delete events -n default --field-selector involvedObject.name="$NODE" >/dev/null 2>&1
  pods_cleanup
  kubectl delete ns "$PODS_NS" --wait=false >/dev/null 2>&1
}
e2e_on_exit cleanup

fresh_ns "$PODS_NS"
kubectl delete node "$NODE" --ignore-not-found >/dev/null
kubectl delete events -n default --field-selector involvedObject.name="$NODE" >/dev/null 2>&1

put web <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: app, image: $IMG, command: [sleep, "3600"]}
  - {name: crash, image: $IMG, command: [sh, -c, "exit 3"]}
EOF2

# The image that cannot be pulled in a pod of its own: its back-off events
# would otherwise share web's spam-filter budget with the crash loop's.
put pullfail <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: pullfail, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: missing, image: localhost/no-such-image:1}]
EOF2

put badvol <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: badvol, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: $IMG, command: [sleep, "3600"]}]
  volumes: [{name: v, hostPath: {path: /nonexistent-nanolet-e2e, type: Directory}}]
EOF2

# A pod of its own for Killing: web's crash loop and image back-off spend its
# spam-filter budget (25 events per object), as upstream's would.
put quiet <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: quiet, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: app, image: $IMG, command: [sleep, "3600"]}]
EOF2

start_agent --kubeconfig "$KC" --node-ip "$NODE_IP"
# events NS FIELD-SELECTOR: the Events as JSON items
events() { kubectl get events -n "$1" --field-selector "$2" -o json 2>/dev/null | jq -c '.items'; }
has_event() { # has_event NS SELECTOR JQ-FILTER
  [ "$(events "$1" "$2" | jq "[.[] | select($3)] | length")" -gt 0 ]
}

# --- node events -------------------------------------------------------------
sel="involvedObject.kind=Node,involvedObject.name=$NODE"
check "node event: Starting kubelet." wait_for 20 has_event default "$sel" '.reason == "Starting" and .message == "Starting kubelet."'
check "node event: NodeHasSufficientMemory" wait_for 5 has_event default "$sel" \
  ".reason == \"NodeHasSufficientMemory\" and .message == \"Node $NODE status is now: NodeHasSufficientMemory\""
check "node event: NodeReady" wait_for 20 has_event default "$sel" '.reason == "NodeReady"'
ev=$(events default "$sel" | jq -c '[.[] | select(.reason == "NodeReady")][0]')
check "node event: involvedObject uid is the node name, no namespace" \
  [ "$(jq -r '.involvedObject | "\(.uid) \(.namespace // "")"' <<<"$ev")" = "$NODE " ]
check "node event: source and reporting fields" \
  [ "$(jq -r '"\(.source.component) \(.source.host) \(.reportingComponent) \(.reportingInstance)"' <<<"$ev")" = "kubelet $NODE kubelet $NODE" ]

# --- pod events --------------------------------------------------------------
pod="web-$NODE"
psel="involvedObject.name=$pod"
fp() { echo "involvedObject.fieldPath=spec.containers{$1}"; }
check "pod event: Pulled (already present)" wait_for 30 has_event "$PODS_NS" "$psel,$(fp app)" \
  ".reason == \"Pulled\" and .message == \"Container image \\\"$IMG\\\" already present on machine and can be accessed by the pod\""
check "pod event: Created" wait_for 5 has_event "$PODS_NS" "$psel,$(fp app)" '.reason == "Created" and .message == "Container created"'
check "pod event: Started" wait_for 5 has_event "$PODS_NS" "$psel,$(fp app)" '.reason == "Started" and .message == "Container started"'
ev=$(events "$PODS_NS" "$psel,$(fp app)" | jq -c '[.[] | select(.reason == "Started")][0]')
uid=$(uid_of web)
check "pod event: involvedObject names the static pod" \
  [ "$(jq -r '.involvedObject | "\(.kind) \(.apiVersion) \(.namespace) \(.name) \(.uid)"' <<<"$ev")" = "Pod v1 $PODS_NS $pod $uid" ]
check "pod event: image pull failure" wait_for 30 has_event "$PODS_NS" "involvedObject.name=pullfail-$NODE,$(fp missing)" \
  '.reason == "Failed" and (.message | startswith("Failed to pull image \"localhost/no-such-image:1\""))'
check "pod event: Error: ErrImagePull" wait_for 5 has_event "$PODS_NS" "involvedObject.name=pullfail-$NODE,$(fp missing)" \
  '.type == "Warning" and .reason == "Failed" and .message == "Error: ErrImagePull"'
check "pod event: image back-off" wait_for 30 has_event "$PODS_NS" "involvedObject.name=pullfail-$NODE,$(fp missing)" \
  '.reason == "BackOff" and .message == "Back-off pulling image \"localhost/no-such-image:1\""'
check "pod event: crash-loop BackOff" wait_for 40 has_event "$PODS_NS" "$psel,$(fp crash)" \
  ".reason == \"BackOff\" and .message == \"Back-off restarting failed container crash in pod ${pod}_$PODS_NS($uid)\""
# the second start of the crashing container is the same Event, count 2
check "pod event: a repeat raises the count" wait_for 40 has_event "$PODS_NS" "$psel,$(fp crash)" \
  '.reason == "Started" and .count >= 2 and .firstTimestamp != .lastTimestamp'
check "pod event: FailedMount" wait_for 20 has_event "$PODS_NS" "involvedObject.name=badvol-$NODE" \
  '.type == "Warning" and .reason == "FailedMount" and (.message | startswith("Unable to attach or mount volumes: ")) and (.message | contains("/nonexistent-nanolet-e2e"))'
n=$(kubectl get events -n "$PODS_NS" --field-selector "$psel" -o json | jq '.items | length')
if [ "$n" -le 25 ]; then ok "a crash-looping pod makes $n Event objects"; else fail "bounded events" "$n Event objects"; fi
quiet_running() { has_event "$PODS_NS" "involvedObject.name=quiet-$NODE,$(fp app)" '.reason == "Started"'; }
wait_for 30 quiet_running
unput quiet
check "pod event: Killing when the pod goes" wait_for 20 has_event "$PODS_NS" "involvedObject.name=quiet-$NODE,$(fp app)" \
  '.reason == "Killing" and .message == "Stopping container app"'
unput web
stop_agent TERM
check "the agent says nothing of a failure to send events" bash -c "! grep -q 'unable to write event\|server rejected event' '$LOG'"

# --- standalone: the log only ------------------------------------------------------
: >"$LOG"
start_agent -v=3
check "standalone: no events are sent" wait_for 10 grep -q "No api server defined - no events will be sent to API server" "$LOG"
check "standalone: events are logged at -v=3" wait_for 20 grep -q "Event occurred object=\"$PODS_NS/badvol-$NODE\" fieldPath=\"\" kind=\"Pod\" apiVersion=\"v1\" type=\"Warning\" reason=\"FailedMount\" message=\"Unable to attach or mount volumes: " "$LOG"
