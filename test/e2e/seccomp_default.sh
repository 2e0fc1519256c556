#!/usr/bin/env bash
# seccompDefault (--seccomp-default): a container whose pod and security
# context name no seccomp profile runs under the runtime's default filter
# (the kernel's Seccomp: 2 in /proc/self/status) instead of none (0); one that
# asks for Unconfined keeps none. Without the flag, both run without a filter.
PODS_NS=nanolet-e2e-seccomp
. "$(dirname "$0")/pods_lib.sh"
IMG=localhost/busybox:1.36

# seccomp_pod NAME [container securityContext]: writes its seccomp mode as its
# termination message and ends.
seccomp_pod() {
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
    command: [sh, -c, 'grep "^Seccomp:" /proc/self/status > /dev/termination-log']
    securityContext: {${2:-}}
EOF
}
MSG='.status.containerStatuses[0].state.terminated.message'

start_agent || { fail "agent start" ""; exit 1; }
seccomp_pod off-none
seccomp_pod off-unconfined 'seccompProfile: {type: Unconfined}'
expect "without seccompDefault: no profile runs without a filter" 30 off-none "$MSG" $'Seccomp:\t0'
expect "without seccompDefault: Unconfined runs without a filter" 30 off-unconfined "$MSG" $'Seccomp:\t0'
stop_agent TERM

start_agent --seccomp-default || { fail "agent start --seccomp-default" ""; exit 1; }
seccomp_pod on-none
seccomp_pod on-unconfined 'seccompProfile: {type: Unconfined}'
expect "--seccomp-default: no profile runs under the runtime's default filter" 30 on-none "$MSG" $'Seccomp:\t2'
expect "--seccomp-default: Unconfined still runs without a filter" 30 on-unconfined "$MSG" $'Seccomp:\t0'
