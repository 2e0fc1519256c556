#!/usr/bin/env bash
# PodReadyToStartContainers goes True as soon as the pod's sandbox is up, while
# its image is still being pulled, as upstream's OnPodSandboxReady: on the fake
# CRI, whose PullImage takes 6 s, /pods shows the condition True with the
# container still Waiting (ContainerCreating); when the pod is Running the
# condition is still True, with the same transition time, never False between.
. "$(dirname "$0")/fake_cri_lib.sh"
IMG=localhost/busybox:1.36
fake_cri ready-node --image "$IMG" --fault "PullImage delay 6000" || exit 1
mkdir -p "$E2E_TMP/manifests"
cat >"$E2E_TMP/manifests/pull.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: pull, namespace: default}
spec:
  containers:
  - {name: main, image: $IMG, imagePullPolicy: Always, command: [sleep, "3600"]}
EOF
fake_agent ready-node --pod-manifest-path "$E2E_TMP/manifests" || exit 1

# The pod's status as /pods shows it, 10 times a second until it runs (or 20
# s): "CONDITION-STATUS TRANSITION-TIME CONTAINER-STATE".
look() {
  curl -fsS "http://127.0.0.1:$RO_PORT/pods" | jq -r '.items[] | select(.metadata.name == "pull-ready-node")
    | .status | ((.conditions // [])[] | select(.type == "PodReadyToStartContainers")
      | "\(.status) \(.lastTransitionTime)") + " "
      + ((.containerStatuses // [])[0].state // {} | keys[0] // "none")'
}
end=$(($(date +%s) + 20))
while [ "$(date +%s)" -lt "$end" ]; do
  look >>"$E2E_TMP/seen" 2>/dev/null
  [ "$(tail -1 "$E2E_TMP/seen" 2>/dev/null | cut -d' ' -f3)" = running ] && break
  sleep 0.1
done

grep -q '^True .* waiting$' "$E2E_TMP/seen" &&
  ok "PodReadyToStartContainers True while the image is pulled (container waiting)" ||
  fail "True during the pull" "seen: $(sort "$E2E_TMP/seen" | uniq -c | tr '\n' ';')"
tail -1 "$E2E_TMP/seen" | grep -q '^True .* running$' &&
  ok "  ... and still True once the container runs" ||
  fail "True once running" "last seen: $(tail -1 "$E2E_TMP/seen")"
first_true=$(grep -m1 '^True ' "$E2E_TMP/seen" | cut -d' ' -f2)
[ -n "$first_true" ] && [ "$(tail -1 "$E2E_TMP/seen" | cut -d' ' -f2)" = "$first_true" ] &&
  ok "  ... with the transition time of the sandbox's readiness ($first_true)" ||
  fail "transition time" "first True at $first_true, last: $(tail -1 "$E2E_TMP/seen")"
sed -n '/^True /,$p' "$E2E_TMP/seen" | grep -q '^False ' &&
  fail "never False again" "seen: $(uniq "$E2E_TMP/seen" | tr '\n' ';')" ||
  ok "  ... never False after it was True"
