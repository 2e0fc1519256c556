#!/usr/bin/env bash
# The agent's wall clock steps back 10 minutes under a running static pod
# (libfaketime on the agent alone, as tools/bench/faults_soak.sh does; never
# the machine's clock): when its manifest then goes, the pod is stopped within
# seconds, not once the clock has caught up with the time of its last sync.
# The agent orders its syncs after the runtime's state with a monotonic clock,
# as upstream's pod cache compares Go times by their monotonic reading.
PODS_NS=nanolet-e2e-clock-step
. "$(dirname "$0")/pods_lib.sh"
IMG=localhost/busybox:1.36
LIB=$(dpkg -L libfaketime 2>/dev/null | grep -m1 '/libfaketime\.so\.1$') ||
  { fail "libfaketime" "missing (tools/install-deps.sh --test)"; exit 1; }
CLOCK=$E2E_TMP/faketime
set_clock() { echo "$1" >"$CLOCK.tmp" && mv "$CLOCK.tmp" "$CLOCK"; }

set_clock +600
LD_PRELOAD=$LIB FAKETIME_TIMESTAMP_FILE=$CLOCK FAKETIME_CACHE_DURATION=1 FAKETIME_DONT_FAKE_MONOTONIC=1 \
  FAKETIME_DONT_RESET=1 NO_FAKE_STAT=1 start_agent || { fail "agent start" "under libfaketime"; exit 1; }
put stepped <<EOF
apiVersion: v1
kind: Pod
metadata: {name: stepped, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: $IMG, command: [sleep, "3600"]}]
EOF
expect "a static pod runs with the agent's clock 10 minutes ahead" 60 stepped .status.phase Running
ahead=$(($(pod stepped '.status.startTime | fromdateiso8601') - $(date +%s)))
check "  ... its startTime is the agent's clock ($ahead s ahead)" [ "$ahead" -ge 590 ]
sleep 3 # (its syncs under the clock that is ahead)

set_clock +0
sleep 2 # (libfaketime reads the file at most once a second)
running() { [ "$(pod_containers "stepped-$NODE" | jq '[.[] | select(.state == "CONTAINER_RUNNING")] | length')" -gt 0 ]; }
stopped() { ! running; }
check "  ... its container runs in the runtime" running
t0=$(date +%s)
unput stepped
if wait_for 60 stopped; then
  took=$(($(date +%s) - t0))
  check "the clock stepped back 10 minutes: the pod is stopped when its manifest goes (${took} s)" [ "$took" -le 20 ]
else
  fail "the clock stepped back 10 minutes: the pod is stopped when its manifest goes" "still running after 60 s"
fi
