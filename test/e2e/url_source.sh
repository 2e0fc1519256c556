#!/usr/bin/env bash
# The static-pod URL source on the real containerd: a local HTTP server serves
# a manifest at staticPodURL; the pod runs, named and uid'd as a static pod of
# source "http"; an edit replaces it; a PodList adds pods; a URL that fails (404)
# keeps the pods running, as upstream; an empty body removes them.
PODS_NS=nanolet-e2e-url
. "$(dirname "$0")/pods_lib.sh"
IMG=localhost/busybox:1.36
SRV=$E2E_TMP/www
mkdir -p "$SRV"
HTTP_PORT=$(free_port)
# a file server that logs the X-Edge header of each request
python3 - "$HTTP_PORT" "$SRV" >"$E2E_TMP/http.log" 2>&1 <<'PY' &
import functools, http.server, sys
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        sys.stderr.write("%s X-Edge=%s\n" % (fmt % args, self.headers.get("X-Edge")))
        sys.stderr.flush()
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])),
    functools.partial(H, directory=sys.argv[2])).serve_forever()
PY
HTTP_PID=$!
cleanup() { kill "$HTTP_PID" 2>/dev/null; pods_cleanup; }
e2e_on_exit cleanup
served() { cat >"$SRV/.tmp" && mv "$SRV/.tmp" "$SRV/pods.yaml"; }
pod_yaml() { # pod_yaml NAME MESSAGE
  cat <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PODS_NS}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: $IMG, command: [sh, -c, "echo $2; sleep 3600"]}]
EOF2
}
gone() { refresh_pods; [ "$(pod "$1" .metadata.name)" = null ]; }

pod_yaml web one | served
wait_for 10 curl -fsS -o /dev/null "http://127.0.0.1:$HTTP_PORT/pods.yaml" || fail "http server" "$(cat "$E2E_TMP/http.log")"
start_agent --manifest-url "http://127.0.0.1:$HTTP_PORT/pods.yaml" --http-check-frequency 1s \
  --manifest-url-header 'X-Edge:gw1' || { fail "agent start" ""; exit 1; }

expect "the URL's pod runs" 30 web .status.phase Running
expect "  ... with the source annotation http" 1 web '.metadata.annotations["kubernetes.io/config.source"]' http
uid1=$(uid_of web)
check "  ... and a static pod's uid" bash -c "[[ '$uid1' =~ ^[0-9a-f]{32}$ ]]"
check "staticPodURLHeader is sent" grep -q '"GET /pods.yaml HTTP/1.1" 200 .* X-Edge=gw1' "$E2E_TMP/http.log"

# an edit: the pod is replaced (its uid is the hash of the manifest)
pod_yaml web two | served
new_uid() { [ "$(uid_of web)" != "$uid1" ] && [ "$(uid_of web)" != null ]; }
check "an edited manifest replaces the pod" wait_for 20 new_uid
expect "  ... and the new one runs" 30 web .status.phase Running
uid2=$(uid_of web)

# a PodList: both pods
{ echo "apiVersion: v1"; echo "kind: PodList"; echo "items:"
  pod_yaml web two | sed 's/^/  /; 1s/^  /- /'
  pod_yaml db db | sed 's/^/  /; 1s/^  /- /'; } | served
expect "a PodList adds its pods" 30 db .status.phase Running
check "  ... and keeps the one that did not change" [ "$(uid_of web)" = "$uid2" ]

# the URL fails: nothing changes (upstream keeps the last set)
rm -f "$SRV/pods.yaml"
sleep 3
check "a failing URL leaves the pods running" bash -c "[ '$(refresh_pods; pod web .status.phase)' = Running ]"
check "  ... and says why" grep -q 'Failed to read pods from URL: http://127.0.0.1:[0-9]*/pods.yaml: 404 ' "$E2E_TMP/agent.log"

# an empty body: the set is empty, the pods go
: | served
check "an empty body removes the pods" wait_for 30 gone web
check "  ... all of them" wait_for 10 gone db
