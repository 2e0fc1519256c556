#!/usr/bin/env bash
# Upstream's node conformance suite against a cluster whose only node is a
# nanolet built from this tree, as a cluster operator runs it:
#
#   tools/conformance.sh [FOCUS]
#
# FOCUS is a ginkgo regular expression (default '\[NodeConformance\]'); the
# specs tagged [Serial], [Disruptive], [Flaky] or [Feature:*] are always
# skipped (they need a dedicated or special cluster). Ends with
# `N passed, M failed` (skipped specs named and counted); exits 0 when
# nothing failed.
#
# What it does, as root, on a fresh Debian 12 machine too:
#  1. builds nanolet (build/, meson + ninja) unless NANOLET names a binary;
#  2. the private containerd (tools/testenv/setup.sh);
#     and the `kubelet` user's subordinate ids with getsubids
#     (tools/testenv/subids.sh): the user namespace specs read the node's range
#     with getsubids on the host, and nanolet reads the same at start;
#  3. kube-scheduler, e2e.test, ginkgo, agnhost, nonewprivs and the test
#     credential provider plugin gcp-credential-provider from the pinned
#     module (tools/testenv/k8s-build.sh suite, cached like the control plane);
#  4. the specs' images, pushed to a local registry (tools/testenv/e2e-images.sh)
#     and mapped with KUBE_TEST_REPO_LIST; the private one of the
#     ImageCredentialProvider spec in the test registry, pulled with the
#     credentials of upstream's test credential provider plugin, which
#     nanolet runs (tools/testenv/credprov-plugin.sh);
#  5. a control plane of its own with a scheduler (controlplane.sh with
#     NANOLET_TESTENV_K8S_NAME=k8s-conformance): the shared one has other
#     tests' nodes, where the scheduler would place the specs' pods;
#  6. joins nanolet as node nanolet-conformance with the node credential and
#     the CNI bridge's gateway as its InternalIP (the apiserver's node proxy
#     refuses a loopback address), serving on 10250 when that port is free
#     (another port otherwise: tools/node-conformance.sh's node holds 10250
#     while it runs, and a run of this script holds it from that one);
#  7. runs e2e.test under `ginkgo --procs`, then deletes what is left and
#     takes the control plane down.
#
# The report directory keeps junit_01.xml and report.json (ginkgo's), the
# ginkgo output (e2e.log), nanolet.log and summary.txt. While it runs, nanolet
# logs to /var/log/nanolet-INSTANCE.log (where the node log query finds it),
# copied to the report's nanolet.log at the end.
#
# Environment:
#   CONFORMANCE_PROCS       parallel ginkgo processes (default 4; more than ~6
#                           on 2 CPUs leave pods unschedulable)
#   CONFORMANCE_REPORT_DIR  report directory (default build/conformance/report)
#   CONFORMANCE_TIMEOUT     ginkgo's --timeout for the whole run (default 3h)
#   CONFORMANCE_SKIP        a further skip regular expression
#   CONFORMANCE_BASE_SKIP   replaces the skip of [Serial], [Disruptive],
#                           [Flaky] and [Feature:*] specs, for a run of one
#                           feature's specs on this dedicated cluster (e.g.
#                           '\[Disruptive\]|\[Flaky\]' for the [Serial]
#                           [Feature:PodLevelResources] ones)
#   CONFORMANCE_INSTANCE    runs with different names run at the same time:
#                           control plane k8s-NAME, node nanolet-NAME
#                           (default conformance)
#   CONFORMANCE_PORT_OFFSET its control plane's ports, above the shared one's
#                           (default 100; test/e2e/conformance_subset.sh: 200)
#   CONFORMANCE_ROOT_DIR    nanolet's --root-dir (default /var/lib/nl-INSTANCE:
#                           short, as upstream's /var/lib/kubelet, because a
#                           unix socket's path holds at most 107 bytes and the
#                           DRA specs' rolling-update plugins put a pod UID in
#                           their registration sockets' names). The Mount
#                           propagation spec shares /var/lib/kubelet/NAMESPACE
#                           between its pods and the host: it needs
#                           /var/lib/kubelet, the kubelet's default, which
#                           tools/node-conformance.sh's node uses too (such a
#                           run takes that script's lock)
#   NANOLET                 the nanolet binary (default: build it in build/)
#   NANOLET_TEST_RUNTIME    containerd (default: Debian's 1.6, setup.sh) or
#                           containerd2 (tools/testenv/containerd2.sh, its
#                           bridge nl-br-c2 and subnet 10.89.0.0/24)
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

FOCUS=${1:-'\[NodeConformance\]'}
SKIP=${CONFORMANCE_BASE_SKIP:-'\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:'}
[ -z "${CONFORMANCE_SKIP:-}" ] || SKIP+="|$CONFORMANCE_SKIP"
PROCS=${CONFORMANCE_PROCS:-4}
REPORT=${CONFORMANCE_REPORT_DIR:-$top/build/conformance/report}
TIMEOUT=${CONFORMANCE_TIMEOUT:-3h}
INSTANCE=${CONFORMANCE_INSTANCE:-conformance}
[[ $INSTANCE =~ ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ ]] || { echo "bad CONFORMANCE_INSTANCE: $INSTANCE" >&2; exit 2; }
NODE=nanolet-$INSTANCE
TESTENV_DIR=${NANOLET_TESTENV_DIR:-/var/lib/nanolet-testenv}
export NANOLET_TESTENV_K8S_NAME=k8s-$INSTANCE
export NANOLET_TESTENV_K8S_PORT_OFFSET=${CONFORMANCE_PORT_OFFSET:-100}
export NANOLET_TESTENV_K8S_SCHEDULER=1 NANOLET_TEST_NODE_NAME=$NODE
# As upstream's test clusters (TERMINATED_POD_GC_THRESHOLD=100), which the Pod
# garbage collector spec expects of the controller manager.
export NANOLET_TESTENV_K8S_TERMINATED_POD_GC=100

say() { echo "conformance: $*" >&2; }
die() { say "$*"; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root"
[[ $PROCS =~ ^[1-9][0-9]*$ ]] || die "CONFORMANCE_PROCS must be a positive number: $PROCS"

# One run per instance at a time: its control plane, node name and root dir
# are this run's alone.
mkdir -p "$TESTENV_DIR"
exec 9>"$TESTENV_DIR/$INSTANCE.lock"
if ! flock -n 9; then
  say "waiting for another tools/conformance.sh run of $INSTANCE to finish"
  flock 9
fi

if [ -z "${NANOLET:-}" ]; then
  [ -f build/build.ninja ] || meson setup build --fatal-meson-warnings >&2
  ninja -C build >&2 || die "the build failed"
  NANOLET=$top/build/agent/nanolet
fi
[ -x "$NANOLET" ] || die "no nanolet binary at $NANOLET"

# The runtime and its CNI bridge and subnet (the node's InternalIP below).
# The daemons these start (containerd, the registries, the control plane)
# outlive the run: they must not keep its lock (fd 9) open.
# The 1.6 instance runs the registries (the credential provider's too)
# whatever the runtime.
tools/testenv/setup.sh 9>&- >/dev/null || die "the test environment did not start"
# shellcheck source=tools/testenv/runtime.sh
. tools/testenv/runtime.sh
testenv_runtime 9>&- || die "the runtime did not start"
endpoint=$RUNTIME_ENDPOINT bridge=$RUNTIME_BRIDGE subnet=$RUNTIME_SUBNET
tools/testenv/subids.sh 9>&- >/dev/null || die "the kubelet user's subordinate ids could not be set up"
bin=$(tools/testenv/k8s-build.sh suite)
# The sample device plugin's image goes into the runtime the pods run on,
# containerd 2's when it is the one.
repo_list=$(NANOLET_TESTENV_E2E_IMPORT_SOCK=${endpoint#unix://} tools/testenv/e2e-images.sh "$bin" 9>&-)
credprov=$(tools/testenv/credprov-plugin.sh "$bin" "$repo_list" 9>&-)
repo_list=$credprov/repo-list.yaml

rm -rf "$REPORT"
mkdir -p "$REPORT"
ROOT=${CONFORMANCE_ROOT_DIR:-/var/lib/nl-$INSTANCE}
case $ROOT in /*) ;; *) die "CONFORMANCE_ROOT_DIR must be absolute: $ROOT" ;; esac
if [ "$ROOT" = /var/lib/kubelet ]; then
  exec 8>"$TESTENV_DIR/node-conformance.lock"
  # (the waiting flock must not hold this run's own lock, fd 9, if the run is
  # killed meanwhile)
  if ! flock -n 8 9>&-; then
    say "waiting for tools/node-conformance.sh (its node's root dir is /var/lib/kubelet too)"
    flock 8 9>&-
  fi
fi
AGENT_PID= NLOG=

cleanup() {
  local rc=$? ns
  trap - EXIT
  # Best effort from here on: a namespace the framework deleted meanwhile, or
  # nanolet's exit status, must not stop the clean-up half way.
  set +e
  if [ -n "${KUBECONFIG:-}" ]; then
    # The specs' namespaces (the framework deletes its own; a run cut short
    # leaves them), so that nanolet removes their pods before it stops.
    for ns in $("$bin/kubectl" get ns -o name 2>/dev/null | sed -n 's|^namespace/||p'); do
      case $ns in default | kube-*) ;; *) "$bin/kubectl" delete ns "$ns" --wait=false >/dev/null 2>&1 ;; esac
    done
    "$bin/kubectl" delete pods -A --all --grace-period=0 --force >/dev/null 2>&1 || true
    # nanolet keeps a directory per pod under its root dir until the pod is
    # gone from the runtime.
    if [ -n "$AGENT_PID" ]; then
      for _ in $(seq 90); do
        pods_left || break
        sleep 1
      done
      pods_left && say "pods left on the node: $(ls "$ROOT/pods" | tr '\n' ' ')(see nanolet.log)"
    fi
  fi
  if [ -n "$AGENT_PID" ]; then
    kill -TERM "$AGENT_PID" 2>/dev/null
    wait "$AGENT_PID" 2>/dev/null
  fi
  [ -z "${NLOG:-}" ] || cp "$NLOG" "$REPORT/nanolet.log"
  [ -n "${CONFORMANCE_KEEP:-}" ] || tools/testenv/controlplane.sh down >/dev/null 2>&1 || true
  # The QoS cgroups nanolet leaves; a pod's that is still busy stays.
  [ -z "${CGROUP_ROOT:-}" ] || tools/testenv/cgroup-root.sh remove "$CGROUP_ROOT"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# True while a sandbox of this node's pods is left: nanolet keeps a directory
# per pod under its root dir.
pods_left() { compgen -G "$ROOT/pods/*" >/dev/null; }

# A control plane left over by a run that was killed is taken down first: a
# fresh etcd, so no namespace or pod of an earlier run is waited on.
tools/testenv/controlplane.sh down >/dev/null 2>&1 || true
env_file=$(tools/testenv/controlplane.sh up 8>&- 9>&-)
# shellcheck source=/dev/null
. "$env_file"

# The node's InternalIP: the CNI bridge's gateway, made now if no pod made it yet.
prefix=${subnet#*/}
net=${subnet%/*}
node_ip=${net%.*}.$((${net##*.} + 1))
if ! ip link show "$bridge" >/dev/null 2>&1; then
  ip link add "$bridge" type bridge
  ip link set "$bridge" up
fi
ip -4 addr show dev "$bridge" | grep -q "inet $node_ip/" || ip addr add "$node_ip/$prefix" dev "$bridge"

free_port() { tools/testenv/free-port.py; }
HEALTHZ_PORT=$(free_port)
# The kubelet's port is upstream's 10250 when it is free: some specs reach the
# kubelet through the API server's node proxy at that port, not at the Node's
# daemon endpoint (ports.KubeletPort: Pods Extended Delete Grace Period,
# PreStop, the kubelet authz specs). The node suite's nanolet holds it while
# that suite runs; then those specs reach that kubelet instead, and fail.
if python3 -c 'import socket; s=socket.socket(); s.bind(("0.0.0.0",10250))' 2>/dev/null; then
  KPORT=10250
else
  KPORT=$(free_port)
  say "port 10250 is taken: the kubelet serves on $KPORT; the specs that reach a kubelet at 10250 will fail"
fi
# nanolet bind-mounts its root dir on itself at start (made rshared, as
# upstream's kubelet does): an earlier run's mounts there go first.
awk -v d="$ROOT" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
  while read -r m; do umount -l "$m" 2>/dev/null || true; done
rm -rf "$ROOT"
mkdir -p "$ROOT"
# The node's pods under a cgroup root of its own (cgroupRoot), so that a
# second agent on this machine (another instance, an e2e test) and this one
# never set each other's kubepods.
CGROUP_ROOT=/$NODE
tools/testenv/cgroup-root.sh make "$CGROUP_ROOT"
# nanolet's log where an init script puts it (dist/: /var/log/nanolet.log),
# one per instance so that runs at once keep theirs apart: the node log query
# (/logs/?query=kubelet, the NodeLogQuery specs) finds it as nanolet's own log,
# its standard error under /var/log. The report gets a copy at the end.
NLOG=/var/log/nanolet-$INSTANCE.log
: >"$NLOG"
# As upstream's clusters that run the NodeLogQuery specs: the query is on.
# Authentication and authorization as kubeadm's and kube-up's clusters set
# their kubelets': client certificates of the cluster's CA (the API server's
# node proxy presents kube-apiserver-kubelet-client, group
# kubeadm:cluster-admins), bearer tokens by TokenReview, every request
# authorized by SubjectAccessReview, no anonymous requests. The
# KubeletFineGrainedAuthz specs call the kubelet from a pod with a service
# account token and expect 403 where its RBAC does not allow the request.
CONFIG=$TESTENV_DIR/$INSTANCE-config.yaml
printf '%s\n' 'apiVersion: kubelet.config.k8s.io/v1beta1' 'kind: KubeletConfiguration' \
  'enableSystemLogQuery: true' \
  "authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $NANOLET_TEST_K8S_CA}}" \
  'authorization: {mode: Webhook}' >"$CONFIG"
say "starting nanolet as node $NODE ($node_ip, port $KPORT); log: $NLOG"
# Under the kubelet's name, as an operator who replaces the kubelet installs
# it: the Mount propagation spec finds the node agent with `pidof kubelet`.
mkdir -p "$TESTENV_DIR/$INSTANCE-bin"
ln -sfn "$(realpath "$NANOLET")" "$TESTENV_DIR/$INSTANCE-bin/kubelet"
"$TESTENV_DIR/$INSTANCE-bin/kubelet" --config "$CONFIG" --kubeconfig "$NANOLET_TEST_NODE_KUBECONFIG" --hostname-override "$NODE" \
  --node-ip "$node_ip" --port "$KPORT" --read-only-port 0 --healthz-port "$HEALTHZ_PORT" \
  --cert-dir "$ROOT/pki" --root-dir "$ROOT" --cgroup-root "$CGROUP_ROOT" \
  --container-runtime-endpoint "$endpoint" --image-credential-provider-config "$credprov/config.yaml" \
  --image-credential-provider-bin-dir "$credprov/bin" >"$NLOG" 2>&1 &
AGENT_PID=$!
node_ready() {
  [ "$("$bin/kubectl" get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
for _ in $(seq 60); do
  node_ready && break
  kill -0 "$AGENT_PID" 2>/dev/null || die "nanolet exited: $(tail -5 "$NLOG")"
  sleep 1
done
node_ready || die "node $NODE is not Ready after 60 s"
say "node $NODE is Ready; running '$FOCUS' without '$SKIP', $PROCS processes; output: $REPORT/e2e.log"

start=$(date +%s)
set +e
KUBE_TEST_REPO_LIST=$repo_list nice -n 5 "$bin/ginkgo" --procs="$PROCS" --timeout="$TIMEOUT" \
  --focus="$FOCUS" --skip="$SKIP" --no-color \
  --output-dir="$REPORT" --json-report=report.json \
  "$bin/e2e.test" -- \
  --kubeconfig="$KUBECONFIG" --provider=skeleton --report-dir="$REPORT" \
  --e2e-output-dir="$REPORT" --repo-root="$top" --kubelet-root-dir="$ROOT" >"$REPORT/e2e.log" 2>&1
ginkgo_rc=$?
set -e
elapsed=$(($(date +%s) - start))

[ -s "$REPORT/report.json" ] || die "ginkgo wrote no report (exit $ginkgo_rc); see $REPORT/e2e.log"
# Specs that ran (the rest of the suite is filtered out, and not listed);
# a spec skipped at run time says why.
jq -r '.[].SpecReports[] | select(.LeafNodeType == "It")
  | select(.State != "skipped" or (.Failure.Message // "") != "")
  | [.State, ([.ContainerHierarchyTexts[], .LeafNodeText] | join(" ")),
     (.Failure.Message // "" | gsub("\n"; " ") | .[0:300])] | @tsv' \
  "$REPORT/report.json" | sort >"$REPORT/specs.tsv"
passed=$(awk -F'\t' '$1 == "passed"' "$REPORT/specs.tsv" | wc -l)
skipped=$(awk -F'\t' '$1 == "skipped"' "$REPORT/specs.tsv" | wc -l)
failed=$(awk -F'\t' '$1 != "passed" && $1 != "skipped"' "$REPORT/specs.tsv" | wc -l)
{
  echo "nanolet $(git -C "$top" describe --always --dirty 2>/dev/null || echo '?'), $(date -u +%FT%TZ), $elapsed s, $PROCS processes"
  echo "focus: $FOCUS"
  echo "skip: $SKIP"
  awk -F'\t' '$1 != "passed" && $1 != "skipped" { print "FAILED (" $1 "): " $2 }' "$REPORT/specs.tsv"
  awk -F'\t' '$1 == "skipped" { print "SKIPPED: " $2 ": " $3 }' "$REPORT/specs.tsv"
  echo "$passed passed, $failed failed, $skipped skipped"
} >"$REPORT/summary.txt"
cat "$REPORT/summary.txt"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ] && [ "$ginkgo_rc" -eq 0 ]
