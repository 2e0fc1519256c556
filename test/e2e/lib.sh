# shellcheck shell=bash
# A small harness for end-to-end tests in bash: `ok NAME` / `fail NAME WHY`,
# `wait_for SECONDS CMD...`, and a summary line at exit. Sourced by each test.
set -uo pipefail
E2E_PASSED=0
E2E_FAILED=0
NANOLET=${NANOLET:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/agent/nanolet}
E2E_TMP=$(mktemp -d /tmp/nanolet-e2e.XXXXXX)

ok() { E2E_PASSED=$((E2E_PASSED + 1)); echo "ok: $1"; }
fail() { E2E_FAILED=$((E2E_FAILED + 1)); echo "FAIL: $1: ${2:-}"; }
check() { # check NAME CMD... : passes when CMD exits 0
  local name=$1; shift
  if "$@"; then ok "$name"; else fail "$name" "command failed: $*"; fi
}
wait_for() { # wait_for SECONDS CMD... : polls CMD every 100 ms
  local deadline=$(($(date +%s%N) + $1 * 1000000000)); shift
  while ! "$@" 2>/dev/null; do
    [ "$(date +%s%N)" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}
E2E_FREE_PORT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../tools/testenv" && pwd)/free-port.py
free_port() { "$E2E_FREE_PORT"; }
# NODE_IP: the address tests give as --node-ip, a non-loopback one of this host
# (tools/testenv/node-ip.sh; NANOLET_TEST_NODE_IP overrides it), empty when the
# host has none.
NODE_IP=$("$(dirname "${BASH_SOURCE[0]}")/../../tools/testenv/node-ip.sh" 2>/dev/null || true)
healthz_ok() { [ "$(curl -fsS "http://127.0.0.1:$1/healthz")" = ok ]; }
# server_flags DIR: sets SERVER_FLAGS, flags that give an agent's kubelet
# server ports of its own (KPORT for HTTPS, RO_PORT for the read-only port,
# which serves /pods) and its self-signed certificate under DIR, so that agents
# running at the same time never meet on 10250.
server_flags() {
  KPORT=$(free_port)
  RO_PORT=$(free_port)
  SERVER_FLAGS="--port $KPORT --read-only-port $RO_PORT --cert-dir $1/pki"
}

# k8s_env: the variables of the test control plane (NANOLET_TEST_KUBECONFIG,
# NANOLET_TEST_NODE_KUBECONFIG, ...: tools/testenv/controlplane.sh). When
# tools/test.sh has not brought it up, brings it up here and down at exit.
# Returns 1, with the reason on stderr, when it cannot be built or started.
E2E_CONTROLPLANE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/tools/testenv/controlplane.sh
k8s_env() {
  local env
  [ -n "${NANOLET_TEST_KUBECONFIG:-}" ] && return 0
  # Taken down at exit only when nothing was running: a control plane whose
  # status check failed for a moment (a component restarting) is someone
  # else's, and `up` only repairs it.
  "$E2E_CONTROLPLANE" status 2>/dev/null || "$E2E_CONTROLPLANE" env >/dev/null 2>&1 ||
    E2E_K8S_STARTED=1
  env=$("$E2E_CONTROLPLANE" up) || return 1
  # shellcheck source=/dev/null
  . "$env"
}
# Always the kubectl built with the control plane, never one from PATH.
kubectl() { "${NANOLET_TEST_KUBECTL:?no test control plane: call k8s_env first}" "$@"; }
# node_kubeconfig NODE: prints the path of a credential of NODE's own
# (system:node:NODE in system:nodes), minted by the control plane script.
node_kubeconfig() { "$E2E_CONTROLPLANE" cert "$1" "system:node:$1" system:nodes; }
# fresh_ns NS: creates NS anew; an earlier run's, still terminating, is waited
# out first (a terminating namespace refuses new objects, Events included).
fresh_ns() {
  kubectl delete ns "$1" --ignore-not-found --timeout=90s >/dev/null 2>&1
  kubectl create ns "$1" >/dev/null
}

# The script's own exit status counts: a script that exits non-zero (an abort
# after some `ok`, `set -e` meeting a failed command, `exit 3`) fails even with
# no `fail`, and a clean-up's status never stands for the script's.
# e2e_on_exit [CMD [ARG...]]: the one way a script sets its EXIT trap. At exit
# it saves the script's status in E2E_RC, runs CMD (its clean-up: a `fail` there
# counts, its exit status does not; compound clean-ups go in a function), then
# e2e_finish, whose status is the script's. Called again, the new CMD replaces
# the old one. Never `trap ... EXIT` by hand: that is how a status gets lost.
e2e_on_exit() {
  E2E_CLEANUP=("$@")
  trap 'e2e__exit $?' EXIT
}
e2e__exit() {
  E2E_RC=$1
  set +e # a failing command of the clean-up must not cut it (or e2e_finish) short
  [ ${#E2E_CLEANUP[@]} -eq 0 ] || "${E2E_CLEANUP[@]}"
  e2e_finish
  exit $?
}
# e2e_unmount_under DIR: what is still mounted under DIR, deepest first
# (lazily): an agent's root dir bind-mounted on itself at its start (made
# rshared, as upstream's kubelet does), volumes of pods that outlived it.
e2e_unmount_under() {
  local m
  awk -v d="$1/" '$5 == substr(d, 1, length(d) - 1) || index($5, d) == 1 {print $5}' /proc/self/mountinfo |
    sort -r | while read -r m; do umount -l "$(printf '%b' "$m")" 2>/dev/null || true; done
}
e2e_finish() {
  local rc=${E2E_RC:-$?}
  [ -z "${E2E_K8S_STARTED:-}" ] || "$E2E_CONTROLPLANE" down
  [ -n "${E2E_KEEP:-}" ] || { e2e_unmount_under "$E2E_TMP"; rm -rf --one-file-system "$E2E_TMP"; }
  echo "$E2E_PASSED passed, $E2E_FAILED failed"
  [ "$E2E_FAILED" -eq 0 ] && [ "$rc" -eq 0 ] && [ "$E2E_PASSED" -gt 0 ]
}
e2e_on_exit
