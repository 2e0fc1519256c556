#!/usr/bin/env bash
# Termination messages reach /pods as upstream's kubelet puts them there: what
# the container wrote to its terminationMessagePath (policy File), or the tail
# of its log when it failed leaving that file empty (FallbackToLogsOnError). For
# containers that end while the agent runs, and for those that end while it is
# down (found already dead when it starts again).
PODS_NS=nanolet-e2e-termmsg
. "$(dirname "$0")/pods_lib.sh"
IMG=localhost/busybox:1.36

# The pods see $GO as /go: a pod that waits for /go/now ends when the test says.
GO=$E2E_TMP/go
mkdir -p "$GO"
msg_pod() { # msg_pod NAME POLICY SCRIPT
  put "$1" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PODS_NS}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: $IMG
    terminationMessagePolicy: $2
    command: [sh, -c, '$3']
    volumeMounts: [{name: go, mountPath: /go}]
  volumes: [{name: go, hostPath: {path: $GO, type: Directory}}]
EOF
}
TERM_Q='.status.containerStatuses[0].state.terminated | "\(.exitCode) \(.reason) \(.message | @json)"'
# exited NAME: the runtime says the pod's container has exited.
exited() { [ "$(pod_containers "$1-$NODE" | jq -r '.[0].state')" = CONTAINER_EXITED ]; }

start_agent || { fail "agent start" ""; exit 1; }
msg_pod file File 'echo -n bye > /dev/termination-log; exit 3'
msg_pod logs FallbackToLogsOnError 'echo first; echo last; exit 1'
# These two end while the agent is down: they wait for /go/now.
WAIT='until [ -e /go/now ]; do sleep 0.1; done'
msg_pod down-file File "$WAIT"'; echo -n "gone while down" > /dev/termination-log; exit 4'
msg_pod down-logs FallbackToLogsOnError "$WAIT"'; echo "crashed while down"; exit 5'
expect "File: state.terminated.message is the file" 30 file "$TERM_Q" '3 Error "bye"'
expect "FallbackToLogsOnError: the log's last lines" 30 logs "$TERM_Q" '1 Error "first\nlast\n"'
expect "  ... and the pod Failed" 10 logs .status.phase Failed

expect "down-file running" 20 down-file .status.phase Running
expect "down-logs running" 20 down-logs .status.phase Running
stop_agent TERM
touch "$GO/now"
if wait_for 20 exited down-file && wait_for 20 exited down-logs; then
  ok "containers ended while the agent was down"
else
  fail "containers ended while down" "$(pod_containers "down-file-$NODE" | jq -c '[.[].state]')"
fi
start_agent || { fail "agent restart" ""; exit 1; }
expect "after a restart: File" 20 down-file "$TERM_Q" '4 Error "gone while down"'
expect "after a restart: FallbackToLogsOnError" 20 down-logs "$TERM_Q" '5 Error "crashed while down\n"'
