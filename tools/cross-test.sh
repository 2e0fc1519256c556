#!/usr/bin/env bash
# tools/cross-test.sh [aarch64] [arm]: cross-builds nanolet (build-aarch64/,
# build-arm/, with tools/cross/*.ini: Debian's cross compilers and the
# :arm64/:armhf libraries from tools/install-deps.sh --cross), checks with
# `file` that the binary is for its architecture, and runs the unit suite
# under qemu-user (the cross files' exe_wrapper), but for the test named
# below. Default: both.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- aarch64 arm

# Not run under emulation (it runs natively and under ASan): kube_client, whose
# deadlines (100-300 ms around TLS handshakes and HTTP/2 flow control) assume
# native speed; qemu-user emulating mbedtls' RSA is several times slower
# (docs/INSTALL.md, "Cross builds").
slow=(kube_client)

status=0
for dir in "$@"; do
  case $dir in
  aarch64) triplet=aarch64-linux-gnu want="ARM aarch64" ;;
  arm) triplet=arm-linux-gnueabihf want="ARM, EABI5" ;;
  *) echo "usage: $0 [aarch64] [arm]" >&2; exit 2 ;;
  esac
  build=build-$dir
  cross=(--cross-file "tools/cross/$triplet.ini")
  # Meson puts ccache before the compilers it finds, not before a cross file's:
  # a second machine file does it (tools/test.sh sets the cache up).
  if command -v ccache >/dev/null && [ ! -f "$build/build.ninja" ]; then
    mkdir -p "$build"
    printf "[binaries]\nc = ['ccache', '%s-gcc']\n" "$triplet" >"$build/ccache.ini"
    cross+=(--cross-file "$build/ccache.ini")
  fi
  [ -f "$build/build.ninja" ] || meson setup "$build" "${cross[@]}" --fatal-meson-warnings >/dev/null
  ninja -C "$build" -j2 >/dev/null
  desc=$(file -b "$build/agent/nanolet")
  if [[ $desc == *"$want"* ]]; then
    echo "cross: $triplet: $desc"
  else
    echo "cross: $triplet: FAILED: file says: $desc"
    status=1
  fi
  mapfile -t tests < <(meson test -C "$build" --suite unit --list 2>/dev/null | sed 's/^.* \/ //' |
    grep -vxF -f <(printf '%s\n' "${slow[@]}"))
  meson test -C "$build" --no-rebuild --print-errorlogs --logbase unit "${tests[@]}" || status=1
done
exit $status
