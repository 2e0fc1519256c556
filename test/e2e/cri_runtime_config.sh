#!/usr/bin/env bash
# The runtime's cgroup driver (CRI RuntimeConfig), on the fake CRI: a runtime
# that uses systemd's while the agent's cgroupDriver is cgroupfs gets an error
# at start naming both and the setting to change (upstream's kubelet takes the
# runtime's; nanolet has made its cgroups before the runtime answers,
# docs/DIFFERENCES.md); a runtime without RuntimeConfig is counted as
# upstream counts it, kubelet_cri_losing_support{version="1.37.0"} 1, and one
# that answers is not. (containerd 1.6 and 2 themselves: e2e evented_pleg.)
. "$(dirname "$0")/fake_cri_lib.sh"

run() { # run NAME [FAKE CRI FLAGS...]: the fake CRI and an agent on it, until /metrics answers
  local name=$1
  shift
  fake_stop
  fake_cri "$name" "$@" || return 1
  fake_agent "$name" || return 1
  wait_for 5 grep -q "container runtime fake-cri" "$E2E_TMP/$name.log"
  sleep 0.5 # RuntimeConfig follows Version
  METRICS=$(curl -fsS "http://127.0.0.1:$RO_PORT/metrics")
}

run systemd --cgroup-driver systemd
check "a runtime on systemd's cgroup driver, the agent on cgroupfs: the agent says so at start" \
  grep -q "the container runtime uses the systemd cgroup driver and cgroupDriver is cgroupfs: .*set cgroupDriver: systemd" \
  "$E2E_TMP/systemd.log"
check "  ... and no kubelet_cri_losing_support" bash -c "! grep -q '^kubelet_cri_losing_support' <<<\"\$0\"" "$METRICS"

run cgroupfs --cgroup-driver cgroupfs
check "a runtime on cgroupfs, as the agent: it says they agree" \
  grep -q "the container runtime's cgroup driver is cgroupfs, as cgroupDriver" "$E2E_TMP/cgroupfs.log"
check "  ... and no error" bash -c "! grep -q 'cgroup driver and cgroupDriver is' '$E2E_TMP/cgroupfs.log'"

run none
check "a runtime without RuntimeConfig: kubelet_cri_losing_support{version=\"1.37.0\"} 1" \
  grep -qx 'kubelet_cri_losing_support{version="1.37.0"} 1' <<<"$METRICS"
check "  ... and the agent says it falls back to its cgroupDriver" \
  grep -q "CRI implementation should be updated to support RuntimeConfig" "$E2E_TMP/none.log"
