#!/usr/bin/env bash
# The environment from ConfigMaps and Secrets on the real control plane, with
# pods created by kubectl: env (configMapKeyRef, secretKeyRef) and envFrom
# (configMapRef with a prefix, secretRef) reach the container, keys that are
# no C identifiers included (upstream's relaxed validation); a required key
# that is missing gives CreateContainerConfigError with upstream's message in
# `kubectl get pod`, and the pod starts once the key is added (the Watch
# strategy's change re-syncs it); optional missing objects and keys leave the
# pod running. Access: the apiserver's audit log shows that the node asked
# only for the objects its pods reference, by name, and never for another
# ConfigMap of the same namespace. Downward API resource values with the API's
# "0" divisor and the Node's allocatable for unset limits, and the hostname of
# spec.hostnameOverride; a pod with an unsafe sysctl is rejected at admission.
# Env files (fileKeyRef): variables read from a file an init container wrote in
# an emptyDir; a required key the file lacks, or a file not in the format,
# gives CreateContainerConfigError naming the key or the line.
# Then, with
# configMapAndSecretChangeDetectionStrategy: Get in the config file, a Secret
# still reaches its pod, fetched by a GET of its name.
# API_ENV_NODE / API_ENV_KUBECONFIG: the node and its credential (default: a
# node of this test's own, credential minted with controlplane.sh cert);
# API_ENV_NS: the namespace.
PODS_NS=${API_ENV_NS:-objects-e2e-env}
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
NODE=${API_ENV_NODE:-nanolet-objects}
KC=${API_ENV_KUBECONFIG:-$(node_kubeconfig "$NODE")}
IMG=localhost/busybox:1.36
AUDIT=${NANOLET_TEST_AUDIT_LOG:-}
e2e_on_exit api_cleanup

fresh_ns "$PODS_NS"
# pods are refused until the namespace's ServiceAccount exists
wait_for 30 kubectl get sa default -n "$PODS_NS" >/dev/null 2>&1 ||
  { fail "namespace" "no default ServiceAccount"; exit 1; }
audit_start=0
[ -r "$AUDIT" ] && audit_start=$(wc -l <"$AUDIT")
kubectl create configmap -n "$PODS_NS" app --from-literal=MODE=fast --from-literal=level=3 \
  --from-literal=data-1=value-1 >/dev/null
kubectl create secret generic -n "$PODS_NS" db --from-literal=PASSWORD=s3cr3t \
  --from-literal=1bad=x >/dev/null
kubectl create configmap -n "$PODS_NS" unrelated --from-literal=X=1 >/dev/null

# bound_pod NAME: applies a pod bound to this node, its spec continued from stdin.
bound_pod() {
  { printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nspec:\n' "$1" "$PODS_NS"
    printf '  nodeName: %s\n  automountServiceAccountToken: false\n' "$NODE"
    printf '  terminationGracePeriodSeconds: 1\n'
    cat; } | kubectl apply -f - >/dev/null
}
# pod NAME ENV ENVFROM: a pod bound to this node that prints its environment.
pod() {
  bound_pod "$1" <<EOF2
  enableServiceLinks: false
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, "tr '\\\\0' '\\\\n' </proc/1/environ | sort; sleep 3600"]
    env: $2
    envFrom: $3
EOF2
}
get() { kubectl get pod -n "$PODS_NS" "$1" -o jsonpath="$2" 2>/dev/null; }
phase_is() { [ "$(get "$1" '{.status.phase}')" = "$2" ]; }
waiting_is() { [ "$(get "$1" '{.status.containerStatuses[0].state.waiting.reason}')" = "$2" ]; }
logged() { # logged POD LINE: the container's log has the line
  cat "$LOGS/${PODS_NS}_$1_$(get "$1" '{.metadata.uid}')"/c/*.log 2>/dev/null | grep -q " stdout F $2\$"
}

start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" ${API_ENV_AGENT_FLAGS:-} || { fail "agent start" ""; exit 1; }

# --- env and envFrom from both kinds -------------------------------------------
pod both '[{name: M, valueFrom: {configMapKeyRef: {name: app, key: MODE}}},
           {name: P, valueFrom: {secretKeyRef: {name: db, key: PASSWORD}}},
           {name: JOINED, value: "$(M)/$(CM_level)"}]' \
  '[{prefix: CM_, configMapRef: {name: app}}, {secretRef: {name: db}}]'
pod missing '[{name: L, valueFrom: {configMapKeyRef: {name: app, key: later}}}]' '[]'
pod optional '[{name: O, valueFrom: {secretKeyRef: {name: nope, key: k, optional: true}}},
               {name: K, valueFrom: {configMapKeyRef: {name: app, key: absent, optional: true}}}]' \
  '[{configMapRef: {name: gone, optional: true}}]'

if wait_for 40 phase_is both Running; then ok "a pod with env and envFrom from a ConfigMap and a Secret runs"
else fail "env pod runs" "phase $(get both '{.status.phase}'): $(get both '{.status.containerStatuses[0].state}')"; fi
check "  configMapKeyRef reaches the container" wait_for 10 logged both "M=fast"
check "  secretKeyRef (decoded)" logged both "P=s3cr3t"
check "  envFrom configMapRef with its prefix" logged both "CM_MODE=fast"
check "  envFrom: a key with a dash reaches the container (upstream's spec keys)" logged both "CM_data-1=value-1"
check "  envFrom secretRef" logged both "PASSWORD=s3cr3t"
check "  \$(VAR) sees envFrom variables" logged both "JOINED=fast/3"
check "  a key that is no C identifier is a variable too (relaxed validation, as upstream)" logged both "1bad=x"

# --- downward API resourceFieldRef: the API's "0" divisor, node allocatable -------
# The API server gives an unset divisor as "0" (read as 1, as upstream); an
# unset limit is the Node's allocatable (defaultPodLimitsForDownwardAPI).
bound_pod dapi <<EOF2
  enableServiceLinks: false
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, "tr '\\\\0' '\\\\n' </proc/1/environ | sort; grep . /dapi/*; sleep 3600"]
    resources: {requests: {cpu: 10m, memory: 16Mi}}
    env:
    - {name: CPU_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}
    - {name: MEMORY_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}
    - {name: MEMORY_REQUEST, valueFrom: {resourceFieldRef: {resource: requests.memory}}}
    volumeMounts: [{name: dapi, mountPath: /dapi}]
  volumes:
  - name: dapi
    downwardAPI:
      items:
      - {path: cpu_request, resourceFieldRef: {containerName: c, resource: requests.cpu, divisor: 1m}}
      - {path: memory_limit, resourceFieldRef: {containerName: c, resource: limits.memory}}
EOF2
# ceil of a quantity ("2", "1900m", "8036340Ki", "16Mi") in units
units() { awk -v q="$1" 'BEGIN { n = q + 0; s = substr(q, length(n "") + 1)
  m["m"] = 0.001; m["k"] = 1e3; m["M"] = 1e6; m["G"] = 1e9; m["Ki"] = 1024; m["Mi"] = 1048576; m["Gi"] = 1073741824
  v = n * (s in m ? m[s] : 1); printf "%.0f\n", (v == int(v) ? v : int(v) + 1) }'; }
alloc_cpu=$(units "$(kubectl get node "$NODE" -o jsonpath='{.status.allocatable.cpu}')")
alloc_mem=$(units "$(kubectl get node "$NODE" -o jsonpath='{.status.allocatable.memory}')")
if wait_for 40 phase_is dapi Running; then ok "a pod with resourceFieldRefs and no divisor (the API's \"0\") runs"
else fail "resourceFieldRef pod runs" "$(get dapi '{.status.containerStatuses[0].state}')"; fi
check "  env limits.cpu unset: the Node's allocatable cpu ($alloc_cpu)" wait_for 10 logged dapi "CPU_LIMIT=$alloc_cpu"
check "  env limits.memory unset: the Node's allocatable memory ($alloc_mem)" logged dapi "MEMORY_LIMIT=$alloc_mem"
check "  env requests.memory in bytes" logged dapi "MEMORY_REQUEST=16777216"
check "  volume requests.cpu with divisor 1m" logged dapi "/dapi/cpu_request:10"
check "  volume limits.memory unset: the Node's allocatable" logged dapi "/dapi/memory_limit:$alloc_mem"

# --- spec.hostnameOverride (HostnameOverride, on in 1.36) ---------------------------
bound_pod hover <<EOF2
  hostname: custom-host
  subdomain: sub
  hostnameOverride: override.example.host
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, "echo names=\$(hostname)';'\$(hostname -f)';'; sleep 3600"]
EOF2
if wait_for 40 phase_is hover Running && wait_for 10 logged hover "names=override.example.host;override.example.host;"; then
  ok "hostnameOverride: hostname and hostname -f are the override (not hostname, subdomain or name)"
else fail "hostnameOverride" "$(get hover '{.status.containerStatuses[0].state}') $(cat "$LOGS/${PODS_NS}_hover_"*/c/*.log 2>/dev/null)"; fi

# --- an unsafe sysctl not allowed: rejected at admission ---------------------------
bound_pod sysctl <<EOF2
  securityContext:
    sysctls: [{name: kernel.shm_rmid_forced, value: "1"}, {name: kernel.msgmax, value: "10000000000"}]
  containers:
  - {name: c, image: $IMG, command: [sleep, "3600"]}
EOF2
if wait_for 30 phase_is sysctl Failed && [ "$(get sysctl '{.status.reason}')" = SysctlForbidden ]; then
  ok "kernel.msgmax (not safe, not allowed): Failed, SysctlForbidden, as upstream"
else fail "sysctl admission" "$(get sysctl '{.status.phase} {.status.reason}')"; fi
msg=$(get sysctl '{.status.message}')
want='Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted'
if [ "$msg" = "$want" ]; then ok "  with upstream's message"; else fail "sysctl message" "got '$msg', want '$want'"; fi
sysctl_event() { kubectl get events -n "$PODS_NS" --field-selector involvedObject.name=sysctl \
  -o jsonpath='{range .items[*]}{.type} {.reason} {.message}{"\n"}{end}' |
  grep -qx 'Warning SysctlForbidden forbidden sysctl: "kernel.msgmax" not allowlisted'; }
check "  and a Warning event SysctlForbidden (upstream rejectPod)" wait_for 10 sysctl_event
check "  no sandbox was made for it" bash -c "! grep -q 'pod sysctl_$PODS_NS.*creating sandbox' '$E2E_TMP/agent.log'"

# --- a missing required key, then added -----------------------------------------
if wait_for 30 waiting_is missing CreateContainerConfigError; then
  ok "a missing required key: CreateContainerConfigError in kubectl get pod"
else fail "CreateContainerConfigError" "$(get missing '{.status.containerStatuses[0].state}')"; fi
msg=$(get missing '{.status.containerStatuses[0].state.waiting.message}')
want="couldn't find key later in ConfigMap $PODS_NS/app"
if [ "$msg" = "$want" ]; then ok "  with upstream's message"; else fail "message" "got '$msg', want '$want'"; fi
check "  kubectl get pod shows the reason" bash -c "'$NANOLET_TEST_KUBECTL' --kubeconfig '$NANOLET_TEST_KUBECONFIG' \
  get pod -n $PODS_NS missing --no-headers | grep -q CreateContainerConfigError"
t0=$(date +%s%N)
kubectl patch configmap -n "$PODS_NS" app --type merge -p '{"data":{"later":"now"}}' >/dev/null
if wait_for 20 phase_is missing Running; then
  ok "the key added: the pod starts ($((($(date +%s%N) - t0) / 1000000)) ms after the patch)"
else fail "start after the key" "$(get missing '{.status.containerStatuses[0].state}')"; fi
check "  with the new value" wait_for 10 logged missing "L=now"

# --- optional objects and keys --------------------------------------------------
if wait_for 30 phase_is optional Running; then ok "optional missing objects and keys: the pod runs"
else fail "optional" "$(get optional '{.status.containerStatuses[0].state}')"; fi
check "  without the optional variables" bash -c "! grep -Eq ' F (O|K)=' $LOGS/${PODS_NS}_optional_*/c/*.log"

# --- access: only the referenced objects, by name ---------------------------------
if [ ! -r "$AUDIT" ]; then
  fail "audit log" "NANOLET_TEST_AUDIT_LOG not readable (tools/testenv/README.md)"
else
  # every ConfigMap and Secret request of the node: "verb resource name", the
  # name from the URL's fieldSelector for lists and watches ("*" when none)
  asked=$(tail -n +"$((audit_start + 1))" "$AUDIT" | jq -r --arg u "system:node:$NODE" '
    select(.user.username == $u and (.objectRef.resource == "configmaps" or .objectRef.resource == "secrets"))
    | "\(.verb) \(.objectRef.resource) \(.objectRef.namespace // "") \(.objectRef.name
        // ((.requestURI | capture("fieldSelector=metadata.name%3D(?<n>[^&]+)").n) // "*"))"' | sort -u)
  echo "$asked" | sed 's/^/  audit: /'
  if grep -q "list configmaps $PODS_NS app" <<<"$asked" && grep -q "list secrets $PODS_NS db" <<<"$asked"; then
    ok "audit: the node listed its pods' ConfigMap and Secret by name"
  else fail "audit: referenced objects" "not seen"; fi
  if grep -q "watch configmaps $PODS_NS app" <<<"$asked"; then ok "audit: and watches the ConfigMap by name"
  else fail "audit: watch" "no watch of app"; fi
  bad=$(grep -Ev " $PODS_NS (app|db|nope|gone)\$" <<<"$asked")
  if [ -z "$bad" ]; then ok "audit: nothing else was asked for (no other ConfigMap, no whole collection)"
  else fail "audit: other objects" "$bad"; fi
  if ! grep -q unrelated <<<"$asked"; then ok "audit: the unreferenced ConfigMap of the namespace was never asked for"
  else fail "audit: unrelated" "asked"; fi
  # a refusal can happen while the Node authorizer's graph has not caught up
  # with a new pod (the reflector lists again): shown, not an error
  tail -n +"$((audit_start + 1))" "$AUDIT" | jq -r --arg u "system:node:$NODE" '
    select(.user.username == $u and .responseStatus.code == 403) | "  refused: \(.requestURI)"' | sort -u
fi

# --- env files (fileKeyRef, EnvFiles) --------------------------------------------
# envfile_pod NAME SETUP ENV: an init container runs SETUP (sh) with the emptyDir
# cfg on /data; the container prints its environment.
envfile_pod() {
  bound_pod "$1" <<EOF2
  enableServiceLinks: false
  volumes: [{name: cfg, emptyDir: {}}]
  initContainers:
  - name: setup
    image: $IMG
    volumeMounts: [{name: cfg, mountPath: /data}]
    command:
    - sh
    - -c
    - |
      $2
  containers:
  - name: c
    image: $IMG
    command: [sh, -c, "tr '\\\\0' '\\\\n' </proc/1/environ | sort; sleep 3600"]
    env: $3
EOF2
}
fk() { echo "{name: $1, valueFrom: {fileKeyRef: {volumeName: cfg, path: ${3:-app/config.env}, key: $2${4:+, optional: $4}}}}"; }
envfile_pod files "mkdir -p /data/app; echo \"# written by setup\" > /data/app/config.env; echo \"A='one'\" >> /data/app/config.env; echo \"B='two words'\" >> /data/app/config.env" \
  "[$(fk A A), $(fk BEE B), $(fk O nope app/config.env true)]"
envfile_pod nokey "echo \"A='one'\" > /data/config.env" "[$(fk X X config.env)]"
envfile_pod badfile "echo \"A=one\" > /data/config.env" "[$(fk A A config.env)]"
if wait_for 40 phase_is files Running; then ok "fileKeyRef: a pod whose variables come from a file its init container wrote runs"
else fail "fileKeyRef pod runs" "phase $(get files '{.status.phase}'): $(get files '{.status.containerStatuses[0].state}')"; fi
check "  the file's value reaches the container" wait_for 10 logged files "A=one"
check "  a value with a blank, under another variable name" logged files "BEE=two words"
check "  an optional key the file lacks is not set" bash -c "! grep -q ' stdout F O=' $LOGS/${PODS_NS}_files_*/c/*.log"
# config_error POD WHAT WHY REGEX: the pod waits in CreateContainerConfigError,
# its message matching REGEX.
config_error() {
  if wait_for 30 waiting_is "$1" CreateContainerConfigError; then
    ok "fileKeyRef: $2: CreateContainerConfigError"
  else fail "fileKeyRef: $2" "$(get "$1" '{.status.containerStatuses[0].state}')"; fi
  local msg
  msg=$(get "$1" '{.status.containerStatuses[0].state.waiting.message}')
  check "  $3: $msg" grep -q "$4" <<<"$msg"
}
config_error nokey "a required key the file lacks" "with upstream's message" \
  'environment variable key "X" not found in file ".*/volumes/kubernetes.io~empty-dir/cfg/config.env"'
config_error badfile "a file not in the env file format" "the message names the file and the line" \
  "couldn't parse env file .*/cfg/config.env for A: line 1: value must be enclosed in single quotes"
if kubectl apply -f - >/dev/null 2>"$E2E_TMP/fk-refused" <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: fk-hostpath, namespace: $PODS_NS}
spec:
  nodeName: $NODE
  volumes: [{name: cfg, hostPath: {path: /tmp}}]
  containers: [{name: c, image: $IMG, env: [$(fk A A config.env)]}]
EOF2
then fail "fileKeyRef on a hostPath volume" "the API server accepted it"
else check "fileKeyRef on a volume that is no emptyDir: refused by the API server" grep -q "must be of type emptyDir" "$E2E_TMP/fk-refused"; fi

# --- configMapAndSecretChangeDetectionStrategy: Get ---------------------------------
stop_agent TERM
printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nconfigMapAndSecretChangeDetectionStrategy: Get\n' \
  >"$E2E_TMP/get.yaml"
start_agent --config "$E2E_TMP/get.yaml" --kubeconfig "$KC" --node-ip "$NODE_IP" || fail "agent start (Get)" ""
pod viaget '[{name: G, valueFrom: {secretKeyRef: {name: db, key: PASSWORD}}}]' '[]'
if wait_for 40 phase_is viaget Running && wait_for 10 logged viaget "G=s3cr3t"; then
  ok "strategy Get: the secret reaches the container"
else fail "strategy Get" "$(get viaget '{.status.containerStatuses[0].state}')"; fi
if [ -r "$AUDIT" ]; then
  if wait_for 10 bash -c "tail -n +$((audit_start + 1)) '$AUDIT' | jq -r --arg u system:node:$NODE \
      'select(.user.username == \$u and .verb == \"get\") | .objectRef.resource + \"/\" + .objectRef.name' |
      grep -qx secrets/db"; then
    ok "strategy Get: the node GETs the secret by name"
  else fail "strategy Get: audit" "no GET of secrets/db"; fi
fi
