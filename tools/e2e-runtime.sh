#!/usr/bin/env bash
# The end-to-end suite on another runtime than tools/test.sh's (Debian's
# containerd 1.6), as root, after a build in build/:
#
#   tools/e2e-runtime.sh containerd2            # the whole e2e suite
#   tools/e2e-runtime.sh containerd2 --ci       # the CI subset (a few minutes)
#   tools/e2e-runtime.sh containerd2 e2e_probes e2e_kserver ...   # named tests
#
# containerd2 is tools/testenv/containerd2.sh: containerd 2 from its Go module
# as a second instance (its own state directory, bridge nl-br-c2 and subnet
# 10.89.0.0/24), a control plane of its own (k8s-containerd2), the shared
# registries (tools/testenv/env.sh). NANOLET_TEST_RUNTIME=containerd2 tells the tests
# that make a containerd of their own (reboot, api_reboot, gc) and the
# conformance subset to make or use one of the same kind, apart from the 1.6
# run's, so that both suites can run at the same time.
#
# meson's logs: build/meson-logs/e2e-containerd2.{txt,json}.
set -euo pipefail
cd "$(dirname "$0")/.."

# The CI subset: the CRI layer's tests, the agent's pods, probes, logs, exec,
# attach and port-forward through the apiserver, and what only containerd 2
# serves (its container events: EventedPLEG; image volumes, which 1.6 refuses;
# pods in user namespaces, which 1.6 cannot run);
# and the tests of meson's suite
# e2e-c2-ci, long and mostly waiting, which tools/test.sh runs here only, beside
# its 1.6 run.
CI_TESTS=(cri_client_test runtime_e2e_test pleg_e2e e2e_pods_run e2e_probes e2e_kubelet_streams
  e2e_kserver e2e_evented_pleg e2e_image_volumes e2e_user_namespaces)

usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
runtime=$1
shift
case $runtime in
  containerd2) endpoint=$(tools/testenv/containerd2.sh) ;;
  *) usage ;;
esac
tests=("$@")
if [ "${1:-}" = --ci ]; then
  [ -f build/build.ninja ] || meson setup build --fatal-meson-warnings >/dev/null
  # shellcheck disable=SC2086
  mapfile -t ci_suite < <(meson test -C build ${NANOLET_MESON_TEST_ARGS:-} --list --suite e2e-c2-ci 2>/dev/null |
    sed -n 's|.* / ||p')
  [ ${#ci_suite[@]} -gt 0 ] || { echo "tools/e2e-runtime.sh: meson lists no test of suite e2e-c2-ci" >&2; exit 1; }
  tests=("${CI_TESTS[@]}" "${ci_suite[@]}")
elif [ $# -eq 0 ]; then
  tests=(--suite e2e)
fi

# The shared registries (their state is the 1.6 instance's directory), the
# runtime's socket over env.sh's, and a control plane of its own
# (k8s-containerd2, port offset 450): the tests' node names and namespaces are
# fixed, and the 1.6 suite may be running on the shared one. Taken down at the
# end unless it was running already.
. tools/testenv/env.sh
export NANOLET_TESTENV_K8S_NAME=k8s-$runtime NANOLET_TESTENV_K8S_PORT_OFFSET=450
if ! tools/testenv/controlplane.sh status 2>/dev/null; then
  trap 'tools/testenv/controlplane.sh down >/dev/null 2>&1' EXIT
  trap 'exit 130' INT TERM
fi
k8s_env=$(tools/testenv/controlplane.sh up)
# Every agent's pods under a cgroup root of the run's own
# (NANOLET_TEST_CGROUP_ROOT, test/e2e/pods_lib.sh): a run beside the 1.6
# suite's never meets its agents in one kubepods.
export NANOLET_TEST_CGROUP_ROOT=/nanolet-$runtime
tools/testenv/cgroup-root.sh make "$NANOLET_TEST_CGROUP_ROOT"
. "$k8s_env"
c2_dir=${NANOLET_TESTENV_C2_DIR:-/var/lib/nanolet-testenv-c2}
export NANOLET_TEST_RUNTIME=$runtime
export NANOLET_TEST_CRI_ENDPOINT=$endpoint NANOLET_TEST_CRI_SOCKET=$endpoint
export CONTAINERD_ADDRESS=${endpoint#unix://}
export NANOLET_TESTENV_SUBNET=${NANOLET_TESTENV_C2_SUBNET:-10.89.0.0/24}
export NANOLET_TESTENV_BRIDGE=${NANOLET_TESTENV_C2_BRIDGE:-nl-br-c2}
CONTAINERD_SNAPSHOTTER=$(cat "$c2_dir/snapshotter")
export CONTAINERD_SNAPSHOTTER

[ -f build/build.ninja ] || meson setup build --fatal-meson-warnings
status=0
# (NANOLET_MESON_TEST_ARGS=--no-rebuild when another meson test runs on build/)
# shellcheck disable=SC2086
meson test -C build --print-errorlogs --num-processes 1 ${NANOLET_MESON_TEST_ARGS:-} \
  --logbase "e2e-$runtime" "${tests[@]}" || status=$?
tools/testenv/cgroup-root.sh remove "$NANOLET_TEST_CGROUP_ROOT"
exit $status
