#!/usr/bin/env bash
# Stop the private containerd and registry started by setup.sh, and the control plane
# started by controlplane.sh (deleting etcd's data).
#
# Options:
#   --purge   also remove what pods left behind: tasks and containers in the
#             k8s.io namespace, mounts under the state dir, the CNI bridge,
#             and the state dir itself (images included)
#
# Only the containerd whose command line names our config file is touched;
# a system containerd (/run/containerd) is never signalled or cleaned.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/testenv/common.sh
. "$here/common.sh"
# shellcheck source=tools/testenv/registry.sh
. "$here/registry.sh"

purge=0
for arg in "$@"; do
  case $arg in
    --purge) purge=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    *) die "unknown argument: $arg" ;;
  esac
done

[ "$(id -u)" -eq 0 ] || die "must run as root"

# The control planes (controlplane.sh; tools/conformance.sh's is
# $DIR/k8s-conformance) go too: their state lives under $DIR.
for cp in "$DIR"/k8s "$DIR"/k8s-*; do
  [ -d "$cp" ] || continue
  NANOLET_TESTENV_K8S_NAME=$(basename "$cp") "$here/controlplane.sh" down
done

# Containers must go while containerd still runs: their shims outlive it, and
# only containerd knows how to delete their tasks and snapshots.
remove_containers() {
  local c ids
  ids=$(ctr_ -n "$NAMESPACE" tasks ls -q 2>/dev/null) || return 0
  for c in $ids; do
    ctr_ -n "$NAMESPACE" tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
  done
  for c in $ids; do
    ctr_ -n "$NAMESPACE" tasks rm -f "$c" >/dev/null 2>&1 || true
  done
  # The CRI plugin deletes a task itself once it exits, so `tasks rm` often
  # finds it gone: only a task still listed afterwards is worth a message.
  ids=$(ctr_ -n "$NAMESPACE" tasks ls -q 2>/dev/null) || ids=
  for c in $ids; do
    log "could not remove task $c"
  done
  ids=$(ctr_ -n "$NAMESPACE" containers ls -q 2>/dev/null) || return 0
  for c in $ids; do
    ctr_ -n "$NAMESPACE" containers rm "$c" >/dev/null 2>&1 ||
      log "could not remove container $c"
  done
}

if [ "$purge" = 1 ] && ! answering && [ -f "$CONFIG" ] && ! our_pid >/dev/null; then
  # Pods may outlive a stopped containerd: bring it back just to delete them.
  rm -f "$SOCK" "$SOCK.ttrpc"
  start_containerd
fi
if [ "$purge" = 1 ] && answering; then
  log "removing tasks and containers in namespace $NAMESPACE"
  remove_containers
fi

if pid=$(our_pid); then
  log "stopping containerd (pid $pid)"
  stop_pid "$pid"
elif answering; then
  die "a containerd that is not ours answers on $SOCK; leaving it alone"
else
  log "containerd is not running"
fi
rm -f "$PIDFILE"

if pid=$(registry_pid); then
  log "stopping docker-registry (pid $pid)"
  stop_pid "$pid"
fi
rm -f "$REGISTRY_PIDFILE"
# The e2e images' registry (e2e-images.sh), only the process with its command line.
if pid=$(pid_by_cmdline "$DIR/run/e2e-registry.pid" "docker-registry serve $DIR/e2e-registry/config.yml "); then
  log "stopping the e2e docker-registry (pid $pid)"
  stop_pid "$pid"
fi
rm -f "$DIR/run/e2e-registry.pid"
# The credential provider plugin's token responder (credprov-plugin.sh).
token_cmd="/usr/bin/python3 $DIR/credprov/credprov-token.py ${NANOLET_TESTENV_CREDPROV_TOKEN_ADDR:-127.0.0.1:15081}"
if pid=$(pid_by_cmdline "$DIR/run/credprov-token.pid" "$token_cmd $REGISTRY_DIR/credprov-token "); then
  log "stopping the credential provider's token responder (pid $pid)"
  stop_pid "$pid"
fi
rm -f "$DIR/run/credprov-token.pid"

[ "$purge" = 1 ] || exit 0

if [ ! -e "$DIR" ]; then
  log "$DIR does not exist"
  exit 0
fi
# The marker proves setup.sh made this directory: a mistyped
# NANOLET_TESTENV_DIR must not become rm -rf of someone else's data.
[ -f "$DIR/$MARKER" ] || die "$DIR has no $MARKER; not removing it"

# Deepest first, so that nested mounts (rootfs inside a sandbox's state,
# netns bind mounts) come off before their parents.
mounts=$(awk -v d="$DIR/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r)
for m in $mounts; do
  umount "$m" 2>/dev/null || umount -l "$m" || log "could not unmount $m"
done

# Pod network namespaces are gone with their mounts; the bridge is ours
# (named in our conflist) and would keep the 10.88.0.1 address otherwise.
if ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link del "$BRIDGE" || log "could not delete bridge $BRIDGE"
fi

rm -rf --one-file-system "$DIR"
log "removed $DIR"
