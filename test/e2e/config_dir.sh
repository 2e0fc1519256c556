#!/usr/bin/env bash
# --config-dir as an operator uses it: nanolet started with --config and a
# drop-in directory of two files (the second in a subdirectory) and a file that
# is no drop-in; /configz read with curl shows the merged configuration
# (upstream's rules: the later file wins, maps merge key by key, lists are
# replaced whole, structs merge field by field), the agent serves on the ports
# the drop-ins give, a flag still wins over them, the settings nanolet ignores
# are reported at start-up, and a bad drop-in stops the start naming the file
# and the field.
. "$(dirname "$0")/lib.sh"

: "${NANOLET_TEST_CRI_ENDPOINT:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
# A cgroup root of its own: the drop-ins reserve memory for the system, which
# sizes kubepods, and another agent on this machine may have its pods in /kubepods.
CG_SH=$(cd "$(dirname "$0")/../.." && pwd)/tools/testenv/cgroup-root.sh
CG=/nl-e2e-config-dir
AGENT_PID=
stop_agent() {
  [ -z "$AGENT_PID" ] && return 0
  kill -TERM "$AGENT_PID" 2>/dev/null
  wait "$AGENT_PID" 2>/dev/null
  AGENT_PID=
}
cleanup() {
  stop_agent
  "$CG_SH" remove "$CG"
}
e2e_on_exit cleanup
"$CG_SH" make "$CG" || { fail "cgroup root" "cannot make $CG"; exit 1; }

PORT_FILE=$(free_port)
PORT1=$(free_port)
PORT2=$(free_port)
RO1=$(free_port)
HZ_DROPIN=$(free_port)
HZ_FLAG=$(free_port)
D=$E2E_TMP/kubelet.conf.d
mkdir -p "$D/more" "$E2E_TMP/manifests"
cat >"$E2E_TMP/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
port: $PORT_FILE
cgroupRoot: $CG
staticPodPath: $E2E_TMP/manifests
evictionHard: {memory.available: 100Mi, nodefs.available: 5%}
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
featureGates: {EventedPLEG: true}
EOF
cat >"$D/10-kubelet.conf" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
port: $PORT1
readOnlyPort: $RO1
healthzPort: $HZ_DROPIN
clusterDNS:
- 192.168.1.10
systemReserved:
  memory: 1Gi
authorization:
  webhook:
    cacheAuthorizedTTL: "5m"
    cacheUnauthorizedTTL: "30s"
staticPodURLHeader:
  kubelet-api-support:
  - "Authorization: 234APSDFA"
  - "X-Custom-Header: 123"
  custom-static-pod:
  - "Authorization: 223EWRWER"
featureGates:
  PodAndContainerStatsFromCRI: true
EOF
cat >"$D/more/20-kubelet.conf" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
clusterDNS:
- 192.168.1.1
- 192.168.1.5
port: $PORT2
cpuManagerReconcilePeriod: 1s
systemReserved:
  cpu: 100m
authorization:
  webhook:
    cacheAuthorizedTTL: "6m"
evictionHard:
  nodefs.available: null
staticPodURLHeader:
  kubelet-api-support:
  - "Authorization: 8945AFSG1"
shutdownGracePeriodByPodPriority:
  - priority: 1
    shutdownGracePeriodSeconds: 19
featureGates:
  PodAndContainerStatsFromCRI: false
EOF
# Not a drop-in: only *.conf files are read.
printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: 1\n' >"$D/30-kubelet.yaml"

"$NANOLET" --config "$E2E_TMP/kubelet.yaml" --config-dir "$D" --healthz-port "$HZ_FLAG" \
  --cert-dir "$E2E_TMP/pki" --root-dir "$E2E_TMP/root" --hostname-override e2e-config-dir \
  --container-runtime-endpoint "$NANOLET_TEST_CRI_ENDPOINT" >"$E2E_TMP/agent.log" 2>&1 &
AGENT_PID=$!
if wait_for 20 healthz_ok "$HZ_FLAG"; then
  ok "the agent starts; /healthz on --healthz-port, the flag over the drop-in's healthzPort"
else
  fail "start" "$(tail -5 "$E2E_TMP/agent.log")"
fi
healthz_ok "$HZ_DROPIN" && fail "healthzPort" "the drop-in's port answers though the flag set another" ||
  ok "the drop-in's healthzPort is not served"

configz=$(curl -fsSk "https://127.0.0.1:$PORT2/configz")
check "/configz on the second drop-in's port" [ -n "$configz" ]
field() { jq -c ".kubeletconfig.$1" <<<"$configz"; }
expect() { # expect FIELD JSON: /configz's FIELD is JSON
  local have
  have=$(field "$1")
  [ "$have" = "$2" ] && ok "/configz $1: $2" || fail "/configz $1" "$have, want $2"
}
expect port "$PORT2"
expect readOnlyPort "$RO1"
expect healthzPort "$HZ_FLAG"
expect clusterDNS '["192.168.1.1","192.168.1.5"]'
expect systemReserved '{"memory":"1Gi","cpu":"100m"}'
expect authorization '{"mode":"AlwaysAllow","webhook":{"cacheAuthorizedTTL":"6m0s","cacheUnauthorizedTTL":"30s"}}'
expect staticPodURLHeader '{"kubelet-api-support":["Authorization: 8945AFSG1"],"custom-static-pod":["Authorization: 223EWRWER"]}'
expect featureGates '{"EventedPLEG":true,"PodAndContainerStatsFromCRI":false}'
expect evictionHard '{"memory.available":"100Mi"}'
expect shutdownGracePeriodByPodPriority '[{"priority":1,"shutdownGracePeriodSeconds":19}]'
expect cpuManagerReconcilePeriod '"1s"'
expect cpuCFSQuotaPeriod '"100ms"'
expect staticPodPath "\"$E2E_TMP/manifests\""

curl -fsS "http://127.0.0.1:$RO1/pods" | jq -e '.kind == "PodList"' >/dev/null &&
  ok "the read-only port of the first drop-in serves /pods" || fail "readOnlyPort" "no /pods on $RO1"
curl -fsSk --max-time 2 "https://127.0.0.1:$PORT_FILE/configz" >/dev/null 2>&1 &&
  fail "port" "the --config file's port still answers" || ok "the --config file's port is not served"

grep -q "cpuManagerReconcilePeriod is set but not supported yet; it is ignored" "$E2E_TMP/agent.log" &&
  grep -q "shutdownGracePeriodByPodPriority is set but not supported yet; it is ignored" "$E2E_TMP/agent.log" &&
  ok "start-up reports the drop-ins' settings nanolet ignores" ||
  fail "ignored settings" "$(grep -i ignored "$E2E_TMP/agent.log")"
grep -q "drop-in $D/30-kubelet.yaml skipped" "$E2E_TMP/agent.log" &&
  grep -q "drop-in $D/more/20-kubelet.conf merged" "$E2E_TMP/agent.log" &&
  ok "the log names the drop-ins merged and the file skipped" ||
  fail "drop-in log" "$(grep drop-in "$E2E_TMP/agent.log")"
stop_agent

# A bad drop-in: exit 2 before anything starts, naming the file and the field.
printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthorization:\n  webhook:\n    cacheAuthorizedTTL: soon\n' \
  >"$D/40-bad.conf"
"$NANOLET" --config "$E2E_TMP/kubelet.yaml" --config-dir "$D" --root-dir "$E2E_TMP/never" \
  2>"$E2E_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "$D/40-bad.conf: authorization.webhook.cacheAuthorizedTTL: invalid duration \"soon\"" "$E2E_TMP/err" &&
  [ ! -e "$E2E_TMP/never" ] && ok "a bad drop-in exits 2 naming the file and the field" ||
  fail "bad drop-in" "rc=$rc $(cat "$E2E_TMP/err")"
"$NANOLET" --config-dir "$E2E_TMP/none" --root-dir "$E2E_TMP/never" 2>"$E2E_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--config-dir $E2E_TMP/none: $E2E_TMP/none: No such file or directory" "$E2E_TMP/err" &&
  ok "a missing --config-dir exits 2" || fail "missing --config-dir" "rc=$rc $(cat "$E2E_TMP/err")"
