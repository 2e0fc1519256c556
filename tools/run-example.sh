#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine (as root), builds nanolet and
# leaves it running standalone on a private containerd, with examples/ as its
# staticPodPath. Run again to restart it; `tools/run-example.sh stop` stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
dir=/var/lib/nanolet-example
pidfile=$dir/nanolet.pid

stop() {
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    kill -TERM "$(cat "$pidfile")"
    for _ in $(seq 50); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
}
if [ "${1:-}" = stop ]; then stop; exit 0; fi

tools/install-deps.sh --test
endpoint=$(tools/testenv/setup.sh)
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
healthzPort: 10248
readOnlyPort: 10255
authentication:
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
CFG
setsid "$top/build/agent/nanolet" --config "$dir/config.yaml" --root-dir "$dir/root" --cert-dir "$dir/pki" \
  --pid-file "$pidfile" -v 2 >"$dir/nanolet.log" 2>&1 < /dev/null &
for _ in $(seq 100); do
  if [ "$(curl -fsS http://127.0.0.1:10248/healthz 2>/dev/null)" = ok ]; then
    echo "nanolet is running (pid $(cat "$pidfile")): healthz ok"
    echo "  log:    $dir/nanolet.log"
    echo "  pods:   curl -s http://127.0.0.1:10255/pods"
    echo "  stop:   tools/run-example.sh stop"
    exit 0
  fi
  sleep 0.1
done
echo "nanolet did not become healthy; last log lines:" >&2
tail -20 "$dir/nanolet.log" >&2
exit 1
