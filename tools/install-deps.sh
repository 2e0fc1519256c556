#!/usr/bin/env bash
# Installs what building and testing nanolet needs on Debian 12, as root.
# Idempotent: apt-get runs only when a package is missing.
#   --test   the test tools too
#   --cross  also the cross compilers, qemu-user and the arm64 and armhf
#            libraries (multiarch) for the cross builds (docs/INSTALL.md)
#   --sources the source-package index and dpkg-dev, for the self-contained
#            build's libraries (tools/deb-sources.sh); --test implies it
#   --static musl (musl-tools, musl-dev) for the static build (tools/build.sh
#            --static), and --sources; with --cross, musl-dev for arm64 and
#            armhf (their <triplet>-musl-gcc wrappers run the cross compilers);
#            --test implies it
set -euo pipefail

build=(meson ninja-build pkg-config gcc libc6-dev libuv1-dev node-llhttp libnghttp2-dev
  libprotobuf-c-dev protobuf-c-compiler libmbedtls-dev libyaml-dev libjansson-dev)
# openssl and unzip: the test control plane's certificates and Go toolchain;
# openrc, runit, logrotate, man-db and systemd (systemd-analyze): the service
# files' test; prometheus: promtool, which checks /metrics; docker-registry,
# skopeo and apache2-utils (htpasswd): the test registry; ccache: the suite's
# builds start from a fresh clone each time (tools/test.sh); netcat-openbsd:
# the conformance suite's agnhost image (tools/testenv/e2e-images.sh);
# python3-grpcio and python3-protobuf: an independent gRPC client for the
# gRPC server's test (test/unit/cri/grpc_python_client.py); faketime: the
# faults soak steps the agent's clock alone (tools/bench/faults_soak.sh);
# uidmap: getsubids, which reads the user namespaces' range of the `kubelet`
# user (tools/testenv/subids.sh) for the agent and upstream's specs;
# libseccomp-dev: the runc of the containerd 2 instance, built from its module
# (tools/testenv/tool-build.sh runc).
sources=(dpkg-dev)
static=("${sources[@]}" musl-tools musl-dev)
test=("${static[@]}" libcmocka-dev curl jq valgrind procps clang libclang-rt-14-dev util-linux openssl
  unzip openrc runit logrotate man-db systemd prometheus docker-registry skopeo apache2-utils ccache
  netcat-openbsd python3-grpcio python3-protobuf faketime uidmap libseccomp-dev)
cross_arches=(arm64 armhf)
# The cross C libraries (-cross, in /usr/<triplet>) rather than libc6-dev:<arch>,
# which must match the native linux-libc-dev version exactly.
cross=(gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf libc6-dev-arm64-cross libc6-dev-armhf-cross
  qemu-user-static file)
for a in "${cross_arches[@]}"; do
  for p in libuv1-dev libnghttp2-dev libprotobuf-c-dev libmbedtls-dev libyaml-dev libjansson-dev \
    libcmocka-dev; do
    cross+=("$p:$a")
  done
done

# Debian's images list only binary packages; apt-get source needs the deb-src
# lines of the same archives.
add_deb_src() {
  local d=/etc/apt/sources.list.d
  [ -e $d/nanolet-src.sources ] || [ -e $d/nanolet-src.list ] && return 0
  apt-get indextargets --format '$(IDENTIFIER)' 2>/dev/null | grep -qx Sources && return 0
  if [ -e $d/debian.sources ]; then # deb822, as Debian 12's images have it
    sed -n 's/^Types:.*deb.*/Types: deb-src/p; /^\(URIs\|Suites\|Components\|Signed-By\):/p; /^$/p' \
      $d/debian.sources >$d/nanolet-src.sources
  else # the one-line format of an installed system
    sed -n 's/^deb \(.*\)/deb-src \1/p' /etc/apt/sources.list >$d/nanolet-src.list
  fi
  need_update=1
}

want=("${build[@]}")
need_update=0
with_static=0 with_cross=0
for arg in "$@"; do
  case $arg in
  --test) want+=("${test[@]}"); add_deb_src; with_static=1 ;;
  --sources) want+=("${sources[@]}"); add_deb_src ;;
  --static) want+=("${static[@]}"); add_deb_src; with_static=1 ;;
  --cross)
    with_cross=1
    want+=("${cross[@]}")
    for a in "${cross_arches[@]}"; do
      dpkg --print-foreign-architectures | grep -qx "$a" || dpkg --add-architecture "$a"
    done
    ;;
  *) echo "usage: $0 [--test] [--cross] [--sources] [--static]" >&2; exit 2 ;;
  esac
done
if [ $with_static = 1 ] && [ $with_cross = 1 ]; then
  for a in "${cross_arches[@]}"; do want+=("musl-dev:$a"); done
fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] || [ $need_update = 1 ]; then
  [ ${#missing[@]} -eq 0 ] || echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # A mirror caught mid-sync fails some index (seen for one architecture);
  # the packages still install from the others, or fail below.
  apt-get update -qq || echo "apt-get update: some indexes failed to download" >&2
  [ ${#missing[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
