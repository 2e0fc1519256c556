#!/usr/bin/env bash
# Unpacks Debian's source packages of the libraries that the self-contained
# build compiles (meson -Dself_contained=true; docs/INSTALL.md), and cmocka for
# the unit tests of that build and the static one, into
# ${NANOLET_SRC_DIR:-/var/cache/nanolet-src}/<source package>, with Debian's
# patches applied, as `apt-get source` does. subprojects/<library>/meson.build
# builds them from there. Needs the deb-src index and dpkg-dev
# (tools/install-deps.sh --sources). Idempotent: a package already unpacked is
# kept.
set -euo pipefail
dir=${NANOLET_SRC_DIR:-/var/cache/nanolet-src}
packages=(libuv1 nghttp2 protobuf-c mbedtls libyaml jansson cmocka)
mkdir -p "$dir"
cd "$dir"
for p in "${packages[@]}"; do
  [ -e "$p/debian/changelog" ] && continue
  rm -rf "$p.tmp" && mkdir "$p.tmp"
  # _apt cannot write to a root-only directory: download as root, quietly.
  (cd "$p.tmp" && apt-get source -qq -o APT::Sandbox::User=root "$p" >/dev/null) ||
    { echo "deb-sources: apt-get source $p failed (run tools/install-deps.sh --sources)" >&2; exit 1; }
  tree=$(find "$p.tmp" -mindepth 1 -maxdepth 1 -type d)
  rm -rf "$p" && mv "$tree" "$p" && rm -rf "$p.tmp"
  echo "deb-sources: $p $(dpkg-parsechangelog -l "$p/debian/changelog" -S Version)" >&2
done
