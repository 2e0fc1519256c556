#!/usr/bin/env bash
# A fixed, representative subset of upstream's node conformance suite, run by
# tools/conformance.sh against this tree's nanolet: at least one spec of each
# group (pods, containers, init containers, probes, lifecycle hooks, security
# context, each volume type, downward API, expansion, ephemeral containers,
# networking within a pod), chosen to finish in a few minutes. The full focus
# is `tools/conformance.sh` (docs/CONFORMANCE.md).
#
# Each spec that passes is one `ok`; one that fails, is skipped or did not run
# (renamed upstream, or a focus that no longer matches it) is a FAIL.
. "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)

# Spec names as ginkgo prints them (the full text, labels included).
SPECS=(
  '[sig-node] Pods should get a host IP [NodeConformance] [Conformance]'
  '[sig-node] Pods should support remote command execution over websockets [NodeConformance] [Conformance]'
  '[sig-node] Containers should be able to override the image'\''s default command and arguments [NodeConformance] [Conformance]'
  '[sig-node] Kubelet when scheduling a busybox command in a pod should print the output to logs [NodeConformance] [Conformance]'
  '[sig-node] Container Runtime blackbox test on terminated container should report termination message if TerminationMessagePath is set as non-root user and at a non-default path [NodeConformance] [Conformance]'
  '[sig-node] InitContainer [NodeConformance] should invoke init containers on a RestartNever pod [Conformance]'
  '[sig-node] Probing container should be restarted with a exec "cat /tmp/health" liveness probe [NodeConformance] [Conformance]'
  '[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook should execute poststart http hook properly [NodeConformance] [Conformance]'
  '[sig-node] Security Context When creating a container with runAsUser should run the container with uid 65534 [LinuxOnly] [NodeConformance] [Conformance]'
  '[sig-node] Security Context when creating containers with AllowPrivilegeEscalation should not allow privilege escalation when false [LinuxOnly] [NodeConformance] [Conformance]'
  '[sig-storage] EmptyDir volumes should support (non-root,0644,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]'
  '[sig-storage] HostPath should support r/w [NodeConformance]'
  '[sig-storage] ConfigMap should be consumable from pods in volume with mappings [NodeConformance] [Conformance]'
  '[sig-storage] Secrets should be consumable from pods in volume with defaultMode set [LinuxOnly] [NodeConformance] [Conformance]'
  '[sig-storage] Downward API volume should provide podname only [NodeConformance] [Conformance]'
  '[sig-storage] Projected combined should project all components that make up the projection API [Projection] [NodeConformance] [Conformance]'
  '[sig-node] Downward API should provide pod name, namespace and IP address as env vars [NodeConformance] [Conformance]'
  '[sig-node] Variable Expansion should allow composing env vars into new env vars [NodeConformance] [Conformance]'
  '[sig-node] Ephemeral Containers [NodeConformance] will start an ephemeral container in an existing pod [Conformance]'
  '[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http [NodeConformance] [Conformance]'
)

# Each name matched literally, at the end of the text ginkgo matches (the
# suite's description, a space, the spec's text).
focus=
for s in "${SPECS[@]}"; do
  e=$(sed 's/[][\.*^$(){}?+|/]/\\&/g' <<<"$s")
  focus+="${focus:+|}$e\$"
done

report=$E2E_TMP/report
# An instance of its own: a full run (tools/conformance.sh) may be going on,
# and the subset on the other runtime (NANOLET_TEST_RUNTIME, tools/e2e-runtime.sh).
case ${NANOLET_TEST_RUNTIME:-containerd} in
  containerd2) instance=c2-subset offset=400 ;;
  *) instance=conformance-subset offset=200 ;;
esac
CONFORMANCE_INSTANCE=$instance CONFORMANCE_PORT_OFFSET=$offset \
  CONFORMANCE_REPORT_DIR=$report CONFORMANCE_PROCS=${CONFORMANCE_PROCS:-4} NANOLET=$NANOLET \
  "$top/tools/conformance.sh" "$focus" >"$E2E_TMP/run.log" 2>&1
rc=$?
tail -3 "$E2E_TMP/run.log"

for s in "${SPECS[@]}"; do
  state=$(awk -F'\t' -v s="$s" '$2 == s { print $1 }' "$report/specs.tsv" 2>/dev/null)
  case $state in
    passed) ok "$s" ;;
    "") fail "$s" "did not run" ;;
    *) fail "$s" "$state: $(awk -F'\t' -v s="$s" '$2 == s { print $3 }' "$report/specs.tsv")" ;;
  esac
done
ran=$(wc -l <"$report/specs.tsv" 2>/dev/null || echo 0)
check "the run holds exactly the subset's ${#SPECS[@]} specs" [ "$ran" -eq ${#SPECS[@]} ]
check "tools/conformance.sh exits 0" [ "$rc" -eq 0 ]
if [ "$E2E_FAILED" -gt 0 ]; then
  echo "--- run ---"; tail -40 "$E2E_TMP/run.log"
  echo "--- nanolet (last 60 lines) ---"; tail -60 "$report/nanolet.log" 2>/dev/null
  # The report outlives the test's temporary directory.
  keep=$top/build/conformance/subset-failed
  rm -rf "$keep" && mkdir -p "$keep" && cp -a "$report/." "$keep/" && echo "report kept in $keep"
fi
