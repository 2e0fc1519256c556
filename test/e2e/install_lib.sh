# shellcheck shell=bash
# Shared by install.sh and reboot.sh (not a test itself): nanolet built and
# installed with `meson install --strip` into a root of its own (a prefix:
# $ROOT/usr, $ROOT/etc, $ROOT/var, $ROOT/run, so that the service files run
# from where they were installed), set up for a test runtime with the
# example pods, and the queries on them. Set NODE and ENDPOINT first.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${NODE:?}" "${ENDPOINT:?}"
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROOT=$E2E_TMP/root
BUILD=$E2E_TMP/build
BIN=$ROOT/usr/bin/nanolet
INIT=$ROOT/etc/init.d/nanolet
PORT=$(free_port)

# install_root [MESON OPTION...]: exits the test when it fails.
install_root() {
  meson setup "$BUILD" "$TOP" --fatal-meson-warnings -Dtests=false --buildtype=minsize -Db_lto=true \
    --prefix="$ROOT/usr" \
    --sysconfdir="$ROOT/etc" --localstatedir="$ROOT/var" -Drundir="$ROOT/run" "$@" \
    >"$E2E_TMP/setup.log" 2>&1 || { fail "meson setup" "$(tail -5 "$E2E_TMP/setup.log")"; exit 1; }
  ninja -C "$BUILD" agent/nanolet dist/nanolet.8 >"$E2E_TMP/build.log" 2>&1 &&
    meson install -C "$BUILD" --no-rebuild --strip >"$E2E_TMP/install.log" 2>&1 \
    && ok "meson install --strip" || { fail "meson install" "$(tail -5 "$E2E_TMP/build.log" "$E2E_TMP/install.log")"; exit 1; }
}

# The test's settings over the installed ones: the test runtime, a free
# port, a private root dir, the node name; the example pods as static pods.
use_test_runtime() {
  sed -i -e "s|unix:///run/containerd/containerd.sock|$ENDPOINT|" \
    -e "s|^healthzPort: .*|healthzPort: $PORT|" "$ROOT/etc/nanolet/config.yaml"
  cat >>"$ROOT/etc/default/nanolet" <<EOT
NANOLET_ARGS="--config $ROOT/etc/nanolet/config.yaml --root-dir $ROOT/var/lib/kubelet --hostname-override $NODE"
NANOLET_RESPAWN_DELAY=1
EOT
  cp "$TOP"/examples/*.yaml "$ROOT/etc/kubernetes/manifests/"
}

agent_pids() { pgrep -f "^$BIN " || true; }
agent_pid() { local p; p=$(agent_pids); [ "$(wc -w <<<"$p")" = 1 ] && echo "$p"; }
no_agent() { [ -z "$(agent_pids)" ]; }
# The example pods, named after the node, have every container running (after
# a reboot, upstream's phase stays Running while the containers are terminated
# and about to be restarted). Asked of the runtime: the installed configuration
# serves /pods only on the kubelet server, which needs an API server to
# authorize requests.
pods_running() {
  local out
  out=$("$BIN" cri -r "$ENDPOINT" ps -o json 2>/dev/null) || return 1
  [ "$(jq --arg n "$NODE" '[.containers[] | select(.state == "CONTAINER_RUNNING")
    | .labels["io.kubernetes.pod.name"] | select(. == "web-\($n)" or . == "ticker-\($n)")] | unique | length' <<<"$out")" = 2 ]
}
# The runtime's sandboxes of this node's pods (JSON array).
node_sandboxes() {
  "$BIN" cri pods -r "$ENDPOINT" -o json | jq --arg n "$NODE" '[.items[] | select(.metadata.name | endswith("-\($n)"))]'
}
no_pods() { [ "$(node_sandboxes | jq length)" = 0 ]; }

# The pods go with their manifests: a last agent removes them.
remove_pods() {
  [ -x "$BIN" ] || return 0
  rm -f "$ROOT"/etc/kubernetes/manifests/*.yaml
  "$BIN" --config "$ROOT/etc/nanolet/config.yaml" --root-dir "$ROOT/var/lib/kubelet" \
    --hostname-override "$NODE" >>"$E2E_TMP/cleanup.log" 2>&1 &
  local pid=$!
  wait_for 60 no_pods
  kill -TERM $pid
  wait $pid
}
