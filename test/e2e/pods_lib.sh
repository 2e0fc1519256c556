# shellcheck shell=bash
# Shared by the pods_*.sh end-to-end tests (not a test itself): one nanolet run
# on the test containerd with a static pod directory, /pods and runtime
# queries, and a clean-up that leaves the runtime without any pod the script
# made. Each script sets PODS_NS (a namespace prefixed nanolet-e2e-) first.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${NANOLET_TEST_CRI_ENDPOINT:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
: "${PODS_NS:?set PODS_NS before sourcing pods_lib.sh}"
NODE=e2e-node
MANIFESTS=$E2E_TMP/manifests
ROOT=$E2E_TMP/root
LOGS=/var/log/pods
AGENT_PID=
PORT=
# Where start_agent sends the agent's output (a script may set it first).
AGENT_LOG=${AGENT_LOG:-$E2E_TMP/agent.log}
mkdir -p "$MANIFESTS"

# start_agent [EXTRA FLAGS...]: nanolet in the background, waits for /healthz.
start_agent() {
  PORT=$(free_port)
  server_flags "$ROOT"
  # shellcheck disable=SC2086
  "$NANOLET" --healthz-port "$PORT" $SERVER_FLAGS --pod-manifest-path "$MANIFESTS" \
    --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" --root-dir "$ROOT" \
    --hostname-override "$NODE" --file-check-frequency 1s $CGROUP_ROOT_FLAG "$@" \
    >>"$AGENT_LOG" 2>&1 &
  AGENT_PID=$!
  wait_for 10 healthz_ok "$PORT" || { echo "agent did not start:"; tail -20 "$AGENT_LOG"; return 1; }
}
# An agent's pods under a cgroup root of their own (--cgroup-root ROOT, as
# tools/conformance.sh), so that the agents of tests that run at the same time
# (tools/test.sh runs the containerd 2 subset beside the 1.6 suite) never meet
# in one kubepods, where each would set the QoS cgroups for its own pods.
# NANOLET_TEST_CGROUP_ROOT (tools/e2e-runtime.sh) gives every agent of a run
# one (CGROUP_ROOT_FLAG; a later --cgroup-root wins); KUBEPODS is where their
# pods go. cgroup_root_make ROOT and cgroup_root_remove ROOT: the root in
# every hierarchy, and its removal with the kubepods tree the agent made
# (tools/testenv/cgroup-root.sh).
CGROUP_ROOT_FLAG=${NANOLET_TEST_CGROUP_ROOT:+--cgroup-root $NANOLET_TEST_CGROUP_ROOT}
KUBEPODS=${NANOLET_TEST_CGROUP_ROOT:-}/kubepods
E2E_CGROUP_ROOT_SH=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/tools/testenv/cgroup-root.sh
cgroup_root_make() { "$E2E_CGROUP_ROOT_SH" make "$1"; }
cgroup_root_remove() { "$E2E_CGROUP_ROOT_SH" remove "$1"; }
# join_agent KUBECONFIG [EXTRA FLAGS...]: start_agent as node NODE of the test
# cluster on NODE_IP, in a fresh PODS_NS, with a configuration file as
# clusters run the kubelet: the file's defaults (webhook authentication and
# authorization; the flags alone are AlwaysAllow) and the cluster CA for
# client certificates.
join_agent() {
  local kc=$1
  shift
  cat >"$E2E_TMP/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  x509: {clientCAFile: $NANOLET_TEST_K8S_CA}
EOF
  kubectl delete node "$NODE" --ignore-not-found >/dev/null
  fresh_ns "$PODS_NS"
  start_agent --config "$E2E_TMP/config.yaml" --kubeconfig "$kc" --node-ip "$NODE_IP" "$@"
}
stop_agent() { # stop_agent [SIGNAL]: default TERM; waits for the exit, returns its status
  [ -n "$AGENT_PID" ] || return 0
  kill -"${1:-TERM}" "$AGENT_PID" 2>/dev/null
  wait "$AGENT_PID" 2>/dev/null
  local rc=$?
  AGENT_PID=
  return $rc
}

cri() { "$NANOLET" cri -r "$NANOLET_TEST_CRI_ENDPOINT" "$@"; }
# Sandboxes of this script's namespace made since it started (JSON array), all
# states. An older one is an earlier run's whose agent and root-dir are gone (a
# run killed before its clean-up): no agent of this run touches it (a runtime
# pod without a directory under its root-dir is another agent's), so it is
# neither this run's to find nor to clean up (see note_stale).
E2E_T0=$(date +%s%N)
all_ns_sandboxes() { cri pods -o json | jq --arg ns "$PODS_NS" '[.items[] | select(.metadata.namespace == $ns)]'; }
ns_sandboxes() { all_ns_sandboxes | jq --argjson t0 "$E2E_T0" '[.[] | select((.createdAt | tonumber) >= $t0)]'; }
# The clean-ups name the earlier runs' sandboxes: no agent removes them any
# more, a runtime tool (ctr, crictl) must.
note_stale() {
  local stale
  stale=$(all_ns_sandboxes | jq -r --argjson t0 "$E2E_T0" '[.[] | select((.createdAt | tonumber) < $t0) | .metadata.name] | join(" ")')
  [ -z "$stale" ] || echo "note: sandboxes of an earlier run in $PODS_NS, not this run's: $stale"
}
# Containers of one pod (static pod name, with the node suffix), all states.
pod_containers() {
  cri ps -a -o json | jq --arg n "$1" --arg ns "$PODS_NS" '[.containers[]
    | select(.labels["io.kubernetes.pod.name"] == $n and .labels["io.kubernetes.pod.namespace"] == $ns)]'
}
runtime_has_ns() { [ "$(ns_sandboxes | jq length)" -gt 0 ]; }
# (a failed query is not "clear": containerd busy with other tests' pods)
runtime_clear() { local n; n=$(ns_sandboxes | jq length) && [ "$n" = 0 ]; }
runtime_has_pod() { [ "$(ns_sandboxes | jq --arg n "$1" '[.[] | select(.metadata.name == $n)] | length')" -gt 0 ]; }

# poll_instances POD FILE: in the background (its pid in POLLER), the
# instances of POD's containers as the runtime stamps them, one line each,
# "attempt createdAt finishedAt" (ns; finishedAt 0 while it runs), appended to
# FILE: a crash-loop back-off is measured on the runtime's clock, from an
# instance's exit to the next one's creation, not on the script's, which a
# busy machine delays. The runtime keeps the last dead instance beside the new
# one: a look every 0.3 s sees every instance exited.
poll_instances() {
  ( declare -A done=()
    while :; do
      for id in $(pod_containers "$1" 2>/dev/null | jq -r '.[].id' 2>/dev/null); do
        [ -z "${done[$id]:-}" ] || continue
        row=$(cri inspect -o json "$id" 2>/dev/null |
          jq -r '.status | "\(.metadata.attempt // 0) \(.createdAt // 0) \(.finishedAt // 0)"' 2>/dev/null)
        [[ $row =~ ^[0-9]+\ [0-9]+\ [0-9]+$ ]] || continue
        echo "$row" >>"$2"
        [ "${row##* }" = 0 ] || done[$id]=1
      done
      sleep 0.3
    done
  ) &
  POLLER=$!
}

# put NAME: writes the manifest read from stdin as NAME.yaml (atomically).
put() { cat >"$MANIFESTS/.$1.tmp" && mv "$MANIFESTS/.$1.tmp" "$MANIFESTS/$1.yaml"; }
unput() { rm -f "$MANIFESTS/$1.yaml"; }

# pod NAME JQ: evaluates JQ on the /pods item of static pod NAME-e2e-node
# (null when absent). Uses a cache refreshed by refresh_pods.
PODS_JSON='{"items":[]}'
refresh_pods() { PODS_JSON=$(curl -fsS "http://127.0.0.1:$RO_PORT/pods") || PODS_JSON='{"items":[]}'; }
pod() {
  jq -r --arg n "$1-$NODE" --arg ns "$PODS_NS" \
    "(.items[] | select(.metadata.name == \$n and .metadata.namespace == \$ns) | $2) // null" \
    <<<"$PODS_JSON" 2>/dev/null | head -1
}
# pod_is NAME JQ VALUE: refreshes and compares (for wait_for).
pod_is() { refresh_pods; [ "$(pod "$1" "$2")" = "$3" ]; }
pod_matches() { refresh_pods; [[ "$(pod "$1" "$2")" =~ $3 ]]; }
uid_of() { refresh_pods; pod "$1" .metadata.uid; }

# expect NAME SECONDS POD JQ VALUE: waits for the value, then ok/fail.
expect() {
  local name=$1 secs=$2 p=$3 q=$4 v=$5
  if wait_for "$secs" pod_is "$p" "$q" "$v"; then ok "$name"; else fail "$name" "$q = $(pod "$p" "$q"), want $v"; fi
}
expect_re() {
  local name=$1 secs=$2 p=$3 q=$4 v=$5
  if wait_for "$secs" pod_matches "$p" "$q" "$v"; then ok "$name"; else fail "$name" "$q = $(pod "$p" "$q"), want /$v/"; fi
}

# api_pod NAME GRACE [SPEC LINES...]: applies pod NAME in $PODS_NS, bound to
# node $NODE, without a service-account token volume (another issue's work),
# with terminationGracePeriodSeconds GRACE; each further line is one of its
# spec's.
api_pod() {
  local name=$1 grace=$2
  shift 2
  { cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: $grace
EOF
    printf '  %s\n' "$@"; } | kubectl apply -f - >/dev/null
}

# The namespace's API pods force-deleted and their sandboxes removed by the
# agent (started again with credential $KC when it is not running and any are
# left), which then stops; sandboxes still there are a failure.
# jget POD JQ: JQ over API pod POD of $PODS_NS ("" when it is absent).
# expect_api NAME SECONDS POD JQ VALUE: waits for the value, then ok/fail.
jget() { kubectl get pod -n "$PODS_NS" "$1" -o json 2>/dev/null | jq -r "$2" 2>/dev/null; }
jget_is() { [ "$(jget "$1" "$2")" = "$3" ]; }
expect_api() {
  if wait_for "$2" jget_is "$3" "$4" "$5"; then ok "$1"; else fail "$1" "$4 = $(jget "$3" "$4"), want $5"; fi
}
# cgfile CONTROLLER PATH FILE: a cgroup v1 file under $CG ("" when absent);
# check_cg NAME CONTROLLER PATH FILE WANT: ok when it holds WANT.
cgfile() { cat "$CG/$1$2/$3" 2>/dev/null; }
check_cg() {
  local got; got=$(cgfile "$2" "$3" "$4")
  [ "$got" = "$5" ] && ok "$1 ($3/$4 = $5)" || fail "$1" "$CG/$2$3/$4 = '$got', want $5"
}
# node_ready: node $NODE is Ready in the API.
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }

api_pods_clear() {
  kubectl delete pods -n "$PODS_NS" --all --grace-period=0 --force >/dev/null 2>&1
  if ! runtime_clear; then
    if [ -z "$AGENT_PID" ] || ! kill -0 "$AGENT_PID" 2>/dev/null; then
      AGENT_PID=
      start_agent --kubeconfig "$KC" >/dev/null 2>&1
    fi
    wait_for 60 runtime_clear
  fi
  stop_agent TERM
  runtime_has_ns && fail "clean-up" "sandboxes left in $PODS_NS: $(ns_sandboxes | jq -c '[.[].metadata.name]')"
  note_stale
}

# Clean-up at exit for tests of API pods on node $NODE (credential $KC): the
# pods and their sandboxes (api_pods_clear), then the namespace and the Node.
api_cleanup() {
  api_pods_clear
  kubectl delete ns "$PODS_NS" --wait=false >/dev/null 2>&1
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  if [ -n "${E2E_KEEP:-}" ] || [ "$E2E_FAILED" -gt 0 ]; then
    echo "--- agent log (last 60 lines) ---"; tail -60 "$AGENT_LOG"
  fi
}

# Clean-up at exit: every manifest removed; the agent (restarted if it is not
# running) stops and removes the pods; then the runtime must not have any.
pods_cleanup() {
  rm -f "$MANIFESTS"/*.yaml
  if [ -z "$AGENT_PID" ] || ! kill -0 "$AGENT_PID" 2>/dev/null; then
    AGENT_PID=
    start_agent >/dev/null 2>&1
  fi
  wait_for 60 runtime_clear
  stop_agent TERM
  if runtime_has_ns; then
    fail "clean-up" "sandboxes left in namespace $PODS_NS: $(ns_sandboxes | jq -c '[.[].metadata.name]')"
  fi
  note_stale
  if [ -n "${E2E_KEEP:-}" ] || [ "$E2E_FAILED" -gt 0 ]; then
    echo "--- agent log (last 40 lines) ---"; tail -40 "$AGENT_LOG"
  fi
}
e2e_on_exit pods_cleanup
