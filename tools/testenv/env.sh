# shellcheck shell=bash
# Source after setup.sh: points nanolet's tests and ctr at the private
# containerd.
#   . tools/testenv/env.sh
NANOLET_TESTENV_DIR=${NANOLET_TESTENV_DIR:-/var/lib/nanolet-testenv}
export NANOLET_TESTENV_DIR
export NANOLET_TEST_CRI_SOCKET="unix://$NANOLET_TESTENV_DIR/run/containerd.sock"
export NANOLET_TEST_CRI_ENDPOINT="$NANOLET_TEST_CRI_SOCKET"
export NANOLET_TEST_BUSYBOX_IMAGE=localhost/busybox:latest
export NANOLET_TEST_PAUSE_IMAGE=localhost/pause:3.9
# Read by ctr itself, so plain `ctr images ls` talks to the right daemon.
export CONTAINERD_ADDRESS="$NANOLET_TESTENV_DIR/run/containerd.sock"
export CONTAINERD_NAMESPACE=k8s.io
if [ -r "$NANOLET_TESTENV_DIR/snapshotter" ]; then
  CONTAINERD_SNAPSHOTTER=$(cat "$NANOLET_TESTENV_DIR/snapshotter")
  export CONTAINERD_SNAPSHOTTER
fi
# The registry (registry.sh): TLS from its own CA, htpasswd authentication.
export NANOLET_TEST_REGISTRY=127.0.0.1:15443
export NANOLET_TEST_REGISTRY_CA="$NANOLET_TESTENV_DIR/registry/ca.crt"
export NANOLET_TEST_REGISTRY_USER=nanolet
export NANOLET_TEST_REGISTRY_IMAGE="$NANOLET_TEST_REGISTRY/busybox:latest"
if [ -r "$NANOLET_TESTENV_DIR/registry/password" ]; then
  NANOLET_TEST_REGISTRY_PASSWORD=$(cat "$NANOLET_TESTENV_DIR/registry/password")
  export NANOLET_TEST_REGISTRY_PASSWORD
fi
# The control plane's variables, while tools/testenv/controlplane.sh has it up.
if [ -r "$NANOLET_TESTENV_DIR/k8s/env.sh" ]; then
  # shellcheck source=/dev/null
  . "$NANOLET_TESTENV_DIR/k8s/env.sh"
fi
