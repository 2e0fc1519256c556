#!/usr/bin/env bash
# Image credential provider plugins (--image-credential-provider-config,
# --image-credential-provider-bin-dir) against the real control plane,
# containerd and the test registry (tools/testenv/registry.sh: TLS, htpasswd):
# a pod without pull secrets pulls from the registry with the credentials a
# plugin gives; the plugin reads upstream's CredentialProviderRequest (the
# image's repository) and gets its configured args and env; its answer is
# cached for the registry (a second pod runs the plugin no more); a plugin whose
# matchImages do not match is never run; a plugin that fails leaves the pull
# without credentials (the registry's 401), counted in
# kubelet_credential_provider_plugin_errors_total; a bad configuration stops
# the agent at start with the file and the field. Every pull is
# imagePullPolicy: Always, so an image already in containerd proves nothing.
PODS_NS=nanolet-e2e-credprov
. "$(dirname "$0")/pods_lib.sh"
k8s_env || { fail "control plane" "tools/testenv/controlplane.sh up failed"; exit 1; }
: "${NANOLET_TEST_REGISTRY_PASSWORD:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
NODE=nanolet-credprov
KC=$("$E2E_CONTROLPLANE" cert "$NODE" "system:node:$NODE" system:nodes)
REG=$NANOLET_TEST_REGISTRY
BIN=$E2E_TMP/plugins
CONF=$E2E_TMP/credential-providers
mkdir -p "$BIN" "$CONF"

e2e_on_exit api_cleanup
fresh_ns "$PODS_NS"

# The plugin: logs its request, args and env, then answers with the
# registry's credentials for every image under it.
cat >"$BIN/test-registry-auth" <<'EOF'
#!/bin/sh
req=$(cat)
printf '%s\n' "$req" >>"$PLUGIN_LOG"
printf 'args: %s\n' "$*" >>"$PLUGIN_LOG"
printf '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"10m","auth":{"%s":{"username":"%s","password":"%s"}}}\n' \
  "$REGISTRY" "$REGISTRY_USER" "$REGISTRY_PASSWORD"
EOF
# One that must never run: its matchImages are another registry's.
cat >"$BIN/elsewhere" <<EOF
#!/bin/sh
echo ran >>"$E2E_TMP/elsewhere.ran"
exit 1
EOF
# One that fails, for a second name of the registry (localhost).
cat >"$BIN/broken" <<'EOF'
#!/bin/sh
cat >/dev/null
echo "no token service" >&2
exit 3
EOF
chmod +x "$BIN"/*

cat >"$CONF/10-registry.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: test-registry-auth
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["${REG%%:*}:${REG##*:}"]
  defaultCacheDuration: 1m
  args: [--mode, test]
  env:
  - {name: PLUGIN_LOG, value: "$E2E_TMP/plugin.log"}
  - {name: REGISTRY, value: "$REG"}
  - {name: REGISTRY_USER, value: "$NANOLET_TEST_REGISTRY_USER"}
  - {name: REGISTRY_PASSWORD, value: "$NANOLET_TEST_REGISTRY_PASSWORD"}
EOF
cat >"$CONF/20-others.json" <<EOF
{"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig",
 "providers": [
  {"name": "elsewhere", "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
   "matchImages": ["*.example.com"], "defaultCacheDuration": "1m"},
  {"name": "broken", "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
   "matchImages": ["localhost:${REG##*:}"], "defaultCacheDuration": "0s"}]}
EOF

# apply NAME IMAGE: a pod bound to this node pulling IMAGE, no pull secret.
apply() {
  api_pod "$1" 0 "containers: [{name: c, image: \"$2\", imagePullPolicy: Always, command: [sleep, \"3600\"]}]"
}
column() { kubectl get pod -n "$PODS_NS" "$1" --no-headers 2>/dev/null | awk '{print $3}'; }
column_is() { [ "$(column "$1")" = "$2" ]; }
column_matches() { [[ "$(column "$1")" =~ $2 ]]; }
waiting_message() {
  kubectl get pod -n "$PODS_NS" "$1" -o jsonpath='{.status.containerStatuses[0].state.waiting.message}' 2>/dev/null
}
runs() { grep -c '"kind":"CredentialProviderRequest"' "$E2E_TMP/plugin.log" 2>/dev/null || echo 0; }

# --- a bad configuration: the agent does not start, and says why -----------------
mkdir -p "$E2E_TMP/bad"
cat >"$E2E_TMP/bad/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- {name: test-registry-auth, apiVersion: credentialprovider.kubelet.k8s.io/v1, defaultCacheDuration: 1m}
EOF
out=$(timeout 20 "$NANOLET" --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" --root-dir "$E2E_TMP/badroot" \
  --image-credential-provider-config "$E2E_TMP/bad/config.yaml" --image-credential-provider-bin-dir "$BIN" \
  --healthz-port 0 2>&1 | tail -3)
if [[ $out == *"$E2E_TMP/bad/config.yaml"*"providers[0].matchImages: Required value"* ]]; then
  ok "a provider without matchImages stops the start: $(grep -o 'credential provider config.*' <<<"$out" | head -1)"
else fail "bad config" "$out"; fi
out=$(timeout 20 "$NANOLET" --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" --root-dir "$E2E_TMP/badroot" \
  --image-credential-provider-config "$CONF" --image-credential-provider-bin-dir "$E2E_TMP/nowhere" \
  --healthz-port 0 2>&1 | tail -3)
if [[ $out == *"plugin binary executable $E2E_TMP/nowhere/test-registry-auth did not exist"* ]]; then
  ok "a provider whose executable is missing stops the start"
else fail "missing executable" "$out"; fi

# --- the plugins at work ---------------------------------------------------------------
start_agent --kubeconfig "$KC" --node-ip "$NODE_IP" \
  --image-credential-provider-config "$CONF" --image-credential-provider-bin-dir "$BIN" || exit 1

apply first "$REG/busybox:latest"
if wait_for 40 column_is first Running; then ok "a pod without pull secrets pulls with the plugin's credentials and runs"
else fail "first pod" "kubectl get pod says $(column first): $(waiting_message first)"; fi
check "the plugin read upstream's request for the image's repository" \
  grep -q "{\"kind\":\"CredentialProviderRequest\",\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\",\"image\":\"$REG/busybox\"}" "$E2E_TMP/plugin.log"
check "the plugin got its configured args" grep -q '^args: --mode test$' "$E2E_TMP/plugin.log"

apply second "$REG/busybox:1.36"
if wait_for 40 column_is second Running; then ok "a second image of the registry pulls too"
else fail "second pod" "kubectl get pod says $(column second): $(waiting_message second)"; fi
n=$(runs)
[ "$n" = 1 ] && ok "the Registry-keyed answer was cached: the plugin ran once for both pulls" \
  || fail "cache" "the plugin ran $n times"
check "the provider that matches another registry never ran" test ! -e "$E2E_TMP/elsewhere.ran"

apply refused "localhost:${REG##*:}/busybox:latest"
if wait_for 40 column_matches refused '^(ErrImagePull|ImagePullBackOff)$'; then
  ok "a failing plugin: the pull goes on without credentials and fails ($(column refused))"
else fail "failing plugin" "kubectl get pod says $(column refused)"; fi
check "the agent log names the plugin, the image and its error" \
  grep -q "credential provider broken: error execing credential provider plugin broken for image localhost:${REG##*:}/busybox: exit status 3: no token service" "$E2E_TMP/agent.log"
metrics=$(curl -fsS "http://127.0.0.1:$RO_PORT/metrics")
check "kubelet_credential_provider_plugin_errors_total counts it" \
  grep -q '^kubelet_credential_provider_plugin_errors_total{plugin_name="broken"} [1-9]' <<<"$metrics"
check "kubelet_credential_provider_plugin_duration counts the runs" \
  grep -q '^kubelet_credential_provider_plugin_duration_count{plugin_name="test-registry-auth"} 1$' <<<"$metrics"
check "kubelet_credential_provider_config_info has the configuration's hash" \
  grep -Eq '^kubelet_credential_provider_config_info\{hash="sha256:[0-9a-f]{64}"\} 1$' <<<"$metrics"

