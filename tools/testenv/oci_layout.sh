# shellcheck shell=bash
# Images made by hand as OCI layouts, for tests that need content no test
# image has (sourced). Import the tar with
# `ctr images import --base-name NAME TAR` (NAME:TAG for each TAG).

# oci_layout_init LAYOUT: an empty layout directory.
oci_layout_init() {
  mkdir -p "$1/blobs/sha256"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$1/oci-layout"
  OCI_ENTRIES=()
}

# oci_blob LAYOUT FILE: stores FILE by digest; prints "DIGEST SIZE".
oci_blob() {
  local d
  d=$(sha256sum "$2" | cut -d' ' -f1)
  cp "$2" "$1/blobs/sha256/$d"
  echo "$d $(stat -c %s "$2")"
}

# oci_image LAYOUT LAYER_TAR TAG CONFIG: an image of the one layer, its config's
# "config" object CONFIG (JSON, e.g. '{"Cmd":["sh"]}'), tagged TAG.
oci_image() {
  local layout=$1 layer=$2 tag=$3 config=$4 work l ls c cs m ms
  work=$(mktemp -d)
  read -r l ls < <(oci_blob "$layout" "$layer")
  printf '{"architecture":"%s","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$(dpkg --print-architecture)" "$config" "$l" >"$work/config.json"
  read -r c cs < <(oci_blob "$layout" "$work/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$c" "$cs" "$l" "$ls" >"$work/manifest.json"
  read -r m ms < <(oci_blob "$layout" "$work/manifest.json")
  OCI_ENTRIES+=("$(printf '{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}' "$m" "$ms" "$tag")")
  rm -rf "$work"
}

# oci_layout_tar LAYOUT TAR: the index of the images added, and the layout as TAR.
oci_layout_tar() {
  (IFS=,; printf '{"schemaVersion":2,"manifests":[%s]}' "${OCI_ENTRIES[*]}") >"$1/index.json"
  tar -C "$1" -cf "$2" .
}
