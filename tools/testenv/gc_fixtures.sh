# shellcheck shell=bash
# What the tests and benchmarks of garbage collection collect (sourced).

# random_images TAR COUNT MIB PREFIX WORKDIR: writes to TAR an OCI layout of
# COUNT images, each one layer of MIB MiB of random data (so that nothing
# compresses or deduplicates), tagged PREFIX1..PREFIXCOUNT; WORKDIR is scratch
# space. Import with `ctr images import --base-name NAME TAR` (NAME:PREFIX1 ...).
random_images() {
  local tar=$1 count=$2 mib=$3 prefix=$4 work=$5 i
  local layout=$work/layout
  . "$(dirname "${BASH_SOURCE[0]}")/oci_layout.sh"
  oci_layout_init "$layout"
  mkdir -p "$work/layer"
  for i in $(seq 1 "$count"); do
    head -c $((mib << 20)) /dev/urandom >"$work/layer/data"
    tar -C "$work/layer" -cf "$work/layer.tar" data
    oci_image "$layout" "$work/layer.tar" "$prefix$i" '{"Cmd":["sh"]}'
  done
  oci_layout_tar "$layout" "$tar"
  rm -rf "$layout" "$work/layer" "$work/layer.tar"
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
