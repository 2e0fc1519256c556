#!/usr/bin/env bash
# The status of a pod's init containers while they start, as /pods shows it:
# on the fake CRI, whose StartContainer takes 2.5 s, so that relists run
# between a container's create and its start and see it created, not started,
# and whose ListContainers takes 0.5 s, so that a status made from such a
# relist would stay for the next one to replace (and /pods would show it).
# A created container is Waiting with no reason in the runtime's terms; the
# status never says so (upstream's pod worker never publishes it, and
# upstream's NodeConformance InitContainer specs fail on it): the first init
# container goes from Waiting PodInitializing to Running, the second and the
# app container stay Waiting PodInitializing.
. "$(dirname "$0")/fake_cri_lib.sh"
IMG=localhost/busybox:1.36
fake_cri init-node --image "$IMG" --fault "StartContainer delay 2500" \
  --fault "ListContainers delay 500" || exit 1
mkdir -p "$E2E_TMP/manifests"
cat >"$E2E_TMP/manifests/init.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: init, namespace: default}
spec:
  restartPolicy: Never
  initContainers:
  - {name: init1, image: $IMG, command: [/bin/false]}
  - {name: init2, image: $IMG, command: [/bin/true]}
  containers:
  - {name: run1, image: $IMG, command: [/bin/true]}
EOF
fake_agent init-node --pod-manifest-path "$E2E_TMP/manifests" || exit 1

# Every status /pods shows for 8 s, 10 times a second: one line per container
# status, "NAME STATE REASON".
states() {
  curl -fsS "http://127.0.0.1:$RO_PORT/pods" | jq -r '.items[] | select(.metadata.name == "init-init-node")
    | .status | ((.initContainerStatuses // []) + (.containerStatuses // []))[]
    | "\(.name) \(.state | keys[0]) \(.state[.state | keys[0]].reason // "")"'
}
end=$(($(date +%s) + 8))
while [ "$(date +%s)" -lt "$end" ]; do
  states >>"$E2E_TMP/seen" 2>/dev/null
  sleep 0.1
done
sort "$E2E_TMP/seen" | uniq -c | sed 's/^/  /'
check "init1 started (Running)" grep -qx "init1 running " "$E2E_TMP/seen"
check "no container Waiting without a reason" bash -c "! grep -q ' waiting \$' '$E2E_TMP/seen'"
check "init1 Waiting only for PodInitializing" \
  bash -c "! grep '^init1 waiting' '$E2E_TMP/seen' | grep -vqx 'init1 waiting PodInitializing'"
check "init2 and run1 only Waiting PodInitializing" \
  bash -c "! grep -E '^(init2|run1) ' '$E2E_TMP/seen' | grep -vqE '^(init2|run1) waiting PodInitializing\$'"
check "the agent lives" kill -0 "$AGENT_PID"
