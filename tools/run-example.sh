#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine (as root), builds nanolet and
# leaves it running standalone on a private containerd, with examples/ as its
# staticPodPath. Run again to restart it; `tools/run-example.sh stop` stops it.
#
# Environment (unset, each is what the README promises; the README's own test,
# test/e2e/readme_commands.sh, points them at the test environment):
#   NANOLET_EXAMPLE_DIR       config, log, pid file and root dir
#                             (default /var/lib/nanolet-example)
#   NANOLET_EXAMPLE_ENDPOINT  the CRI endpoint of a containerd already set up
#                             (default: the private one tools/testenv/setup.sh
#                             sets up and starts)
#   NANOLET_EXAMPLE_HEALTHZ_PORT, NANOLET_EXAMPLE_READ_ONLY_PORT,
#   NANOLET_EXAMPLE_PORT      /healthz, the read-only port (/pods) and the
#                             kubelet server (default 10248, 10255, 10250)
#   NANOLET_EXAMPLE_NODE      the node name (default: the host's)
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
dir=${NANOLET_EXAMPLE_DIR:-/var/lib/nanolet-example}
pidfile=$dir/nanolet.pid
healthz_port=${NANOLET_EXAMPLE_HEALTHZ_PORT:-10248}
read_only_port=${NANOLET_EXAMPLE_READ_ONLY_PORT:-10255}
port=${NANOLET_EXAMPLE_PORT:-10250}
node_flag=()
[ -z "${NANOLET_EXAMPLE_NODE:-}" ] || node_flag=(--hostname-override "$NANOLET_EXAMPLE_NODE")

# alive PID: the process runs (an exited one that no init has reaped yet, a
# zombie, does not).
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $st != Z* ]]; }
# stop: SIGTERM, then waits for nanolet to exit (its pods keep running); fails,
# saying so, when it is still running 30 s later.
stop() {
  local pid
  if [ -f "$pidfile" ] && pid=$(cat "$pidfile") && alive "$pid"; then
    kill -TERM "$pid"
    for _ in $(seq 300); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then
      echo "nanolet (pid $pid) is still running 30 s after SIGTERM; see $dir/nanolet.log" >&2
      return 1
    fi
  fi
  rm -f "$pidfile"
}
if [ "${1:-}" = stop ]; then stop; exit; fi

tools/install-deps.sh --test
endpoint=${NANOLET_EXAMPLE_ENDPOINT:-$(tools/testenv/setup.sh)}
tools/build.sh
stop
mkdir -p "$dir"
# failSwapOn: false because this is a try-out on whatever machine runs it; a
# node should run without swap, and nanolet refuses swap by default, as upstream.
cat > "$dir/config.yaml" <<CFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failSwapOn: false
staticPodPath: $top/examples
containerRuntimeEndpoint: $endpoint
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
readOnlyPort: $read_only_port
port: $port
authentication:
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
CFG
setsid "$top/build/agent/nanolet" --config "$dir/config.yaml" --root-dir "$dir/root" --cert-dir "$dir/pki" \
  --pid-file "$pidfile" "${node_flag[@]}" -v 2 >"$dir/nanolet.log" 2>&1 < /dev/null &
for _ in $(seq 100); do
  if [ "$(curl -fsS "http://127.0.0.1:$healthz_port/healthz" 2>/dev/null)" = ok ]; then
    echo "nanolet is running (pid $(cat "$pidfile")): healthz ok"
    echo "  log:    $dir/nanolet.log"
    echo "  pods:   curl -s http://127.0.0.1:$read_only_port/pods"
    echo "  stop:   tools/run-example.sh stop"
    exit 0
  fi
  sleep 0.1
done
echo "nanolet did not become healthy; last log lines:" >&2
tail -20 "$dir/nanolet.log" >&2
exit 1
