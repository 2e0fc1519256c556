#!/usr/bin/env bash
# Every command in the README's sh blocks, run as written from the repository's
# top, with its output and exit status checked. The environment is swapped in
# only where the README names the machine's own: `nanolet` is the built binary,
# the containerd socket the test runtime's, port 10248 a free port, the example
# paths temporary ones, port 10250 another free port; an agent started from the
# README also gets a private --root-dir and --cert-dir. tools/run-example.sh
# runs as written, with its environment (its header) pointing it at the test
# runtime, free ports, a private directory and node name. A README command
# without a check here fails the test.
. "$(dirname "$0")/lib.sh"
: "${NANOLET_TEST_CRI_ENDPOINT:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
TOP=$(cd "$(dirname "$0")/../.." && pwd)
cd "$TOP" || exit 1
PORT=$(free_port)
server_flags "$E2E_TMP"
AGENT_PID=
stop_agent() { [ -z "$AGENT_PID" ] || { kill -TERM "$AGENT_PID" 2>/dev/null; wait "$AGENT_PID"; }; }
cleanup() { stop_agent >/dev/null 2>&1; example_cleanup; }
e2e_on_exit cleanup

mkdir -p "$E2E_TMP/manifests" "$E2E_TMP/etc"
cat >"$E2E_TMP/etc/config.yaml" <<CFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $E2E_TMP/manifests
containerRuntimeEndpoint: $NANOLET_TEST_CRI_ENDPOINT
CFG

# The commands: lines of ```sh blocks, continuations joined, comments dropped.
readme_commands() {
  awk '/^```sh$/ {on = 1; next} /^```$/ {on = 0} on' README.md |
    sed -e 's/[[:space:]]\+#.*$//' | sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta'
}
local_env() { # the README's command with this machine's paths and ports
  sed -e "s|^nanolet |$NANOLET |" \
      -e "s|unix:///run/containerd/containerd.sock|$NANOLET_TEST_CRI_ENDPOINT|g" \
      -e "s|127\.0\.0\.1:10248|127.0.0.1:$PORT|g" \
      -e "s|127\.0\.0\.1:10250|127.0.0.1:$KPORT|g" \
      -e "s|/etc/nanolet/config.yaml|$E2E_TMP/etc/config.yaml|g" \
      -e "s|/etc/kubernetes/manifests|$E2E_TMP/manifests|g" <<<"$1"
}
run() { # run CMD: sets OUT, ERR, RC
  eval "$1" >"$E2E_TMP/out" 2>"$E2E_TMP/err"
  RC=$?
  OUT=$(cat "$E2E_TMP/out") ERR=$(cat "$E2E_TMP/err")
}
expect_rc() { # expect_rc NAME WANT [COND...]: RC is WANT and each COND holds
  local name=$1 want=$2; shift 2
  if [ "$RC" != "$want" ]; then fail "$name" "exit status $RC, want $want; stderr: ${ERR:0:300}"; return; fi
  for c in "$@"; do eval "$c" || { fail "$name" "not true: $c; stdout: ${OUT:0:300} stderr: ${ERR:0:300}"; return; }; done
  ok "$name"
}

# An agent from the README: healthy, no warnings for the README's own flags,
# and a clean stop (exit 0) on SIGTERM.
check_agent() {
  stop_agent
  eval "exec $1 --root-dir $E2E_TMP/root --healthz-port $PORT --port $KPORT --cert-dir $E2E_TMP/pki" \
    >"$E2E_TMP/agent.log" 2>&1 &
  AGENT_PID=$!
  if ! wait_for 10 healthz_ok "$PORT"; then
    fail "$2: starts" "$(tail -5 "$E2E_TMP/agent.log")"; AGENT_PID=; return
  fi
  if grep -q "not supported yet" "$E2E_TMP/agent.log"; then
    fail "$2: no ignored settings" "$(grep "not supported yet" "$E2E_TMP/agent.log")"
  else
    ok "$2: healthy, warns of nothing"
  fi
}

# The README's example (tools/run-example.sh) on the test runtime, already set
# up (NANOLET_EXAMPLE_ENDPOINT, in place of the containerd its setup.sh would
# start), under a node name of this run's own. Its pods (examples/) keep
# running after the stop, as upstream's do: example_cleanup removes them.
EX_DIR=$E2E_TMP/example
EX_NODE=readme-example-$$
EX_HPORT=$(free_port) EX_RO_PORT=$(free_port) EX_KPORT=$(free_port)
EX_PODS=
example() { # example [ARG]: tools/run-example.sh ARG in the test's environment
  NANOLET_EXAMPLE_DIR=$EX_DIR NANOLET_EXAMPLE_ENDPOINT=$NANOLET_TEST_CRI_ENDPOINT \
    NANOLET_EXAMPLE_HEALTHZ_PORT=$EX_HPORT NANOLET_EXAMPLE_READ_ONLY_PORT=$EX_RO_PORT \
    NANOLET_EXAMPLE_PORT=$EX_KPORT NANOLET_EXAMPLE_NODE=$EX_NODE ./tools/run-example.sh "$@"
}
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $st != Z* ]]; }
ex_pid() { cat "$EX_DIR/nanolet.pid" 2>/dev/null; }
ex_phases() { # the example pods' phases on /pods, sorted: "Running Running"
  curl -fsS "http://127.0.0.1:$EX_RO_PORT/pods" 2>/dev/null | jq -r --arg n "$EX_NODE" \
    '[.items[] | select(.metadata.name == "web-\($n)" or .metadata.name == "ticker-\($n)")
      | .status.phase] | sort | join(" ")'
}
ex_running() { [ "$(ex_phases)" = "Running Running" ]; }
ex_sandboxes() { # the example pods' sandboxes in the runtime, any state
  "$NANOLET" cri -r "$NANOLET_TEST_CRI_ENDPOINT" pods -o json | jq --arg n "$EX_NODE" \
    '[.items[] | select(.metadata.name == "web-\($n)" or .metadata.name == "ticker-\($n)")] | length'
}
ex_clear() { local n; n=$(ex_sandboxes) && [ "$n" = 0 ]; }
check_example() { # check_example CMD: CMD is ./tools/run-example.sh
  run "example"
  expect_rc "$1" 0 'grep -qx "nanolet is running (pid [0-9]*): healthz ok" <<<"$OUT"' \
    'grep -qF "curl -s http://127.0.0.1:$EX_RO_PORT/pods" <<<"$OUT"' 'alive "$(ex_pid)"' \
    'healthz_ok "$EX_HPORT"'
  EX_PODS=1
  [ "$RC" = 0 ] || return
  if wait_for 120 ex_running; then ok "$1: the example pods run (examples/web.yaml, ticker.yaml)"
  else fail "$1: the example pods" "phases: $(ex_phases); $(tail -5 "$EX_DIR/nanolet.log")"; fi
  # The stop, named in the README's text.
  local pid
  pid=$(ex_pid)
  run "example stop"
  expect_rc "./tools/run-example.sh stop" 0 '! alive "$pid"' '[ ! -e "$EX_DIR/nanolet.pid" ]' \
    '! healthz_ok "$EX_HPORT"' 'grep -q "received Terminated, shutting down" "$EX_DIR/nanolet.log"' \
    '! grep -qE "handles still open|failed to run" "$EX_DIR/nanolet.log"'
  run "example stop"
  expect_rc "./tools/run-example.sh stop, again: nothing to stop" 0
  # The pods kept running (upstream's behaviour), until the clean-up.
  if [ "$(ex_sandboxes)" -ge 2 ]; then ok "the example's pods keep running after the stop"
  else fail "the example's pods after the stop" "$(ex_sandboxes) sandboxes"; fi
  example_cleanup
}
# example_cleanup: a running example stopped; its pods removed by an agent
# with the example's configuration, root dir and node name but no manifests
# (a failure to remove them is a fail).
example_cleanup() {
  [ -n "$EX_PODS" ] || return 0
  EX_PODS=
  example stop >/dev/null 2>&1
  [ -f "$EX_DIR/config.yaml" ] || return 0
  mkdir -p "$EX_DIR/none"
  "$NANOLET" --config "$EX_DIR/config.yaml" --pod-manifest-path "$EX_DIR/none" \
    --root-dir "$EX_DIR/root" --cert-dir "$EX_DIR/pki" --hostname-override "$EX_NODE" \
    --healthz-port "$(free_port)" --port "$(free_port)" --read-only-port 0 >>"$EX_DIR/cleanup.log" 2>&1 &
  local pid=$!
  if wait_for 90 ex_clear; then ok "the example's pods removed by an agent on its root dir"
  else fail "example clean-up" "$(ex_sandboxes) sandboxes left; $(tail -5 "$EX_DIR/cleanup.log")"; fi
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
}

n=0
while IFS= read -r cmd; do
  [ -n "$cmd" ] || continue
  n=$((n + 1))
  local_cmd=$(local_env "$cmd")
  case "$cmd" in
  ./tools/run-example.sh)
    check_example "$cmd" ;;
  ./tools/test.sh)
    # Not run and not counted: tools/test.sh is the suite that runs this test
    # (CI runs it: .ci/run). Seen, so it is no command without a check.
    ;;
  "nanolet --config "* | "nanolet --pod-manifest-path "*)
    check_agent "$local_cmd" "$cmd" ;;
  "nanolet --kubeconfig "*)
    # The test control plane's node credential is for its node name.
    if k8s_env; then
      check_agent "$(sed "s|/etc/kubernetes/kubelet.conf|$NANOLET_TEST_NODE_KUBECONFIG|" <<<"$local_cmd") \
        --hostname-override $NANOLET_TEST_NODE_NAME" "$cmd"
      node_ready() { [ "$(kubectl get node "$NANOLET_TEST_NODE_NAME" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
      check "$cmd: the node is Ready" wait_for 15 node_ready
      JOINED=1 # the Node goes once the agent has stopped
    else
      fail "$cmd" "no test control plane (tools/testenv/controlplane.sh up failed)"
    fi ;;
  "nanolet --help")
    run "$local_cmd"
    expect_rc "$cmd" 0 '[ "$(grep -c "^Usage:" <<<"$OUT")" = 1 ]' '[ -z "$ERR" ]' \
      'grep -q -- "--pod-manifest-path" <<<"$OUT"' ;;
  "nanolet manifest check "*)
    run "$local_cmd"
    expect_rc "$cmd" 0 '[ "$(jq -r .kind <<<"$OUT")" = Pod ]' '[ -z "$ERR" ]' ;;
  "nanolet cri ps "*)
    run "$local_cmd"
    expect_rc "$cmd" 0 '[[ "$(head -1 <<<"$OUT")" == CONTAINER* ]]' '[ -z "$ERR" ]' ;;
  "curl -sk https://127.0.0.1:10250/pods")
    # The README's standalone agent (no --config: anonymous requests allowed).
    check_agent "$(local_env "nanolet --pod-manifest-path /etc/kubernetes/manifests \
      --container-runtime-endpoint unix:///run/containerd/containerd.sock")" "a standalone agent for /pods"
    run "$local_cmd"
    expect_rc "$cmd" 0 '[ "$(jq -c "[.kind, .apiVersion, (.items | length)]" <<<"$OUT")" = "[\"PodList\",\"v1\",0]" ]' ;;
  "curl http://127.0.0.1:10248/healthz")
    [ -n "$AGENT_PID" ] || check_agent "$NANOLET --config $E2E_TMP/etc/config.yaml" "an agent for /healthz"
    run "$local_cmd"
    expect_rc "$cmd" 0 '[ "$OUT" = ok ]' ;;
  *)
    fail "README command without a check in test/e2e/readme_commands.sh" "$cmd" ;;
  esac
done < <(readme_commands)
[ "$n" -ge 8 ] && ok "$n README commands seen" || fail "README commands" "only $n found"
stop_agent
rc=$?
[ "$rc" -eq 0 ] && ok "the README's agent stops with status 0" || fail "agent stop" "status $rc"
AGENT_PID=
[ -z "${JOINED:-}" ] || kubectl delete node "$NANOLET_TEST_NODE_NAME" --wait=false >/dev/null

# manifest check beyond the README's line: a bad manifest, both flag forms.
run "$NANOLET manifest check examples/web.yaml test/fixtures/manifests/invalid/dup-container.yaml"
expect_rc "manifest check: a bad file exits 1" 1 'grep -q "spec.containers\[1\].name: duplicate value" <<<"$ERR"'
run "$NANOLET manifest check --hostname-override=Edge-1 examples/web.yaml"
expect_rc "manifest check --flag=value" 0 '[ "$(jq -r .spec.nodeName <<<"$OUT")" = edge-1 ]'
run "$NANOLET manifest check examples/web.yaml --hostname-override edge-2"
expect_rc "manifest check --flag value" 0 '[ "$(jq -r .spec.nodeName <<<"$OUT")" = edge-2 ]'
run "$NANOLET manifest check --help"
expect_rc "manifest check --help" 0 '[ "$(grep -c "^usage:" <<<"$OUT")" = 1 ]' '[ -z "$ERR" ]'
run "$NANOLET --kubeconfig $E2E_TMP/nonexistent"
expect_rc "--kubeconfig that does not exist" 2 "grep -q '$E2E_TMP/nonexistent' <<<\"\$ERR\""
