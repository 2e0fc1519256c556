#!/usr/bin/env bash
# What a power cut does to the agent, the runtime and the pods: nanolet (run by
# its sysvinit script), containerd, the shims and the pods' processes killed
# with SIGKILL; the runtime's state under its run directory unmounted and
# removed, as a reboot empties /run; then containerd started, then nanolet by
# its init script. The static pods must run again; the time from nanolet's
# start until both run is printed (docs/PERFORMANCE.md).
#
# It runs on a containerd of its own (tools/testenv/setup.sh with its own
# NANOLET_TESTENV_DIR, bridge and subnet), never on the shared one, and purges
# it at the end.
NODE=${NANOLET_REBOOT_NODE:-reboot-e2e}
. "$(dirname "$0")/private_testenv.sh"
# (10.89.0.0/24 is tools/testenv/containerd2.sh's)
private_testenv "${NANOLET_REBOOT_TESTENV_DIR:-/var/lib/nanolet-reboot-testenv}" nl-br1 10.84.0.0/24 ||
  { echo "tools/testenv/tool-build.sh containerd2 failed"; exit 1; }
export NANOLET_TESTENV_DIR=$PRIVATE_DIR NANOLET_TESTENV_BRIDGE=$PRIVATE_BRIDGE NANOLET_TESTENV_SUBNET=$PRIVATE_SUBNET
export NANOLET_TESTENV_CONTAINERD=$PRIVATE_CONTAINERD NANOLET_TESTENV_NO_REGISTRY=1
RUNDIR=$NANOLET_TESTENV_DIR/run
TESTENV=$(cd "$(dirname "$0")/../../tools/testenv" && pwd)
# A containerd that started without its CRI plugin is purged too: the next
# run's setup.sh would find it answering and fail the same way.
ENDPOINT=$("$TESTENV/setup.sh" 2>/tmp/nanolet-reboot-setup.log) || {
  echo "setup.sh failed:"; tail -5 /tmp/nanolet-reboot-setup.log
  "$TESTENV/teardown.sh" --purge >/dev/null 2>&1; exit 1
}
. "$(dirname "$0")/install_lib.sh"
cleanup() {
  "$INIT" stop >/dev/null
  remove_pods
  "$TESTENV/teardown.sh" --purge 2>/dev/null
}
e2e_on_exit cleanup

install_root -Dinit=sysv
use_test_runtime
"$INIT" start >/dev/null
wait_for 90 pods_running && ok "before: nanolet runs the example pods" || fail "before" "$(tail -5 "$ROOT/var/log/nanolet.log")"
before=$(node_sandboxes | jq -r '[.[].id] | sort | join(" ")')

# --- the power cut -----------------------------------------------------------
kill -KILL "$(cat "$ROOT/run/nanolet.pid")" "$(agent_pid)" "$(cat "$RUNDIR/containerd.pid")"
# This instance's shims (they name its socket) and the pods' processes under them.
shims=$(pgrep -f "containerd-shim-runc-v2 .*-address $RUNDIR/containerd.sock")
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
victims=$(for s in $shims; do echo "$s"; descendants "$s"; done)
# shellcheck disable=SC2086
[ -n "$shims" ] && kill -KILL $victims && ok "killed nanolet, containerd, $(wc -w <<<"$shims") shims and their $(($(wc -w <<<"$victims") - $(wc -w <<<"$shims"))) processes" \
  || fail "power cut" "no shims of $RUNDIR/containerd.sock"
wait_for 10 sh -c "! kill -0 $(tr '\n' ' ' <<<"$victims") 2>/dev/null"
# /run is a tmpfs: a reboot empties it (the runtime's state, netns and shm
# mounts, runc's state, pid files). Disks keep the rest (root-dir, images).
awk -v d="$RUNDIR" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
  while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
rm -rf --one-file-system "$RUNDIR" "$ROOT/run"
[ ! -e "$RUNDIR" ] && ok "the runtime's run directory is gone" || fail "rm $RUNDIR"

# --- the boot ------------------------------------------------------------------
"$TESTENV/setup.sh" >/dev/null 2>>/tmp/nanolet-reboot-setup.log && ok "containerd started" \
  || fail "containerd start" "$(tail -3 /tmp/nanolet-reboot-setup.log)"
[ "$(node_sandboxes | jq '[.[] | select(.state == "SANDBOX_READY")] | length')" = 0 ] \
  && ok "no pod runs before nanolet" || fail "pods before nanolet" "$(node_sandboxes)"
t0=$(date +%s%N)
"$INIT" start >/dev/null
if wait_for 120 pods_running; then
  ms=$((($(date +%s%N) - t0) / 1000000))
  ok "after: the static pods run again, ${ms} ms after nanolet's start"
  echo "reboot: static pods running ${ms} ms after nanolet's start"
else
  fail "after" "$(tail -10 "$ROOT/var/log/nanolet.log")"
fi
after=$(node_sandboxes | jq -r '[.[] | select(.state == "SANDBOX_READY") | .id] | sort | join(" ")')
[ -n "$after" ] && [ "$after" != "$before" ] && ok "in new sandboxes" || fail "sandboxes" "before $before, after $after"
