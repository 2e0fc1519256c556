#!/usr/bin/env bash
# `meson install --strip` into a clean root, then nanolet run by each of its
# service files with the real tools: the sysvinit script (start-stop-daemon),
# OpenRC (openrc-run, supervise-daemon), runit (runsvdir, runsv, sv, svlogd);
# the systemd unit checked by systemd-analyze. Each starts nanolet with the
# example pods, reports its status, starts it again when it is killed, stops it
# with SIGTERM and keeps its log. Then the uninstall, which leaves data alone.
# The root is a prefix ($ROOT/usr, $ROOT/etc, $ROOT/var, $ROOT/run), so the
# scripts run from where they were installed; no chroot is needed.
: "${NANOLET_TEST_CRI_ENDPOINT:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
NODE=${NANOLET_INSTALL_NODE:-install-e2e}
ENDPOINT=$NANOLET_TEST_CRI_ENDPOINT
. "$(dirname "$0")/install_lib.sh"
RUNSVDIR_PID=
SOFTLEVEL_MADE=

cleanup() {
  [ -z "$RUNSVDIR_PID" ] || { sv -w 30 down "$E2E_TMP/service/nanolet" >/dev/null 2>&1; kill -HUP "$RUNSVDIR_PID"; wait "$RUNSVDIR_PID"; }
  for p in $(agent_pids); do kill -TERM "$p"; done
  [ -z "$SOFTLEVEL_MADE" ] || rm -f /run/openrc/softlevel
  remove_pods
}
e2e_on_exit cleanup

# --- install ---------------------------------------------------------------
install_root -Dinit=sysv,runit,systemd
missing=
for f in usr/bin/nanolet etc/nanolet/config.yaml etc/kubernetes/manifests etc/init.d/nanolet \
  etc/default/nanolet etc/logrotate.d/nanolet etc/sv/nanolet/run etc/sv/nanolet/log/run etc/sv/nanolet/control/t \
  usr/lib/systemd/system/nanolet.service usr/share/man/man8/nanolet.8; do
  [ -e "$ROOT/$f" ] || missing+=" $f"
done
[ -z "$missing" ] && ok "installed: binary, config, manifest directory, service files, manual" ||
  fail "installed" "missing:$missing"
size=$(stat -c %s "$BIN")
[ "$size" -le 1048576 ] && ok "stripped binary is $size bytes (<= 1 MiB)" || fail "binary size" "$size bytes"
grep -q 'staticPodPath: '"$ROOT"'/etc/kubernetes/manifests' "$ROOT/etc/nanolet/config.yaml" &&
  grep -q 'containerRuntimeEndpoint: unix:///run/containerd/containerd.sock' "$ROOT/etc/nanolet/config.yaml" \
  && ok "example config: upstream's paths" || fail "example config" "$(cat "$ROOT/etc/nanolet/config.yaml")"
man -l "$ROOT/usr/share/man/man8/nanolet.8" 2>/dev/null | grep -q -- '--pod-manifest-path' \
  && ok "man page lists the flags" || fail "man page" "$(head -5 "$ROOT/usr/share/man/man8/nanolet.8")"
# The ticker (sh as PID 1 ignores SIGTERM) with a grace period of 2s, under
# the 3s its group has in the halt below: a pod whose grace reaches its
# group's period is still being killed when the shutdown hook returns
# (upstream's groups end on time too), and the runtime gives up a stop whose
# client has gone once nanolet exits (containerd 2 does, 3.13 s into a 3 s
# stop).
sed -i 's/^spec:$/spec:\n  terminationGracePeriodSeconds: 2/' "$ROOT/etc/kubernetes/manifests/ticker.yaml"

use_test_runtime

# Common to every init system: runs, pods run, killed -> started again.
new_agent_pid() { local p; p=$(agent_pid) && [ "$p" != "$1" ] && healthz_ok "$PORT"; }
expect_running() { # expect_running NAME
  if wait_for 60 pods_running; then ok "$1: nanolet runs the example pods"
  else fail "$1: pods" "$(tail -5 "$2")"; fi
}
expect_respawn() { # expect_respawn NAME LOG
  local pid
  pid=$(agent_pid) || { fail "$1: one nanolet" "$(agent_pids)"; return; }
  kill -KILL "$pid"
  if wait_for 20 new_agent_pid "$pid"; then ok "$1: started again after kill -9"
  else fail "$1: respawn" "$(tail -5 "$2")"; fi
}
expect_sigterm() { # expect_sigterm NAME LOG: nanolet logged SIGTERM and exited 0
  if grep -q 'received Terminated, shutting down' "$2"; then ok "$1: stopped with SIGTERM"
  else fail "$1: SIGTERM" "$(tail -5 "$2")"; fi
}

# --- sysvinit --------------------------------------------------------------
LOG=$ROOT/var/log/nanolet.log
"$INIT" start >/dev/null; rc=$?
[ $rc -eq 0 ] && wait_for 10 healthz_ok "$PORT" && ok "sysv: start" || fail "sysv: start" "rc=$rc $(tail -5 "$LOG")"
expect_running sysv "$LOG"
grep -q 'not supported yet' "$LOG" && fail "sysv: the example config warns" "$(grep 'not supported yet' "$LOG")" \
  || ok "sysv: the example config warns of nothing"
out=$("$INIT" status); rc=$?
[ $rc -eq 0 ] && [ "$out" = "nanolet is running (pid $(cat "$ROOT/run/nanolet.pid"))" ] \
  && ok "sysv: status says running" || fail "sysv: status" "rc=$rc $out"
"$INIT" start >/dev/null; rc=$?
[ $rc -eq 0 ] && [ "$(agent_pids | wc -w)" = 1 ] && ok "sysv: a second start starts nothing" || fail "sysv: start twice" "rc=$rc $(agent_pids)"
logrotate -f -s "$E2E_TMP/logrotate.state" "$ROOT/etc/logrotate.d/nanolet" \
  && [ -s "$LOG.1" ] && ok "sysv: logrotate rotates the log" || fail "sysv: logrotate" "$(ls -l "$ROOT/var/log")"
expect_respawn sysv "$LOG"
grep -q 'nanolet exited with status 137; starting it again' "$LOG" && [ "$(stat -c %s "$LOG")" -lt 100000 ] \
  && ok "sysv: the respawn is logged in the rotated log" || fail "sysv: log after rotation" "$(ls -ls "$LOG")"
old=$(cat "$ROOT/run/nanolet.pid")
"$INIT" restart >/dev/null; rc=$?
[ $rc -eq 0 ] && [ "$(cat "$ROOT/run/nanolet.pid")" != "$old" ] && wait_for 10 healthz_ok "$PORT" \
  && ok "sysv: restart" || fail "sysv: restart" "rc=$rc"
# A halt (runlevel 0): the hook stops the pods within shutdownGracePeriod
# (4s here, 3s for these pods; the ticker's own is 2s, above), then nanolet
# gets SIGTERM.
sed -i -e 's/^shutdownGracePeriod: .*/shutdownGracePeriod: 4s/' \
  -e 's/^shutdownGracePeriodCriticalPods: .*/shutdownGracePeriodCriticalPods: 1s/' "$ROOT/etc/nanolet/config.yaml"
"$INIT" restart >/dev/null && wait_for 10 healthz_ok "$PORT" && wait_for 60 pods_running
t0=$(date +%s%N)
RUNLEVEL=0 "$INIT" stop >"$E2E_TMP/halt.out" 2>&1; rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
# (web stops on SIGTERM; ticker ignores it and is killed at the end of its
# grace period)
pods_stopping() { ! pods_running; }
[ $rc -eq 0 ] && no_agent && grep -q 'shutdown hook: the node is shutting down' "$LOG" && grep -q '^done in' "$E2E_TMP/halt.out" \
  && wait_for 10 pods_stopping && ok "sysv: a halt runs the shutdown hook, which stops the pods first (${ms} ms)" \
  || fail "sysv: halt" "rc=$rc $(cat "$E2E_TMP/halt.out") $(grep -i shutdown "$LOG" | tail -5)"
"$INIT" start >/dev/null && wait_for 10 healthz_ok "$PORT" || fail "sysv: start after the halt"
: >"$LOG"
t0=$(date +%s%N)
"$INIT" stop >/dev/null; rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc -eq 0 ] && no_agent && [ ! -e "$ROOT/run/nanolet.pid" ] && ok "sysv: stop waits for nanolet (${ms} ms)" \
  || fail "sysv: stop" "rc=$rc $(agent_pids)"
expect_sigterm sysv "$LOG"
out=$("$INIT" status); rc=$?
[ $rc -eq 3 ] && [ "$out" = "nanolet is not running" ] && ok "sysv: status says stopped (3)" || fail "sysv: status stopped" "rc=$rc $out"
[ "$(no_pods && echo none)" != none ] && ok "sysv: pods keep running while nanolet is stopped" || fail "sysv: pods gone"

# --- OpenRC ----------------------------------------------------------------
# openrc-run refuses to run on a machine OpenRC did not boot unless it finds
# its softlevel file.
meson configure "$BUILD" -Dinit=openrc >/dev/null && ninja -C "$BUILD" agent/nanolet >>"$E2E_TMP/build.log" 2>&1 &&
  meson install -C "$BUILD" --no-rebuild --strip >>"$E2E_TMP/install.log" 2>&1 \
  && head -1 "$INIT" | grep -q openrc-run && ok "openrc: -Dinit=openrc installs its script" || fail "openrc: install" "$(head -1 "$INIT")"
printf 'NANOLET_ARGS="%s"\nNANOLET_RESPAWN_DELAY=1\n' "$(sed -n 's/^NANOLET_ARGS="\(.*\)"$/\1/p' "$ROOT/etc/default/nanolet" | tail -1)" \
  >>"$ROOT/etc/conf.d/nanolet"
if [ ! -e /run/openrc/softlevel ]; then mkdir -p /run/openrc && touch /run/openrc/softlevel && SOFTLEVEL_MADE=1; fi
"$INIT" start >"$E2E_TMP/openrc.out" 2>&1; rc=$?
[ $rc -eq 0 ] && wait_for 10 healthz_ok "$PORT" && ok "openrc: start" || fail "openrc: start" "rc=$rc $(cat "$E2E_TMP/openrc.out") $(tail -5 "$LOG")"
expect_running openrc "$LOG"
"$INIT" status 2>&1 | grep -q 'status: started' && ok "openrc: status started" || fail "openrc: status" "$("$INIT" status 2>&1)"
expect_respawn openrc "$LOG"
: >"$LOG"
"$INIT" stop >"$E2E_TMP/openrc.out" 2>&1; rc=$?
[ $rc -eq 0 ] && no_agent && ok "openrc: stop waits for nanolet" || fail "openrc: stop" "rc=$rc $(cat "$E2E_TMP/openrc.out")"
expect_sigterm openrc "$LOG"
"$INIT" status >/dev/null 2>&1; rc=$?
[ $rc -eq 3 ] && ok "openrc: status stopped (3)" || fail "openrc: status stopped" "rc=$rc"

# --- runit -----------------------------------------------------------------
SV=$ROOT/etc/sv/nanolet
mkdir -p "$E2E_TMP/service"
ln -s "$SV" "$E2E_TMP/service/nanolet"
export SVDIR=$E2E_TMP/service
runsvdir "$E2E_TMP/service" >/dev/null 2>&1 &
RUNSVDIR_PID=$!
SVLOG=$ROOT/var/log/nanolet/current
wait_for 10 healthz_ok "$PORT" && ok "runit: runsvdir starts it" || fail "runit: start" "$(sv status nanolet 2>&1)"
expect_running runit "$SVLOG"
sv status nanolet | grep -q '^run: nanolet: (pid [0-9]*) .*; run: log: ' && ok "runit: sv status: service and log run" \
  || fail "runit: sv status" "$(sv status nanolet)"
expect_respawn runit "$SVLOG"
sv -w 40 down nanolet >/dev/null; rc=$?
[ $rc -eq 0 ] && no_agent && ok "runit: sv down waits for nanolet" || fail "runit: sv down" "rc=$rc $(sv status nanolet)"
wait_for 5 grep -q 'received Terminated, shutting down' "$SVLOG"
expect_sigterm runit "$SVLOG"
grep -q 'shutdown hook' "$SVLOG" && fail "runit: a plain sv down runs no shutdown hook" "$(grep 'shutdown hook' "$SVLOG")"
# The machine going down: runit-init makes <sysconfdir>/runit/stopit executable.
sv up nanolet >/dev/null && wait_for 10 healthz_ok "$PORT" && wait_for 60 pods_running
mkdir -p "$ROOT/etc/runit" && touch "$ROOT/etc/runit/stopit" && chmod 100 "$ROOT/etc/runit/stopit"
sv -w 40 down nanolet >/dev/null; rc=$?
rm -f "$ROOT/etc/runit/stopit"
[ $rc -eq 0 ] && no_agent && grep -q 'shutdown hook: the node is shutting down' "$SVLOG" && wait_for 10 pods_stopping \
  && ok "runit: going down (stopit), control/t runs the shutdown hook, which stops the pods first" \
  || fail "runit: going down" "rc=$rc $(grep -i shutdown "$SVLOG" | tail -3)"
grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}_[0-9:.]+ ' "$SVLOG" && [ -f "$ROOT/var/log/nanolet/config" ] && ok "runit: svlogd timestamps and rotates the log" \
  || fail "runit: svlogd" "$(head -2 "$SVLOG")"
kill -HUP "$RUNSVDIR_PID"; wait "$RUNSVDIR_PID"; RUNSVDIR_PID=

# --- systemd ---------------------------------------------------------------
UNIT=$ROOT/usr/lib/systemd/system/nanolet.service
# --man=no: the manual is installed under $ROOT, not where man looks.
out=$(systemd-analyze verify --man=no "$UNIT" 2>&1); rc=$?
[ $rc -eq 0 ] && ! grep -q "$UNIT" <<<"$out" && ok "systemd: systemd-analyze verify" || fail "systemd: verify" "rc=$rc $out"
grep -q '^Type=notify$' "$UNIT" && grep -q '^Restart=always$' "$UNIT" && ok "systemd: Type=notify, Restart=always" || fail "systemd unit"

# --- uninstall -------------------------------------------------------------
ninja -C "$BUILD" uninstall >"$E2E_TMP/uninstall.log" 2>&1
[ ! -e "$BIN" ] && [ ! -e "$INIT" ] && [ ! -e "$ROOT/usr/share/man/man8/nanolet.8" ] \
  && ok "uninstall removes what the last install placed" || fail "uninstall" "$(tail -5 "$E2E_TMP/uninstall.log")"
[ -f "$ROOT/etc/nanolet/config.yaml" ] && [ -f "$ROOT/etc/default/nanolet" ] && [ -f "$ROOT/etc/kubernetes/manifests/web.yaml" ] && [ -d "$ROOT/var/lib/kubelet/pods" ] \
  && [ -s "$LOG.1" ] && ok "uninstall keeps the settings, manifests, pods' data and logs" || fail "uninstall kept" "$(find "$ROOT" -maxdepth 3)"
# The clean-up needs a binary: install it again.
meson install -C "$BUILD" --no-rebuild >/dev/null 2>&1
