# shellcheck shell=bash disable=SC2034
# (SC2034: the names below are used by the scripts that source this file.)
#
# Shared by setup.sh, teardown.sh and env.sh (sourced, not run): paths, and
# the helpers that decide whether a containerd is "ours".

DIR=${NANOLET_TESTENV_DIR:-/var/lib/nanolet-testenv}
# Kept short: unix socket paths are limited to 108 bytes, and containerd adds
# ".ttrpc" to it.
SOCK=$DIR/run/containerd.sock
CONFIG=$DIR/config.toml
LOG=$DIR/containerd.log
PIDFILE=$DIR/run/containerd.pid
MARKER=.nanolet-testenv
BRIDGE=nl-br0
NAMESPACE=k8s.io

case $DIR in
  /*) ;;
  *) echo "nanolet-testenv: NANOLET_TESTENV_DIR must be absolute: $DIR" >&2; exit 1 ;;
esac
# The system containerd's directories are never ours to configure or purge.
case ${DIR%/} in
  "" | /run/containerd | /var/lib/containerd | /run | /var/lib | /var | /tmp)
    echo "nanolet-testenv: refusing NANOLET_TESTENV_DIR=$DIR" >&2
    exit 1
    ;;
esac

log() { echo "nanolet-testenv: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

ctr_() { ctr --address "$SOCK" --connect-timeout 3s "$@"; }

# True when a containerd serves our socket. Checks the socket file first: ctr
# waits ~10 s on a path that does not exist.
answering() {
  [ -S "$SOCK" ] && ctr_ version >/dev/null 2>&1
}

# Prints the pid of the containerd running with our config, if any. A pid is
# trusted only if its command line names our config file, so a stale pid file
# can never make us signal another process (least of all a system containerd).
our_pid() {
  local pid cmd p
  if [ -f "$PIDFILE" ]; then
    pid=$(cat "$PIDFILE")
    if [ -r "/proc/$pid/cmdline" ]; then
      cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
      if [ "$cmd" = "containerd --config $CONFIG " ]; then
        echo "$pid"
        return 0
      fi
    fi
  fi
  # Pid file lost (e.g. a purged run dir): look for the exact command line.
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    if [ "$cmd" = "containerd --config $CONFIG " ]; then
      echo "${p#/proc/}"
      return 0
    fi
  done
  return 1
}

start_containerd() {
  log "starting containerd (log: $LOG)"
  # setsid: the daemon must outlive this script and its caller's session.
  # 3>&-: setup.sh keeps its stdout on fd 3; a daemon holding it would hang
  # a caller reading the endpoint with $(...) forever.
  setsid nohup containerd --config "$CONFIG" >>"$LOG" 2>&1 </dev/null 3>&- &
  echo $! >"$PIDFILE"
  local i
  for i in $(seq 1 60); do
    if answering; then
      log "containerd is up (pid $(cat "$PIDFILE")) after $((i / 2)) s"
      return 0
    fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      tail -n 20 "$LOG" >&2 || true
      die "containerd exited; see $LOG"
    fi
    sleep 0.5
  done
  tail -n 20 "$LOG" >&2 || true
  die "containerd did not answer on $SOCK within 30 s; see $LOG"
}

stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 30); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.5
  done
  log "containerd $pid ignored SIGTERM for 15 s; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

# A dynamic busybox would find no libc in the image.
file_is_static() {
  ! ldd "$1" >/dev/null 2>&1
}
