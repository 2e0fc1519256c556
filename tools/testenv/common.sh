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
# A second instance on the same machine needs its own bridge and subnet.
BRIDGE=${NANOLET_TESTENV_BRIDGE:-nl-br0}
SUBNET=${NANOLET_TESTENV_SUBNET:-10.88.0.0/24}
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

# Write only on change, and report whether it changed, so that a running
# daemon (containerd, a registry) is restarted only when its configuration
# really moved.
update_file() {
  local path=$1 tmp
  tmp=$(mktemp "$path.XXXXXX")
  cat >"$tmp"
  if [ -f "$path" ] && cmp -s "$tmp" "$path"; then
    rm -f "$tmp"
    return 1
  fi
  mv -f "$tmp" "$path"
  return 0
}

ctr_() { ctr --address "$SOCK" --connect-timeout 3s "$@"; }

# True when a containerd serves our socket. Checks the socket file first: ctr
# waits ~10 s on a path that does not exist.
answering() {
  [ -S "$SOCK" ] && ctr_ version >/dev/null 2>&1
}

# pid_by_cmdline PIDFILE CMD: prints the pid of the process whose command
# line (its arguments joined by spaces, with a trailing space) is exactly CMD:
# the one in PIDFILE, else any. A pid is trusted only for its command line, so
# a stale pid file can never make us signal another process.
pid_by_cmdline() {
  local pidfile=$1 want=$2 pid cmd p
  if [ -f "$pidfile" ]; then
    pid=$(cat "$pidfile")
    cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || cmd=
    if [ "$cmd" = "$want" ]; then
      echo "$pid"
      return 0
    fi
  fi
  # Pid file lost (e.g. a purged run dir): look for the exact command line.
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    if [ "$cmd" = "$want" ]; then
      echo "${p#/proc/}"
      return 0
    fi
  done
  return 1
}

# The containerd running with our config, if any (least of all a system one).
our_pid() { pid_by_cmdline "$PIDFILE" "containerd --config $CONFIG "; }

start_containerd() {
  log "starting containerd (log: $LOG)"
  # setsid: the daemon must outlive this script and its caller's session.
  # 3>&-: setup.sh keeps its stdout on fd 3; a daemon holding it would hang
  # a caller reading the endpoint with $(...) forever.
  # NANOLET_TESTENV_CONTAINERD: another containerd binary (containerd 2 from
  # tools/testenv/tool-build.sh containerd2), run by the name containerd as
  # our_pid expects it.
  local path=$PATH
  if [ -n "${NANOLET_TESTENV_CONTAINERD:-}" ]; then
    ln -sf "$NANOLET_TESTENV_CONTAINERD" "$DIR/bin/containerd"
    # and its shim, when one was built beside it
    local shim
    shim=$(dirname "$NANOLET_TESTENV_CONTAINERD")/containerd-shim-runc-v2
    [ ! -x "$shim" ] || ln -sf "$shim" "$DIR/bin/containerd-shim-runc-v2"
    path=$DIR/bin:$PATH
  fi
  PATH=$path setsid nohup containerd --config "$CONFIG" >>"$LOG" 2>&1 </dev/null 3>&- &
  echo $! >"$PIDFILE"
  wait_ready containerd $! "$LOG" 30 answering
}

# wait_ready NAME PID LOGFILE SECONDS CMD...: polls CMD until it succeeds;
# dies with the tail of LOGFILE when PID exits first or SECONDS pass.
wait_ready() {
  local name=$1 pid=$2 logfile=$3 secs=$4 t0
  shift 4
  t0=$(date +%s%N)
  while [ $(($(date +%s%N) - t0)) -lt $((secs * 1000000000)) ]; do
    if "$@"; then
      log "$name is ready (pid $pid) after $((($(date +%s%N) - t0) / 1000000)) ms"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$logfile" >&2 || true
      die "$name exited; see $logfile"
    fi
    sleep 0.2
  done
  tail -n 20 "$logfile" >&2 || true
  die "$name was not ready within $secs s; see $logfile"
}

stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 30); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.5
  done
  log "pid $pid ignored SIGTERM for 15 s; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

# A dynamic busybox would find no libc in the image.
file_is_static() {
  ! ldd "$1" >/dev/null 2>&1
}

# install_packages PKG...: apt-get installs those of PKG that are missing.
install_packages() {
  local missing=() p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
      missing+=("$p")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "${NANOLET_TESTENV_NO_APT:-0}" = 1 ] && die "missing packages: ${missing[*]}"
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Only when something is missing: a second run must not wait on the network.
  # A mirror caught mid-sync fails one index (another architecture's, say) but
  # leaves the rest usable: the install below says whether it mattered.
  apt-get update -qq || log "apt-get update: some indexes failed to download"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
