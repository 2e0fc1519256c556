# shellcheck shell=bash
# Shared by the tests that run on a containerd of their own (reboot, api_reboot,
# gc; not a test itself): `private_testenv DIR BRIDGE SUBNET` picks the
# instance, then `private CMD...` runs tools/testenv/setup.sh or teardown.sh on
# it. The instance is of the kind the suite runs on (NANOLET_TEST_RUNTIME:
# containerd, Debian's 1.6, or containerd2, tools/e2e-runtime.sh); on
# containerd2 its state dir, bridge and subnet are apart from the 1.6 run's
# (DIR-c2, BRIDGEc2, 10.(N-10).0.0/24), so that both suites can run at once.
private_testenv() {
  PRIVATE_DIR=$1 PRIVATE_BRIDGE=$2 PRIVATE_SUBNET=$3 PRIVATE_CONTAINERD=
  case ${NANOLET_TEST_RUNTIME:-containerd} in
    containerd) ;;
    containerd2)
      local octet=${3#10.}
      PRIVATE_DIR+=-c2 PRIVATE_BRIDGE+=c2 PRIVATE_SUBNET=10.$((${octet%%.*} - 10)).${octet#*.}
      PRIVATE_CONTAINERD=$("$(dirname "${BASH_SOURCE[0]}")/../../tools/testenv/tool-build.sh" containerd2) ||
        return 1
      ;;
    *) echo "NANOLET_TEST_RUNTIME must be containerd or containerd2: $NANOLET_TEST_RUNTIME" >&2; return 1 ;;
  esac
}
private() {
  NANOLET_TESTENV_DIR=$PRIVATE_DIR NANOLET_TESTENV_BRIDGE=$PRIVATE_BRIDGE NANOLET_TESTENV_SUBNET=$PRIVATE_SUBNET \
    NANOLET_TESTENV_CONTAINERD=$PRIVATE_CONTAINERD NANOLET_TESTENV_NO_REGISTRY=1 "$@"
}
