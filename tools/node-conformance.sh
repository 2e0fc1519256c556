#!/usr/bin/env bash
# Upstream's node validation suite (test/e2e_node of the pinned v1.36.3,
# the suite kubernetes.io's "Validate node setup" runs) against a nanolet
# built from this tree, as that page runs it:
#
#   tools/node-conformance.sh            # '[NodeConformance]' without '[Serial]'
#   tools/node-conformance.sh FOCUS      # any ginkgo focus (the same skip)
#   tools/node-conformance.sh --subset   # a fixed list of fast specs, one a group
#   tools/node-conformance.sh --list     # the specs FOCUS selects (dry run)
#
# Ends with `N passed, M failed` alone on the last line (specs that ran; a
# spec that could not run is listed above it as not run, with its reason);
# exits 0 when nothing failed.
#
# What it does, as root, on a fresh Debian 12 machine too:
#  1. builds nanolet (build/, meson + ninja) unless NANOLET names a binary;
#  2. the private containerd (tools/testenv/setup.sh);
#     and the `kubelet` user's subordinate ids with getsubids
#     (tools/testenv/subids.sh): the user namespace specs read the node's range
#     with getsubids on the host, and nanolet reads the same at start;
#  3. e2e_node.test, ginkgo, agnhost, nonewprivs and the test credential
#     provider plugin gcp-credential-provider from the pinned module
#     (tools/testenv/k8s-build.sh node-suite, cached like the control plane);
#  4. the specs' images, pushed to a local registry (tools/testenv/e2e-images.sh)
#     and mapped with KUBE_TEST_REPO_LIST; the private one of the
#     ImageCredentialProvider spec (Feature:KubeletCredentialProviders) in the
#     test registry, pulled with that plugin's credentials
#     (tools/testenv/credprov-plugin.sh);
#  5. runs e2e_node.test under `ginkgo --procs` the documented way:
#     --conformance (the suite starts no kubelet: the node's own is used),
#     --start-services (the suite starts its own etcd, in-process, and
#     kube-apiserver, in-process, on https://127.0.0.1:6443, with a token
#     file that makes --bearer-token a system:masters credential, and a
#     namespace controller; no scheduler, no controller-manager: the specs
#     bind their pods with spec.nodeName), --prepull-images=false (its list
#     names images that exist nowhere here; the pods' images are pulled from
#     the local registry as any pod's), --container-runtime-endpoint (the
#     specs that talk CRI themselves), --node-name;
#  6. once its API server answers, starts nanolet OUTSIDE the suite as the
#     node's kubelet, as the suite's own kubelet set-up would
#     (test/e2e_node/services/kubelet.go): a kubeconfig with the bearer token,
#     root dir /var/lib/kubelet, a static pod directory (the specs read
#     staticPodPath from /configz), ports 10250, 10255 (read-only: the specs
#     read /metrics there), 10248 (healthz), anonymous requests with
#     AlwaysAllow (the API server's node proxy presents no client
#     certificate), the suite's eviction thresholds, --config-dir the suite's
#     drop-in directory (kubelet.conf.d beside e2e_node.test, which the
#     Feature:KubeletConfigDropInDir spec writes); InternalIP the CNI
#     bridge's gateway (the API server's node proxy refuses loopback);
#     as a service the specs can restart: the suite runs with
#     tools/testenv/node-shims first in its PATH, whose `sudo` and `systemctl`
#     answer the specs' `sudo systemctl list-units '*kubelet*'`, `restart`
#     and `kill` (test/e2e_node/util.go) for a unit kubelet-nanolet that is
#     this nanolet (started again with the same flags, its log appended);
#  7. when the specs are done, deletes what is left, stops nanolet, then the
#     suite's services.
#
# System validation: with --conformance the suite validates the node (kernel
# version and config, cgroups) chrooted into /rootfs, where the upstream image
# has the host's / mounted. This script gives /rootfs the host's root file
# system, /proc and /sys for the run (and takes them away after), unless a
# /rootfs is already mounted.
#
# The report directory (build/node-conformance/report, or
# NODE_CONFORMANCE_REPORT_DIR) keeps junit_01.xml (the framework's), junit.xml
# (only the specs that ran), report.json (ginkgo's), e2e.log (ginkgo's
# output), services.log (the suite's API server), nanolet.log,
# nanolet-log-summary.txt, specs.tsv (state, spec, message) and summary.txt.
#
# One run per machine at a time: the ports (6443, 10250, 10255, 10248) and
# /var/lib/kubelet are fixed by the suite.
#
# Environment:
#   NODE_CONFORMANCE_PROCS       parallel ginkgo processes (default 4)
#   NODE_CONFORMANCE_REPORT_DIR  report directory
#   NODE_CONFORMANCE_TIMEOUT     ginkgo's --timeout (default 3h)
#   NODE_CONFORMANCE_SKIP        a further skip regular expression
#   NODE_CONFORMANCE_SERIAL=1    [Serial] specs too (skip [Flaky] only), one
#                                process unless NODE_CONFORMANCE_PROCS says
#   NODE_CONFORMANCE_NODE_NAME   the node's name (default: the host name, as
#                                the upstream kubelet's)
#   NODE_CONFORMANCE_CGROUP_ROOT nanolet's cgroupRoot (default /, as the
#                                suite's kubelet: the Kubelet Cgroup Manager
#                                specs look for /kubepods/... from the root;
#                                another value keeps the node's pods apart from
#                                another agent's /kubepods on a shared machine,
#                                and those specs fail)
#   NODE_CONFORMANCE_CRI_PROXY=1 the suite's CRI proxy between nanolet and the
#                                runtime (--cri-proxy-enabled, as upstream's
#                                CriProxy job): the Feature:CriProxy specs inject
#                                errors and delays into it; the others skip
#                                themselves without it
#   NANOLET                      the nanolet binary (default: build it in build/)
#   NANOLET_TEST_RUNTIME         containerd (default: Debian's 1.6, setup.sh) or
#                                containerd2 (tools/testenv/containerd2.sh, its
#                                bridge and subnet: the runtime with CDI, for
#                                `can make a CDI device accessible`)
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

# The CI subset: one fast spec of each group that passes here (a spec renamed
# upstream no longer matches, and the run counts fewer specs than this list).
SUBSET=(
  '\[sig-node\] Pods should get a host IP '
  '\[sig-node\] Containers should be able to override the image.s default command and arguments '
  '\[sig-node\] InitContainer \[NodeConformance\] should invoke init containers on a RestartNever pod '
  '\[sig-node\] Probing container should be restarted with a exec "cat /tmp/health" liveness probe '
  '\[sig-node\] Container Lifecycle Hook when create a pod with lifecycle hook should execute prestop exec hook properly '
  '\[sig-node\] Security Context When creating a pod with privileged should run the container as unprivileged when false '
  '\[sig-storage\] EmptyDir volumes should support \(non-root,0644,tmpfs\) '
  '\[sig-storage\] ConfigMap should be consumable from pods in volume with mappings \[NodeConformance\]'
  '\[sig-node\] Downward API should provide pod name, namespace and IP address as env vars '
  '\[sig-node\] MirrorPod when create a mirror pod should be updated when static pod updated '
  '\[sig-node\] NodeLease \[NodeConformance\] NodeLease the kubelet should create and update a lease '
  '\[sig-node\] Sysctls \[LinuxOnly\] \[NodeConformance\] should support sysctls \[Environment'
  '\[sig-node\] Ephemeral Containers \[NodeConformance\] will start an ephemeral container in an existing pod '
)

MODE=run
FOCUS='\[NodeConformance\]'
case ${1:-} in
  --subset)
    MODE=subset
    FOCUS=$(printf '%s|' "${SUBSET[@]}")
    FOCUS=${FOCUS%|}
    ;;
  --list) MODE=list; FOCUS=${2:-$FOCUS} ;;
  -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  -*) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  '') ;;
  *) FOCUS=$1 ;;
esac
# The node is the suite's own, so its [Serial] specs may run too, one process
# at a time (NODE_CONFORMANCE_SERIAL=1: the feature groups beyond
# NodeConformance, e.g. 'Feature:DevicePlugin').
if [ "${NODE_CONFORMANCE_SERIAL:-0}" = 1 ]; then
  SKIP='\[Flaky\]'
  PROCS=${NODE_CONFORMANCE_PROCS:-1}
else
  SKIP='\[Serial\]'
  PROCS=${NODE_CONFORMANCE_PROCS:-4}
fi
[ -z "${NODE_CONFORMANCE_SKIP:-}" ] || SKIP+="|$NODE_CONFORMANCE_SKIP"
REPORT=${NODE_CONFORMANCE_REPORT_DIR:-$top/build/node-conformance/report}
TIMEOUT=${NODE_CONFORMANCE_TIMEOUT:-3h}
CRI_PROXY=${NODE_CONFORMANCE_CRI_PROXY:-0}
NODE=${NODE_CONFORMANCE_NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
TESTENV_DIR=${NANOLET_TESTENV_DIR:-/var/lib/nanolet-testenv}
WORK=$TESTENV_DIR/node-conformance
ROOT=/var/lib/kubelet
APISERVER=https://127.0.0.1:6443
PORTS=(6443 10250 10255 10248)

say() { echo "node-conformance: $*" >&2; }
die() { say "$*"; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root"
[[ $PROCS =~ ^[1-9][0-9]*$ ]] || die "NODE_CONFORMANCE_PROCS must be a positive number: $PROCS"
[[ $NODE =~ ^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$ ]] || die "bad node name: $NODE (set NODE_CONFORMANCE_NODE_NAME)"

bin=$(tools/testenv/k8s-build.sh node-suite sample-device-plugin)
# The specs FOCUS selects without SKIP (a dry run): one name per line.
list_specs() {
  "$bin/e2e_node.test" --ginkgo.dry-run --ginkgo.no-color --ginkgo.v --ginkgo.focus="$FOCUS" \
    --ginkgo.skip="$SKIP" --start-services=false --conformance 2>/dev/null |
    awk '/^k8s.io\/kubernetes@/ && prev !~ /^\[Synchronized/ { print prev } { prev = $0 }' |
    sed -E 's/ \[[^]]*\]$//'
}
if [ "$MODE" = list ]; then
  list_specs
  exit 0
fi

# Specs this machine cannot run, found by probing it (never assumed): each a
# regular expression of spec names and why. They are skipped, and listed in
# the summary as not run with their reason.
MACHINE_SKIPS=()
machine_probe() {
  if ip link add nl-nc-probe0 type dummy 2>/dev/null; then
    ip link del nl-nc-probe0
  else
    MACHINE_SKIPS+=('PrivilegedPod .*should enable privileged commands|the kernel has no dummy link type (`ip link add ... type dummy`: not supported), which the spec makes in its privileged container')
  fi
  local blkio=/sys/fs/cgroup/blkio/blkio.throttle.io_service_bytes
  if [ -r "$blkio" ] && ! grep -qv '^Total' "$blkio"; then
    MACHINE_SKIPS+=('ContainerMetrics .*should report container metrics|the kernel accounts no block I/O to cgroup v1 blkio (only `Total 0` in every cgroup, the root too: no blk-throttle rule on any device), and the spec requires the containers'"'"' blkio series')
  fi
}

machine_probe
MACHINE_NOTRUN=
for m in "${MACHINE_SKIPS[@]}"; do
  # (the specs of the focus it removes, named in the summary; none is no error)
  MACHINE_NOTRUN+=$(list_specs | { grep -E -- "${m%%|*}" || true; } | sed "s|\$|: ${m#*|}|" | sed 's/^/NOT RUN (this machine): /')$'\n'
  SKIP+="|${m%%|*}"
done
MACHINE_NOTRUN=$(printf '%s' "$MACHINE_NOTRUN" | grep -v '^$' || true)

mkdir -p "$TESTENV_DIR"
exec 9>"$TESTENV_DIR/node-conformance.lock"
if ! flock -n 9; then
  say "waiting for another tools/node-conformance.sh run to finish"
  flock 9
fi

if [ -z "${NANOLET:-}" ]; then
  [ -f build/build.ninja ] || meson setup build --fatal-meson-warnings >&2
  ninja -C build >&2 || die "the build failed"
  NANOLET=$top/build/agent/nanolet
fi
[ -x "$NANOLET" ] || die "no nanolet binary at $NANOLET"

# The daemons these start (containerd, the registry) outlive the run: they
# must not keep its lock (fd 9) open.
# The 1.6 instance runs the registries whatever the runtime.
tools/testenv/setup.sh 9>&- >/dev/null
# shellcheck source=tools/testenv/runtime.sh
. tools/testenv/runtime.sh
testenv_runtime 9>&- || die "the runtime did not start"
endpoint=$RUNTIME_ENDPOINT bridge=$RUNTIME_BRIDGE subnet=$RUNTIME_SUBNET
tools/testenv/subids.sh 9>&- >/dev/null || die "the kubelet user's subordinate ids could not be set up"
repo_list=$(NANOLET_TESTENV_E2E_IMPORT_SOCK=${endpoint#unix://} tools/testenv/e2e-images.sh "$bin" 9>&-)
credprov=$(tools/testenv/credprov-plugin.sh "$bin" "$repo_list" 9>&-)
repo_list=$credprov/repo-list.yaml

for p in "${PORTS[@]}"; do
  [ -z "$(ss -Hltn "sport = :$p")" ] ||
    die "port $p is taken (the suite's API server and the node's kubelet ports are fixed): $(ss -Hltnp "sport = :$p" | head -1)"
done

rm -rf "$REPORT"
mkdir -p "$REPORT"
AGENT_PID=
SUITE_PID=
ROOTFS_MARK=$TESTENV_DIR/node-conformance.rootfs
CGROUP_ROOT=${NODE_CONFORMANCE_CGROUP_ROOT:-/}
# The suite's own kubelet runs in kubeletCgroups /kubelet, /kubelet.slice
# under systemd (test/e2e_node/services/kubelet.go); the Summary API spec
# bounds that cgroup's CPU and memory as the kubelet's own.
KUBELET_CGROUPS=/kubelet
[ ! -d /run/systemd/system ] || KUBELET_CGROUPS=/kubelet.slice

# The suite's services process (etcd and the API server, in-process), by the
# port it listens on; it is a child of the first ginkgo process.
services_pid() {
  local pid
  pid=$(ss -Hltnp "sport = :6443" | sed -n 's/.*pid=\([0-9]*\),.*/\1/p' | head -1)
  [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- '--run-services-mode' && echo "$pid"
}
kubectl_() { "$bin/kubectl" --kubeconfig "$WORK/kubeconfig" "$@"; }
pods_left() { compgen -G "$ROOT/pods/*" >/dev/null; }

rootfs_down() {
  [ -e "$ROOTFS_MARK" ] || return 0
  umount -R /rootfs 2>/dev/null || umount -R -l /rootfs 2>/dev/null
  rmdir /rootfs 2>/dev/null
  rm -f "$ROOTFS_MARK"
}
rootfs_up() {
  rootfs_down
  if mountpoint -q /rootfs; then
    say "/rootfs is mounted already: the system validation reads it as it is"
    return 0
  fi
  mkdir -p /rootfs
  : >"$ROOTFS_MARK"
  mount --bind / /rootfs
  mount --make-private /rootfs
  mount -t proc proc /rootfs/proc
  mount --rbind /sys /rootfs/sys
  mount --make-rprivate /rootfs/sys
}

# nanolet as the node's kubelet service. The specs that restart the kubelet
# (test/e2e_node/util.go) run `sudo systemctl list-units '*kubelet*'`, then
# `sudo systemctl restart|kill kubelet-<name>`; the suite runs with
# tools/testenv/node-shims first in its PATH, whose sudo and systemctl answer
# for the unit kubelet-nanolet through $CTL: `want` asks for nanolet to run,
# `pid` is the running one. As a systemd unit without Restart=, nanolet
# exiting (killed, or on its own) leaves it down until asked again.
CTL=$WORK/agent
# The settings the suite may change go in the configuration file it rewrites
# (test/e2e_node/kubeletconfig: read back from /configz, changed, written
# whole as `kubelet-config` in its working directory, which for a precompiled
# suite under ginkgo is the binary's directory; then the kubelet restarted),
# and that file is nanolet's --config; the rest are flags, which the suite
# leaves alone. A flag would win over the file (as upstream's), so none of
# these is a flag.
KUBELET_CONFIG=$bin/kubelet-config
# The drop-in directory (framework.TestContext.KubeletConfigDropinDir): without
# --config-dir, the suite makes kubelet.conf.d in its working directory, the
# binary's, as upstream's kubelet set-up gives the kubelet; emptied of the
# drop-ins a run cut short left.
KUBELET_CONFIG_DIR=$bin/kubelet.conf.d
write_kubelet_config() {
  mkdir -p "$KUBELET_CONFIG_DIR"
  rm -f "$KUBELET_CONFIG_DIR"/*.conf
  cat >"$KUBELET_CONFIG" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupRoot: $CGROUP_ROOT
kubeletCgroups: $KUBELET_CGROUPS
port: 10250
readOnlyPort: 10255
healthzPort: 10248
staticPodPath: $WORK/static-pods
fileCheckFrequency: 10s
serializeImagePulls: false
evictionPressureTransitionPeriod: 30s
evictionHard: {memory.available: 250Mi, nodefs.available: 10%, nodefs.inodesFree: 5%}
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
EOF
}
# The lock file and its contention as the suite's LockContention spec requires
# of the kubelet (upstream's job for it passes them as extra kubelet flags):
# the spec takes /var/run/kubelet.lock and expects the kubelet to stop, and
# it stays down as a unit without Restart= would, so that spec runs alone.
# The credential provider flags as upstream's node e2e job gives every
# kubelet it starts (test/e2e_node/remote/node_e2e.go).
agent_run() {
  exec "$NANOLET" --config "$KUBELET_CONFIG" --config-dir "$KUBELET_CONFIG_DIR" --kubeconfig "$WORK/kubeconfig" \
    --hostname-override "$NODE" --node-ip "$node_ip" --root-dir "$ROOT" --cert-dir "$ROOT/pki" \
    --lock-file /var/run/kubelet.lock --exit-on-lock-contention \
    --image-credential-provider-config "$credprov/config.yaml" --image-credential-provider-bin-dir "$credprov/bin" \
    --container-runtime-endpoint "$agent_endpoint" >>"$REPORT/nanolet.log" 2>&1
}
agent_service() {
  local pid starts=0
  trap 'rm -f "$CTL/want"; [ -z "${pid:-}" ] || kill -TERM "$pid" 2>/dev/null' TERM
  while [ ! -e "$CTL/quit" ]; do
    if [ -e "$CTL/want" ]; then
      starts=$((starts + 1))
      [ "$starts" -eq 1 ] || echo "node-conformance: nanolet started again ($starts)" >>"$REPORT/nanolet.log"
      agent_run &
      pid=$!
      echo "$pid" >"$CTL/pid"
      while kill -0 "$pid" 2>/dev/null; do wait "$pid" || true; done
      rm -f "$CTL/want" "$CTL/pid"
      pid=
    else
      sleep 0.2
    fi
  done
}
agent_stop() {
  [ -n "$AGENT_PID" ] || return 0
  : >"$CTL/quit"
  kill -TERM "$AGENT_PID" 2>/dev/null
  wait "$AGENT_PID" 2>/dev/null
  AGENT_PID=
}

# Deletes what the specs left, stops nanolet, then the suite's services;
# idempotent (the run calls it before its summary, the EXIT trap again).
teardown() {
  local ns pid
  if [ -n "$AGENT_PID" ] && [ -n "$(services_pid)" ]; then
    # The specs' namespaces (the framework deletes its own; a run cut short
    # leaves them) and the static pods, so that nanolet removes their pods
    # before it stops.
    rm -f "$WORK"/static-pods/* 2>/dev/null
    for ns in $(kubectl_ get ns -o name 2>/dev/null | sed -n 's|^namespace/||p'); do
      case $ns in default | kube-*) ;; *) kubectl_ delete ns "$ns" --wait=false >/dev/null 2>&1 ;; esac
    done
    kubectl_ delete pods -A --all --grace-period=0 --force >/dev/null 2>&1
    for _ in $(seq 90); do
      pods_left || break
      sleep 1
    done
    pods_left && say "pods left on the node: $(ls "$ROOT/pods" | tr '\n' ' ')(see nanolet.log)"
  fi
  agent_stop
  # --stop-services=false: the services outlive the ginkgo processes until
  # here, so that the clean-up above still has an API server.
  pid=$(services_pid)
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$pid" 2>/dev/null
  fi
  if [ -n "$SUITE_PID" ]; then
    kill -TERM "$SUITE_PID" 2>/dev/null
    wait "$SUITE_PID" 2>/dev/null
    SUITE_PID=
  fi
  rootfs_down
  [ "$CGROUP_ROOT" = / ] || tools/testenv/cgroup-root.sh remove "$CGROUP_ROOT"
  tools/testenv/cgroup-root.sh remove "$KUBELET_CGROUPS"
}
cleanup() {
  local rc=$?
  trap - EXIT
  set +e
  teardown
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The node's InternalIP: the CNI bridge's gateway, made now if no pod made it yet.
prefix=${subnet#*/}
net=${subnet%/*}
node_ip=${net%.*}.$((${net##*.} + 1))
if ! ip link show "$bridge" >/dev/null 2>&1; then
  ip link add "$bridge" type bridge
  ip link set "$bridge" up
fi
ip -4 addr show dev "$bridge" | grep -q "inet $node_ip/" || ip addr add "$node_ip/$prefix" dev "$bridge"

# The suite's working directory (its token file, kubelet.conf.d), the node's
# kubeconfig and static pod directory; the node's root dir, fresh.
# A run cut short may leave pods' volume mounts (tmpfs) under the root dir,
# and something may have bind-mounted the root dir itself: both go.
findmnt -rn -o TARGET | { grep -E "^$ROOT(/|$)" || true; } | sort -r | while read -r m; do umount "$m" || umount -l "$m"; done
rm -rf --one-file-system "$WORK" "$ROOT"
mkdir -p "$WORK/static-pods" "$ROOT" "$CTL"
TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
# As the suite's own createKubeconfig (test/e2e_node/services/kubelet.go).
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
users:
- name: kubelet
  user:
    token: $TOKEN
clusters:
- cluster:
    server: $APISERVER
    insecure-skip-tls-verify: true
  name: local
contexts:
- context:
    cluster: local
    user: kubelet
  name: local-context
current-context: local-context
EOF
chmod 600 "$WORK/kubeconfig"
write_kubelet_config
rootfs_up
[ "$CGROUP_ROOT" = / ] || tools/testenv/cgroup-root.sh make "$CGROUP_ROOT"

say "running '$FOCUS' without '$SKIP', $PROCS processes; output: $REPORT/e2e.log"
start=$(date +%s)
# The suite's CRI proxy listens on /tmp/kubelet_remote_proxy_<random>.sock,
# made before its API server starts (test/e2e_node/criproxy): nanolet goes
# through it, the specs' own CRI calls too.
suite_args=()
if [ "$CRI_PROXY" = 1 ]; then
  suite_args+=(--cri-proxy-enabled=true)
  : >"$WORK/suite-start"
fi
(
  cd "$WORK"
  PATH=$top/tools/testenv/node-shims:$PATH NODE_CONFORMANCE_AGENT_CTL=$CTL \
    KUBE_TEST_REPO_LIST=$repo_list exec "$bin/ginkgo" --procs="$PROCS" --timeout="$TIMEOUT" \
    --focus="$FOCUS" --skip="$SKIP" --no-color \
    --output-dir="$REPORT" --json-report=report.json \
    "$bin/e2e_node.test" -- \
    --conformance --start-services=true --stop-services=false --prepull-images=false \
    --node-name="$NODE" --bearer-token="$TOKEN" \
    --container-runtime-endpoint="$endpoint" --report-dir="$REPORT" \
    "${suite_args[@]}" --v=2 9>&-
) >"$REPORT/e2e.log" 2>&1 &
SUITE_PID=$!

# nanolet once the suite's API server answers (the suite waits 2 minutes for
# the node to be Ready after that).
for _ in $(seq 300); do
  curl -ksf --max-time 2 -H "Authorization: Bearer $TOKEN" "$APISERVER/readyz" >/dev/null 2>&1 && break
  kill -0 "$SUITE_PID" 2>/dev/null || die "the suite ended before its API server answered: $(tail -5 "$REPORT/e2e.log")"
  sleep 1
done
curl -ksf --max-time 2 -H "Authorization: Bearer $TOKEN" "$APISERVER/readyz" >/dev/null 2>&1 ||
  die "the suite's API server does not answer after 300 s; see $REPORT/e2e.log"
agent_endpoint=$endpoint
if [ "$CRI_PROXY" = 1 ]; then
  proxy=$(find /tmp -maxdepth 1 -name 'kubelet_remote_proxy_*.sock' -type s -newer "$WORK/suite-start" | head -1)
  [ -n "$proxy" ] || die "--cri-proxy-enabled: no proxy socket /tmp/kubelet_remote_proxy_*.sock made by the suite"
  agent_endpoint=unix://$proxy
  say "nanolet reaches the runtime through the suite's CRI proxy $proxy"
fi
say "the suite's API server answers after $(($(date +%s) - start)) s; starting nanolet as node $NODE ($node_ip); log: $REPORT/nanolet.log"
: >"$CTL/want"
agent_service 9>&- &
AGENT_PID=$!

set +e
wait "$SUITE_PID"
ginkgo_rc=$?
SUITE_PID=
set -e
elapsed=$(($(date +%s) - start))
[ -e "$CTL/pid" ] || say "nanolet is not running at the end of the run: $(tail -3 "$REPORT/nanolet.log")"
set +e
teardown
set -e

[ -s "$REPORT/report.json" ] || die "ginkgo wrote no report (exit $ginkgo_rc); see $REPORT/e2e.log"
# Specs that ran, and those skipped at run time with a reason (the rest of
# the suite is filtered out and not listed).
jq -r '.[].SpecReports[] | select(.LeafNodeType == "It")
  | select(.State != "skipped" or (.Failure.Message // "") != "")
  | [.State, ([.ContainerHierarchyTexts[], .LeafNodeText] | join(" ")),
     (.Failure.Message // "" | gsub("[\n\t]"; " ") | .[0:400]), (.RunTime / 1e9 | floor)] | @tsv' \
  "$REPORT/report.json" | sort -t$'\t' -k2 >"$REPORT/specs.tsv"
bad_nodes=$(jq '[.[].SpecReports[] | select(.LeafNodeType != "It" and .State != "passed" and .State != "skipped")] | length' "$REPORT/report.json")
passed=$(awk -F'\t' '$1 == "passed"' "$REPORT/specs.tsv" | wc -l)
notrun=$(( $(awk -F'\t' '$1 == "skipped"' "$REPORT/specs.tsv" | wc -l) + $(printf '%s' "$MACHINE_NOTRUN" | grep -c . || true) ))
failed=$(awk -F'\t' '$1 != "passed" && $1 != "skipped"' "$REPORT/specs.tsv" | wc -l)

# junit.xml: the framework's junit_01.xml without the specs outside the focus.
/usr/bin/python3 - "$REPORT/junit_01.xml" "$REPORT/junit.xml" <<'EOF' || true
import sys, xml.etree.ElementTree as ET
t = ET.parse(sys.argv[1])
for suite in t.getroot().iter('testsuite'):
    for c in list(suite.findall('testcase')):
        s = c.find('skipped')
        # Outside the focus: "skipped" alone; skipped at run time: "skipped - why".
        if s is not None and (s.get('message') or '') == 'skipped':
            suite.remove(c)
    suite.set('tests', str(len(suite.findall('testcase'))))
    suite.set('skipped', str(sum(1 for c in suite.findall('testcase') if c.find('skipped') is not None)))
t.write(sys.argv[2], encoding='unicode', xml_declaration=True)
EOF

# nanolet's log, summed up: its size and the most frequent warning and error
# messages (the log's own words, numbers and names blanked).
{
  echo "nanolet.log: $(wc -l <"$REPORT/nanolet.log") lines"
  echo "most frequent warnings and errors (count, message with numbers and quoted names blanked):"
  grep -E '(^| )(W|E)[0-9]{4} |level=(warn|error)|\b(warning|error)\b' "$REPORT/nanolet.log" |
    sed -E 's/^[^]]*\] //; s/"[^"]*"/"…"/g; s/[0-9a-f]{8,}/#/g; s/[0-9]+/N/g' |
    sort | uniq -c | sort -rn | head -40
} >"$REPORT/nanolet-log-summary.txt" 2>/dev/null || true

{
  echo "nanolet $(git -C "$top" describe --always --dirty 2>/dev/null || echo '?'), $(date -u +%FT%TZ), $elapsed s, $PROCS processes"
  echo "suite: k8s.io/kubernetes/test/e2e_node v1.36.3, --conformance --start-services${suite_args[*]:+ ${suite_args[*]}}, node $NODE"
  echo "focus: $FOCUS"
  echo "skip: $SKIP"
  [ "$bad_nodes" -eq 0 ] || echo "setup or teardown nodes that did not pass: $bad_nodes (see e2e.log)"
  awk -F'\t' '$1 != "passed" && $1 != "skipped" { print "FAILED (" $1 "): " $2 ": " $3 }' "$REPORT/specs.tsv"
  awk -F'\t' '$1 == "skipped" { print "NOT RUN: " $2 ": " $3 }' "$REPORT/specs.tsv"
  [ -z "$MACHINE_NOTRUN" ] || printf '%s\n' "$MACHINE_NOTRUN"
  echo "$notrun not run"
  echo "$passed passed, $failed failed"
} >"$REPORT/summary.txt"
cat "$REPORT/summary.txt"
ok=1
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ] && [ "$ginkgo_rc" -eq 0 ] || ok=0
if [ "$MODE" = subset ] && [ "$passed" -ne ${#SUBSET[@]} ]; then
  say "the subset names ${#SUBSET[@]} specs; $passed passed"
  ok=0
fi
[ "$ok" -eq 1 ]
