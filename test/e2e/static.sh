#!/usr/bin/env bash
# The static build (tools/build.sh --static: nanolet and every library it links
# compiled with musl, linked -static) needs nothing at all: no dynamic section,
# and it runs in a root that holds nothing but itself, a kubeconfig, a manifest
# and /etc/hosts (no libc, no loader): --version, manifest check, a standalone
# start that talks to containerd (its socket bound in) until healthz says ok,
# then SIGTERM; and a join to the test control plane by name, which musl's
# resolver finds in the root's /etc/hosts (`kubernetes`, one of the
# apiserver certificate's names, which the machine itself does not resolve):
# the Node Ready, then SIGTERM. And tools/release.sh's tarball.
. "$(dirname "$0")/lib.sh"
: "${NANOLET_TEST_CRI_ENDPOINT:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
TOP=$(cd "$(dirname "$0")/../.." && pwd)
NODE=nanolet-static-e2e
CG=/nanolet-static-e2e
"$TOP/tools/build.sh" --static >"$E2E_TMP/build.log" 2>&1 && ok "tools/build.sh --static" ||
  { fail "build" "$(tail -5 "$E2E_TMP/build.log")"; exit 1; }
BIN=$TOP/build-static/agent/nanolet
strip -o "$E2E_TMP/nanolet" "$BIN"
echo "static amd64 binary, stripped: $(stat -c %s "$E2E_TMP/nanolet") bytes"
info=$(file -b "$E2E_TMP/nanolet")
[[ $info == *"statically linked"* ]] && ok "file: statically linked" || fail "file" "$info"
readelf -d "$E2E_TMP/nanolet" 2>&1 | grep -q 'There is no dynamic section' && ok "readelf: no dynamic section" ||
  fail "dynamic section" "$(readelf -d "$E2E_TMP/nanolet" | head -5)"
readelf -l "$E2E_TMP/nanolet" | grep -q INTERP && fail "interpreter" "$(readelf -l "$E2E_TMP/nanolet" | grep -A1 INTERP)" ||
  ok "no program interpreter"

# The release tarball: the same binary, stripped, with the manual, the example
# config and every init system's service files.
tgz=$("$TOP/tools/release.sh" 2>"$E2E_TMP/release.log") || fail "tools/release.sh" "$(tail -3 "$E2E_TMP/release.log")"
want="usr/bin/nanolet usr/share/man/man8/nanolet.8 etc/nanolet/config.yaml etc/default/nanolet
  init/procd/nanolet init/openrc/nanolet init/openrc/nanolet.confd init/sysv/nanolet
  init/runit/nanolet/run init/systemd/nanolet.service README"
missing=
listing=$(tar -tzf "$tgz")
for f in $want; do grep -qx "nanolet-[^/]*-linux-amd64/$f" <<<"$listing" || missing+=" $f"; done
[[ $tgz == */nanolet-*-linux-amd64.tar.gz ]] && [ -z "$missing" ] && ok "tools/release.sh: $(basename "$tgz") ($(stat -c %s "$tgz") bytes)" ||
  fail "release tarball" "$tgz, missing:$missing"
mkdir -p "$E2E_TMP/rel" && tar -xzf "$tgz" -C "$E2E_TMP/rel"
cmp -s "$E2E_TMP"/rel/*/usr/bin/nanolet "$E2E_TMP/nanolet" && ok "the tarball's binary is the stripped static one" || fail "tarball binary"

k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
kc=$(node_kubeconfig "$NODE") || { fail "node credential" "$kc"; exit 1; }
apiport=${NANOLET_TEST_APISERVER##*:}
getent hosts kubernetes >/dev/null && fail "the machine must not resolve kubernetes itself" "$(getent hosts kubernetes)"

# The root: the binary, a kubeconfig (certificates inline), a manifest, /etc/hosts.
R=$E2E_TMP/root
mkdir -p "$R/bin" "$R/etc" "$R/m" "$R/empty" "$R/run" "$R/proc" "$R/sys" "$R/tmp"
cp "$E2E_TMP/nanolet" "$R/bin/"
cp "$TOP/examples/web.yaml" "$R/m/"
echo "127.0.0.1 kubernetes" >"$R/etc/hosts"
b64() { base64 -w0 "$1"; }
path_of() { sed -n "s/^ *$1: //p" "$kc"; }
cat >"$R/etc/kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://kubernetes:$apiport
    certificate-authority-data: $(b64 "$NANOLET_TEST_K8S_CA")
users:
- name: $NODE
  user:
    client-certificate-data: $(b64 "$(path_of client-certificate)")
    client-key-data: $(b64 "$(path_of client-key)")
contexts:
- name: test
  context: {cluster: test, user: $NODE}
current-context: test
EOK
[ "$(find "$R" -type f | wc -l)" = 4 ] && ok "the root holds 4 files: binary, kubeconfig, manifest, hosts" ||
  fail "root" "$(find "$R" -type f)"
[ -z "$(find "$R" -name 'ld-*' -o -name 'lib*.so*')" ] && ok "no C library, no loader in the root" || fail "root libs"

out=$(chroot "$R" /bin/nanolet --version 2>&1) && [[ $out == "nanolet v"* ]] && ok "--version in the empty root" || fail "--version" "$out"
out=$(chroot "$R" /bin/nanolet manifest check /m/web.yaml 2>"$E2E_TMP/err") && [[ "$(jq -r .metadata.name <<<"$out")" == web-* ]] \
  && ok "manifest check in the empty root" || fail "manifest check" "${out:0:300} $(cat "$E2E_TMP/err")"

cleanup() {
  [ -z "${pid:-}" ] || kill -TERM "$pid" 2>/dev/null
  kubectl delete node "$NODE" --wait=false >/dev/null 2>&1
  kubectl delete lease -n kube-node-lease "$NODE" --wait=false >/dev/null 2>&1
  "$TOP/tools/testenv/cgroup-root.sh" remove "$CG"
}
e2e_on_exit cleanup
"$TOP/tools/testenv/cgroup-root.sh" make "$CG"
# run_in_root ARGS...: nanolet in the root, in a mount namespace of its own
# (the mounts go with it): /proc, /sys (the pod and QoS cgroups) and the
# runtime's socket. Sets pid (nanolet's: unshare, sh and chroot exec).
run_in_root() {
  unshare -m sh -c '
    R=$1; sock=$2; shift 2
    mount -t proc proc "$R/proc" && mount --rbind /sys "$R/sys" && touch "$R/run/cri.sock" &&
      mount --bind "$sock" "$R/run/cri.sock" && exec chroot "$R" /bin/nanolet "$@"' \
    sh "$R" "${NANOLET_TEST_CRI_ENDPOINT#unix://}" --root-dir /tmp/root --cgroup-root "$CG" \
    --container-runtime-endpoint unix:///run/cri.sock --hostname-override "$NODE" "$@" \
    >>"$E2E_TMP/agent.log" 2>&1 &
  pid=$!
}
stop_in_root() { # NAME: SIGTERM, exit 0
  kill -TERM "$pid"; wait "$pid"; local rc=$?
  pid=
  [ $rc = 0 ] && ok "$1: exits 0 on SIGTERM" || fail "$1: SIGTERM" "rc=$rc $(tail -3 "$E2E_TMP/agent.log")"
}

port=$(free_port)
server_flags /tmp # --cert-dir /tmp/pki in the root
# shellcheck disable=SC2086
run_in_root --pod-manifest-path /empty --healthz-port "$port" $SERVER_FLAGS
wait_for 10 healthz_ok "$port" && grep -q 'container runtime containerd' "$E2E_TMP/agent.log" \
  && ok "standalone in the empty root: talks to containerd (healthz ok)" || fail "standalone" "$(tail -5 "$E2E_TMP/agent.log")"
[ "$(curl -fsS "http://127.0.0.1:$RO_PORT/healthz")" = ok ] && curl -ksS -o /dev/null "https://127.0.0.1:$KPORT/healthz" \
  && ok "the kubelet server (TLS on $KPORT, read-only $RO_PORT)" || fail "kubelet server" "$(tail -5 "$E2E_TMP/agent.log")"
[ "$(readlink "/proc/$pid/root")" = "$R" ] && ok "nanolet's root is the empty root" || fail "root" "$(readlink "/proc/$pid/root")"
stop_in_root standalone

# The join, by name.
kubectl delete node "$NODE" --ignore-not-found >/dev/null 2>&1
node_ready() { [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
port=$(free_port)
server_flags /tmp
# shellcheck disable=SC2086
run_in_root --kubeconfig /etc/kubeconfig --pod-manifest-path /empty --healthz-port "$port" $SERVER_FLAGS \
  ${NODE_IP:+--node-ip "$NODE_IP"}
wait_for 30 node_ready && ok "joins the control plane at https://kubernetes:$apiport (musl's resolver, the root's /etc/hosts): Node Ready" ||
  fail "join" "$(tail -5 "$E2E_TMP/agent.log")"
renew=$(kubectl get lease -n kube-node-lease "$NODE" -o jsonpath='{.spec.renewTime}' 2>/dev/null)
[ -n "$renew" ] && ok "its Lease ($renew)" || fail "lease"
stop_in_root joined
