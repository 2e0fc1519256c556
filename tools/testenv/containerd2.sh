#!/usr/bin/env bash
# A second private containerd, version 2 (tools/testenv/tool-build.sh
# containerd2: v2.4.2 from its Go module, with runc 1.4 from its module:
# tool-build.sh runc), beside Debian's 1.6 from setup.sh:
# its own state directory, bridge and subnet, no registry of its own (it
# pulls from the shared one), the same configuration file (containerd 2
# migrates version 2 in memory).
# Idempotent, as setup.sh; the last line on stdout is the CRI endpoint:
#   NANOLET_TEST_CRI_ENDPOINT=$(tools/testenv/containerd2.sh) meson test -C build e2e_pods_run
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$("$here/tool-build.sh" containerd2)
export NANOLET_TESTENV_CONTAINERD=$bin
# runc from its module too: Debian 12's 1.1 has no idmapped mounts, without
# which containerd 2 says its handlers do not support user namespaces.
NANOLET_TESTENV_RUNC=$("$here/tool-build.sh" runc)
export NANOLET_TESTENV_RUNC
export NANOLET_TESTENV_DIR=${NANOLET_TESTENV_C2_DIR:-/var/lib/nanolet-testenv-c2}
export NANOLET_TESTENV_BRIDGE=${NANOLET_TESTENV_C2_BRIDGE:-nl-br-c2}
export NANOLET_TESTENV_SUBNET=${NANOLET_TESTENV_C2_SUBNET:-10.89.0.0/24}
# No registry of its own: its pulls trust the shared instance's (127.0.0.1:15443).
export NANOLET_TESTENV_NO_REGISTRY=1
export NANOLET_TESTENV_REGISTRY_DIR=${NANOLET_TESTENV_REGISTRY_DIR:-/var/lib/nanolet-testenv/registry}
exec "$here/setup.sh" "$@"
