# shellcheck shell=bash
# What the tests and benchmarks of garbage collection collect (sourced).

# random_images TAR COUNT MIB PREFIX WORKDIR: writes to TAR an OCI layout of
# COUNT images, each one layer of MIB MiB of random data (so that nothing
# compresses or deduplicates), tagged PREFIX1..PREFIXCOUNT; WORKDIR is scratch
# space. Import with `ctr images import --base-name NAME TAR` (NAME:PREFIX1 ...).
random_images() {
  local tar=$1 count=$2 mib=$3 prefix=$4 work=$5 i l ls c cs m ms entries=()
  local layout=$work/layout
  mkdir -p "$layout/blobs/sha256" "$work/layer"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
  # blob FILE: stores FILE by digest; prints "DIGEST SIZE"
  blob() {
    local d
    d=$(sha256sum "$1" | cut -d' ' -f1)
    cp "$1" "$layout/blobs/sha256/$d"
    echo "$d $(stat -c %s "$1")"
  }
  for i in $(seq 1 "$count"); do
    head -c $((mib << 20)) /dev/urandom >"$work/layer/data"
    tar -C "$work/layer" -cf "$work/layer.tar" data
    read -r l ls < <(blob "$work/layer.tar")
    printf '{"architecture":"%s","os":"linux","config":{"Cmd":["sh"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
      "$(dpkg --print-architecture)" "$l" >"$work/config.json"
    read -r c cs < <(blob "$work/config.json")
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
      "$c" "$cs" "$l" "$ls" >"$work/manifest.json"
    read -r m ms < <(blob "$work/manifest.json")
    entries+=("$(printf '{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s%s"}}' "$m" "$ms" "$prefix" "$i")")
  done
  (IFS=,; printf '{"schemaVersion":2,"manifests":[%s]}' "${entries[*]}") >"$layout/index.json"
  tar -C "$layout" -cf "$tar" .
  rm -rf "$layout" "$work/layer" "$work/layer.tar" "$work/config.json" "$work/manifest.json"
}

# failing_pod NAME NS MIB: the manifest of a pod whose container writes MIB
# MiB into its writable layer and fails three times, then runs (it counts its
# starts in an emptyDir): three dead instances, then a running one. Each start
# makes a file of a unique name: busybox's date has no %N, and the first two
# starts fall in the same second.
failing_pod() {
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $2}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: runs, emptyDir: {}}]
  containers:
  - name: c
    image: localhost/busybox:1.36
    command: [sh, -c, 'mktemp /runs/start.XXXXXX >/dev/null; [ \$(ls /runs | wc -l) -gt 3 ] && exec sleep 3600; head -c $3m /dev/urandom >/fill; exit 1']
    volumeMounts: [{name: runs, mountPath: /runs}]
EOF
}
