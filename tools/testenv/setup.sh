#!/usr/bin/env bash
# Set up a private containerd (CRI) for nanolet's integration tests.
#
# Idempotent; run as root. Everything it reports goes to stderr; the last
# (and only) line on stdout is the CRI endpoint, so callers can do
#   sock=$(tools/testenv/setup.sh)
#
# Options:
#   --rebuild-images   build and import the local images even if present
#
# Environment:
#   NANOLET_TESTENV_DIR          state directory (default /var/lib/nanolet-testenv)
#   NANOLET_TESTENV_SNAPSHOTTER  overlayfs or native (default: overlayfs if it mounts)
#   NANOLET_TESTENV_NO_APT=1     do not touch apt (fail if a tool is missing)
#   NANOLET_TESTENV_NO_REGISTRY=1  no registry: a second instance's (the shared
#                                one holds 127.0.0.1:15443)
#   NANOLET_TESTENV_REGISTRY_DIR  the registry's directory (default DIR/registry);
#                                with NO_REGISTRY, another instance's, whose CA
#                                (certs.d) this containerd's pulls then trust
#   NANOLET_TESTENV_BRIDGE, NANOLET_TESTENV_SUBNET  the CNI bridge and subnet
#                                (default nl-br0, 10.88.0.0/24)
#   NANOLET_TESTENV_CONTAINERD   another containerd binary than Debian's: a
#                                second instance on containerd 2, e.g.
#                                tools/testenv/containerd2.sh
#   NANOLET_TESTENV_RUNC         another runc binary than Debian's (the CRI
#                                runtime's BinaryName): containerd2.sh's
set -euo pipefail

# Keep stdout for the final endpoint line only: anything a tool prints goes
# to stderr, so callers never have to filter.
exec 3>&1 1>&2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/testenv/common.sh
. "$here/common.sh"
# shellcheck source=tools/testenv/pki.sh
. "$here/pki.sh"
# shellcheck source=tools/testenv/registry.sh
. "$here/registry.sh"

rebuild_images=0
for arg in "$@"; do
  case $arg in
    --rebuild-images) rebuild_images=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    *) die "unknown argument: $arg" ;;
  esac
done

[ "$(id -u)" -eq 0 ] || die "must run as root"

start_time=$(date +%s%N)

# --- packages -----------------------------------------------------------------

packages=(containerd runc containernetworking-plugins busybox-static umoci
  iproute2 iptables gcc libc6-dev util-linux
  docker-registry skopeo apache2-utils openssl curl)


install_packages "${packages[@]}"

# --- state directory ------------------------------------------------------------

mkdir -p "$DIR" "$DIR/run" "$DIR/root" "$DIR/opt" "$DIR/bin" \
  "$DIR/cni/net.d" "$DIR/cni/networks" "$DIR/tmp"
# teardown.sh --purge refuses to delete a directory without this marker.
touch "$DIR/$MARKER"

pick_snapshotter() {
  if [ -n "${NANOLET_TESTENV_SNAPSHOTTER:-}" ]; then
    echo "$NANOLET_TESTENV_SNAPSHOTTER"
    return
  fi
  # Probe on the same filesystem containerd's root lives on: overlay support
  # depends on the backing filesystem, not only on the kernel.
  local t
  t=$(mktemp -d "$DIR/tmp/ovl.XXXXXX")
  mkdir "$t/l" "$t/u" "$t/w" "$t/m"
  if mount -t overlay overlay -o "lowerdir=$t/l,upperdir=$t/u,workdir=$t/w" "$t/m" 2>/dev/null; then
    umount "$t/m"
    echo overlayfs
  else
    echo native
  fi
  rm -rf "$t"
}

snapshotter=$(pick_snapshotter)
case $snapshotter in overlayfs | native) ;; *) die "unsupported snapshotter: $snapshotter" ;; esac
echo "$snapshotter" >"$DIR/snapshotter"
log "snapshotter: $snapshotter"

# --- containerd and CNI configuration ---------------------------------------------

write_config() {
  cat <<EOF
# Written by nanolet tools/testenv/setup.sh; rewritten on every run.
version = 2
root = "$DIR/root"
state = "$DIR/run/state"
# Never let a private containerd pick up plugins from the system's
# /opt/containerd or the system's config drop-ins.
imports = []
# Snapshotters that cannot work here only add noise to the log.
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[debug]
  level = "info"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$DIR/opt"

  [plugins."io.containerd.grpc.v1.cri"]
    # This machine lacks CAP_SYS_RESOURCE: a negative oom_score_adj (-998 for
    # sandboxes) is denied and runc fails with "can't get final child's PID
    # from pipe: EOF". Restricting keeps scores >= our own.
    restrict_oom_score_adj = true
    # No registry is reachable: setup.sh builds this image locally.
    sandbox_image = "localhost/pause:3.9"
    # Keeps pod network namespaces under our state dir, so --purge finds them.
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "$snapshotter"
      default_runtime_name = "runc"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "${NANOLET_TESTENV_RUNC:-runc}"
          # cgroupfs: the test machine need not run systemd.
          SystemdCgroup = false
          # runc's default root is under /run/containerd, shared with a
          # system containerd; keep CRI containers' runc state with ours.
          Root = "$DIR/run/runc"

      # upstream's PreconfiguredRuntimeClassHandler: its node test jobs give
      # containerd a second runc runtime by this name, which the RuntimeClass
      # and PodOverhead specs' classes name.
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.test-handler]
        runtime_type = "io.containerd.runc.v2"

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.test-handler.options]
          BinaryName = "${NANOLET_TESTENV_RUNC:-runc}"
          SystemdCgroup = false
          Root = "$DIR/run/runc"

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$DIR/cni/net.d"
      max_conf_num = 1

    # Per-registry hosts.toml files (the test registry's CA), read at every
    # pull: registry.sh changes them without a restart.
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "$REGISTRY_DIR/certs.d"
EOF
}

write_conflist() {
  cat <<EOF
{
  "cniVersion": "0.4.0",
  "name": "nanolet-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$DIR/cni/networks",
        "ranges": [[{ "subnet": "$SUBNET" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    {
      "type": "portmap",
      "capabilities": { "portMappings": true }
    }
  ]
}
EOF
}

config_changed=0
if write_config | update_file "$CONFIG"; then
  config_changed=1
  log "wrote $CONFIG"
fi
# CNI configuration is read per pod; no restart needed for it.
if write_conflist | update_file "$DIR/cni/net.d/10-nanolet-test.conflist"; then
  log "wrote $DIR/cni/net.d/10-nanolet-test.conflist"
fi

# --- the bridge's neighbour cache ------------------------------------------------

# host-local hands the /24's addresses out again within minutes, and Debian's
# bridge plugin (1.1; upstream's sets arp_notify since) announces no new pod:
# the host's entry for a reused address keeps the departed pod's MAC, and the
# kernel collects no entry while the table has fewer than gc_thresh1 (128). A
# pod that sends nothing first, as a probed server, is then unreachable from
# the host for 5 to 8 s (a delay of 5 s, then three unicast probes to the dead
# MAC): a probe's first connect times out, and a liveness probe with
# failureThreshold 1 kills the container. So: entries unused for 15 s are
# collected (gc_thresh1 0: the collector runs whatever the table's size; it
# is the whole host's table, and an entry in use is never collected), and an
# entry found stale is re-resolved at once by broadcast, so that a reuse
# before the collector came costs one SYN (1 s), not the probe. The bridge is
# made now (the plugin takes it as it is), so that its parameters exist.
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link add "$BRIDGE" type bridge
  ip link set "$BRIDGE" up
fi
for kv in default.gc_thresh1=0 "$BRIDGE.gc_stale_time=15" "$BRIDGE.delay_first_probe_time=0" \
  "$BRIDGE.ucast_solicit=0" "$BRIDGE.mcast_resolicit=3" "$BRIDGE.retrans_time_ms=100"; do
  sysctl -qw "net.ipv4.neigh.$kv" ||
    log "warning: cannot set net.ipv4.neigh.$kv: a probe of a pod on a reused address may time out"
done

# --- containerd -----------------------------------------------------------------


if answering; then
  if [ "$config_changed" = 1 ]; then
    pid=$(our_pid) || die "a containerd that is not ours answers on $SOCK; not restarting it"
    log "configuration changed: restarting containerd (pid $pid)"
    stop_pid "$pid"
    start_containerd
  else
    log "containerd already answering on $SOCK"
  fi
else
  if pid=$(our_pid); then
    log "containerd pid $pid does not answer; restarting it"
    stop_pid "$pid"
  fi
  rm -f "$SOCK" "$SOCK.ttrpc"
  start_containerd
fi

# Catch a CRI plugin that failed to load (bad config, missing CNI dir...)
# now, not as an obscure "unknown service" in the first test.
plugins=$(ctr_ plugins ls)
if ! awk '$2 == "cri" && $4 == "ok" { found = 1 } END { exit !found }' <<<"$plugins"; then
  grep -E 'cri|snapshotter' <<<"$plugins" >&2 || true
  # and containerd's reason (e.g. "couldn't initialize inotify: too many open
  # files" when the machine's fs.inotify.max_user_instances are taken)
  grep -F 'failed to load plugin' "$LOG" | grep -F 'grpc.v1.cri' | tail -1 >&2 || true
  die "the CRI plugin is not loaded; see $LOG"
fi

# --- images ------------------------------------------------------------------------

# Not `ctr ... | grep -q`: grep exits at the first match, ctr dies of
# SIGPIPE, and pipefail turns a present image into a missing one.
have_image() {
  local names
  names=$(ctr_ -n "$NAMESPACE" images ls -q)
  grep -qxF "$1" <<<"$names"
}

build_pause() {
  local src=$here/../pause/pause.c
  # Rebuilt when the source is newer, so a change to pause.c is not silently
  # ignored by a stale binary.
  if [ ! -x "$DIR/bin/pause" ] || [ "$src" -nt "$DIR/bin/pause" ]; then
    log "building pause"
    cc -static -Os -Wall -Wextra -o "$DIR/bin/pause.new" "$src"
    strip "$DIR/bin/pause.new" 2>/dev/null || true
    mv -f "$DIR/bin/pause.new" "$DIR/bin/pause"
  fi
}

# new_layout WORK TAG: an OCI layout WORK/oci with an empty image TAG unpacked
# at WORK/bundle.
new_layout() {
  local work=$1 tag=$2
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:$tag"
  # --rootless: no need to reproduce ownership; the rootfs is ours anyway.
  umoci unpack --rootless --image "$work/oci:$tag" "$work/bundle" >/dev/null
}

# import_layout WORK NAME: tar the layout and import every tag as
# localhost/NAME:TAG.
import_layout() {
  local work=$1 name=$2
  tar -C "$work/oci" -cf "$work/image.tar" .
  ctr_ -n "$NAMESPACE" images import --snapshotter "$snapshotter" \
    --base-name "localhost/$name" "$work/image.tar" >/dev/null
}

base_rootfs() {
  local root=$1
  mkdir -p "$root/etc" "$root/tmp" "$root/proc" "$root/sys" "$root/dev" "$root/root" "$root/var"
  chmod 1777 "$root/tmp"
  # Lets tests use user names (RunAsUsername, `id`) without extra files.
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
}

path_env="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

build_busybox() {
  local work=$1 bb root a
  bb=/bin/busybox
  # Debian's plain busybox package is dynamic; only busybox-static's runs in
  # an image without a libc.
  file_is_static "$bb" || die "$bb is not static; install busybox-static"
  new_layout "$work" latest
  root=$work/bundle/rootfs
  base_rootfs "$root"
  mkdir -p "$root/bin"
  cp "$bb" "$root/bin/busybox"
  for a in $("$bb" --list); do
    [ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"
  done
  umoci repack --image "$work/oci:latest" "$work/bundle"
  # No PATH in the config means runc cannot find "sh".
  umoci config --image "$work/oci:latest" --config.env "$path_env" \
    --config.cmd sh --config.workingdir /
  umoci tag --image "$work/oci:latest" 1.36
  umoci gc --layout "$work/oci"
  import_layout "$work" busybox
  # Kept for registry_push: skopeo copies from the layout.
  rm -rf "$DIR/images/busybox"
  mkdir -p "$DIR/images"
  cp -a "$work/oci" "$DIR/images/busybox"
}

build_pause_image() {
  local work=$1 root
  new_layout "$work" 3.9
  root=$work/bundle/rootfs
  cp "$DIR/bin/pause" "$root/pause"
  umoci repack --image "$work/oci:3.9" "$work/bundle"
  # Same shape as the upstream image: entrypoint /pause as 65535:65535.
  umoci config --image "$work/oci:3.9" --config.env "$path_env" \
    --config.entrypoint /pause --config.user 65535:65535
  umoci gc --layout "$work/oci"
  import_layout "$work" pause
}

build_pause

build_tmp=$(mktemp -d "$DIR/tmp/img.XXXXXX")
trap 'rm -rf "$build_tmp"' EXIT

if [ "$rebuild_images" = 1 ] || ! have_image localhost/busybox:latest || ! have_image localhost/busybox:1.36; then
  log "building localhost/busybox:latest, :1.36"
  mkdir "$build_tmp/busybox"
  build_busybox "$build_tmp/busybox"
else
  log "localhost/busybox:latest present"
fi

if [ "$rebuild_images" = 1 ] || ! have_image localhost/pause:3.9; then
  log "building localhost/pause:3.9"
  mkdir "$build_tmp/pause"
  build_pause_image "$build_tmp/pause"
else
  log "localhost/pause:3.9 present"
fi

if [ "${NANOLET_TESTENV_NO_REGISTRY:-0}" = 1 ]; then
  log "no registry (NANOLET_TESTENV_NO_REGISTRY)"
else
  registry_up
  if [ "$rebuild_images" = 1 ] || ! registry_has_images; then
    if [ ! -f "$DIR/images/busybox/index.json" ]; then
      log "building the busybox layout to push"
      mkdir "$build_tmp/busybox-push"
      build_busybox "$build_tmp/busybox-push"
    fi
    registry_push "$DIR/images/busybox"
  else
    log "$REGISTRY_ADDR/$REGISTRY_REPO present"
  fi
fi

for img in localhost/busybox:latest localhost/busybox:1.36 localhost/pause:3.9; do
  have_image "$img" || die "image $img missing after import"
done

end_time=$(date +%s%N)
log "ready in $(((end_time - start_time) / 1000000)) ms; source tools/testenv/env.sh to use it"
echo "unix://$SOCK" >&3
