#!/usr/bin/env bash
# Evented PLEG (featureGates: EventedPLEG) on the real runtime. containerd 2
# serves GetContainerEvents: PLEG relists only on its events (the periodic
# relist is 5 minutes apart), so a container's start and exit reach the pod's
# status within seconds and an idle node does not relist. containerd 1.6 has no
# such stream: the agent says so and relists every second, as without the gate.
# Which one the suite runs on: NANOLET_TEST_RUNTIME (tools/e2e-runtime.sh).
# The same for RuntimeConfig: containerd 2 answers it (its cgroup driver),
# 1.6 does not, and the agent counts it as upstream,
# kubelet_cri_losing_support{version="1.37.0"} 1.
PODS_NS=nanolet-e2e-evented-pleg
. "$(dirname "$0")/pods_lib.sh"
e2e_on_exit pods_cleanup
IMG=localhost/busybox:1.36
RUNTIME=${NANOLET_TEST_RUNTIME:-containerd}

relists() {
  curl -fsS "http://127.0.0.1:$RO_PORT/metrics" | awk '$1 == "kubelet_pleg_relist_duration_seconds_count" { print $2 }'
}
start_agent --feature-gates EventedPLEG=true || { fail "agent start" ""; exit 1; }
put quick <<EOF
apiVersion: v1
kind: Pod
metadata: {name: quick, namespace: $PODS_NS}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: $IMG, command: [sh, -c, "sleep 3; exit 3"]}]
EOF
expect "the pod runs" 20 quick .status.phase Running
expect "its container's exit (3) reaches the status" 15 quick \
  '.status.containerStatuses[0].state.terminated.exitCode' 3
expect "  ... and the pod is Failed" 5 quick .status.phase Failed

# Idle now: 6 s without a change.
sleep 1
r0=$(relists)
sleep 6
r1=$(relists)
echo "relists in 6 idle seconds: $((r1 - r0))"
case $RUNTIME in
  containerd2)
    check "containerd 2: the agent stays on the runtime's events" \
      bash -c "! grep -q 'Evented PLEG: .*relisting every' '$E2E_TMP/agent.log'"
    check "  ... and does not relist while nothing happens ($((r1 - r0)) relists in 6 s)" [ $((r1 - r0)) -le 1 ]
    check "containerd 2 answers RuntimeConfig: no kubelet_cri_losing_support" \
      bash -c "! curl -fsS http://127.0.0.1:$RO_PORT/metrics | grep -q '^kubelet_cri_losing_support'"
    check "  ... and its cgroup driver is the agent's: the agent says so" \
      grep -q "the container runtime's cgroup driver is cgroupfs, as cgroupDriver" "$E2E_TMP/agent.log"
    ;;
  containerd)
    check "containerd 1.6: the agent says the runtime has no container events" \
      grep -q 'Evented PLEG: the runtime has no container events' "$E2E_TMP/agent.log"
    check "  ... and relists every second ($((r1 - r0)) relists in 6 s)" [ $((r1 - r0)) -ge 4 ]
    check "containerd 1.6 has no RuntimeConfig: kubelet_cri_losing_support{version=\"1.37.0\"} 1" \
      bash -c "curl -fsS http://127.0.0.1:$RO_PORT/metrics | grep -qx 'kubelet_cri_losing_support{version=\"1.37.0\"} 1'"
    ;;
  *) fail "NANOLET_TEST_RUNTIME" "containerd or containerd2, not $RUNTIME" ;;
esac
