#!/usr/bin/env bash
# Container and image garbage collection on the real containerd.
#
# Containers: a static pod's container fails three times, then runs (it counts
# its starts in an emptyDir); the three dead instances are kept (no limit),
# then with --maximum-dead-containers-per-container 2 the two newest stay.
# Images: four unused images of 6 MiB of random data each beside the pod's
# image and the sandbox image, on a 96 MiB tmpfs as the image filesystem; with
# imageGCHighThresholdPercent just under the usage and imageGCLowThresholdPercent
# 9 MiB below it, the collector removes unused images (two, by their sizes)
# until the usage is under the low threshold; the images in use stay.
#
# Both collectors run first at the agent's start: the agent is restarted with
# the policy once the dead containers are there.
#
# Image GC would remove the shared test images: it runs on a containerd of its
# own (tools/testenv/setup.sh with its own NANOLET_TESTENV_DIR, bridge and
# subnet, its root on the tmpfs), purged at the end.
PODS_NS=nanolet-e2e-gc
# The endpoint is this script's own containerd, set up below.
NANOLET_TEST_CRI_ENDPOINT=unset
. "$(dirname "$0")/pods_lib.sh"
TESTENV=$(cd "$(dirname "$0")/../../tools/testenv" && pwd)
. "$(dirname "$0")/private_testenv.sh"
private_testenv "${NANOLET_GC_TESTENV_DIR:-/var/lib/nanolet-gc-testenv}" nl-br3 10.86.0.0/24 ||
  { fail "containerd 2" "tools/testenv/tool-build.sh containerd2 failed"; exit 1; }
gc_cleanup() {
  pods_cleanup
  private "$TESTENV/teardown.sh" --purge >/dev/null 2>&1
  # The purge may have unmounted it already; the test's result is not this.
  if mountpoint -q "$PRIVATE_DIR/root"; then umount "$PRIVATE_DIR/root"; fi
  return 0
}
e2e_on_exit gc_cleanup
mkdir -p "$PRIVATE_DIR/root"
mountpoint -q "$PRIVATE_DIR/root" || mount -t tmpfs -o size=96m nanolet-gc "$PRIVATE_DIR/root" ||
  { fail "tmpfs" "mount failed"; exit 1; }
NANOLET_TEST_CRI_ENDPOINT=$(private "$TESTENV/setup.sh" 2>"$E2E_TMP/setup.log") ||
  { fail "setup.sh" "$(tail -5 "$E2E_TMP/setup.log")"; exit 1; }
export NANOLET_TEST_CRI_ENDPOINT
SOCK=${NANOLET_TEST_CRI_ENDPOINT#unix://}
ctr_() { ctr --address "$SOCK" -n k8s.io "$@"; }

# ---- four unused images: an OCI layout made here, imported ----------------------
. "$TESTENV/gc_fixtures.sh"
random_images "$E2E_TMP/big.tar" 4 6 big "$E2E_TMP"
ctr_ images import --snapshotter "$(cat "$PRIVATE_DIR/snapshotter")" --base-name localhost/gc \
  "$E2E_TMP/big.tar" >/dev/null 2>"$E2E_TMP/import.log" || { fail "import" "$(tail -3 "$E2E_TMP/import.log")"; exit 1; }
images() { cri images -o json | jq -r '[.images[].repoTags[]] | sort | join(" ")'; }
big_left() { cri images -o json | jq '[.images[].repoTags[] | select(startswith("localhost/gc:"))] | length'; }
[ "$(big_left)" = 4 ] && ok "four unused images imported" || fail "import" "$(images)"

# ---- a container that fails three times, then runs ------------------------------
failing_pod crash "$PODS_NS" 0 | put crash
dead() { pod_containers crash-$NODE | jq '[.[] | select(.state == "CONTAINER_EXITED")] | length'; }
running_attempt() { pod_containers crash-$NODE | jq -r '[.[] | select(.state == "CONTAINER_RUNNING") | .metadata.attempt][0]'; }
crashed_thrice() { [ "$(running_attempt)" = 3 ] && [ "$(dead)" = 3 ]; }
start_agent --maximum-dead-containers-per-container=-1 || { fail "agent start" ""; exit 1; }
if wait_for 75 crashed_thrice; then
  ok "three dead instances, the fourth runs"
else
  fail "crash loop" "dead $(dead), running attempt $(running_attempt)"
fi
stop_agent TERM

# ---- the policy: both collectors run at start -----------------------------------
fs_used() { df -B1 --output=used "$PRIVATE_DIR/root" | tail -1; }
fs_size() { df -B1 --output=size "$PRIVATE_DIR/root" | tail -1; }
size=$(fs_size) used=$(fs_used)
high=$((used * 100 / size - 1))
low=$(((used - (9 << 20)) * 100 / size))
cat >"$E2E_TMP/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: $high
imageGCLowThresholdPercent: $low
imageMinimumGCAge: 0s
evictionHard: {memory.available: "1Mi"}
EOF
echo "image filesystem: $((used >> 20)) of $((size >> 20)) MiB used; high $high%, low $low%"
start_agent --config "$E2E_TMP/kubelet.yaml" --maximum-dead-containers-per-container 2 ||
  { fail "agent start" ""; exit 1; }
attempts() { pod_containers crash-$NODE | jq -r '[.[] | select(.state == "CONTAINER_EXITED") | .metadata.attempt] | sort | join(" ")'; }
dead_is() { [ "$(dead)" = "$1" ]; }
wait_for 20 dead_is 2
[ "$(attempts)" = "1 2" ] && ok "maxPerPodContainer 2: the two newest dead instances stay" \
  || fail "container GC" "dead attempts: $(attempts)"
[ "$(running_attempt)" = 3 ] && ok "  ... the running one untouched" || fail "running" "$(running_attempt)"

under_low() { [ $(($(fs_used) * 100)) -le $((low * size)) ]; }
if wait_for 30 under_low; then
  ok "image GC: usage $(($(fs_used) >> 20)) MiB, under the low threshold ($low%)"
else
  fail "image GC" "usage $(($(fs_used) >> 20)) MiB, low $low%; images: $(images)"
fi
left=$(big_left)
[ "$left" -gt 0 ] && [ "$left" -lt 4 ] && ok "  ... $((4 - left)) unused images removed, $left kept (no more than needed)" \
  || fail "unused images" "$left of 4 left"
have() { grep -qw "$1" <<<"$(images)"; }
have localhost/busybox:1.36 && ok "  ... the image in use stays" || fail "image in use" "$(images)"
have localhost/pause:3.9 && ok "  ... the sandbox image stays" || fail "sandbox image" "$(images)"
