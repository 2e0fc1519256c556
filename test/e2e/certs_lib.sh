# shellcheck shell=bash
# Shared by tls_bootstrap.sh and cert_rotation.sh (not a test itself): a
# bootstrap token and its kubeconfig, certificates minted from the test CA with
# the validity a test needs, and the certDir layout of client-go's store.
: "${NANOLET_TEST_K8S_CA:?call k8s_env first}"
CA_DIR=$(dirname "$NANOLET_TEST_K8S_CA")

# bootstrap_token FILE [SERVER] [VALIDITY]: a bootstrap token Secret
# (kube-system/bootstrap-token-<id>, valid for VALIDITY, `date -d` words,
# default an hour; the token-cleaner removes it then) and a kubeconfig that
# uses it (the API server SERVER, default the test one), written to FILE. Sets
# TOKEN_ID.
bootstrap_token() {
  TOKEN_ID=$(tr -dc 'a-z0-9' </dev/urandom | head -c 6)
  local secret expires
  secret=$(tr -dc 'a-z0-9' </dev/urandom | head -c 16)
  expires=$(date -u -d "+${3:-1 hour}" +%Y-%m-%dT%H:%M:%SZ)
  kubectl create secret generic -n kube-system "bootstrap-token-$TOKEN_ID" \
    --type bootstrap.kubernetes.io/token --from-literal=token-id="$TOKEN_ID" \
    --from-literal=token-secret="$secret" --from-literal=usage-bootstrap-authentication=true \
    --from-literal=expiration="$expires" >/dev/null || return 1
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${2:-$NANOLET_TEST_APISERVER}", certificate-authority: "$NANOLET_TEST_K8S_CA"}}]
users: [{name: bootstrap, user: {token: "$TOKEN_ID.$secret"}}]
contexts: [{name: bootstrap, context: {cluster: c, user: bootstrap}}]
current-context: bootstrap
KC
}
drop_token() { [ -z "${TOKEN_ID:-}" ] || kubectl delete secret -n kube-system "bootstrap-token-$TOKEN_ID" --ignore-not-found >/dev/null 2>&1; }

# mint OUT CN O FROM TO USAGE [SAN]: an EC P-256 key OUT.key and OUT.crt signed
# by the test CA, valid from now+FROM to now+TO seconds (negative: the past);
# USAGE clientAuth or serverAuth; SAN e.g. "IP:10.0.0.1,DNS:n1".
mint() {
  local out=$1 cn=$2 o=$3 from=$4 to=$5 usage=$6 san=${7:-} d=$E2E_TMP/mint
  mkdir -p "$d"
  : >"$d/index.txt"
  [ -s "$d/serial" ] || printf '%x\n' "$(date +%s)" >"$d/serial"
  cat >"$d/ca.cnf" <<CNF
[ca]
default_ca = d
[d]
database = $d/index.txt
serial = $d/serial
new_certs_dir = $d
default_md = sha256
policy = p
unique_subject = no
[p]
organizationName = supplied
commonName = supplied
[ext]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = $usage
${san:+subjectAltName = $san}
CNF
  openssl ecparam -name prime256v1 -genkey -noout -out "$out.key" 2>/dev/null &&
    openssl req -new -key "$out.key" -subj "/O=$o/CN=$cn" -out "$out.csr" 2>/dev/null &&
    openssl ca -batch -config "$d/ca.cnf" -cert "$NANOLET_TEST_K8S_CA" -keyfile "$CA_DIR/ca.key" \
      -startdate "$(date -u -d "@$(($(date +%s) + from))" +%Y%m%d%H%M%SZ)" \
      -enddate "$(date -u -d "@$(($(date +%s) + to))" +%Y%m%d%H%M%SZ)" \
      -extensions ext -notext -in "$out.csr" -out "$out.crt" 2>/dev/null
}

# store_pair DIR PREFIX OUT: OUT.crt and OUT.key as the store's current pair
# (DIR/PREFIX-<time>.pem and the DIR/PREFIX-current.pem link). Prints the file.
store_pair() {
  local f
  f=$1/$2-$(date -u +%Y-%m-%d-%H-%M-%S)-minted.pem
  mkdir -p "$1"
  cat "$3.crt" "$3.key" >"$f"
  chmod 600 "$f"
  ln -sfn "$f" "$1/$2-current.pem"
  echo "$f"
}

# node_kubeconfig_at FILE PEM [SERVER]: a kubeconfig whose user is the pair PEM.
node_kubeconfig_at() {
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${3:-$NANOLET_TEST_APISERVER}", certificate-authority: "$NANOLET_TEST_K8S_CA"}}]
users: [{name: u, user: {client-certificate: "$2", client-key: "$2"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
KC
}

# not_after FILE: the certificate's notAfter as seconds since the epoch.
not_after() { date -d "$(openssl x509 -in "$1" -noout -enddate | cut -d= -f2)" +%s; }
issuer_cn() { openssl x509 -in "$1" -noout -issuer -nameopt sep_multiline | sed -n 's/^ *CN=//p'; }
subject_of() { openssl x509 -in "$1" -noout -subject -nameopt compat | sed 's/^subject=//'; }
# served_cert HOST PORT: the certificate a TLS server presents, PEM on stdout.
served_cert() { openssl s_client -connect "$1:$2" </dev/null 2>/dev/null | openssl x509 2>/dev/null; }
# CSRs of one requestor and signer, JSON list.
csrs_of() {
  kubectl get csr -o json | jq --arg u "$1" --arg s "$2" '[.items[] | select(.spec.username == $u and .spec.signerName == $s)]'
}
