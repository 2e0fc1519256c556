#!/usr/bin/env bash
# Configures and builds nanolet in build/ (and, with --asan, build-asan/ with
# AddressSanitizer and UndefinedBehaviorSanitizer).
#   tools/build.sh --static [amd64|arm64|armhf]
# builds only the static binary (docs/INSTALL.md, "Static build"): nanolet and
# every library it links compiled with musl and linked -static, in
# build-static/agent/nanolet (amd64) or build-static-ARCH/agent/nanolet.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --static ]; then
  arch=${2:-amd64}
  case $arch in
  amd64) dir=build-static machine=(--native-file tools/musl.ini) ;;
  arm64) dir=build-static-arm64 machine=(--cross-file tools/cross/aarch64-linux-musl.ini) ;;
  armhf) dir=build-static-armhf machine=(--cross-file tools/cross/arm-linux-musleabihf.ini) ;;
  *) echo "usage: $0 --static [amd64|arm64|armhf]" >&2; exit 2 ;;
  esac
  tools/deb-sources.sh
  # self-contained.ini's options (-Os, LTO, no tests) after the machine's.
  kind=${machine[0]}
  [ -f $dir/build.ninja ] || meson setup $dir --fatal-meson-warnings --prefix=/usr "${machine[@]}" \
    "$kind" tools/self-contained.ini >/dev/null
  ninja -C $dir agent/nanolet
  exit 0
fi
[ -f build/build.ninja ] || meson setup build --fatal-meson-warnings >/dev/null
ninja -C build
if [ "${1:-}" = --asan ]; then
  [ -f build-asan/build.ninja ] || meson setup build-asan --fatal-meson-warnings \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug >/dev/null
  ninja -C build-asan
fi
