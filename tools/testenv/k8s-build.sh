#!/usr/bin/env bash
# Build the test control plane's binaries (kube-apiserver,
# kube-controller-manager, kubectl, etcd) from the pinned module in
# tools/testenv/k8s, once per machine: they are cached outside the source tree,
# keyed on everything that goes into them, so a warm run takes well under a
# second and a fresh clone on the same machine reuses them.
#
# The only stdout line is the directory holding the binaries:
#   bin=$(tools/testenv/k8s-build.sh)
#   bin=$(tools/testenv/k8s-build.sh kubelet)   # the upstream kubelet as well
#   bin=$(tools/testenv/k8s-build.sh kubemark)  # kubemark's hollow node (the real
#       kubelet code on a fake runtime; tools/bench/fleet_bench.sh)
#   bin=$(tools/testenv/k8s-build.sh suite)     # and upstream's node e2e suite:
#       kube-scheduler, e2e.test (`go test -c` of k8s.io/kubernetes/test/e2e),
#       the ginkgo CLI at the version k8s pins, the test images' binaries
#       agnhost and nonewprivs (tools/conformance.sh runs them) and the node
#       e2e's image credential provider plugin gcp-credential-provider
#       (test/e2e_node/plugins; tools/testenv/credprov-plugin.sh)
#   bin=$(tools/testenv/k8s-build.sh sample-device-plugin)  # upstream's sample
#       device plugin (example.com/resource; test/e2e/devices.sh)
#   bin=$(tools/testenv/k8s-build.sh test-driver)  # upstream's DRA test driver
#       (test/e2e/dra/test-driver; its kubelet-plugin command: test/e2e/dra.sh)
#   go=$(tools/testenv/k8s-build.sh go)          # only the Go it builds with
#       (tools/check_k8s_proto.py reads upstream's .proto files through it)
#   bin=$(tools/testenv/k8s-build.sh node-suite) # upstream's node validation
#       suite: e2e_node.test (`go test -c` of k8s.io/kubernetes/test/e2e_node,
#       which runs its own etcd and apiserver in-process), ginkgo, agnhost,
#       nonewprivs and gcp-credential-provider (tools/node-conformance.sh runs
#       them)
#
# Go: `go` from PATH when it is >= 1.26.0, else the official toolchain module
# golang.org/toolchain@v0.0.1-go1.26.8.linux-ARCH from the Go module proxy,
# checked against the sha256 pinned below. Without Go or the proxy, it fails
# and says so.
#
# Environment:
#   NANOLET_TESTENV_CACHE  cache directory (default /var/cache/nanolet-testenv)
#   GOPROXY                module proxy (default: Go's own, `go env GOPROXY`)
set -euo pipefail
exec 3>&1 1>&2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/testenv/common.sh
. "$here/common.sh"
mod=$here/k8s
CACHE=${NANOLET_TESTENV_CACHE:-/var/cache/nanolet-testenv}

K8S_VERSION=v1.36.3
GO_MIN=1.26.0
GO_TOOLCHAIN=1.26.8
declare -A GO_TOOLCHAIN_SHA256=(
  [amd64]=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
  [arm64]=02b36b6787b3ac767668f630e2998df45a3b1f9ffee08d1bf3ef6487cd658d99
)
declare -A PACKAGES=(
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [kubemark]=k8s.io/kubernetes/cmd/kubemark
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [ginkgo]=github.com/onsi/ginkgo/v2/ginkgo
  [agnhost]=k8s.io/kubernetes/test/images/agnhost
  [nonewprivs]=k8s.io/kubernetes/test/images/nonewprivs
  [sample-device-plugin]=k8s.io/kubernetes/test/images/sample-device-plugin
  [test-driver]=k8s.io/kubernetes/test/e2e/dra/test-driver
  [e2e.test]=k8s.io/kubernetes/test/e2e
  [gcp-credential-provider]=k8s.io/kubernetes/test/e2e_node/plugins/gcp-credential-provider
  [e2e_node.test]=k8s.io/kubernetes/test/e2e_node
  [etcd]=./etcd
)
SUITE=(kube-scheduler ginkgo agnhost nonewprivs e2e.test gcp-credential-provider)
NODE_SUITE=(ginkgo agnhost nonewprivs e2e_node.test gcp-credential-provider)

targets=(kube-apiserver kube-controller-manager kubectl etcd)
only_go=
for arg in "$@"; do
  case $arg in
    go) only_go=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    suite) targets+=("${SUITE[@]}") ;;
    node-suite) targets+=("${NODE_SUITE[@]}") ;;
    *)
      [ -n "${PACKAGES[$arg]:-}" ] || die "unknown binary: $arg (one of: ${!PACKAGES[*]})"
      targets+=("$arg")
      ;;
  esac
done

# As upstream's hack/lib/golang.sh: static, no paths, no debug info, and the
# version stamped so that `kubectl version` and /version tell the truth.
minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  ldflags+=" -X $p.gitTreeState=clean"
done
build_flags=(-trimpath -tags selinux,notest -ldflags "$ldflags")
export CGO_ENABLED=0 GOTOOLCHAIN=local GOSUMDB=off GOFLAGS=-mod=readonly
# go.sum is committed; the checksum database need not be reachable. The module
# proxy is Go's own setting: GOPROXY, else what a go on PATH (of any version)
# says; the toolchain fetch below needs it when no go is there.
goproxy=${GOPROXY:-$(go env GOPROXY 2>/dev/null || true)}

# --- Go -----------------------------------------------------------------------

go_usable() { # go_usable GO: true when GO runs and is >= GO_MIN
  local v
  v=$("$1" env GOVERSION 2>/dev/null) || return 1
  v=${v#go}
  [ "$(printf '%s\n%s\n' "$GO_MIN" "$v" | sort -V | head -n1)" = "$GO_MIN" ]
}

# The first real proxy in GOPROXY ("direct" and "off" are not proxies).
proxy_url() {
  local p
  for p in ${goproxy//[,|]/ }; do
    case $p in direct | off) ;; *) echo "${p%/}"; return 0 ;; esac
  done
  return 1
}

fetch_go() {
  local arch sum url zip dir=$CACHE/go/go$GO_TOOLCHAIN
  if [ -x "$dir/bin/go" ]; then
    echo "$dir/bin/go"
    return 0
  fi
  case $(uname -m) in
    x86_64) arch=amd64 ;;
    aarch64) arch=arm64 ;;
    *) die "no Go >= $GO_MIN on PATH, and no pinned toolchain for $(uname -m)" ;;
  esac
  command -v unzip >/dev/null || die "unzip is missing (tools/install-deps.sh --test)"
  url=$(proxy_url) || die "no Go >= $GO_MIN on PATH, and GOPROXY=\"$goproxy\" names no proxy to fetch it from (set GOPROXY)"
  url+=/golang.org/toolchain/@v/v0.0.1-go$GO_TOOLCHAIN.linux-$arch.zip
  log "no Go >= $GO_MIN on PATH: fetching go$GO_TOOLCHAIN from $url"
  mkdir -p "$CACHE/go"
  zip=$(mktemp "$CACHE/go/toolchain.XXXXXX")
  if ! curl -fsSL --retry 2 -o "$zip" "$url"; then
    rm -f "$zip"
    die "cannot fetch the Go toolchain from the module proxy ($url): Go >= $GO_MIN is needed to build the test control plane"
  fi
  sum=$(sha256sum "$zip" | cut -d' ' -f1)
  if [ "$sum" != "${GO_TOOLCHAIN_SHA256[$arch]}" ]; then
    rm -f "$zip"
    die "go$GO_TOOLCHAIN from $url has sha256 $sum, expected ${GO_TOOLCHAIN_SHA256[$arch]}"
  fi
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  unzip -q "$zip" -d "$dir.tmp"
  rm -f "$zip"
  mv "$dir.tmp/golang.org/toolchain@v0.0.1-go$GO_TOOLCHAIN.linux-$arch" "$dir"
  rm -rf "$dir.tmp"
  # Module zips carry no file modes; cmd/go marks these executable the same way.
  chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/*
  echo "$dir/bin/go"
}

find_go() {
  local g
  if g=$(command -v go) && go_usable "$g"; then
    echo "$g"
  else
    fetch_go
  fi
}

# --- cache key ----------------------------------------------------------------

# Everything the binaries depend on besides the toolchain: the module, the etcd
# entry point and the flags. The toolchain's version is added once known.
recipe() {
  cat "$mod/go.mod" "$mod/go.sum" "$mod/etcd/main.go"
  printf '%s\n' "${build_flags[@]}" "$CGO_ENABLED"
}

# --- build --------------------------------------------------------------------

go_bin=$(find_go)
if [ -n "$only_go" ]; then
  echo "$go_bin" >&3
  exit 0
fi
go_version=$("$go_bin" env GOVERSION)
key=$({ recipe; echo "$go_version"; } | sha256sum | cut -c1-16)
out=$CACHE/k8s/$key/bin

find_missing() {
  local t
  missing=()
  for t in "${targets[@]}"; do
    [ -x "$out/$t" ] || missing+=("$t")
  done
}

# module_files DIR FROM:TO...: files of the pinned module's DIR, kept beside
# agnhost as TO for tools/testenv/e2e-images.sh.
module_files() {
  local dir=$1 src f have=1
  shift
  [[ " ${targets[*]} " == *" agnhost "* ]] && [ -x "$out/agnhost" ] || return 0
  for f in "$@"; do [ -s "$out/${f#*:}" ] || have=; done
  [ -z "$have" ] || return 0
  src=$(cd "$mod" && "$go_bin" list -m -f '{{.Dir}}' k8s.io/kubernetes)/$dir
  for f in "$@"; do cp "$src/${f%%:*}" "$out/${f#*:}.tmp"; done
  for f in "$@"; do mv "$out/${f#*:}.tmp" "$out/${f#*:}"; done
}
# agnhost's image serves HTTPS with the key pair its Dockerfile adds
# (test/images/agnhost/porter/localhost.*; netexec --tls-cert-file
# /localhost.crt); the kitten image (test/images/kitten: agnhost with
# html/kitten.jpg and html/data.json at its root) is what the image volume
# spec mounts.
agnhost_files() {
  module_files test/images/agnhost/porter localhost.crt:agnhost-localhost.crt \
    localhost.key:agnhost-localhost.key
  module_files test/images/kitten/html kitten.jpg:kitten.jpg data.json:kitten-data.json
}

find_missing
if [ ${#missing[@]} -eq 0 ]; then
  agnhost_files
  echo "$out" >&3
  exit 0
fi

mkdir -p "$CACHE/k8s/$key"
# One build per key at a time: a second caller waits, then finds the binaries.
exec 4>"$CACHE/k8s/$key/lock"
if ! flock -n 4; then
  log "waiting for another build of $out"
  flock 4
fi
find_missing
if [ ${#missing[@]} -gt 0 ]; then
  pkgs=()
  tests=()
  for t in "${missing[@]}"; do
    case $t in
      *.test) tests+=("$t") ;;
      *) pkgs+=("${PACKAGES[$t]}") ;;
    esac
  done
  blog=$CACHE/k8s/$key/build.log
  log "building ${missing[*]} $K8S_VERSION with $go_version into $out"
  log "a cold build takes about 8 minutes on 2 cores (the suite as much again); log: $blog"
  start=$(date +%s)
  tmp=$CACHE/k8s/$key/bin.tmp
  rm -rf "$tmp"
  mkdir -p "$tmp"
  # A test binary is linked by `go test -c`, one package at a time, with the
  # same flags: upstream's hack/make-rules/build.sh builds e2e.test this way.
  (
    cd "$mod"
    [ ${#pkgs[@]} -eq 0 ] || "$go_bin" build -v "${build_flags[@]}" -o "$tmp/" "${pkgs[@]}"
    for t in "${tests[@]}"; do
      "$go_bin" test -c "${build_flags[@]}" -o "$tmp/$t" "${PACKAGES[$t]}"
    done
  ) >"$blog" 2>&1 &
  pid=$!
  # -v names each package as it is compiled: a count is the progress.
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 1 30); do
      sleep 1
      kill -0 "$pid" 2>/dev/null || break
    done
    kill -0 "$pid" 2>/dev/null &&
      log "still building: $(($(date +%s) - start)) s, $(grep -vc '^go: ' "$blog") packages compiled"
  done
  if ! wait "$pid"; then
    tail -n 20 "$blog" >&2
    if grep -qE 'dial tcp|no such host|connection refused|i/o timeout|TLS handshake' "$blog"; then
      die "the Go module proxy ($goproxy) cannot be reached: the test control plane cannot be built (see $blog)"
    fi
    die "building the test control plane failed; see $blog"
  fi
  mkdir -p "$out"
  mv "$tmp"/* "$out/"
  rmdir "$tmp"
  log "built ${missing[*]} in $(($(date +%s) - start)) s"
fi
agnhost_files
echo "$out" >&3
