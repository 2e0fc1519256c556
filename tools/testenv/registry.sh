# shellcheck shell=bash
# A private image registry on loopback for the image-pull tests (sourced by
# setup.sh after common.sh and pki.sh): Debian's docker-registry
# (distribution 2.8) with TLS from its own CA and htpasswd (bcrypt)
# authentication, and the test images pushed to it with skopeo.
#
# containerd trusts the CA through the CRI plugin's registry config_path
# ($REGISTRY_DIR/certs.d/HOST:PORT/hosts.toml, read at every pull).

REGISTRY_ADDR=127.0.0.1:15443
REGISTRY_USER=nanolet
# A second instance without a registry of its own (NANOLET_TESTENV_NO_REGISTRY)
# trusts the shared one's: its certs.d (containerd2.sh).
REGISTRY_DIR=${NANOLET_TESTENV_REGISTRY_DIR:-$DIR/registry}
REGISTRY_CONFIG=$REGISTRY_DIR/config.yml
REGISTRY_LOG=$REGISTRY_DIR/registry.log
REGISTRY_PIDFILE=$DIR/run/registry.pid
# The repository and tags pushed (from the busybox OCI layout setup.sh keeps).
REGISTRY_REPO=busybox
REGISTRY_TAGS=(latest 1.36)

registry_password() { cat "$REGISTRY_DIR/password"; }

# The PKI, the password and the htpasswd file, each made only once.
registry_prepare() {
  mkdir -p "$REGISTRY_DIR/data" "$REGISTRY_DIR/certs.d/$REGISTRY_ADDR"
  pki_ca "$REGISTRY_DIR/ca" nanolet-test-registry-ca
  if ! pki_valid "$REGISTRY_DIR/server"; then
    pki_cert "$REGISTRY_DIR/ca" "$REGISTRY_DIR/server" serverAuth registry -- \
      IP:127.0.0.1 DNS:localhost
  fi
  if [ ! -s "$REGISTRY_DIR/password" ]; then
    (umask 077 && openssl rand -hex 12 >"$REGISTRY_DIR/password")
    rm -f "$REGISTRY_DIR/htpasswd"
  fi
  if [ ! -s "$REGISTRY_DIR/htpasswd" ]; then
    htpasswd -Bbn "$REGISTRY_USER" "$(registry_password)" >"$REGISTRY_DIR/htpasswd.tmp" ||
      die "htpasswd failed"
    mv -f "$REGISTRY_DIR/htpasswd.tmp" "$REGISTRY_DIR/htpasswd"
  fi
  # skopeo reads a directory of certificates (ca.crt) per destination.
  cp -f "$REGISTRY_DIR/ca.crt" "$REGISTRY_DIR/certs.d/$REGISTRY_ADDR/ca.crt"
}

registry_write_config() {
  cat <<EOF
# Written by nanolet tools/testenv/setup.sh; rewritten on every run.
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $REGISTRY_DIR/data
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDR
  tls:
    certificate: $REGISTRY_DIR/server.crt
    key: $REGISTRY_DIR/server.key
auth:
  htpasswd:
    realm: nanolet-test
    path: $REGISTRY_DIR/htpasswd
EOF
}

# containerd's view of the registry: trust our CA for it. containerd tries
# every [host] in turn, then the server as the last one, so both have the CA:
# with it on the [host] only, a missing tag's 404 went on to the server and
# failed there with "x509: certificate signed by unknown authority". The
# [host] table must stay: containerd 1.6 rejects a hosts.toml without one and
# falls back to plain http for a loopback registry (400 Bad Request).
registry_write_hosts() {
  cat <<EOF
# Written by nanolet tools/testenv/setup.sh.
server = "https://$REGISTRY_ADDR"
ca = "$REGISTRY_DIR/ca.crt"

[host."https://$REGISTRY_ADDR"]
  capabilities = ["pull", "resolve"]
  ca = "$REGISTRY_DIR/ca.crt"
EOF
}

registry_curl() {
  curl -sS --max-time 5 --cacert "$REGISTRY_DIR/ca.crt" -u "$REGISTRY_USER:$(registry_password)" "$@"
}

registry_answering() { registry_curl -f -o /dev/null "https://$REGISTRY_ADDR/v2/" 2>/dev/null; }

registry_pid() { pid_by_cmdline "$REGISTRY_PIDFILE" "docker-registry serve $REGISTRY_CONFIG "; }

registry_start() {
  log "starting docker-registry on $REGISTRY_ADDR (log: $REGISTRY_LOG)"
  # As containerd: outlive this script, and never hold setup.sh's stdout.
  setsid nohup docker-registry serve "$REGISTRY_CONFIG" >>"$REGISTRY_LOG" 2>&1 </dev/null 3>&- &
  echo $! >"$REGISTRY_PIDFILE"
  wait_ready docker-registry $! "$REGISTRY_LOG" 30 registry_answering
}

# Starts the registry unless ours answers; restarts it on a changed config.
registry_up() {
  local changed=0 pid
  registry_prepare
  if registry_write_config | update_file "$REGISTRY_CONFIG"; then
    changed=1
    log "wrote $REGISTRY_CONFIG"
  fi
  registry_write_hosts | update_file "$REGISTRY_DIR/certs.d/$REGISTRY_ADDR/hosts.toml" || true
  if pid=$(registry_pid); then
    if [ "$changed" = 0 ] && registry_answering; then
      log "docker-registry already answering on $REGISTRY_ADDR"
      return 0
    fi
    log "restarting docker-registry (pid $pid)"
    stop_pid "$pid"
  fi
  registry_answering && die "something else answers on $REGISTRY_ADDR"
  registry_start
}

# True when every test tag is in the registry.
registry_has_images() {
  local tags t
  [ -e "$REGISTRY_DIR/pushed-labelled" ] || return 1
  tags=$(registry_curl "https://$REGISTRY_ADDR/v2/$REGISTRY_REPO/tags/list" 2>/dev/null) || return 1
  for t in "${REGISTRY_TAGS[@]}"; do
    grep -q "\"$t\"" <<<"$tags" || return 1
  done
}

# registry_push LAYOUT: copies each test tag of the OCI layout LAYOUT. The
# copies carry a label, so that their image ID differs from the local
# localhost/busybox images: containerd 1.6 reports a container's image as the
# first tag of its image ID, and a shared ID would show the registry's name in
# the status of pods that run localhost/busybox.
registry_push() {
  local layout=$1 t work
  work=$(mktemp -d)
  cp -a "$layout" "$work/oci"
  for t in "${REGISTRY_TAGS[@]}"; do
    umoci config --image "$work/oci:$t" --config.label org.nanolet.test.registry=1 ||
      die "umoci could not label $REGISTRY_REPO:$t"
    skopeo copy --quiet --dest-creds "$REGISTRY_USER:$(registry_password)" \
      --dest-cert-dir "$REGISTRY_DIR/certs.d/$REGISTRY_ADDR" \
      "oci:$work/oci:$t" "docker://$REGISTRY_ADDR/$REGISTRY_REPO:$t" ||
      die "skopeo could not push $REGISTRY_REPO:$t to $REGISTRY_ADDR"
  done
  rm -rf "$work"
  touch "$REGISTRY_DIR/pushed-labelled"
  log "pushed $REGISTRY_REPO:{${REGISTRY_TAGS[*]}} to $REGISTRY_ADDR"
}
