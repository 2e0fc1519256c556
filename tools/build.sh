#!/usr/bin/env bash
# Configures and builds nanolet in build/ (and, with --asan, build-asan/ with
# AddressSanitizer and UndefinedBehaviorSanitizer).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || meson setup build --fatal-meson-warnings >/dev/null
ninja -C build
if [ "${1:-}" = --asan ]; then
  [ -f build-asan/build.ninja ] || meson setup build-asan --fatal-meson-warnings \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug >/dev/null
  ninja -C build-asan
fi
