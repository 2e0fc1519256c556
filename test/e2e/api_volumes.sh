#!/usr/bin/env bash
# Volumes whose content comes from the API, on the real control plane and
# containerd: a pod made by `kubectl run` in a namespace with the default
# service account starts, and its projected kube-api-access volume holds a
# token that the apiserver accepts, the cluster CA and the namespace;
# configMap and secret volumes have their content and modes (items,
# defaultMode, mode, fsGroup), secrets on a tmpfs, all mounted read-only; an
# emptyDir on tmpfs takes the fsGroup (setgid, so new files too), and so does a
# subPath made for a container; a non-root user reads a configMap volume; an
# updated ConfigMap reaches the running container within seconds with no
# restart (and not its subPath mount); a deleted optional ConfigMap leaves the
# pod running; a nanolet restart rewrites no volume and restarts no container.
# The node name, its kubeconfig and the namespace come from
# NANOLET_E2E_VOLUMES_NODE / _KUBECONFIG / _NS.
PODS_NS=${NANOLET_E2E_VOLUMES_NS:-satoken-api-volumes}
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${NANOLET_E2E_VOLUMES_NODE:-nanolet-satoken}
KC=${NANOLET_E2E_VOLUMES_KUBECONFIG:-$("$NANOLET_TEST_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)}
IMG=localhost/busybox:1.36
SA_DIR=/var/run/secrets/kubernetes.io/serviceaccount

e2e_on_exit api_cleanup

fresh_ns "$PODS_NS"
ns_ready() { kubectl get sa default -n "$PODS_NS" >/dev/null 2>&1 &&
  kubectl get cm kube-root-ca.crt -n "$PODS_NS" >/dev/null 2>&1; }
wait_for 30 ns_ready || { fail "namespace" "no default ServiceAccount or kube-root-ca.crt"; exit 1; }
kubectl create configmap app -n "$PODS_NS" --from-literal=a=1 --from-literal=b=2 >/dev/null
kubectl create secret generic creds -n "$PODS_NS" --from-literal=user=admin --from-literal=pass=s3cret >/dev/null
kubectl create configmap opt -n "$PODS_NS" --from-literal=x=1 >/dev/null

# The running container id of pod NAME ("" when none).
running_id() {
  cri ps -o json | jq -r --arg n "$1" --arg ns "$PODS_NS" '[.containers[]
    | select(.labels["io.kubernetes.pod.name"] == $n and .labels["io.kubernetes.pod.namespace"] == $ns)
    | .id][0] // ""'
}
is_running() { [ -n "$(running_id "$1")" ]; }
# inside POD CMD...: runs CMD in the pod's container.
inside() { local id; id=$(running_id "$1"); shift; [ -n "$id" ] && cri exec "$id" "$@" 2>/dev/null; }
inside_is() { [ "$(inside "$1" cat "$2")" = "$3" ]; }
mode_of() { inside "$1" stat -L -c '%a %g' "$2"; }
restarts() { kubectl get pod -n "$PODS_NS" "$1" -o jsonpath='{.status.containerStatuses[0].restartCount}'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1

# --- kubectl run: the projected service-account volume -------------------------
kubectl run web -n "$PODS_NS" --image="$IMG" --restart=Never \
  --overrides="{\"apiVersion\":\"v1\",\"spec\":{\"nodeName\":\"$NODE\",\"terminationGracePeriodSeconds\":1}}" \
  --command -- sleep 3600 >/dev/null
if wait_for 40 is_running web; then ok "a pod from kubectl run (kube-api-access volume) starts"
else fail "kubectl run" "$(grep -E 'FailedMount|web' "$E2E_TMP/agent.log" | tail -3)"; fi
kubectl get pod -n "$PODS_NS" web -o json | jq -e '.spec.volumes[] | select(.name | startswith("kube-api-access-"))' >/dev/null &&
  ok "the pod has the admission plugin's kube-api-access volume" || fail "kube-api-access" "no such volume"
TOKEN=$(inside web cat "$SA_DIR/token")
WHO=$("$NANOLET_TEST_KUBECTL" --kubeconfig /dev/null --server "$NANOLET_TEST_APISERVER" \
  --certificate-authority "$NANOLET_TEST_K8S_CA" --token "$TOKEN" auth whoami -o jsonpath='{.status.userInfo.username}' 2>&1)
[ "$WHO" = "system:serviceaccount:$PODS_NS:default" ] && ok "the token is accepted: auth whoami shows $WHO" ||
  fail "token" "whoami: $WHO"
check "namespace file" inside_is web "$SA_DIR/namespace" "$PODS_NS"
[ "$(inside web cat "$SA_DIR/ca.crt")" = "$(kubectl get cm kube-root-ca.crt -n "$PODS_NS" -o jsonpath='{.data.ca\.crt}')" ] &&
  ok "ca.crt is the cluster's kube-root-ca.crt" || fail "ca.crt" "differs"

# --- configMap and secret volumes -----------------------------------------------
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: vols, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  securityContext: {fsGroup: 2000}
  volumes:
  - {name: all, configMap: {name: app, defaultMode: 0400}}
  - name: some
    configMap: {name: app, items: [{key: b, path: sub/bee, mode: 0600}]}
  - {name: sec, secret: {secretName: creds}}
  - {name: opt, configMap: {name: opt, optional: true}}
  containers:
  - name: c
    image: $IMG
    command: [sleep, "3600"]
    volumeMounts:
    - {name: all, mountPath: /all}
    - {name: some, mountPath: /some}
    - {name: sec, mountPath: /sec}
    - {name: opt, mountPath: /opt}
    - {name: all, mountPath: /sub-a, subPath: a}
EOF
wait_for 40 is_running vols || fail "configMap/secret pod" "$(grep -E 'FailedMount|vols' "$E2E_TMP/agent.log" | tail -3)"
check "configMap: all keys, defaultMode 0400 (+ group read of fsGroup 2000)" \
  [ "$(inside vols cat /all/a)$(inside vols cat /all/b) $(mode_of vols /all/a)" = "12 440 2000" ]
check "configMap items: only the path asked, with its mode 0600 (+ group read)" \
  [ "$(inside vols cat /some/sub/bee) $(mode_of vols /some/sub/bee)" = "2 640 2000" ]
check "configMap items: the other keys are not there" [ -z "$(inside vols ls /some/a)" ]
check "secret: content, default mode 0644" [ "$(inside vols cat /sec/pass) $(mode_of vols /sec/pass)" = "s3cret 644 2000" ]
check "secret: on a tmpfs" [ "$(inside vols awk '$2 == "/sec" {print $3}' /proc/mounts)" = tmpfs ]
check "the volumes are read-only" [ "$(inside vols sh -c 'touch /all/x 2>/dev/null && echo rw || echo ro')" = ro ]
check "optional configMap: content" inside_is vols /opt/x 1
check "subPath of a configMap volume" inside_is vols /sub-a 1

# --- fsGroup on an emptyDir (tmpfs), a new subPath, a non-root reader ------------
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: fsg, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  securityContext: {fsGroup: 123}
  volumes: [{name: mem, emptyDir: {medium: Memory}}]
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, "echo x >/mem/new; sleep 3600"]
    volumeMounts: [{name: mem, mountPath: /mem}, {name: mem, mountPath: /sub, subPath: test-sub}]
---
apiVersion: v1
kind: Pod
metadata: {name: nonroot, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 1000}
  volumes: [{name: cm, configMap: {name: app}}]
  containers:
  - {name: c, image: $IMG, command: [sleep, "3600"], volumeMounts: [{name: cm, mountPath: /etc/configmap-volume}]}
EOF
wait_for 40 is_running fsg || fail "fsGroup pod" "$(grep -E 'fsg' "$E2E_TMP/agent.log" | tail -3)"
stat_of() { inside "$1" stat -c '%a %g' "$2"; }
new_file_group() { [ "$(inside fsg stat -c %g /mem/new)" = 123 ]; }
check "emptyDir on tmpfs with fsGroup 123: root 3777 (tmpfs 1777 + setgid), group 123" \
  [ "$(stat_of fsg /mem)" = "3777 123" ]
check "  a file the root container makes there has the fsGroup (setgid directory)" wait_for 5 new_file_group
check "  a nonexistent subPath is made with the volume's mode and group (upstream's SafeMakeDir)" \
  [ "$(stat_of fsg /sub)" = "3777 123" ]
wait_for 40 is_running nonroot || fail "non-root configMap pod" "$(grep -E 'nonroot' "$E2E_TMP/agent.log" | tail -3)"
check "configMap volume read by a non-root user without fsGroup" inside_is nonroot /etc/configmap-volume/a 1

# --- updates ----------------------------------------------------------------------
ID=$(running_id vols)
t0=$(now_ms)
kubectl create configmap app -n "$PODS_NS" --from-literal=a=changed --from-literal=b=2 \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null 2>&1
if wait_for 15 inside_is vols /all/a changed; then ok "ConfigMap update reaches the running container in $(($(now_ms) - t0)) ms"
else fail "update" "/all/a is $(inside vols cat /all/a)"; fi
check "the subPath mount keeps the old content (as upstream)" inside_is vols /sub-a 1
check "no container restart: same container" [ "$(running_id vols)" = "$ID" ]
check "restartCount stays 0" [ "$(restarts vols)" = 0 ]
kubectl delete configmap opt -n "$PODS_NS" >/dev/null
opt_gone() { [ -z "$(inside vols ls /opt)" ]; }
check "deleted optional ConfigMap: the volume empties" wait_for 15 opt_gone
check "deleted optional ConfigMap: the pod keeps running" [ "$(running_id vols)" = "$ID" ]

# --- a nanolet restart rewrites nothing and restarts nothing ------------------------
data_links() { for d in "$ROOT"/pods/*/volumes/*/*; do readlink "$d/..data"; done | sort | tr '\n' ' '; }
BEFORE=$(data_links)
WEB_ID=$(running_id web)
stop_agent TERM
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" || exit 1
sleep 5
check "restart: no volume rewritten (the same ..data directories)" [ "$(data_links)" = "$BEFORE" ]
check "restart: no container restarted" [ "$(running_id vols) $(running_id web)" = "$ID $WEB_ID" ]
