#!/usr/bin/env bash
# Build metrics-server (sigs.k8s.io/metrics-server cmd/metrics-server) from
# the pinned module in tools/testenv/metrics-server, once per machine: cached
# under the test environment's cache, keyed on the module, the flags and the
# Go version, as tools/testenv/k8s-build.sh does for the control plane (whose
# k8s.io modules it shares, so a warm Go build cache makes it a few minutes).
#
# The only stdout line is the binary's path:
#   ms=$(tools/testenv/metrics-server-build.sh)
#
# Go: as k8s-build.sh (which fetches its pinned toolchain when PATH has none).
#
# Environment:
#   NANOLET_TESTENV_CACHE  cache directory (default /var/cache/nanolet-testenv)
#   GOPROXY                module proxy (default https://proxy.golang.org)
set -euo pipefail
exec 3>&1 1>&2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod=$here/metrics-server
CACHE=${NANOLET_TESTENV_CACHE:-/var/cache/nanolet-testenv}
log() { echo "metrics-server-build: $*"; }
die() { log "$*"; exit 1; }

build_flags=(-trimpath -ldflags "-s -w")
export CGO_ENABLED=0 GOTOOLCHAIN=local GOSUMDB=off GOFLAGS=-mod=readonly
export GOPROXY=${GOPROXY:-https://proxy.golang.org}

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
dir=$CACHE/metrics-server/$key
out=$dir/metrics-server
if [ -x "$out" ]; then
  echo "$out" >&3
  exit 0
fi
mkdir -p "$dir"
exec 4>"$dir/lock"
flock -n 4 || { log "waiting for another build of $out"; flock 4; }
if [ ! -x "$out" ]; then
  blog=$dir/build.log
  log "building metrics-server with $go_version into $out (log: $blog)"
  start=$(date +%s)
  if ! (cd "$mod" && exec nice -n 10 "$go_bin" build "${build_flags[@]}" -o "$out.tmp" \
    sigs.k8s.io/metrics-server/cmd/metrics-server) >"$blog" 2>&1; then
    tail -n 20 "$blog" >&2
    grep -qE 'dial tcp|no such host|connection refused|i/o timeout' "$blog" &&
      die "the Go module proxy ($GOPROXY) cannot be reached (see $blog)"
    die "building metrics-server failed; see $blog"
  fi
  mv "$out.tmp" "$out"
  log "built in $(($(date +%s) - start)) s"
fi
echo "$out" >&3
