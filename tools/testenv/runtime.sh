# shellcheck shell=bash
# Shared by the conformance runners (sourced, not run): `testenv_runtime`
# makes sure the runtime NANOLET_TEST_RUNTIME names is up — containerd
# (Debian's 1.6, setup.sh, the default) or containerd2 (containerd2.sh) — and
# sets RUNTIME_ENDPOINT (its CRI endpoint), RUNTIME_BRIDGE and RUNTIME_SUBNET
# (its CNI bridge and subnet: a node's InternalIP is the bridge's gateway).
testenv_runtime() {
  local here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  case ${NANOLET_TEST_RUNTIME:-containerd} in
    containerd)
      RUNTIME_ENDPOINT=$("$here/setup.sh") || return 1
      RUNTIME_BRIDGE=${NANOLET_TESTENV_BRIDGE:-nl-br0}
      RUNTIME_SUBNET=${NANOLET_TESTENV_SUBNET:-10.88.0.0/24}
      ;;
    containerd2)
      RUNTIME_ENDPOINT=$("$here/containerd2.sh") || return 1
      RUNTIME_BRIDGE=${NANOLET_TESTENV_C2_BRIDGE:-nl-br-c2}
      RUNTIME_SUBNET=${NANOLET_TESTENV_C2_SUBNET:-10.89.0.0/24}
      ;;
    *)
      echo "NANOLET_TEST_RUNTIME must be containerd or containerd2: $NANOLET_TEST_RUNTIME" >&2
      return 1
      ;;
  esac
}
