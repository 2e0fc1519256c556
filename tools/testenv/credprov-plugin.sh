#!/usr/bin/env bash
# A node's image credential provider for upstream's ImageCredentialProvider
# spec (test/e2e/common/node/image_credential_provider.go, in both suites): the
# spec runs imageutils.AgnhostPrivate (PRIVATE/agnhost:2.6, PRIVATE being the
# KUBE_TEST_REPO_LIST's privateRegistry) with no pull secret, and its pod runs
# only if the kubelet's credential provider plugin gives the registry's
# credentials. The plugin is upstream's own test plugin, gcp-credential-provider
# (test/e2e_node/plugins, built by tools/testenv/k8s-build.sh suite), configured
# as upstream's node e2e jobs configure it (test/e2e_node/remote/utils.go).
#
#   dir=$(tools/testenv/credprov-plugin.sh BINDIR REPO_LIST)
#   kubelet --image-credential-provider-config "$dir/config.yaml" \
#     --image-credential-provider-bin-dir "$dir/bin"
#   KUBE_TEST_REPO_LIST=$dir/repo-list.yaml e2e.test ...
#
# The only stdout line is that directory. How the plugin is made to work here,
# with nothing leaving the machine:
#  - The plugin asks a cloud metadata server for an access token (an HTTP GET)
#    and answers with it as the password of user `_token`. Its environment
#    (the provider's `env`) sets HTTP_PROXY to a small responder on
#    127.0.0.1:15081 (credprov-token.py, started here, detached like the
#    registries), which answers every GET with the token of
#    $REGISTRY_DIR/credprov-token.
#  - The test registry (registry.sh: TLS, htpasswd) gets a user `_token` with
#    that token as its password, and PRIVATE/agnhost:2.6 (the e2e registry's
#    agnhost:2.63.0, copied) under k8s-authenticated-test, as upstream's.
#  - The plugin answers for the registries its source names (provider.go's
#    containerRegistryUrls), nothing else: PRIVATE must be one of them for its
#    credentials to apply. PRIVATE's host is made under the first wildcard
#    there, read from the pinned module's source at run time, and the
#    runtime's registry hosts file for it (registry.sh's certs.d, which both
#    containerd 1.6 and 2 read) sends its pulls to the test registry. The
#    provider's matchImages are the plugin's own list, as upstream's config.
#  - Upstream's config has a second provider, gcp-credential-provider-with-sa
#    (tokenAttributes: a service account token with each request), which
#    nanolet does not support (docs/DIFFERENCES.md): it is left out. The spec's
#    pod needs either provider's credentials only.
#
# Debian's python3 runs the responder (a python3 elsewhere in PATH may be a
# wrapper that changes the command line by which a later run finds it).
#
# Environment: NANOLET_TESTENV_DIR (see setup.sh), NANOLET_TESTENV_CREDPROV_TOKEN_ADDR
# (default 127.0.0.1:15081).
set -euo pipefail
exec 3>&1 1>&2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/testenv/common.sh
. "$here/common.sh"
# shellcheck source=tools/testenv/registry.sh
. "$here/registry.sh"

[ $# -eq 2 ] || die "usage: $0 BINDIR REPO_LIST (from k8s-build.sh suite and e2e-images.sh)"
BIN=$1 REPO_LIST=$2
[ -x "$BIN/gcp-credential-provider" ] || die "$BIN/gcp-credential-provider is missing: run tools/testenv/k8s-build.sh suite"
[ -s "$REPO_LIST" ] || die "no KUBE_TEST_REPO_LIST at $REPO_LIST"
[ "$(id -u)" -eq 0 ] || die "must run as root"
[ -x /usr/bin/python3 ] || install_packages python3
E2E_ADDR=${NANOLET_TESTENV_E2E_REGISTRY:-127.0.0.1:15000}
TOKEN_ADDR=${NANOLET_TESTENV_CREDPROV_TOKEN_ADDR:-127.0.0.1:15081}
OUT=$DIR/credprov
TOKEN_FILE=$REGISTRY_DIR/credprov-token
RESPONDER=$OUT/credprov-token.py
RLOG=$OUT/token.log
RPIDFILE=$DIR/run/credprov-token.pid
mkdir -p "$OUT/bin" "$DIR/run"
exec 4>"$OUT/lock"
flock 4

# --- the plugin's registries, from its source ------------------------------------------
src=$(cd "$here/k8s" && "$("$here/k8s-build.sh" go)" list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/e2e_node/plugins/gcp-credential-provider/provider.go
[ -s "$src" ] || die "no $src in the pinned module"
mapfile -t patterns < <(sed -n 's/^var containerRegistryUrls = \[\]string{\(.*\)}$/\1/p' "$src" | tr ',' '\n' | tr -d ' "')
[ ${#patterns[@]} -gt 0 ] || die "no containerRegistryUrls in $src: the plugin changed; read it again"
wildcard=
for p in "${patterns[@]}"; do
  case $p in '*.'*) wildcard=${p#\*.}; break ;; esac
done
[ -n "$wildcard" ] || die "no wildcard among the plugin's registries (${patterns[*]})"
HOST=nanolet-private.$wildcard
PRIVATE=$HOST/k8s-authenticated-test

# --- the registry: user _token, the image, and PRIVATE's host ------------------------------
[ -s "$REGISTRY_DIR/password" ] || die "no test registry in $REGISTRY_DIR: run tools/testenv/setup.sh"
if [ ! -s "$TOKEN_FILE" ]; then
  (umask 077 && openssl rand -hex 16 >"$TOKEN_FILE")
fi
token=$(cat "$TOKEN_FILE")
# The registry reads its htpasswd file again when it changes.
if ! grep -q '^_token:' "$REGISTRY_DIR/htpasswd" ||
  ! htpasswd -vb "$REGISTRY_DIR/htpasswd" _token "$token" >/dev/null 2>&1; then
  { grep -v '^_token:' "$REGISTRY_DIR/htpasswd" || true; htpasswd -Bbn _token "$token" | sed '/^$/d'; } \
    >"$REGISTRY_DIR/htpasswd.tmp"
  mv -f "$REGISTRY_DIR/htpasswd.tmp" "$REGISTRY_DIR/htpasswd"
  log "added user _token to $REGISTRY_DIR/htpasswd"
fi
ACCEPT='Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json'
if ! registry_curl -f -o /dev/null -H "$ACCEPT" "https://$REGISTRY_ADDR/v2/k8s-authenticated-test/agnhost/manifests/2.6" 2>/dev/null; then
  skopeo copy --quiet --src-tls-verify=false --dest-creds "$REGISTRY_USER:$(registry_password)" \
    --dest-cert-dir "$REGISTRY_DIR/certs.d/$REGISTRY_ADDR" \
    "docker://$E2E_ADDR/e2e-test-images/agnhost:2.63.0" \
    "docker://$REGISTRY_ADDR/k8s-authenticated-test/agnhost:2.6" ||
    die "skopeo could not copy agnhost to $REGISTRY_ADDR/k8s-authenticated-test/agnhost:2.6"
  log "pushed k8s-authenticated-test/agnhost:2.6 to $REGISTRY_ADDR"
fi
# Without credentials the registry refuses the image (so the spec's pod runs
# only with the plugin's), and with the plugin's it serves it.
code=$(curl -sS --max-time 5 --cacert "$REGISTRY_DIR/ca.crt" -o /dev/null -w '%{http_code}' \
  "https://$REGISTRY_ADDR/v2/k8s-authenticated-test/agnhost/manifests/2.6")
[ "$code" = 401 ] || die "the registry answered $code without credentials, not 401"
ok=
for _ in $(seq 20); do
  code=$(curl -sS --max-time 5 --cacert "$REGISTRY_DIR/ca.crt" -u "_token:$token" -H "$ACCEPT" \
    -o /dev/null -w '%{http_code}' "https://$REGISTRY_ADDR/v2/k8s-authenticated-test/agnhost/manifests/2.6")
  [ "$code" = 200 ] && ok=1 && break
  sleep 0.5
done
[ -n "$ok" ] || die "the registry refuses user _token ($code)"
mkdir -p "$REGISTRY_DIR/certs.d/$HOST"
registry_write_hosts | update_file "$REGISTRY_DIR/certs.d/$HOST/hosts.toml" || true

# --- the token responder -----------------------------------------------------------------
responder_answering() {
  [ "$(curl -fsS --max-time 2 -x "http://$TOKEN_ADDR" http://metadata.invalid/token 2>/dev/null)" = "{\"access_token\": \"$token\"}" ]
}
cat >"$RESPONDER.new" <<'EOF'
# Written by nanolet tools/testenv/credprov-plugin.sh: answers every GET, as
# an HTTP proxy or a server, with the access token of the file it is given.
import http.server
import sys

host, port = sys.argv[1].rsplit(":", 1)
token_file = sys.argv[2]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(token_file) as f:
            body = ('{"access_token": "%s"}' % f.read().strip()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.command, self.path))


http.server.ThreadingHTTPServer((host, int(port)), Handler).serve_forever()
EOF
changed=0
update_file "$RESPONDER" <"$RESPONDER.new" && changed=1
rm -f "$RESPONDER.new"
want="/usr/bin/python3 $RESPONDER $TOKEN_ADDR $TOKEN_FILE "
if pid=$(pid_by_cmdline "$RPIDFILE" "$want"); then
  if [ "$changed" = 0 ] && responder_answering; then
    pid=
  else
    log "restarting the token responder (pid $pid)"
    stop_pid "$pid"
    pid=restart
  fi
else
  pid=restart
fi
if [ "$pid" = restart ]; then
  responder_answering && die "something else answers on $TOKEN_ADDR"
  log "starting the token responder on $TOKEN_ADDR (log: $RLOG)"
  # shellcheck disable=SC2086
  setsid nohup $want >>"$RLOG" 2>&1 </dev/null 3>&- 4>&- &
  echo $! >"$RPIDFILE"
  wait_ready credprov-token $! "$RLOG" 15 responder_answering
fi

# --- what the node and the suite read -------------------------------------------------------
ln -sfn "$(realpath "$BIN/gcp-credential-provider")" "$OUT/bin/gcp-credential-provider"
{
  echo "# Written by nanolet tools/testenv/credprov-plugin.sh."
  echo "kind: CredentialProviderConfig"
  echo "apiVersion: kubelet.config.k8s.io/v1"
  echo "providers:"
  echo "- name: gcp-credential-provider"
  echo "  apiVersion: credentialprovider.kubelet.k8s.io/v1"
  echo "  matchImages:"
  for p in "${patterns[@]}"; do echo "  - \"$p\""; done
  echo "  defaultCacheDuration: 1m"
  echo "  env:"
  echo "  - {name: HTTP_PROXY, value: \"http://$TOKEN_ADDR\"}"
} | update_file "$OUT/config.yaml" || true
{
  grep -v '^privateRegistry:' "$REPO_LIST"
  echo "privateRegistry: $PRIVATE"
} | update_file "$OUT/repo-list.yaml" || true
echo "$OUT" >&3
