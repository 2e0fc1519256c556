#!/usr/bin/env bash
# busybox as its upstream release builds it, for the e2e suite's busybox
# image, once per machine: cached under the test environment's cache, keyed on
# the source tarball and this script.
#
# Why not Debian's busybox-static: Debian patches busybox's ash back to
# dropping environment variables whose names are not shell identifiers (for
# its installer), and upstream's ash keeps them, as the e2e suite's image
# (busybox 1.37.0, upstream's release) does: the envFrom specs run `sh -c env`
# in it and look for `data-1=value-1`.
#
# The source is Debian 12's busybox source package (its .orig tarball is
# upstream's release tarball), fetched with `apt-get source` from the
# machine's own Debian archive (tools/install-deps.sh --sources adds its
# deb-src index) and checked by apt against the signed index; none of Debian's
# patches are applied. Configured with upstream's defconfig, linked static.
#
# The only stdout line is the binary's path:
#   bb=$(tools/testenv/busybox-build.sh)
#
# Environment:
#   NANOLET_TESTENV_CACHE  cache directory (default /var/cache/nanolet-testenv)
set -euo pipefail
exec 3>&1 1>&2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${NANOLET_TESTENV_CACHE:-/var/cache/nanolet-testenv}
log() { echo "busybox-build: $*"; }
die() { log "$*"; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root"

top=$CACHE/busybox
mkdir -p "$top"
exec 4>"$top/lock"
flock 4

"$here/../install-deps.sh" --sources # the deb-src index and dpkg-dev
for p in make bzip2; do
  command -v "$p" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null
done

src=$top/src
if ! ls "$src"/busybox_*.orig.tar.* >/dev/null 2>&1; then
  rm -rf "$src.tmp"
  mkdir -p "$src.tmp"
  # _apt cannot write to a root-only directory: download as root.
  (cd "$src.tmp" && apt-get source -qq --download-only -o APT::Sandbox::User=root busybox >/dev/null) ||
    die "apt-get source busybox failed"
  rm -rf "$src"
  mv "$src.tmp" "$src"
fi
tarball=$(ls "$src"/busybox_*.orig.tar.* | head -1)

key=$({ sha256sum "$tarball"; cat "$0"; gcc --version | head -1; } | sha256sum | cut -c1-16)
out=$top/$key/busybox
if ! [ -x "$out" ]; then
  log "building $(basename "$tarball") (defconfig, static) into $top/$key"
  start=$(date +%s)
  work=$(mktemp -d "$top/build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  tar -xf "$tarball" -C "$work" --strip-components=1
  (
    cd "$work"
    make -s defconfig >/dev/null
    sed -i 's/^# CONFIG_STATIC is not set$/CONFIG_STATIC=y/' .config
    # tc needs the kernel's CBQ headers, gone from newer kernels' uapi.
    sed -i 's/^CONFIG_TC=y$/# CONFIG_TC is not set/' .config
    yes '' | make -s oldconfig >/dev/null
    nice make -s -j"$(nproc)" busybox >build.log 2>&1 || { tail -30 build.log; exit 1; }
  ) || die "the busybox build failed"
  mkdir -p "$top/$key"
  cp "$work/busybox" "$out.tmp"
  mv "$out.tmp" "$out"
  log "built in $(($(date +%s) - start)) s"
  # Builds of earlier keys are left by script or source changes.
  find "$top" -mindepth 1 -maxdepth 1 -type d -name '[0-9a-f]*' ! -name "$key" -exec rm -rf {} +
fi
banner=$("$out" --help 2>&1 || true)
[[ $banner == BusyBox* ]] || die "$out does not run: ${banner:0:200}"
echo "$out" >&3
