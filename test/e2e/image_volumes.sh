#!/usr/bin/env bash
# Image volumes (volumes[].image) on the real control plane, containerd and
# the test registry (tools/testenv/registry.sh: TLS, htpasswd). On a runtime
# that mounts images (containerd 2.1 or later: tools/e2e-runtime.sh
# containerd2 e2e_image_volumes): the registry's busybox image, pulled with
# the pod's pull secret (pullPolicy Always, so an image another test left
# proves nothing), is mounted read-only; the container runs a binary from it
# and reads its files, whole and through a subPath; without the secret the
# volume's pull fails with the registry's 401 and the container that mounts
# it waits in ErrImagePull, then ImagePullBackOff, while a container of the
# same pod that does not mount it runs; a tag the registry does not have
# fails the same way. On Debian's containerd 1.6, which ignores the CRI
# Mount's image field, the container waits in CreateContainerConfigError with
# a message that names the runtime, and is never created. The node name and
# its kubeconfig come from NANOLET_E2E_IMGVOL_NODE / _KUBECONFIG, the
# namespace from NANOLET_E2E_IMGVOL_NS.
PODS_NS=${NANOLET_E2E_IMGVOL_NS:-nanolet-e2e-image-volumes}
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
: "${NANOLET_TEST_REGISTRY_PASSWORD:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
NODE=${NANOLET_E2E_IMGVOL_NODE:-nanolet-imgvol}
KC=${NANOLET_E2E_IMGVOL_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
REG=$NANOLET_TEST_REGISTRY
IMG=localhost/busybox:1.36

e2e_on_exit api_cleanup
fresh_ns "$PODS_NS"
kubectl create secret docker-registry -n "$PODS_NS" good --docker-server="https://$REG" \
  --docker-username="$NANOLET_TEST_REGISTRY_USER" \
  --docker-password="$NANOLET_TEST_REGISTRY_PASSWORD" >/dev/null

# volume_pod NAME REFERENCE SECRETS CONTAINERS...: a pod with image volume "tools".
volume_pod() {
  local name=$1 ref=$2 secrets=$3
  shift 3
  api_pod "$name" 0 "imagePullSecrets: [$secrets]" \
    "volumes: [{name: tools, image: {reference: \"$ref\", pullPolicy: Always}}]" \
    "containers:" "$@"
}
MOUNTS='volumeMounts: [{name: tools, mountPath: /tools}, {name: tools, mountPath: /imgetc, subPath: etc}]'
# state POD CONTAINER: its waiting reason, or "running".
state() {
  kubectl get pod -n "$PODS_NS" "$1" -o json 2>/dev/null | jq -r --arg c "$2" \
    '.status.containerStatuses[]? | select(.name == $c) | .state
     | if .running then "running" else (.waiting.reason // "") end'
}
state_is() { [ "$(state "$1" "$2")" = "$3" ]; }
message() {
  kubectl get pod -n "$PODS_NS" "$1" -o json 2>/dev/null | jq -r --arg c "$2" \
    '.status.containerStatuses[]? | select(.name == $c) | .state.waiting.message // ""'
}
running_id() {
  cri ps -o json | jq -r --arg n "$1" --arg ns "$PODS_NS" '[.containers[]
    | select(.labels["io.kubernetes.pod.name"] == $n and .labels["io.kubernetes.pod.namespace"] == $ns)
    | .id][0] // ""'
}
inside() { local id; id=$(running_id "$1"); shift; [ -n "$id" ] && cri exec "$id" "$@"; }

version=$(cri version | sed -n 's/^RuntimeVersion: *//p')
runtime=$(cri version | sed -n 's/^RuntimeName: *//p')
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1

volume_pod reads "$REG/busybox:latest" "{name: good}" \
  "- {name: c, image: $IMG, command: [sleep, \"3600\"], $MOUNTS}"

if [[ $runtime == containerd && ${version#v} == 1.* ]]; then
  # --- a runtime that does not mount images: a clear failure, no container ---
  if wait_for 60 state_is reads c CreateContainerConfigError; then
    ok "$runtime $version: the container waits in CreateContainerConfigError"
  else fail "old runtime" "state $(state reads c): $(message reads c)"; fi
  msg=$(message reads c)
  [[ $msg == *'image volume "tools"'*"containerd $version does not mount images"* ]] &&
    ok "its message names the volume and the runtime: $msg" || fail "old runtime message" "$msg"
  [ -z "$(cri ps -a -o json | jq -r --arg ns "$PODS_NS" '.containers[]
      | select(.labels["io.kubernetes.pod.namespace"] == $ns) | .id')" ] &&
    ok "no container was created without its volume" || fail "old runtime" "a container exists"
  exit
fi

# --- the volume's files, read by the container ---------------------------------
if wait_for 60 state_is reads c running; then ok "a pod with an image volume pulled with its pull secret runs"
else fail "image volume" "state $(state reads c): $(message reads c)"; fi
out=$(inside reads /tools/bin/busybox echo from-the-volume 2>&1)
[ "$out" = from-the-volume ] && ok "the container runs a binary of the image volume" ||
  fail "binary from the volume" "$out"
a=$(inside reads ls /tools/etc 2>&1)
b=$(inside reads ls /imgetc 2>&1)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "subPath etc mounts the image's /etc ($(echo "$a" | wc -w) entries)" ||
  fail "subPath" "/tools/etc: $a; /imgetc: $b"
inside reads grep -q '^root:' /imgetc/passwd && ok "the container reads the image's /etc/passwd" ||
  fail "read a file" "$(inside reads cat /imgetc/passwd 2>&1)"
out=$(inside reads touch /tools/new 2>&1) && fail "read-only" "touch succeeded" ||
  ok "the image volume is read-only: $out"
mounts=$(cri inspect "$(running_id reads)" 2>/dev/null | jq -c '[.status.mounts[]? | select(.containerPath == "/imgetc")
  | {image: .image.image, sub: .imageSubPath, ro: .readonly}]')
[[ $mounts == *'"sub":"etc"'*'"ro":true'* ]] && [[ $mounts == *'sha256:'* ]] &&
  ok "the runtime has the CRI mount: image id, imageSubPath etc, read-only" || fail "CRI mount" "$mounts"

# --- failed pulls: the containers that mount the volume wait, the others run ---
volume_pod nocreds "$REG/busybox:latest" "" \
  "- {name: c, image: $IMG, command: [sleep, \"3600\"], $MOUNTS}" \
  "- {name: other, image: $IMG, command: [sleep, \"3600\"]}"
volume_pod notag "$REG/busybox:no-such-tag" "{name: good}" \
  "- {name: c, image: $IMG, command: [sleep, \"3600\"], $MOUNTS}"
if wait_for 60 state_is nocreds other running; then
  ok "a container that does not mount the failed volume runs"
else fail "other container" "state $(state nocreds other): $(message nocreds other)"; fi
if wait_for 60 state_is nocreds c ErrImagePull || state_is nocreds c ImagePullBackOff; then
  ok "without the pull secret the mounting container waits in $(state nocreds c)"
else fail "no credentials" "state $(state nocreds c): $(message nocreds c)"; fi
msg=$(message nocreds c)
[[ $msg == *401* || $msg == *uthoriz* ]] && ok "its message has the registry's answer: ${msg:0:160}" ||
  fail "no credentials message" "$msg"
if wait_for 60 state_is nocreds c ImagePullBackOff; then ok "then ImagePullBackOff"
else fail "back-off" "state $(state nocreds c)"; fi
if wait_for 60 state_is notag c ErrImagePull || state_is notag c ImagePullBackOff; then
  ok "a tag the registry does not have: $(state notag c)"
else fail "missing tag" "state $(state notag c): $(message notag c)"; fi
[[ $(message notag c) == *"not found"* ]] && ok "its message says not found" ||
  fail "missing tag message" "$(message notag c)"
# (the event is written after the status: wait for it)
nocreds_event() {
  [[ $(kubectl get events -n "$PODS_NS" --field-selector involvedObject.name=nocreds,reason=Failed \
    --no-headers 2>/dev/null) == *"Error: ErrImagePull"* ]]
}
wait_for 30 nocreds_event &&
  ok "a Failed event 'Error: ErrImagePull' on the container" ||
  fail "event" "$(kubectl get events -n "$PODS_NS" --no-headers 2>&1 | tail -5)"
