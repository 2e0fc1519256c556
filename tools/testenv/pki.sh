# shellcheck shell=bash
# Certificates and kubeconfigs for the test control plane, made with openssl
# (sourced by controlplane.sh). RSA 2048 and the extensions kubeadm uses, so
# that clients meet what a production cluster serves.

PKI_DAYS=365

# pki_ca PREFIX CN: a self-signed CA in PREFIX.crt / PREFIX.key, unless there.
pki_ca() {
  local prefix=$1 cn=$2
  [ -s "$prefix.crt" ] && [ -s "$prefix.key" ] && return 0
  openssl req -x509 -new -newkey rsa:2048 -nodes -sha256 -days $((PKI_DAYS * 10)) \
    -keyout "$prefix.key" -out "$prefix.crt" -subj "/CN=$cn" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign" \
    -addext "subjectKeyIdentifier=hash" 2>/dev/null ||
    die "openssl could not make the CA $prefix.crt"
  chmod 600 "$prefix.key"
}

# pki_cert CA OUT USAGE CN [O...] [-- SAN...]: a certificate for CN (with the
# organisations O, which Kubernetes reads as groups) signed by the CA at prefix
# CA, in OUT.crt / OUT.key. USAGE is clientAuth or serverAuth. SANs are
# "IP:..." or "DNS:...".
pki_cert() {
  local ca=$1 out=$2 usage=$3 cn=$4 subj="" o sans="" ext
  shift 4
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    o=$1
    subj+="/O=$o"
    shift
  done
  [ $# -gt 0 ] && shift
  subj+="/CN=$cn"
  ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$usage
authorityKeyIdentifier=keyid"
  if [ $# -gt 0 ]; then
    sans=$(IFS=,; echo "$*")
    ext+=$'\n'"subjectAltName=$sans"
  fi
  openssl req -new -newkey rsa:2048 -nodes -sha256 -keyout "$out.key" -subj "$subj" \
    2>/dev/null |
    openssl x509 -req -sha256 -days "$PKI_DAYS" -CA "$ca.crt" -CAkey "$ca.key" \
      -set_serial "0x$(openssl rand -hex 16)" -extfile <(echo "$ext") \
      -out "$out.crt" 2>/dev/null ||
    die "openssl could not make $out.crt ($subj)"
  chmod 600 "$out.key"
}

# pki_valid PREFIX: the certificate exists and is good for another day.
pki_valid() {
  [ -s "$1.crt" ] && [ -s "$1.key" ] && openssl x509 -checkend 86400 -noout -in "$1.crt" >/dev/null 2>&1
}

# pki_kubeconfig FILE SERVER CA CERT KEY USER: a kubeconfig with one cluster,
# user and context, naming the files by path.
pki_kubeconfig() {
  local file=$1 server=$2 ca=$3 cert=$4 key=$5 user=$6
  cat >"$file.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: nanolet-test
  cluster:
    server: $server
    certificate-authority: $ca
users:
- name: $user
  user:
    client-certificate: $cert
    client-key: $key
contexts:
- name: $user@nanolet-test
  context:
    cluster: nanolet-test
    user: $user
current-context: $user@nanolet-test
EOF
  mv "$file.tmp" "$file"
}
