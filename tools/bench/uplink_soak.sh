#!/usr/bin/env bash
# A joined node behind a slow, lossy uplink for half an hour, then the link
# down for ten minutes (docs/PERFORMANCE.md, "A slow, lossy uplink"): the
# end-to-end test test/e2e/uplink_impaired.sh at full length. toxiproxy between
# nanolet and the test control plane: 300 ms +- 100 ms each way, 64 kbit/s each
# way, every connection dropped every 5 minutes; then the proxy disabled.
# Prints the test's checks and figures (bytes per phase, Lease gaps, reconnect
# delays, catching up after the outage).
#
#   tools/bench/uplink_soak.sh [BUILD_DIR=build] [SOAK_S=1800] [DOWN_S=600] [RESET_EVERY_S=300]
#
# About 45 minutes with the defaults. Needs the shared containerd
# (tools/testenv/setup.sh) and control plane (brought up if it is not running).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-build}
export UPLINK_IMPAIRED_SECS=${2:-1800} UPLINK_DOWN_SECS=${3:-600} UPLINK_RESET_EVERY_SECS=${4:-300}
export UPLINK_NODE=${UPLINK_NODE:-uplink-soak} UPLINK_NS=${UPLINK_NS:-nanolet-uplink-soak}
export NANOLET=${NANOLET:-$(cd "$BUILD" && pwd)/agent/nanolet}
env_file=$("$HERE/../testenv/controlplane.sh" up) || { echo "no control plane"; exit 1; }
# shellcheck source=/dev/null
. "$env_file"
export NANOLET_TEST_CRI_ENDPOINT=${NANOLET_TEST_CRI_ENDPOINT:-$("$HERE/../testenv/setup.sh")} ||
  { echo "no containerd"; exit 1; }
exec bash "$HERE/../../test/e2e/uplink_impaired.sh"
