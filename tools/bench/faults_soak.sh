#!/usr/bin/env bash
# An hour of combined faults around a joined node, with invariants checked
# throughout (docs/RELIABILITY.md):
#
#   tools/bench/faults_soak.sh [MINUTES=60] [SEED=1]
#
# The last line is `faults-soak: PASS` or `faults-soak: FAIL <what>`, and the
# exit status matches. The run prints its seed and its fault schedule first:
# the same seed replays the same schedule (the faults' kinds, parameters and
# the gaps between them; each fault starts after the previous one converged).
#
# Everything runs on a private instance, never the shared one: it kills
# containerd and stops the API server. Its own containerd
# (tools/testenv/setup.sh with NANOLET_TESTENV_DIR=/var/lib/nanolet-testenv-soak,
# bridge nl-soak0, subnet 10.77.0.0/24, test/e2e/private_testenv.sh), its own
# control plane (controlplane.sh in that directory, ports +500, with
# kube-scheduler and kube-controller-manager), its own node name, root dir (a
# small tmpfs that the disk faults fill), ports and cgroup root, and a
# toxiproxy between the agent and the API server. At the end all of it is
# taken down (FAULTS_SOAK_KEEP=1 keeps the instance and the run's directory).
#
# Environment: NANOLET (the agent binary; default build/agent/nanolet; an ASan
# build works too), NANOLET_TEST_RUNTIME=containerd2 (a containerd 2 instance,
# as the e2e tests), FAULTS_SOAK_ONLY=KIND,... (those faults alone, in that
# order, round after round: to try them one by one), FAULTS_SOAK_DIR (the
# run's files, kept: the agent's log, soak.log, usage.csv, results.json;
# default a fresh /tmp/nanolet-faults-soak.XXXXXX, kept on failure),
# FAULTS_SOAK_INSTANCE=N (0 to 5, default 0: a run beside another one: its
# own state dir, bridge, subnet, control plane ports, cgroup root and
# namespaces, so that two seeds soak at once), FAULTS_SOAK_SIGNING_DURATION
# (how long the node's client certificates are signed for; default 6m).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
MINUTES=${1:-60}
SEED=${2:-1}
fail() { echo "faults-soak: FAIL $*"; exit 1; }
[ "$(id -u)" = 0 ] || fail "must run as root"
[[ $MINUTES =~ ^[0-9]+$ && $MINUTES -gt 0 ]] || fail "MINUTES must be a positive integer: $MINUTES"
[[ $SEED =~ ^[0-9]+$ ]] || fail "SEED must be a non-negative integer: $SEED"
INSTANCE=${FAULTS_SOAK_INSTANCE:-0}
[[ $INSTANCE =~ ^[0-5]$ ]] || fail "FAULTS_SOAK_INSTANCE must be 0 to 5: $INSTANCE"
# (instance 0 keeps the names it always had)
SUFFIX=${INSTANCE#0}
export NANOLET=${NANOLET:-$TOP/build/agent/nanolet}
[ -x "$NANOLET" ] || fail "no agent binary at $NANOLET (tools/build.sh)"
# shellcheck source=tools/bench/bench_lib.sh
. "$HERE/bench_lib.sh"
# shellcheck source=test/e2e/private_testenv.sh
. "$TOP/test/e2e/private_testenv.sh"
private_testenv "/var/lib/nanolet-testenv-soak${SUFFIX:+-$SUFFIX}" "nl-soak$INSTANCE" "10.$((77 + INSTANCE)).0.0/24" ||
  fail "containerd 2 build"
export NANOLET_TESTENV_DIR=$PRIVATE_DIR NANOLET_TESTENV_K8S_PORT_OFFSET=$((500 + 20 * INSTANCE)) NANOLET_TESTENV_K8S_SCHEDULER=1
export NANOLET_TEST_NODE_NAME=soak-node
# The node's client certificates: signed for 6 minutes (kube-controller-manager
# backdates them 5 minutes, so that is 11 minutes of validity, and the agent
# rotates 70-90 % into it: every 3-5 minutes), so that a 30-minute run sees
# several rotations and agent kills land near them.
SIGNING=${FAULTS_SOAK_SIGNING_DURATION:-6m}
export NANOLET_TESTENV_K8S_SIGNING_DURATION=$SIGNING
RUN=${FAULTS_SOAK_DIR:-$(mktemp -d /tmp/nanolet-faults-soak.XXXXXX)}
mkdir -p "$RUN"
ROOT=$PRIVATE_DIR/soak-root
CGROUP_ROOT=/nanolet-soak$SUFFIX
NS=soak$SUFFIX
TOXI_PID=
DRIVER_PID=

# The instance taken down: control plane, containerd with the pods' sandboxes,
# the mounts under the root dir (the secret volumes' tmpfs) and the root dir's
# own, the pods' logs and cgroups. At the start too: every run starts afresh.
instance_down() {
  "$TOP/tools/testenv/controlplane.sh" down >/dev/null 2>&1
  private "$TOP/tools/testenv/teardown.sh" --purge >/dev/null 2>&1
  awk -v d="$ROOT" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
  rm -rf "/var/log/pods/${NS}_"* "/var/log/pods/${NS}-static_"*
  "$TOP/tools/testenv/cgroup-root.sh" remove "$CGROUP_ROOT" >/dev/null 2>&1
}
cleanup() {
  local rc=$?
  [ -z "$DRIVER_PID" ] || { kill "$DRIVER_PID" 2>/dev/null; wait "$DRIVER_PID" 2>/dev/null; }
  # (the driver stops the agent; not when it was cut short)
  [ ! -f "$RUN/agent.pid" ] || kill -KILL "$(cat "$RUN/agent.pid")" 2>/dev/null
  [ -z "$TOXI_PID" ] || { kill "$TOXI_PID" 2>/dev/null; wait "$TOXI_PID" 2>/dev/null; }
  if [ -z "${FAULTS_SOAK_KEEP:-}" ]; then
    instance_down
    [ "$rc" != 0 ] || [ -n "${FAULTS_SOAK_DIR:-}" ] || bench_rm "$RUN"
  fi
  [ "$rc" = 0 ] || echo "faults-soak: the run's files are in $RUN"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "faults-soak: $MINUTES minutes, seed $SEED, agent $NANOLET, run files $RUN"
instance_down
endpoint=$(private "$TOP/tools/testenv/setup.sh" 2>"$RUN/setup.log") ||
  fail "private containerd: $(tail -3 "$RUN/setup.log")"
env_file=$("$TOP/tools/testenv/controlplane.sh" up 2>"$RUN/controlplane.log") ||
  fail "private control plane: $(tail -3 "$RUN/controlplane.log")"
# shellcheck source=/dev/null
. "$env_file"
TOXI=$("$TOP/tools/testenv/tool-build.sh" toxiproxy 2>"$RUN/toxiproxy-build.log") || fail "toxiproxy build"
command -v faketime >/dev/null || fail "faketime missing (tools/install-deps.sh --test)"
FAKETIME_LIB=$(dpkg -L libfaketime 2>/dev/null | grep -m1 '/libfaketime\.so\.1$') || fail "libfaketime missing"

# The agent's root dir: a small tmpfs, so that filling it never fills the machine's disk.
mkdir -p "$ROOT"
mount -t tmpfs -o size=64m,nr_inodes=8192,mode=0750 soak-root "$ROOT" || fail "tmpfs at $ROOT"
"$TOP/tools/testenv/cgroup-root.sh" make "$CGROUP_ROOT" || fail "cgroup root"

TPORT=$(free_port)
LPORT=$(free_port)
"$TOXI" -host 127.0.0.1 -port "$TPORT" >"$RUN/toxiproxy.log" 2>&1 &
TOXI_PID=$!
wait_until 10 curl -fsS -o /dev/null "http://127.0.0.1:$TPORT/version" 2>/dev/null || fail "toxiproxy start"
curl -fsS -o /dev/null -X POST "http://127.0.0.1:$TPORT/proxies" -H 'Content-Type: application/json' \
  -d "{\"name\": \"uplink\", \"listen\": \"127.0.0.1:$LPORT\", \"upstream\": \"127.0.0.1:${NANOLET_TEST_APISERVER##*:}\", \"enabled\": true}" ||
  fail "toxiproxy proxy"
# The node joins as a gateway does: a bootstrap token, then client
# certificates through CSRs that kube-controller-manager approves, signs (for
# SIGNING) and the agent rotates (the token: test/e2e/certs_lib.sh, as the TLS
# bootstrap tests make it).
kubectl() { "$NANOLET_TEST_KUBECTL" "$@"; }
# shellcheck source=test/e2e/certs_lib.sh
. "$TOP/test/e2e/certs_lib.sh"
rm -f "$RUN/node.kubeconfig"
bootstrap_token "$RUN/bootstrap.kubeconfig" "https://127.0.0.1:$LPORT" "$((MINUTES + 60)) minutes" ||
  fail "bootstrap token"

export SOAK_RUN=$RUN SOAK_ROOT=$ROOT SOAK_CRI=$endpoint SOAK_CGROUP_ROOT=$CGROUP_ROOT \
  SOAK_TOXI_API=http://127.0.0.1:$TPORT SOAK_NODE_KUBECONFIG=$RUN/node.kubeconfig \
  SOAK_BOOTSTRAP_KUBECONFIG=$RUN/bootstrap.kubeconfig \
  SOAK_NODE_IP=$("$TOP/tools/testenv/node-ip.sh" 2>/dev/null || true) SOAK_FAKETIME_LIB=$FAKETIME_LIB \
  SOAK_CONTROLPLANE=$TOP/tools/testenv/controlplane.sh SOAK_SETUP=$TOP/tools/testenv/setup.sh \
  SOAK_CONTAINERD_PID=$PRIVATE_DIR/run/containerd.pid SOAK_PRIVATE_CONTAINERD=$PRIVATE_CONTAINERD \
  SOAK_BRIDGE=$PRIVATE_BRIDGE SOAK_SUBNET=$PRIVATE_SUBNET SOAK_NS=$NS
# (a copy: the run goes on with the driver it started with; in the
# background: a signal to this script reaches the trap at once)
cp "$HERE/faults_soak.py" "$RUN/driver.py"
/usr/bin/python3 -u "$RUN/driver.py" "$MINUTES" "$SEED" > >(tee "$RUN/soak.log") 2>&1 &
DRIVER_PID=$!
wait "$DRIVER_PID"
rc=$?
DRIVER_PID=
sleep 0.2 # (tee's last lines)
tail -1 "$RUN/soak.log" | grep -q '^faults-soak: ' || echo "faults-soak: FAIL the driver exited ($rc) without a verdict"
exit "$rc"
