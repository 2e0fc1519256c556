#!/usr/bin/env bash
# The procd init script (dist/procd/nanolet.in, OpenWrt), without OpenWrt:
# procd does not run here, so the script runs under a stand-in for
# /etc/rc.common and /lib/functions/procd.sh of this test's own, which does
# what OpenWrt's do with a procd script (sources it, turns start into
# start_service between procd_open_service and procd_close_service, stop into
# stop_service and procd_kill, dispatches the action) and writes down each
# procd_* call instead of sending it to procd. Checked: the syntax (sh -n with
# dash and busybox ash, OpenWrt's shell), the instance it describes (command,
# respawn, term_timeout, logd), the settings file, and that only `shutdown`
# runs the shutdown hook, before the stop.
. "$(dirname "$0")/lib.sh"
TOP=$(cd "$(dirname "$0")/../.." && pwd)
T=$E2E_TMP
mkdir -p "$T/etc/init.d" "$T/etc/default" "$T/lib/functions" "$T/bin"
sed -e "s|@bindir@|$T/bin|g" -e "s|@sysconfdir@|$T/etc|g" -e "s|@rundir@|$T/run|g" \
  -e "s|@logdir@|$T/log|g" "$TOP/dist/procd/nanolet.in" >"$T/etc/init.d/nanolet"
S=$T/etc/init.d/nanolet
grep -q '@[a-z]*@' "$S" && fail "template" "$(grep '@[a-z]*@' "$S")"
[ "$(head -1 "$S")" = "#!/bin/sh /etc/rc.common" ] && ok "runs through /etc/rc.common" || fail "shebang" "$(head -1 "$S")"
dash -n "$S" && ok "sh -n (dash)" || fail "dash -n"
if command -v busybox >/dev/null; then
  busybox sh -n "$S" && ok "sh -n (busybox ash)" || fail "busybox sh -n"
fi

# The stand-in: every procd_* call is a line of $T/calls.
cat >"$T/lib/functions.sh" <<'EOS'
list_contains() { eval "case \" \$$1 \" in *\" $2 \"*) return 0;; esac"; return 1; }
EOS
: >"$T/lib/functions/service.sh"
cat >"$T/lib/functions/procd.sh" <<'EOS'
procd_call() { echo "$*" >>"$CALLS"; }
procd_open_service() { procd_call open_service "$@"; }
procd_close_service() { procd_call close_service "$@"; }
procd_open_instance() { procd_call open_instance "$@"; }
procd_close_instance() { procd_call close_instance "$@"; }
procd_set_param() { procd_call set_param "$@"; }
procd_kill() { procd_call kill "$@"; }
EOS
cat >"$T/rc.common" <<'EOS'
. "$IPKG_INSTROOT/lib/functions.sh"
. "$IPKG_INSTROOT/lib/functions/service.sh"
initscript=$1 action=${2:-help}
shift 2
start() { return 0; }
stop() { return 0; }
restart() { stop "$@"; start "$@"; }
boot() { start "$@"; }
shutdown() { stop; }
start_service() { return 0; }
stop_service() { return 0; }
. "$initscript"
if [ -n "$USE_PROCD" ]; then
  . "$IPKG_INSTROOT/lib/functions/procd.sh"
  start() { procd_open_service "$(basename "$initscript")" "$initscript"; start_service "$@"; procd_close_service set; }
  stop() { stop_service "$@"; procd_kill "$(basename "$initscript")" "$1"; }
fi
ALL_COMMANDS="start stop restart boot shutdown"
list_contains ALL_COMMANDS "$action" || exit 3
$action "$@"
EOS
# The binary: the shutdown hook writes its arguments down.
cat >"$T/bin/nanolet" <<EOS
#!/bin/sh
echo "nanolet \$*" >>"$T/calls"
EOS
chmod +x "$T/bin/nanolet"
export CALLS=$T/calls IPKG_INSTROOT=$T
# OpenWrt's shell is busybox ash.
if command -v busybox >/dev/null; then SH=(busybox sh); else SH=(dash); fi
rc() { : >"$CALLS"; (cd / && "${SH[@]}" "$T/rc.common" "$S" "$@"); }

rc start && ok "start" || fail "start" "rc=$?"
want="open_service nanolet $S
open_instance
set_param command $T/bin/nanolet --config $T/etc/nanolet/config.yaml
set_param respawn 3600 5 0
set_param term_timeout 30
set_param stdout 1
set_param stderr 1
close_instance
close_service set"
[ "$(cat "$CALLS")" = "$want" ] && ok "start: one instance, respawned after 5 s without limit, SIGKILL 30 s after SIGTERM, output to logd" ||
  fail "start" "$(diff <(echo "$want") "$CALLS")"
grep -q '^START=99$' "$S" && grep -q '^STOP=10$' "$S" && ok "enable: S99 after containerd, K10 before it" || fail "START/STOP"

cat >"$T/etc/default/nanolet" <<EOS
NANOLET_ARGS="--config /x.yaml --v 2"
NANOLET_RESPAWN_DELAY=1
NANOLET_STOP_TIMEOUT=7
EOS
rc start
grep -qx "set_param command $T/bin/nanolet --config /x.yaml --v 2" "$CALLS" &&
  grep -qx "set_param respawn 3600 1 0" "$CALLS" && grep -qx "set_param term_timeout 7" "$CALLS" &&
  ok "the settings of etc/default/nanolet" || fail "settings" "$(cat "$CALLS")"

rc stop
[ "$(cat "$CALLS")" = "kill nanolet " ] && ok "stop: procd stops the instance, no hook" || fail "stop" "$(cat "$CALLS")"
rc shutdown
want="nanolet shutdown-hook --config /x.yaml --v 2
kill nanolet "
[ "$(cat "$CALLS")" = "$want" ] && ok "shutdown: the hook with nanolet's flags, then the stop" ||
  fail "shutdown" "$(diff <(echo "$want") "$CALLS")"
echo 'NANOLET_SHUTDOWN_HOOK="echo own-hook >>$CALLS"' >>"$T/etc/default/nanolet"
rc shutdown
[ "$(cat "$CALLS")" = "own-hook
kill nanolet " ] && ok "shutdown: NANOLET_SHUTDOWN_HOOK replaces it" || fail "own hook" "$(cat "$CALLS")"
echo 'NANOLET_SHUTDOWN_HOOK=' >>"$T/etc/default/nanolet"
rc shutdown
[ "$(cat "$CALLS")" = "kill nanolet " ] && ok "shutdown: an empty NANOLET_SHUTDOWN_HOOK runs nothing" || fail "empty hook" "$(cat "$CALLS")"
