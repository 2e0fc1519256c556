#!/usr/bin/env bash
# Image pull secrets against the real control plane, containerd and the test
# registry (tools/testenv/registry.sh: TLS, htpasswd): a pod whose pull secret
# (`kubectl create secret docker-registry`) has the right password pulls and
# runs; with a wrong password it shows ErrImagePull, then ImagePullBackOff in
# `kubectl get pod`; a tag the registry does not have gives ErrImagePull too,
# with "not found" in the log; a static pod pulling from the registry without
# credentials fails with the registry's 401 in its waiting message. Every pull
# is imagePullPolicy: Always, so an image another test left in containerd
# proves nothing. The node name and its kubeconfig come from
# NANOLET_E2E_PULL_NODE / NANOLET_E2E_PULL_KUBECONFIG (default:
# nanolet-pullsecrets, with a credential minted by the control plane script),
# its namespace from NANOLET_E2E_PULL_NS.
PODS_NS=${NANOLET_E2E_PULL_NS:-nanolet-e2e-pull-secrets}
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
: "${NANOLET_TEST_REGISTRY_PASSWORD:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
NODE=${NANOLET_E2E_PULL_NODE:-nanolet-pullsecrets}
KC=${NANOLET_E2E_PULL_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
REG=$NANOLET_TEST_REGISTRY

e2e_on_exit api_cleanup
fresh_ns "$PODS_NS"

# secret NAME PASSWORD: a kubernetes.io/dockerconfigjson secret for the registry.
secret() {
  kubectl create secret docker-registry -n "$PODS_NS" "$1" --docker-server="https://$REG" \
    --docker-username="$NANOLET_TEST_REGISTRY_USER" --docker-password="$2" >/dev/null
}
# apply NAME IMAGE SECRET...: a pod bound to this node pulling IMAGE.
apply() {
  local name=$1 image=$2 secrets="" s
  shift 2
  for s in "$@"; do secrets+="{name: $s}, "; done
  api_pod "$name" 0 "imagePullSecrets: [${secrets%, }]" \
    "containers: [{name: c, image: \"$image\", imagePullPolicy: Always, command: [sleep, \"3600\"]}]"
}
# The STATUS column of `kubectl get pod NAME` (ErrImagePull, Running, ...).
column() { kubectl get pod -n "$PODS_NS" "$1" --no-headers 2>/dev/null | awk '{print $3}'; }
column_is() { [ "$(column "$1")" = "$2" ]; }
column_matches() { [[ "$(column "$1")" =~ $2 ]]; }
waiting_message() {
  kubectl get pod -n "$PODS_NS" "$1" -o jsonpath='{.status.containerStatuses[0].state.waiting.message}' 2>/dev/null
}
# Events of pod NAME with REASON.
has_event() {
  kubectl get events -n "$PODS_NS" --field-selector "involvedObject.name=$1,reason=$2" \
    --no-headers 2>/dev/null | grep -q .
}
# Seconds since $1 (date +%s%N).
since() { echo "$(( ($(date +%s%N) - $1) / 1000000 )) ms"; }

secret good "$NANOLET_TEST_REGISTRY_PASSWORD"
secret bad "not-the-password"

# A static pod on the same agent: the registry without credentials.
put nocreds <<EOF
apiVersion: v1
kind: Pod
metadata: {name: nocreds, namespace: $PODS_NS}
spec:
  containers:
  - {name: c, image: "$REG/busybox:latest", imagePullPolicy: Always, command: [sleep, "3600"]}
EOF

start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1

t0=$(date +%s%N)
# The wrong secret first: each credential is tried in turn.
apply right "$REG/busybox:latest" bad good
apply wrong "$REG/busybox:latest" bad
apply notag "$REG/busybox:no-such-tag" good
apply missing "$REG/busybox:latest" absent good

if wait_for 40 column_is right Running; then ok "the right pull secret: the pod runs ($(since "$t0"))"
else fail "right secret" "kubectl get pod says $(column right): $(waiting_message right)"; fi
if wait_for 20 column_is missing Running; then
  ok "a pull secret that does not exist is skipped: the pod runs with the other one"
else fail "missing secret" "kubectl get pod says $(column missing): $(waiting_message missing)"; fi
check "a missing pull secret gives a FailedToRetrieveImagePullSecret event" \
  wait_for 10 has_event missing FailedToRetrieveImagePullSecret

if wait_for 30 column_is wrong ErrImagePull; then ok "a wrong password: ErrImagePull in kubectl get pod"
else fail "wrong password ErrImagePull" "kubectl get pod says $(column wrong)"; fi
msg=$(waiting_message wrong)
if [[ $msg == *"401 Unauthorized"* ]]; then ok "its message is the registry's refusal (401 Unauthorized)"
else fail "wrong password message" "$msg"; fi
if wait_for 30 column_is wrong ImagePullBackOff; then ok "then ImagePullBackOff in kubectl get pod"
else fail "ImagePullBackOff" "kubectl get pod says $(column wrong)"; fi
check "the back-off has its BackOff event" wait_for 10 has_event wrong BackOff

if wait_for 30 column_matches notag '^(ErrImagePull|ImagePullBackOff)$'; then
  ok "a tag the registry does not have: ErrImagePull"
else fail "missing tag" "kubectl get pod says $(column notag)"; fi
check "its failure says the tag was not found" \
  grep -q "failed to pull image \"$REG/busybox:no-such-tag\".*not found" "$E2E_TMP/agent.log"

if wait_for 30 pod_matches nocreds '.status.containerStatuses[0].state.waiting.reason' 'ErrImagePull|ImagePullBackOff'; then
  ok "a static pod without credentials: ErrImagePull"
else fail "static pod without credentials" "$(pod nocreds .status.containerStatuses[0].state)"; fi
check "the agent log names the image and the registry's 401" \
  grep -q "failed to pull image \"$REG/busybox:latest\".*401 Unauthorized" "$E2E_TMP/agent.log"
unput nocreds
