#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ (every library
# instrumented for coverage, ASan+UBSan on) and runs each one for SECONDS
# (default 300, the figure docs/FUZZING.md reports; the test suite runs each for
# a short while to prove they build, start from their seeds and stay clean).
#   tools/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
shift || true
if [ ! -f build-fuzz/build.ninja ]; then
  cc=clang
  # As meson does for the native builds (tools/test.sh sets the cache up).
  ! command -v ccache >/dev/null || cc="ccache clang"
  CC=$cc meson setup build-fuzz --fatal-meson-warnings -Dfuzzing=true \
    -Db_sanitize=address,undefined -Db_lundef=false \
    "-Dc_args=-fsanitize=fuzzer-no-link" >/dev/null
fi
ninja -C build-fuzz >/dev/null

work=$(mktemp -d /tmp/nanolet-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/cri-seeds"
build-fuzz/test/fuzz/cri/fuzz_cri_seeds "$work/cri-seeds" >/dev/null
mkdir -p "$work/grpc-server-seeds"
build-fuzz/test/fuzz/cri/fuzz_grpc_server_seeds "$work/grpc-server-seeds" >/dev/null
mkdir -p "$work/kube-seeds"
build-fuzz/test/fuzz/kube/fuzz_kube_seeds "$work/kube-seeds" >/dev/null
declare -A seeds=(
  [fuzz_agent]=test/fuzz/agent/corpus
  [fuzz_cert]=test/fuzz/agent/corpus-cert
  [fuzz_kauth]=test/fuzz/agent/corpus-kauth
  [fuzz_x509_name]=test/fuzz/agent/corpus-x509
  [fuzz_cri_response]="$work/cri-seeds"
  [fuzz_cri_brief]="$work/cri-seeds"
  [fuzz_grpc_server]="$work/grpc-server-seeds"
  [fuzz_dbus]=test/fuzz/dbus/corpus
  [fuzz_device_register]=test/fuzz/devices/corpus-register
  [fuzz_device_plugin]=test/fuzz/devices/corpus-plugin
  [fuzz_dra_plugin]=test/fuzz/dra/corpus
  [fuzz_http_parse]=test/fuzz/http/corpus
  [fuzz_http_server]=test/fuzz/http/corpus-server
  [fuzz_envfile]=test/fuzz/envfile/corpus
  [fuzz_keyring]=test/fuzz/keyring/corpus
  [fuzz_credprov]=test/fuzz/credprov/corpus
  [fuzz_kmsg]=test/fuzz/kmsg/corpus
  [fuzz_kubeconfig]=test/fixtures/kubeconfig
  [fuzz_kube_h2]="$work/kube-seeds"
  [fuzz_manifest]=test/fixtures/manifests
  [fuzz_node]=test/fuzz/node/corpus
  [fuzz_userns]=test/fuzz/userns/corpus
  [fuzz_yamlfast]=test/fixtures/manifests
  [fuzz_watch]=test/fuzz/kube/corpus/watch
  [fuzz_watch_pb]=test/fuzz/kube/corpus/watch_pb
  [fuzz_pb]=test/fuzz/kube/corpus/pb
  [fuzz_checkpoint]=test/fixtures/api
  [fuzz_service]=test/fuzz/kube/corpus/service
  [fuzz_runtimeclass]=test/fuzz/kube/corpus/runtimeclass
  [fuzz_objects]=test/fuzz/kube/corpus/objects
  [fuzz_tokens]=test/fuzz/kube/corpus/tokens
)
declare -A bins=(
  [fuzz_agent]=build-fuzz/test/fuzz/agent/fuzz_agent
  [fuzz_cert]=build-fuzz/test/fuzz/agent/fuzz_cert
  [fuzz_kauth]=build-fuzz/test/fuzz/agent/fuzz_kauth
  [fuzz_x509_name]=build-fuzz/test/fuzz/agent/fuzz_x509_name
  [fuzz_cri_response]=build-fuzz/test/fuzz/cri/fuzz_cri_response
  [fuzz_cri_brief]=build-fuzz/test/fuzz/cri/fuzz_cri_brief
  [fuzz_grpc_server]=build-fuzz/test/fuzz/cri/fuzz_grpc_server
  [fuzz_dbus]=build-fuzz/test/fuzz/dbus/fuzz_dbus
  [fuzz_device_register]=build-fuzz/test/fuzz/devices/fuzz_device_register
  [fuzz_device_plugin]=build-fuzz/test/fuzz/devices/fuzz_device_plugin
  [fuzz_dra_plugin]=build-fuzz/test/fuzz/dra/fuzz_dra_plugin
  [fuzz_http_parse]=build-fuzz/test/fuzz/http/fuzz_http_parse
  [fuzz_http_server]=build-fuzz/test/fuzz/http/fuzz_http_server
  [fuzz_envfile]=build-fuzz/test/fuzz/envfile/fuzz_envfile
  [fuzz_keyring]=build-fuzz/test/fuzz/keyring/fuzz_keyring
  [fuzz_credprov]=build-fuzz/test/fuzz/credprov/fuzz_credprov
  [fuzz_kmsg]=build-fuzz/test/fuzz/kmsg/fuzz_kmsg
  [fuzz_kubeconfig]=build-fuzz/test/fuzz/kube/fuzz_kubeconfig
  [fuzz_kube_h2]=build-fuzz/test/fuzz/kube/fuzz_kube_h2
  [fuzz_manifest]=build-fuzz/test/fuzz/manifest/fuzz_manifest
  [fuzz_node]=build-fuzz/test/fuzz/node/fuzz_node
  [fuzz_userns]=build-fuzz/test/fuzz/userns/fuzz_userns
  [fuzz_yamlfast]=build-fuzz/test/fuzz/manifest/fuzz_yamlfast
  [fuzz_watch]=build-fuzz/test/fuzz/kube/fuzz_watch
  [fuzz_watch_pb]=build-fuzz/test/fuzz/kube/fuzz_watch_pb
  [fuzz_service]=build-fuzz/test/fuzz/kube/fuzz_service
  [fuzz_runtimeclass]=build-fuzz/test/fuzz/kube/fuzz_runtimeclass
  [fuzz_pb]=build-fuzz/test/fuzz/kube/fuzz_pb
  [fuzz_objects]=build-fuzz/test/fuzz/kube/fuzz_objects
  [fuzz_tokens]=build-fuzz/test/fuzz/kube/fuzz_tokens
  [fuzz_checkpoint]=build-fuzz/test/fuzz/sources/fuzz_checkpoint
)
targets=("$@")
# Every target unless some are named.
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(printf '%s\n' "${!bins[@]}" | sort)
status=0
# A finding is kept outside the source tree (libFuzzer writes it into the
# current directory otherwise), for the report and for a regression seed.
artifacts=build-fuzz/findings
mkdir -p "$artifacts"
# one TARGET: runs it, and leaves its report in $work/TARGET.result.
one() {
  local t=$1
  mkdir -p "$work/$t"
  if "${bins[$t]}" -max_total_time="$secs" -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$artifacts/$t-" "$work/$t" ${seeds[$t]} >"$work/$t.log" 2>&1; then
    echo "fuzz: $t clean for ${secs}s ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$') runs)"
  else
    echo "fuzz: $t FAILED"; tail -40 "$work/$t.log"
  fi >"$work/$t.result"
}
# One target per CPU at a time (NANOLET_FUZZ_JOBS): each is single-threaded.
jobs=${NANOLET_FUZZ_JOBS:-$(nproc)}
running=0
for t in "${targets[@]}"; do
  [ -n "${bins[$t]:-}" ] || { echo "fuzz: no target $t"; exit 2; }
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  one "$t" &
  running=$((running + 1))
done
wait
for t in "${targets[@]}"; do
  cat "$work/$t.result"
  grep -q '^fuzz: .* FAILED' "$work/$t.result" && status=1
done
exit $status
