#!/usr/bin/env bash
# The crash-loop back-off as a node's configuration sets it: with
# `crashLoopBackOff: {maxContainerRestartPeriod: 2s}` a crashing container is
# started again 2 s after each exit, where the default waits 10 s, then 20 s
# (e2e pods_run), and the restart comes when the back-off ends, not at the
# next 10 s retry of the pod's sync. A period outside 1s..300s stops the
# agent at start with the field named.
PODS_NS=nanolet-e2e-crash-backoff
. "$(dirname "$0")/pods_lib.sh"
IMG=localhost/busybox:1.36

config() { # config PERIOD: a configuration file with that maximum
  cat >"$E2E_TMP/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
crashLoopBackOff:
  maxContainerRestartPeriod: $1
EOF
}

# ---- a period out of range: a clear error, no agent ----
config 500ms
out=$(timeout 10 "$NANOLET" --config "$E2E_TMP/config.yaml" --root-dir "$ROOT" \
  --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" 2>&1)
rc=$?
[ $rc -ne 0 ] && [[ $out == *"crashLoopBackOff.maxContainerRestartPeriod (got: 0.5 seconds) must be set between 1s and 300s"* ]] &&
  ok "maxContainerRestartPeriod 500ms: the agent refuses it, naming the field (exit $rc)" ||
  fail "500ms refused" "exit $rc: $out"

# ---- 2 s: the restarts come 2 s after each exit ----
config 2s
start_agent --config "$E2E_TMP/config.yaml" || { fail "agent start" ""; exit 1; }
put crash <<EOF
apiVersion: v1
kind: Pod
metadata: {name: crash, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: $IMG
    command: ["sh", "-c", "exit 1"]
EOF
mkdir -p "$E2E_TMP/poll"
poll_instances "crash-$NODE" "$E2E_TMP/poll/crash"
declare -A created=() finished=()
crash_times() {
  local a c f
  [ -s "$E2E_TMP/poll/crash" ] || return 1
  while read -r a c f; do created[$a]=$c; [ "$f" = 0 ] || finished[$a]=$f; done <"$E2E_TMP/poll/crash"
  [ -n "${created[4]:-}" ] && [ -n "${finished[3]:-}" ] && [ -n "${finished[2]:-}" ] && [ -n "${finished[1]:-}" ]
}
# Attempts 2 to 4 each after a 2 s back-off: about 10 s in all; the default
# back-off would take 70 s.
if wait_for 40 crash_times; then
  ok "crash loop: 4 restarts within 40 s"
  for a in 2 3 4; do
    i=$(((created[$a] - finished[$((a - 1))]) / 1000000))
    # Never shorter than the 2 s window; well short of the default's 10 s and
    # of the sync's 10 s retry, which a restart that waited for it would reach.
    [ $i -ge 2000 ] && [ $i -lt 6000 ] && ok "  ... attempt $a created 2 s after the exit before it (${i} ms)" ||
      fail "back-off before attempt $a" "${i} ms from the exit to the next instance's creation"
  done
else
  fail "crash loop: 4 restarts within 40 s" "the runtime's instances seen: $(tr '\n' ' ' <"$E2E_TMP/poll/crash" 2>/dev/null)"
fi
kill "$POLLER" 2>/dev/null
wait "$POLLER" 2>/dev/null
expect_re "  ... its status counts the restarts" 10 crash '.status.containerStatuses[0].restartCount' '^([3-9]|[1-9][0-9]+)$'

unput crash
wait_for 30 runtime_clear && ok "the pod deleted: its sandbox removed" ||
  fail "clean-up" "$(ns_sandboxes | jq -c '[.[].metadata.name]')"
