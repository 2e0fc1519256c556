#!/usr/bin/env bash
# A real Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager v1.36.3, and kube-scheduler when asked) on loopback,
# for nanolet's tests.
#
#   tools/testenv/controlplane.sh up      # stdout: the env file to source
#   . "$NANOLET_TESTENV_DIR/k8s/env.sh"   # (tools/testenv/env.sh sources it too)
#   tools/testenv/controlplane.sh cert NAME CN [O...]   # stdout: a kubeconfig
#   tools/testenv/controlplane.sh down
#
# Commands:
#   build               build (or find cached) binaries; stdout: their dir
#   up                  start whatever is not running (building first if
#                       needed) and wait until it serves; reuses a running,
#                       healthy control plane; stdout: the env file
#   down [--purge]      stop it and delete etcd's data; --purge also deletes
#                       the certificates, kubeconfigs and logs
#   stop COMPONENT      stop one of etcd, kube-apiserver,
#                       kube-controller-manager (to test outages; `up` brings
#                       it back with its data)
#   status              exit 0 when all three run and the apiserver is ready
#   env                 print the env file
#   cert [--foreign] NAME CN [O...]
#                       a client certificate for user CN in groups O, signed
#                       by the cluster CA (or by an unrelated CA with
#                       --foreign); stdout: a kubeconfig that uses it
#                       (k8s/extra/NAME.kubeconfig, beside NAME.crt, NAME.key)
#
# Environment:
#   NANOLET_TESTENV_DIR       state directory (default /var/lib/nanolet-testenv);
#                             the control plane lives in its k8s/ subdirectory
#   NANOLET_TESTENV_CACHE     where binaries are cached (see k8s-build.sh)
#   NANOLET_TEST_NODE_NAME    node the node credential is for (default nanolet-e2e)
#   NANOLET_TESTENV_K8S_TIMEOUT  seconds each component may take to be ready (60)
#   NANOLET_TESTENV_K8S_NAME  a second, separate control plane: its state in
#                             $NANOLET_TESTENV_DIR/NAME (default k8s, the shared one)
#   NANOLET_TESTENV_K8S_PORT_OFFSET  added to every port (a second instance, in
#                             its own NANOLET_TESTENV_DIR or NAME)
#   NANOLET_TESTENV_K8S_SCHEDULER=1  run kube-scheduler too (not in the shared
#                             one: other tests' pods without a node stay Pending)
#   NANOLET_TESTENV_K8S_SIGNING_DURATION  kube-controller-manager's
#                             --cluster-signing-duration (e.g. 6m: client
#                             certificates that rotate within minutes; default
#                             its own, a year)
#   NANOLET_TESTENV_K8S_TERMINATED_POD_GC  kube-controller-manager's
#                             --terminated-pod-gc-threshold (default its own,
#                             12500)
#   NANOLET_TESTENV_K8S_AUDIT_NODES=1  the audit log records every request of a
#                             node (group system:nodes), not only its reads of
#                             ConfigMaps, Secrets, tokens and CSRs (benches)
set -euo pipefail
exec 3>&1 1>&2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/testenv/common.sh
. "$here/common.sh"
# shellcheck source=tools/testenv/pki.sh
. "$here/pki.sh"

K8S_NAME=${NANOLET_TESTENV_K8S_NAME:-k8s}
case $K8S_NAME in k8s*) ;; *) die "NANOLET_TESTENV_K8S_NAME must start with k8s: $K8S_NAME" ;; esac
CP=$DIR/$K8S_NAME
PKI=$CP/pki
RUN=$CP/run
NODE_NAME=${NANOLET_TEST_NODE_NAME:-nanolet-e2e}
TIMEOUT=${NANOLET_TESTENV_K8S_TIMEOUT:-60}
# Away from the usual 2379/2380/6443/10257, so a real cluster on the same
# machine is left alone; a second instance (its own NANOLET_TESTENV_DIR or
# NANOLET_TESTENV_K8S_NAME) adds NANOLET_TESTENV_K8S_PORT_OFFSET to each.
PORT_OFFSET=${NANOLET_TESTENV_K8S_PORT_OFFSET:-0}
ETCD_PORT=$((12379 + PORT_OFFSET))
ETCD_PEER_PORT=$((12380 + PORT_OFFSET))
APISERVER_PORT=$((16443 + PORT_OFFSET))
KCM_PORT=$((16257 + PORT_OFFSET))
SCHEDULER_PORT=$((16259 + PORT_OFFSET))
APISERVER=https://127.0.0.1:$APISERVER_PORT
SERVICE_CIDR=10.0.0.0/24
SERVICE_IP=10.0.0.1
COMPONENTS=(etcd kube-apiserver kube-controller-manager)
SCHEDULER=${NANOLET_TESTENV_K8S_SCHEDULER:-0}
AUDIT_NODES=${NANOLET_TESTENV_K8S_AUDIT_NODES:-0}
SIGNING_DURATION=${NANOLET_TESTENV_K8S_SIGNING_DURATION:-}
TERMINATED_POD_GC=${NANOLET_TESTENV_K8S_TERMINATED_POD_GC:-}
[ "$SCHEDULER" = 1 ] && COMPONENTS+=(kube-scheduler)

# --- processes ------------------------------------------------------------------

# component_pid NAME: the pid of our NAME: the process whose command line is
# exactly the one we started it with (run/NAME.cmd), which names files under
# $CP.
component_pid() {
  [ -f "$RUN/$1.cmd" ] && pid_by_cmdline "$RUN/$1.pid" "$(cat "$RUN/$1.cmd")"
}

# start_component NAME READY-CMD -- CMD...: runs CMD detached unless our NAME
# already runs exactly CMD, then waits for READY-CMD to succeed.
start_component() {
  local name=$1 ready=$2 want pid
  shift 3
  want=$(printf '%s ' "$@")
  if pid=$(component_pid "$name"); then
    if [ "$(cat "$RUN/$name.cmd")" = "$want" ] && $ready; then
      return 0
    fi
    log "restarting $name (pid $pid): its command line or health changed"
    stop_components "$name"
  fi
  log "starting $name (log: $CP/$name.log)"
  echo "$want" >"$RUN/$name.cmd"
  echo "=== $(date -u +%FT%TZ) $want" >>"$CP/$name.log"
  # setsid: the daemons outlive this script; 3>&- 4>&-: they must not hold
  # the caller's stdout pipe or our lock.
  setsid nohup "$@" >>"$CP/$name.log" 2>&1 </dev/null 3>&- 4>&- &
  echo $! >"$RUN/$name.pid"
  wait_ready "$name" $! "$CP/$name.log" "$TIMEOUT" "$ready"
}

# stop_components NAME...: SIGTERM to each at once, SIGKILL to what is left
# after 3 s. The apiserver lingers for long after SIGTERM while clients hold
# watches, and nothing here needs a graceful exit.
stop_components() {
  local name pid pids=() alive i
  for name in "$@"; do
    if pid=$(component_pid "$name"); then
      log "stopping $name (pid $pid)"
      kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    fi
    rm -f "$RUN/$name.pid"
  done
  for ((i = 0; i < 30; i++)); do
    alive=()
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && alive+=("$pid")
    done
    [ ${#alive[@]} -eq 0 ] && return 0
    pids=("${alive[@]}")
    sleep 0.1
  done
  log "SIGKILL to ${pids[*]}: still running 3 s after SIGTERM"
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

admin_get() { # admin_get PATH: GET as the admin, body on stdout
  curl -fsS --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "$APISERVER$1" 2>/dev/null
}
etcd_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; }
apiserver_ready() { [ "$(admin_get /readyz)" = ok ]; }
# The controllers work once the serviceaccount controller has made `default`.
kcm_ready() {
  [ "$(curl -ksS --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz" 2>/dev/null)" = ok ] &&
    admin_get /api/v1/namespaces/default/serviceaccounts/default >/dev/null
}
scheduler_ready() { [ "$(curl -ksS --max-time 2 "https://127.0.0.1:$SCHEDULER_PORT/healthz" 2>/dev/null)" = ok ]; }

# --- PKI ------------------------------------------------------------------------

make_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  if ! pki_valid "$PKI/ca"; then
    log "making the PKI in $PKI"
    rm -f "$PKI"/*.crt "$PKI"/*.key "$PKI"/*.pub
  fi
  pki_ca "$PKI/ca" nanolet-test-ca
  pki_ca "$PKI/foreign-ca" nanolet-test-foreign-ca
  pki_valid "$PKI/apiserver" ||
    pki_cert "$PKI/ca" "$PKI/apiserver" serverAuth kube-apiserver -- \
      IP:127.0.0.1 IP:$SERVICE_IP DNS:localhost DNS:kubernetes DNS:kubernetes.default \
      DNS:kubernetes.default.svc DNS:kubernetes.default.svc.cluster.local
  pki_valid "$PKI/apiserver-kubelet-client" ||
    pki_cert "$PKI/ca" "$PKI/apiserver-kubelet-client" clientAuth kube-apiserver-kubelet-client \
      kubeadm:cluster-admins
  # The aggregation layer (kubeadm's front proxy): the apiserver's client
  # certificate towards extension apiservers (metrics-server), from a CA of
  # its own that they trust for the X-Remote-User headers.
  pki_ca "$PKI/front-proxy-ca" front-proxy-ca
  pki_valid "$PKI/front-proxy-client" ||
    pki_cert "$PKI/front-proxy-ca" "$PKI/front-proxy-client" clientAuth front-proxy-client
  pki_valid "$PKI/admin" || pki_cert "$PKI/ca" "$PKI/admin" clientAuth nanolet-test-admin system:masters
  pki_valid "$PKI/kcm" || pki_cert "$PKI/ca" "$PKI/kcm" clientAuth system:kube-controller-manager
  pki_valid "$PKI/scheduler" || pki_cert "$PKI/ca" "$PKI/scheduler" clientAuth system:kube-scheduler
  pki_valid "$PKI/node-$NODE_NAME" ||
    pki_cert "$PKI/ca" "$PKI/node-$NODE_NAME" clientAuth "system:node:$NODE_NAME" system:nodes
  if [ ! -s "$PKI/sa.key" ]; then
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null &&
      openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null ||
      die "openssl could not make the service-account key"
    chmod 600 "$PKI/sa.key"
  fi
  pki_kubeconfig "$CP/admin.kubeconfig" "$APISERVER" "$PKI/ca.crt" "$PKI/admin.crt" "$PKI/admin.key" admin
  pki_kubeconfig "$CP/kcm.kubeconfig" "$APISERVER" "$PKI/ca.crt" "$PKI/kcm.crt" "$PKI/kcm.key" \
    system:kube-controller-manager
  pki_kubeconfig "$CP/scheduler.kubeconfig" "$APISERVER" "$PKI/ca.crt" "$PKI/scheduler.crt" \
    "$PKI/scheduler.key" system:kube-scheduler
  pki_kubeconfig "$CP/node.kubeconfig" "$APISERVER" "$PKI/ca.crt" "$PKI/node-$NODE_NAME.crt" \
    "$PKI/node-$NODE_NAME.key" "system:node:$NODE_NAME"
}

# --- commands -------------------------------------------------------------------

write_env() {
  local bin=$1
  cat >"$CP/env.sh.tmp" <<EOF
# Written by tools/testenv/controlplane.sh up; removed by down.
export NANOLET_TEST_APISERVER=$APISERVER
export NANOLET_TEST_K8S_CA=$PKI/ca.crt
export NANOLET_TEST_KUBECONFIG=$CP/admin.kubeconfig
export KUBECONFIG=$CP/admin.kubeconfig
export NANOLET_TEST_NODE_NAME=$NODE_NAME
export NANOLET_TEST_NODE_KUBECONFIG=$CP/node.kubeconfig
export NANOLET_TEST_KUBECTL=$bin/kubectl
export NANOLET_TEST_K8S_BIN=$bin
export NANOLET_TEST_CONTROLPLANE=$here/controlplane.sh
export NANOLET_TEST_AUDIT_LOG=$CP/audit.log
EOF
  mv "$CP/env.sh.tmp" "$CP/env.sh"
}

# The audit log records who read which ConfigMap, Secret, token and CSR, so
# that tests can show what a node asked for (one JSON line per request); with
# NANOLET_TESTENV_K8S_AUDIT_NODES=1 every request of a node as well.
write_audit_policy() {
  {
    cat <<'YAML'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: [configmaps, secrets, serviceaccounts/token]
  - group: certificates.k8s.io
    resources: [certificatesigningrequests]
YAML
    [ "$AUDIT_NODES" = 1 ] && printf -- '- level: Metadata\n  userGroups: [system:nodes]\n'
    echo '- level: None'
  } >"$CP/audit-policy.yaml"
}

cmd_up() {
  local bin
  if [ "$SCHEDULER" = 1 ]; then
    bin=$("$here/k8s-build.sh" kube-scheduler)
  else
    bin=$("$here/k8s-build.sh")
  fi
  mkdir -p "$RUN"
  touch "$DIR/$MARKER"
  make_pki
  write_audit_policy
  start_component etcd etcd_ready -- "$bin/etcd" --name nanolet-test \
    --data-dir "$CP/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "nanolet-test=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync
  # --endpoint-reconciler-type=none: Endpoints may not hold a loopback
  # address, so the reconciler of the `kubernetes` Service could only fail.
  # The beta resource.k8s.io versions are served beside v1, as upstream's DRA
  # jobs serve them: the DRA specs "with v1beta1 API" and "with v1beta2 API"
  # make their claims through them.
  start_component kube-apiserver apiserver_ready -- "$bin/kube-apiserver" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
    --secure-port=$APISERVER_PORT \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction \
    --enable-bootstrap-token-auth \
    --allow-privileged \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" \
    --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=$SERVICE_CIDR \
    --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname \
    --audit-policy-file="$CP/audit-policy.yaml" \
    --audit-log-path="$CP/audit.log" --audit-log-maxsize=20 --audit-log-maxbackup=1 \
    --endpoint-reconciler-type=none \
    --runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true
  # All default controllers, plus the two that TLS bootstrap needs.
  start_component kube-controller-manager kcm_ready -- "$bin/kube-controller-manager" \
    --kubeconfig="$CP/kcm.kubeconfig" \
    --authentication-kubeconfig="$CP/kcm.kubeconfig" \
    --authorization-kubeconfig="$CP/kcm.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=$KCM_PORT \
    --leader-elect=false \
    --controllers='*,bootstrap-signer-controller,token-cleaner-controller' \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    ${SIGNING_DURATION:+--cluster-signing-duration="$SIGNING_DURATION"} \
    ${TERMINATED_POD_GC:+--terminated-pod-gc-threshold="$TERMINATED_POD_GC"} \
    --root-ca-file="$PKI/ca.crt" \
    --service-account-private-key-file="$PKI/sa.key" \
    --use-service-account-credentials \
    --service-cluster-ip-range=$SERVICE_CIDR
  if [ "$SCHEDULER" = 1 ]; then
    start_component kube-scheduler scheduler_ready -- "$bin/kube-scheduler" \
      --kubeconfig="$CP/scheduler.kubeconfig" \
      --authentication-kubeconfig="$CP/scheduler.kubeconfig" \
      --authorization-kubeconfig="$CP/scheduler.kubeconfig" \
      --bind-address=127.0.0.1 --secure-port=$SCHEDULER_PORT \
      --leader-elect=false
  fi
  # kubeadm's binding for the apiserver's kubelet-client identity (group
  # kubeadm:cluster-admins): kubelets authorize it with SubjectAccessReview.
  "$bin/kubectl" --kubeconfig "$CP/admin.kubeconfig" apply -f - >/dev/null <<'YAML' ||
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubeadm:cluster-admins"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "kubeadm:cluster-admins"}]
YAML
    die "cannot bind kubeadm:cluster-admins to cluster-admin"
  # TLS bootstrap, as kubeadm sets it up: bootstrap-token users (group
  # system:bootstrappers) may create CSRs, and kube-controller-manager approves
  # their node-client CSRs and the nodes' own renewals by itself.
  "$bin/kubectl" --kubeconfig "$CP/admin.kubeconfig" apply -f - >/dev/null <<'YAML' ||
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubeadm:kubelet-bootstrap"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:node-bootstrapper"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:bootstrappers"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubeadm:node-autoapprove-bootstrap"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:certificates.k8s.io:certificatesigningrequests:nodeclient"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:bootstrappers"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubeadm:node-autoapprove-certificate-rotation"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:nodes"}]
YAML
    die "cannot bind the TLS bootstrap roles"
  write_env "$bin"
  echo "$CP/env.sh" >&3
}

cmd_down() {
  stop_components kube-scheduler kube-controller-manager kube-apiserver etcd
  rm -rf "$CP/etcd" "$CP/env.sh" "$RUN"
  if [ "${1:-}" = --purge ] && [ -d "$CP" ]; then
    rm -rf "$CP"
    log "removed $CP"
  fi
}

cmd_status() {
  local c
  for c in "${COMPONENTS[@]}"; do
    component_pid "$c" >/dev/null || return 1
  done
  apiserver_ready
}

cmd_cert() {
  local ca=$PKI/ca name cn
  if [ "${1:-}" = --foreign ]; then
    ca=$PKI/foreign-ca
    shift
  fi
  [ $# -ge 2 ] || die "usage: cert [--foreign] NAME CN [O...]"
  name=$1 cn=$2
  shift 2
  case $name in */* | .*) die "cert: bad NAME: $name" ;; esac
  [ -s "$ca.crt" ] || die "no PKI in $PKI: run up first"
  mkdir -p "$CP/extra"
  pki_cert "$ca" "$CP/extra/$name" clientAuth "$cn" "$@"
  pki_kubeconfig "$CP/extra/$name.kubeconfig" "$APISERVER" "$PKI/ca.crt" "$CP/extra/$name.crt" \
    "$CP/extra/$name.key" "$cn"
  echo "$CP/extra/$name.kubeconfig" >&3
}

[ $# -ge 1 ] || die "usage: $0 build|up|down|stop|status|env|cert (--help)"
cmd=$1
shift
case $cmd in
  -h | --help)
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
    ;;
  build) exec "$here/k8s-build.sh" "$@" >&3 3>&- ;;
  env)
    [ -f "$CP/env.sh" ] || die "the control plane is not up (no $CP/env.sh)"
    cat "$CP/env.sh" >&3
    exit 0
    ;;
esac

mkdir -p "$CP"
# One command at a time per state dir: up, down and stop race otherwise.
exec 4>"$CP/lock"
flock 4
case $cmd in
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  stop)
    case ${1:-} in
      etcd | kube-apiserver | kube-controller-manager | kube-scheduler) stop_components "$1" ;;
      *) die "stop: one of ${COMPONENTS[*]}" ;;
    esac
    ;;
  status) cmd_status ;;
  cert) cmd_cert "$@" ;;
  *) die "unknown command: $cmd" ;;
esac
