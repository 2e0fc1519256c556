#!/usr/bin/env bash
# Installs what building and testing nanolet needs on Debian 12, as root.
# Idempotent: apt-get runs only when a package is missing.
set -euo pipefail

build=(meson ninja-build pkg-config gcc libc6-dev libuv1-dev node-llhttp libnghttp2-dev
  libprotobuf-c-dev protobuf-c-compiler libmbedtls-dev libyaml-dev libjansson-dev)
# openssl and unzip: the test control plane's certificates and Go toolchain;
# prometheus: promtool, which checks /metrics.
test=(libcmocka-dev curl jq valgrind procps clang libclang-rt-14-dev util-linux openssl unzip
  prometheus)

want=("${build[@]}")
[ "${1:-}" = --test ] && want+=("${test[@]}")

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
