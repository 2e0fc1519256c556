#!/usr/bin/env bash
# The images that upstream's node conformance specs run, made here and pushed
# to a registry of our own, for tools/conformance.sh. No image comes from
# anywhere else: each is built with umoci from the pinned module's binaries
# (agnhost, nonewprivs: tools/testenv/k8s-build.sh suite), busybox built as
# upstream releases it (tools/testenv/busybox-build.sh), tools/pause and the
# Debian packages named below.
#
#   repo_list=$(tools/testenv/e2e-images.sh BINDIR)
#   KUBE_TEST_REPO_LIST=$repo_list e2e.test ...
#
# The only stdout line is a KUBE_TEST_REPO_LIST file that maps the registries
# test/utils/image/manifest.go names to ours. Idempotent: the images are built
# and pushed again only when this script, the binaries or the packages change.
#
# The registry: Debian's docker-registry on 127.0.0.1:15000, plain HTTP and no
# authentication, as a cluster's mirror would be. containerd's CRI pulls from a
# loopback registry over HTTP without any hosts configuration. (The TLS
# registry of registry.sh needs credentials, which the specs' pods do not
# carry.)
#
# Images (names and tags of test/utils/image/manifest.go, v1.36.3):
#   e2e-test-images/busybox:1.37.0-1     upstream's busybox (Debian 12's
#       source, unpatched, defconfig) with every applet
#   e2e-test-images/agnhost:2.63.0, :2.55  /agnhost on busybox, with Debian's
#       dash as /bin/sh, bash, curl and netcat-openbsd (`nc -u`) and their
#       libraries, user-defined-in-image (1000) and group-defined-in-image
#       (50000) and /localhost.crt, .key (netexec's HTTPS) as upstream's;
#       the two tags differ by a label only
#   e2e-test-images/nonewprivs:1.4        setuid-root /usr/local/bin/nnp
#   e2e-test-images/nonroot:1.5           busybox as USER 1234
#   e2e-test-images/nginx:1.15-4          Debian's nginx on busybox
#   e2e-test-images/glibc-dns-testing:2.0.0  glibc's `hostname` (-f resolves
#       through nsswitch) and dash
#   e2e-test-images/ipc-utils:1.4         busybox with Debian's util-linux
#       ipcs, ipcmk and ipcrm, as upstream's is Alpine with util-linux (the
#       host IPC specs read `ipcs -m` in it)
#   e2e-test-images/kitten:1.8            agnhost:2.63.0 with upstream's
#       test/images/kitten files (/kitten.jpg, /data.json) and an
#       /etc/os-release that says it stands in for upstream's Alpine Linux
#       base (the image volume spec reads both through the volume)
#   e2e-test-images/perl:5.26             busybox with Debian's /usr/bin/perl
#       (perl-base, no modules): the LSCIQuotaMonitoring specs' pods write
#       and unlink a file with core perl only
#   pause:3.10.2                          tools/pause/pause.c
#   sig-storage/hostpathplugin:v1.17.1    the DRA specs' proxy pods: busybox
#       with Debian's socat and tools/testenv/hostpathplugin/hostpathplugin,
#       a stand-in for the real plugin's proxy mode (its Go module,
#       github.com/kubernetes-csi/csi-driver-host-path, is refused by the
#       module proxy here); the tag is the highest the pinned module's
#       test/e2e/testing-manifests/storage-csi name, which the specs pick
#   e2e-test-images/sample-device-plugin (the tag of the DaemonSet manifest
#       test/e2e_node's DevicePlugin specs read) upstream's sample device
#       plugin on busybox, as its Dockerfile's entrypoint; only when BINDIR
#       holds sample-device-plugin (k8s-build.sh node-suite
#       sample-device-plugin). Those specs name the image as the manifest
#       does, not through KUBE_TEST_REPO_LIST: it is also pulled into the
#       runtime and tagged with the manifest's name there.
#
# Environment: NANOLET_TESTENV_DIR (see setup.sh), NANOLET_TESTENV_E2E_REGISTRY
# (default 127.0.0.1:15000).
set -euo pipefail
exec 3>&1 1>&2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/testenv/common.sh
. "$here/common.sh"

[ $# -eq 1 ] || die "usage: $0 BINDIR (from tools/testenv/k8s-build.sh suite)"
BIN=$1
for b in agnhost nonewprivs agnhost-localhost.crt agnhost-localhost.key kitten.jpg \
  kitten-data.json; do
  [ -s "$BIN/$b" ] || die "$BIN/$b is missing: run tools/testenv/k8s-build.sh suite"
done

ADDR=${NANOLET_TESTENV_E2E_REGISTRY:-127.0.0.1:15000}
# The runtime the pods run on, when not this instance's (containerd 2's for
# tools/node-conformance.sh): its copies of the images are the ones to keep
# current.
IMPORT_SOCK=${NANOLET_TESTENV_E2E_IMPORT_SOCK:-$SOCK}
RDIR=$DIR/e2e-registry
RCONFIG=$RDIR/config.yml
RLOG=$RDIR/registry.log
RPIDFILE=$DIR/run/e2e-registry.pid
E2E=$ADDR/e2e-test-images
PATH_ENV="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Debian packages whose binaries go into the images: installed for their
# libraries; nginx only unpacked (installing it starts a web server on :80).
PACKAGES=(umoci skopeo docker-registry curl netcat-openbsd bash dash hostname
  util-linux libpcre2-8-0 libssl3 zlib1g libcrypt1 socat perl-base)


# --- the registry ------------------------------------------------------------------

registry_answering() { curl -fsS --max-time 5 -o /dev/null "http://$ADDR/v2/" 2>/dev/null; }
registry_pid() { pid_by_cmdline "$RPIDFILE" "docker-registry serve $RCONFIG "; }

registry_config() {
  cat <<EOF
# Written by nanolet tools/testenv/e2e-images.sh.
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $RDIR/data
http:
  addr: $ADDR
EOF
}

registry_up() {
  local pid
  mkdir -p "$RDIR/data" "$DIR/run"
  if ! [ -f "$RCONFIG" ] || ! cmp -s <(registry_config) "$RCONFIG"; then
    registry_config >"$RCONFIG"
    if pid=$(registry_pid); then
      log "restarting the e2e registry (pid $pid): its config changed"
      stop_pid "$pid"
    fi
  fi
  registry_pid >/dev/null && registry_answering && return 0
  registry_answering && die "something else answers on $ADDR"
  log "starting docker-registry on $ADDR (log: $RLOG)"
  setsid nohup docker-registry serve "$RCONFIG" >>"$RLOG" 2>&1 </dev/null 3>&- &
  echo $! >"$RPIDFILE"
  wait_ready docker-registry $! "$RLOG" 30 registry_answering
}

# --- image building ------------------------------------------------------------------

# copy_bin ROOT FILE [DEST]: FILE (as DEST in ROOT, default the same path) and
# every shared library it loads, at the host's paths.
copy_bin() {
  local root=$1 file=$2 dest=${3:-$2} lib
  mkdir -p "$root/$(dirname "$dest")"
  cp -L "$file" "$root/$dest"
  file_is_static "$file" && return 0
  for lib in $(ldd "$file" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
    [ -e "$root/$lib" ] || cp -L --parents "$lib" "$root/"
  done
}

# busybox_root ROOT: upstream's busybox with every applet in /bin, the base
# files.
busybox_root() {
  local root=$1 a
  mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/proc" "$root/sys" "$root/dev" \
    "$root/root" "$root/var" "$root/usr/bin" "$root/usr/sbin" "$root/usr/local/bin"
  chmod 1777 "$root/tmp"
  cp "$BUSYBOX" "$root/bin/busybox"
  for a in $("$BUSYBOX" --list); do
    [ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
}

# dash_sh ROOT: Debian's dash as /bin/sh. busybox's ash runs its own applets
# before PATH: its `nc` has no -u, and the specs' `sh -c` must find Debian's.
dash_sh() {
  copy_bin "$1" /bin/dash
  ln -sf dash "$1/bin/sh"
}

# image WORK NAME TAG CONFIG-ARGS...: WORK/rootfs (prepared by the caller) as
# REGISTRY/NAME:TAG, with `umoci config` CONFIG-ARGS, pushed.
image() {
  local work=$1 name=$2 tag=$3
  shift 3
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:$tag"
  umoci unpack --image "$work/oci:$tag" "$work/bundle" >/dev/null
  cp -a "$work/rootfs/." "$work/bundle/rootfs/"
  umoci repack --image "$work/oci:$tag" "$work/bundle"
  umoci config --image "$work/oci:$tag" --config.env "$PATH_ENV" --config.workingdir / "$@"
  umoci gc --layout "$work/oci"
  skopeo copy --quiet --dest-tls-verify=false "oci:$work/oci:$tag" "docker://$name:$tag" ||
    die "skopeo could not push $name:$tag"
  log "pushed $name:$tag"
}

new_work() { # new_work NAME: an empty work dir with a rootfs/
  local w=$TMP/$1
  mkdir -p "$w/rootfs"
  echo "$w"
}

build_busybox() {
  local w
  w=$(new_work busybox)
  busybox_root "$w/rootfs"
  image "$w" "$E2E/busybox" 1.37.0-1 --config.cmd sh
}

build_agnhost() { # build_agnhost TAG
  local w r
  w=$(new_work "agnhost-$1")
  r=$w/rootfs
  busybox_root "$r"
  dash_sh "$r"
  copy_bin "$r" /bin/bash
  copy_bin "$r" /usr/bin/curl
  rm -f "$r/bin/nc"
  copy_bin "$r" /bin/nc.openbsd /usr/bin/nc
  cp "$BIN/agnhost" "$r/agnhost"
  cp "$BIN/agnhost-localhost.crt" "$r/localhost.crt"
  cp "$BIN/agnhost-localhost.key" "$r/localhost.key"
  ln -s agnhost "$r/agnhost-2"
  mkdir -p "$r/uploads"
  printf 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n' >>"$r/etc/passwd"
  printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >>"$r/etc/group"
  # A label of its own per tag: the same content under two tags would be one
  # image ID, and a pod's status names an image by its ID's first tag.
  image "$w" "$E2E/agnhost" "$1" --config.entrypoint /agnhost --config.cmd pause \
    --config.label "org.nanolet.test.agnhost=$1"
}

# upstream's kitten is agnhost (Alpine Linux upstream) with two files at its
# root; ours is our agnhost, whose base is busybox: its os-release says so,
# naming the base it stands in for.
build_kitten() {
  local w r
  w=$(new_work kitten)
  r=$w/rootfs
  busybox_root "$r"
  cp "$BIN/agnhost" "$r/agnhost"
  cp "$BIN/kitten.jpg" "$r/kitten.jpg"
  cp "$BIN/kitten-data.json" "$r/data.json"
  cat >"$r/etc/os-release" <<'EOF'
NAME="BusyBox"
ID=busybox
PRETTY_NAME="BusyBox (nanolet's test image, standing in for the Alpine Linux base of upstream's kitten image)"
EOF
  image "$w" "$E2E/kitten" 1.8 --config.entrypoint /agnhost --config.cmd test-webserver
}

build_nonewprivs() {
  local w
  w=$(new_work nonewprivs)
  busybox_root "$w/rootfs"
  cp "$BIN/nonewprivs" "$w/rootfs/usr/local/bin/nnp"
  chown 0:0 "$w/rootfs/usr/local/bin/nnp"
  chmod 4755 "$w/rootfs/usr/local/bin/nnp"
  image "$w" "$E2E/nonewprivs" 1.4 --config.cmd nnp
}

build_nonroot() {
  local w
  w=$(new_work nonroot)
  busybox_root "$w/rootfs"
  image "$w" "$E2E/nonroot" 1.5 --config.cmd sh --config.user 1234
}

build_nginx() {
  local w r deb
  w=$(new_work nginx)
  r=$w/rootfs
  busybox_root "$r"
  mkdir -p "$w/deb"
  (cd "$w/deb" && apt-get download nginx >/dev/null 2>&1) || die "apt-get download nginx failed"
  deb=$(ls "$w/deb"/nginx_*.deb)
  dpkg-deb -x "$deb" "$w/deb/x"
  copy_bin "$r" "$w/deb/x/usr/sbin/nginx" /usr/sbin/nginx
  mkdir -p "$r/etc/nginx" "$r/var/log/nginx" "$r/var/lib/nginx" "$r/run" "$r/usr/share/nginx/html"
  # As in upstream's image (a Debian root): /var/run is /run, so nginx's pid
  # file is /var/run/nginx.pid too, which the host PID namespace spec reads.
  ln -s /run "$r/var/run"
  cat >"$r/etc/nginx/nginx.conf" <<'EOF'
user nobody nogroup;
worker_processes 1;
error_log /dev/stderr;
events {}
http {
  access_log /dev/stdout;
  server {
    listen 80;
    root /usr/share/nginx/html;
  }
}
EOF
  echo 'nginx on nanolet' >"$r/usr/share/nginx/html/index.html"
  image "$w" "$E2E/nginx" 1.15-4 --config.cmd nginx --config.cmd -g --config.cmd 'daemon off;'
}

build_glibc_dns() {
  local w r
  w=$(new_work glibc-dns)
  r=$w/rootfs
  busybox_root "$r"
  dash_sh "$r"
  rm -f "$r/bin/hostname"
  copy_bin "$r" /bin/hostname
  image "$w" "$E2E/glibc-dns-testing" 2.0.0 --config.cmd sh
}

build_ipc_utils() {
  local w r b
  w=$(new_work ipc-utils)
  r=$w/rootfs
  busybox_root "$r"
  for b in ipcs ipcmk ipcrm; do
    rm -f "$r/bin/$b"
    copy_bin "$r" "/usr/bin/$b"
  done
  image "$w" "$E2E/ipc-utils" 1.4 --config.cmd sh
}

build_perl() {
  local w r
  w=$(new_work perl)
  r=$w/rootfs
  busybox_root "$r"
  copy_bin "$r" /usr/bin/perl
  image "$w" "$E2E/perl" 5.26 --config.cmd perl
}

build_pause() {
  local w
  w=$(new_work pause)
  cc -static -Os -Wall -Wextra -o "$w/rootfs/pause" "$here/../pause/pause.c"
  strip "$w/rootfs/pause" 2>/dev/null || true
  image "$w" "$ADDR/pause" 3.10.2 --config.entrypoint /pause --config.user 65535:65535
}

# The sample device plugin's image as test/e2e_node's DaemonSet manifest
# names it (read from the pinned module, so that no registry is named here).
sample_ref() {
  local go dir
  go=$("$here/k8s-build.sh" go) || return 1
  dir=$(cd "$here/k8s" && "$go" list -m -f '{{.Dir}}' k8s.io/kubernetes) || return 1
  sed -n 's/^ *- image: *//p' "$dir/test/e2e/testing-manifests/sample-device-plugin/sample-device-plugin.yaml" | head -1
}

build_sample() { # build_sample TAG
  local w
  w=$(new_work sample-device-plugin)
  busybox_root "$w/rootfs"
  copy_bin "$w/rootfs" "$BIN/sample-device-plugin" /sampledeviceplugin
  image "$w" "$E2E/sample-device-plugin" "$1" --config.entrypoint /sampledeviceplugin \
    --config.entrypoint -alsologtostderr
}

hostpath_tag() { # the highest hostpathplugin tag of the storage-csi manifests
  local go dir
  go=$("$here/k8s-build.sh" go) || return 1
  dir=$(cd "$here/k8s" && "$go" list -m -f '{{.Dir}}' k8s.io/kubernetes) || return 1
  grep -rhoE 'sig-storage/hostpathplugin:v[0-9.]+' "$dir/test/e2e/testing-manifests/storage-csi" |
    sed 's/.*://' | sort -V | tail -1
}

build_hostpathplugin() { # build_hostpathplugin TAG
  local w
  w=$(new_work hostpathplugin)
  busybox_root "$w/rootfs"
  copy_bin "$w/rootfs" /usr/bin/socat
  cp "$here/hostpathplugin/hostpathplugin" "$w/rootfs/hostpathplugin"
  chmod 755 "$w/rootfs/hostpathplugin"
  image "$w" "$ADDR/sig-storage/hostpathplugin" "$1" --config.entrypoint /hostpathplugin
}

ctr_import() { ctr --address "$IMPORT_SOCK" --connect-timeout 3s -n "$NAMESPACE" "$@"; }

# The runtime's copy under the manifest's name (pods with IfNotPresent use it).
import_sample() { # import_sample REF
  local ours=$E2E/sample-device-plugin:${1##*:}
  ctr_import images pull --plain-http "$ours" >/dev/null || die "could not pull $ours into the runtime"
  ctr_import images tag --force "$ours" "$1" >/dev/null || die "could not tag $ours as $1"
}

write_repo_list() {
  cat <<EOF
# Written by nanolet tools/testenv/e2e-images.sh: KUBE_TEST_REPO_LIST.
promoterE2eRegistry: $E2E
gcRegistry: $ADDR
sigStorageRegistry: $ADDR/sig-storage
EOF
}

# --- main ----------------------------------------------------------------------------

[ "$(id -u)" -eq 0 ] || die "must run as root"
install_packages "${PACKAGES[@]}"
BUSYBOX=$("$here/busybox-build.sh")
registry_up

SAMPLE_REF=
if [ -x "$BIN/sample-device-plugin" ]; then
  SAMPLE_REF=$(sample_ref) && [ -n "$SAMPLE_REF" ] || die "no image in the sample device plugin's DaemonSet manifest"
fi
HOSTPATH_TAG=$(hostpath_tag) && [ -n "$HOSTPATH_TAG" ] || die "no hostpathplugin image in the storage-csi manifests"
# Rebuilt when anything that goes into the images changes.
key=$({
  echo "$HOSTPATH_TAG"
  cat "$here/hostpathplugin/hostpathplugin"
  echo "$SAMPLE_REF"
  [ -z "$SAMPLE_REF" ] || sha256sum "$BIN/sample-device-plugin"
  cat "$0" "$here/../pause/pause.c"
  sha256sum "$BIN/agnhost" "$BIN/nonewprivs" "$BIN"/agnhost-localhost.* "$BIN"/kitten* "$BUSYBOX"
  dpkg-query -W "${PACKAGES[@]}"
  apt-cache policy nginx | sed -n 's/^ *Candidate: //p'
} | sha256sum | cut -c1-16)
ACCEPT='Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json'
have_all() {
  local ref
  for ref in busybox:1.37.0-1 agnhost:2.63.0 agnhost:2.55 nonewprivs:1.4 nonroot:1.5 \
    nginx:1.15-4 glibc-dns-testing:2.0.0 kitten:1.8 ipc-utils:1.4 perl:5.26; do
    curl -fsS --max-time 5 -o /dev/null -H "$ACCEPT" \
      "http://$ADDR/v2/e2e-test-images/${ref%%:*}/manifests/${ref#*:}" || return 1
  done
  [ -z "$SAMPLE_REF" ] || curl -fsS --max-time 5 -o /dev/null -H "$ACCEPT" \
    "http://$ADDR/v2/e2e-test-images/sample-device-plugin/manifests/${SAMPLE_REF##*:}" || return 1
  curl -fsS --max-time 5 -o /dev/null -H "$ACCEPT" "http://$ADDR/v2/sig-storage/hostpathplugin/manifests/$HOSTPATH_TAG" || return 1
  curl -fsS --max-time 5 -o /dev/null -H "$ACCEPT" "http://$ADDR/v2/pause/manifests/3.10.2"
}

exec 4>"$RDIR/lock"
flock 4
if [ "$(cat "$RDIR/images.key" 2>/dev/null)" != "$key" ] || ! have_all; then
  log "building the e2e images into $ADDR"
  start=$(date +%s)
  mkdir -p "$DIR/tmp"
  TMP=$(mktemp -d "$DIR/tmp/e2e-images.XXXXXX")
  trap 'rm -rf "$TMP"' EXIT
  build_busybox
  build_agnhost 2.63.0
  build_agnhost 2.55
  build_nonewprivs
  build_nonroot
  build_nginx
  build_glibc_dns
  build_kitten
  build_ipc_utils
  build_perl
  build_pause
  build_hostpathplugin "$HOSTPATH_TAG"
  [ -z "$SAMPLE_REF" ] || build_sample "${SAMPLE_REF##*:}"
  # The runtime's copies of the earlier images are stale: the specs' pods
  # (IfNotPresent) must pull these.
  for sock in $(printf '%s\n' "$SOCK" "$IMPORT_SOCK" | sort -u); do
    stale=$(ctr --address "$sock" --connect-timeout 3s -n "$NAMESPACE" images ls -q 2>/dev/null | grep -F "$ADDR/" || true)
    [ -n "$stale" ] || continue
    # shellcheck disable=SC2086
    ctr --address "$sock" --connect-timeout 3s -n "$NAMESPACE" images rm $stale >/dev/null ||
      log "could not remove the stale images: $stale"
  done
  echo "$key" >"$RDIR/images.key"
  log "e2e images built and pushed in $(($(date +%s) - start)) s"
fi
[ -z "$SAMPLE_REF" ] || import_sample "$SAMPLE_REF"
write_repo_list >"$RDIR/repo-list.yaml"
echo "$RDIR/repo-list.yaml" >&3
