#!/usr/bin/env bash
# Pod user namespaces (`spec.hostUsers: false`, upstream's
# UserNamespacesSupport) on the real control plane and containerd. The node's
# range is the `kubelet` user's subordinate ids (tools/testenv/subids.sh makes
# them: getsubids, the user, /etc/subuid and /etc/subgid).
#  - On a runtime whose default handler supports user namespaces (containerd 2):
#    two pods with hostUsers false run; each one's /proc/self/uid_map and
#    gid_map are "0 H 65536" with H in the kubelet range, a multiple of 65536,
#    different for the two pods, and H is what the pod directory's `userns`
#    file holds; an emptyDir they write is root's inside (idmapped mount); a
#    pod with hostUsers true has the node's users ("0 0 4294967295"); /metrics
#    counts two user-namespaced pods started, no error. Then the agent
#    restarts: a container of the first pod that exits is started again by
#    the new agent with the same H, and a new pod gets a range of its own.
#    A deleted pod's directory and file go.
#  - On containerd 1.6 (it lists no runtime handlers): the pod is refused, never
#    reaches the runtime, with upstream's FailedCreatePodSandBox event and
#    message; /metrics counts its attempts as errors.
# The node name and its kubeconfig: NANOLET_E2E_USERNS_NODE /
# NANOLET_E2E_USERNS_KUBECONFIG.
PODS_NS=${NANOLET_E2E_USERNS_NS:-nanolet-e2e-userns}
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_E2E_USERNS_NODE:-nl-userns}
KC=${NANOLET_E2E_USERNS_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
IMG=localhost/busybox:1.36
e2e_on_exit api_cleanup

range=$("$(dirname "$0")/../../tools/testenv/subids.sh") || { fail "subids" "tools/testenv/subids.sh failed"; exit 1; }
read -r FIRST COUNT <<<"$range"
ok "the kubelet user's subordinate ids (getsubids kubelet): $FIRST, $COUNT of them"
fresh_ns "$PODS_NS"
sa_ready() { kubectl get sa default -n "$PODS_NS" >/dev/null 2>&1; }
wait_for 30 sa_ready || { fail "namespace" "no default ServiceAccount"; exit 1; }
kubectl delete node "$NODE" --ignore-not-found >/dev/null

start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1
grep -q "user namespaces: host ids $FIRST-$((FIRST + COUNT - 1)) for pods, 65536 each;" "$E2E_TMP/agent.log" &&
  ok "the agent's range is the kubelet user's" ||
  fail "range" "$(grep 'user namespaces' "$E2E_TMP/agent.log")"
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
wait_for 30 node_ready || fail "node Ready" "$NODE is not Ready"
handlers() { kubectl get node "$NODE" -o json | jq -c '.status.runtimeHandlers // "none"'; }
has_handlers() { [ "$(handlers)" != '"none"' ]; }
RT=$(kubectl get node "$NODE" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')
case $RT in
  containerd://2.*) wait_for 20 has_handlers ;;
esac
SUPPORTED=$(handlers | jq -r 'if . == "none" then false else (.[] | select(.name == "") | .features.userNamespaces) end')
echo "runtime $RT, its handlers: $(handlers)"

phase() { jget "$1" .status.phase; }
running() { [ "$(phase "$1")" = Running ]; }
userns_pod() { # userns_pod NAME HOSTUSERS
  api_pod "$1" 1 "hostUsers: $2" "volumes: [{name: v, emptyDir: {}}]" "containers:" \
    "- name: c" "  image: $IMG" "  volumeMounts: [{name: v, mountPath: /v}]" \
    "  command: [sh, -c, 'trap \"exit 3\" TERM; cat /proc/self/uid_map /proc/self/gid_map; touch /v/f; stat -c owner=%u /v/f; while :; do sleep 1; done']"
}
metric() { kubectl get --raw "/api/v1/nodes/$NODE/proxy/metrics" 2>/dev/null | awk -v n="$1" '$1 == n { print $2 }'; }
metric_is() { [ "$(metric "$1")" = "$2" ]; }
metric_ge1() { local v; v=$(metric "$1"); [ -n "$v" ] && [ "$v" -ge 1 ]; }
# host_id POD: H of the pod's uid_map line, checked against the gid_map line
host_id() {
  kubectl logs -n "$PODS_NS" "$1" 2>/dev/null | awk 'NR <= 2 { print $2 }' | sort -u | { read -r h && ! read -r _ && echo "$h"; }
}
logs_ready() { [ "$(kubectl logs -n "$PODS_NS" "$1" 2>/dev/null | grep -c .)" -ge 3 ]; }
pod_uid() { jget "$1" .metadata.uid; }

if [ "$SUPPORTED" = true ]; then
  ok "$RT: the default handler supports user namespaces"
  userns_pod a false
  userns_pod b false
  userns_pod host true
  for p in a b host; do
    wait_for 60 running "$p" || fail "$p" "phase $(phase "$p"): $(kubectl get events -n "$PODS_NS" --field-selector involvedObject.name=$p -o jsonpath='{.items[*].message}')"
    wait_for 20 logs_ready "$p" || fail "$p logs" "$(kubectl logs -n "$PODS_NS" "$p" 2>&1 | head -3)"
  done
  HA=$(host_id a)
  HB=$(host_id b)
  for p in a b; do
    h=$(host_id $p)
    line=$(kubectl logs -n "$PODS_NS" $p | head -1 | tr -s ' ' | sed 's/^ //')
    if [ -n "$h" ] && [ "$line" = "0 $h 65536" ] && [ "$h" -ge "$FIRST" ] &&
      [ $((h + 65536)) -le $((FIRST + COUNT)) ] && [ $((h % 65536)) = 0 ]; then
      ok "pod $p: uid_map and gid_map are '0 $h 65536', in the kubelet range"
    else
      fail "pod $p uid_map" "$(kubectl logs -n "$PODS_NS" $p | head -2 | tr '\n' '|')"
    fi
    file=$ROOT/pods/$(pod_uid $p)/userns
    want="{\"uidMappings\":[{\"hostId\":$h,\"containerId\":0,\"length\":65536}],\"gidMappings\":[{\"hostId\":$h,\"containerId\":0,\"length\":65536}]}"
    [ "$(cat "$file" 2>/dev/null)" = "$want" ] && ok "pod $p: its directory's userns file holds its range" ||
      fail "pod $p file" "$(cat "$file" 2>&1)"
    [ "$(kubectl logs -n "$PODS_NS" $p | sed -n 3p)" = owner=0 ] &&
      ok "pod $p: a file it writes in its emptyDir is root's inside (an idmapped mount)" ||
      fail "pod $p emptyDir" "$(kubectl logs -n "$PODS_NS" $p | sed -n 3p)"
  done
  [ -n "$HA" ] && [ "$HA" != "$HB" ] && ok "the two pods have ranges of their own ($HA, $HB)" ||
    fail "overlap" "a: $HA, b: $HB"
  line=$(kubectl logs -n "$PODS_NS" host | head -1 | tr -s ' ' | sed 's/^ //')
  [ "$line" = "0 0 4294967295" ] && ok "hostUsers true: the node's users ($line)" || fail "host" "$line"
  [ ! -e "$ROOT/pods/$(pod_uid host)/userns" ] && ok "hostUsers true: no userns file" || fail "host file" present
  wait_for 10 metric_is kubelet_started_user_namespaced_pods_total 2 &&
    ok "/metrics: kubelet_started_user_namespaced_pods_total 2" ||
    fail "metric" "total $(metric kubelet_started_user_namespaced_pods_total)"
  metric_is kubelet_started_user_namespaced_pods_errors_total 0 &&
    ok "/metrics: kubelet_started_user_namespaced_pods_errors_total 0" ||
    fail "metric errors" "$(metric kubelet_started_user_namespaced_pods_errors_total)"

  # --- an agent restart keeps each pod's range -------------------------------------
  stop_agent TERM
  start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1
  grep -q "user namespaces: host ids .*; 2 allocated" "$E2E_TMP/agent.log" &&
    ok "the restarted agent read the two allocations back" ||
    fail "reload" "$(grep 'user namespaces' "$E2E_TMP/agent.log" | tail -1)"
  restarts() { jget a '.status.containerStatuses[0].restartCount'; }
  kubectl exec -n "$PODS_NS" a -- kill -TERM 1 >/dev/null 2>&1 || fail "exec" "kill -TERM 1 in pod a"
  restarted() { [ "$(restarts)" = 1 ] && running a && logs_ready a; }
  if wait_for 60 restarted; then
    h=$(host_id a)
    [ "$h" = "$HA" ] && ok "pod a's container, started again by the restarted agent, has the same range ($h)" ||
      fail "restart range" "before $HA, after $h: $(kubectl logs -n "$PODS_NS" a | head -2 | tr '\n' '|')"
  else
    fail "restart" "restartCount $(restarts), phase $(phase a)"
  fi
  userns_pod c false
  if wait_for 60 running c && wait_for 20 logs_ready c; then
    HC=$(host_id c)
    [ -n "$HC" ] && [ "$HC" != "$HA" ] && [ "$HC" != "$HB" ] &&
      ok "a pod made after the restart gets a range of its own ($HC)" || fail "pod c" "$HA $HB $HC"
  else
    fail "pod c" "phase $(phase c)"
  fi

  # --- a deleted pod's allocation goes with its directory ----------------------------
  UA=$(pod_uid a)
  kubectl delete pod -n "$PODS_NS" a --wait=false >/dev/null
  dir_gone() { [ ! -e "$ROOT/pods/$UA" ]; }
  wait_for 60 dir_gone && ok "pod a deleted: its directory and userns file are gone" ||
    fail "delete" "$(ls "$ROOT/pods/$UA" 2>&1)"
else
  ok "$RT: the runtime lists no handler supporting user namespaces ($(handlers))"
  userns_pod a false
  ev() { kubectl get events -n "$PODS_NS" --field-selector involvedObject.name=a,reason=FailedCreatePodSandBox -o jsonpath='{.items[0].message}' 2>/dev/null; }
  want="Failed to create pod sandbox: can't set \`spec.hostUsers: false\`, runtime does not support user namespaces"
  has_ev() { [ "$(ev)" = "$want" ]; }
  wait_for 40 has_ev && ok "refused: Warning FailedCreatePodSandBox \"$want\"" || fail "event" "$(ev)"
  sleep 3
  [ "$(phase a)" = Pending ] && ok "the pod stays Pending" || fail "phase" "$(phase a)"
  ! runtime_has_pod a && ok "no sandbox of it reached the runtime: it never ran with the node's users" ||
    fail "runtime" "$(ns_sandboxes | jq -c '[.[].metadata.name]')"
  reason=$(jget a '.status.containerStatuses[0].state.waiting.reason')
  [ "$reason" = ContainerCreating ] && ok "its container waits: ContainerCreating" || fail "waiting" "$reason"
  all_errors() {
    metric_ge1 kubelet_started_user_namespaced_pods_errors_total &&
      [ "$(metric kubelet_started_user_namespaced_pods_total)" = "$(metric kubelet_started_user_namespaced_pods_errors_total)" ]
  }
  wait_for 10 all_errors && ok "/metrics: each attempt counted, each an error ($(metric kubelet_started_user_namespaced_pods_total))" ||
    fail "metrics" "total $(metric kubelet_started_user_namespaced_pods_total), errors $(metric kubelet_started_user_namespaced_pods_errors_total)"
  [ ! -e "$ROOT/pods/$(pod_uid a)/userns" ] && ok "no range was allocated for it" || fail "file" present
fi
