#!/usr/bin/env bash
# Build a test tool from its pinned module in tools/testenv/NAME, once per
# machine: cached under the test environment's cache, keyed on the module, the
# flags and the Go version, as tools/testenv/k8s-build.sh does for the control
# plane.
#   metrics-server  sigs.k8s.io/metrics-server cmd/metrics-server (its k8s.io
#                   modules are the control plane's: the Go build cache shares
#                   them)
#   containerd2     github.com/containerd/containerd/v2 cmd/containerd and
#                   cmd/containerd-shim-runc-v2 (beside it)
#   toxiproxy       github.com/Shopify/toxiproxy/v2 cmd/server, the impairment
#                   proxy of the uplink tests (driven through its HTTP API)
#   runc            github.com/opencontainers/runc, with cgo (its nsenter) and
#                   libseccomp (libseccomp-dev): containerd 2's runc
#                   (tools/testenv/containerd2.sh), whose idmapped mounts
#                   (1.2 and later; Debian 12 has 1.1) user namespaces need
#
# The only stdout line is the (first) binary's path:
#   ms=$(tools/testenv/tool-build.sh metrics-server)
#
# Go: as k8s-build.sh (which fetches its pinned toolchain when PATH has none).
#
# Environment:
#   NANOLET_TESTENV_CACHE  cache directory (default /var/cache/nanolet-testenv)
#   GOPROXY                module proxy (default: Go's own, `go env GOPROXY`)
set -euo pipefail
exec 3>&1 1>&2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${NANOLET_TESTENV_CACHE:-/var/cache/nanolet-testenv}
log() { echo "tool-build: $*"; }
die() { log "$*"; exit 1; }

name=${1:-}
case $name in
  metrics-server) pkgs=(sigs.k8s.io/metrics-server/cmd/metrics-server) tags= ;;
  # as containerd's static release builds, without cgo's snapshotters; its
  # own shim beside it (Debian's 1.6 shim does not speak to containerd 2)
  containerd2)
    pkgs=(github.com/containerd/containerd/v2/cmd/containerd
      github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2)
    tags=no_btrfs,no_devmapper,no_zfs
    ;;
  toxiproxy) pkgs=(github.com/Shopify/toxiproxy/v2/cmd/server) tags= ;;
  runc) pkgs=(github.com/opencontainers/runc) tags=seccomp cgo=1 ;;
  *) die "usage: $0 metrics-server|containerd2|toxiproxy|runc" ;;
esac
mod=$here/$name
build_flags=(-trimpath)
[ -z "$tags" ] || build_flags+=(-tags "$tags")
build_flags+=(-ldflags "-s -w")
export CGO_ENABLED=${cgo:-0} GOTOOLCHAIN=local GOSUMDB=off GOFLAGS=-mod=readonly

need=$(sed -n 's/^go //p' "$mod/go.mod")
go_ok() { # go_ok GO: GO runs and is at least the module's go version
  local v
  v=$("$1" env GOVERSION 2>/dev/null) || return 1
  v=${v#go}
  [ "$(printf '%s\n%s\n' "$need" "$v" | sort -V | head -n1)" = "$need" ]
}
go_bin=$(command -v go || true)
if [ -z "$go_bin" ] || ! go_ok "$go_bin"; then
  # k8s-build.sh fetches and checks its pinned toolchain into the cache.
  "$here/k8s-build.sh" >/dev/null
  go_bin=$(ls -d "$CACHE"/go/go*/bin/go 2>/dev/null | sort -V | tail -1)
  [ -n "$go_bin" ] && go_ok "$go_bin" || die "no Go >= $need (see tools/testenv/k8s-build.sh)"
fi
go_version=$("$go_bin" env GOVERSION)
key=$({ cat "$mod/go.mod" "$mod/go.sum"; printf '%s\n' "${build_flags[@]}" "$CGO_ENABLED" "$go_version"; } |
  sha256sum | cut -c1-16)
dir=$CACHE/$name/$key
out=$dir/${pkgs[0]##*/}
if [ -x "$out" ]; then
  echo "$out" >&3
  exit 0
fi
mkdir -p "$dir"
exec 4>"$dir/lock"
flock -n 4 || { log "waiting for another build of $out"; flock 4; }
if [ ! -x "$out" ]; then
  blog=$dir/build.log
  log "building $name with $go_version into $out (log: $blog)"
  start=$(date +%s)
  rm -rf "$dir/tmp"
  mkdir -p "$dir/tmp"
  if ! (cd "$mod" && exec nice -n 10 "$go_bin" build "${build_flags[@]}" -o "$dir/tmp/" \
    "${pkgs[@]}") >"$blog" 2>&1; then
    tail -n 20 "$blog" >&2
    grep -qE 'dial tcp|no such host|connection refused|i/o timeout' "$blog" &&
      die "the Go module proxy ($("$go_bin" env GOPROXY)) cannot be reached (see $blog)"
    die "building $name failed; see $blog"
  fi
  mv "$dir"/tmp/* "$dir/"
  rmdir "$dir/tmp"
  log "built in $(($(date +%s) - start)) s"
fi
echo "$out" >&3
