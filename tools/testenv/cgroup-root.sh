#!/usr/bin/env bash
# A cgroup root of an agent's own (its --cgroup-root), so that agents that run
# on this machine at the same time (a conformance run, the e2e tests of two
# runtimes side by side) never meet in one kubepods, where each sets the QoS
# cgroups for its own pods.
#
#   tools/testenv/cgroup-root.sh make ROOT     # ROOT (/name) in every hierarchy
#   tools/testenv/cgroup-root.sh remove ROOT   # ROOT and the kubepods tree under it
#
# remove leaves a cgroup that still has processes (rmdir refuses it).
set -uo pipefail
usage() { sed -n '7,8s/^# //p' "$0" >&2; exit 2; }
[ $# -eq 2 ] && [ "${2:0:1}" = / ] && [ "$2" != / ] || usage
dirs() {
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo "/sys/fs/cgroup$1"
  else
    for h in /sys/fs/cgroup/*/; do [ -L "${h%/}" ] || echo "$h${1#/}"; done
  fi
}
case $1 in
  make) for d in $(dirs "$2"); do mkdir -p "$d" || exit 1; done ;;
  remove) for d in $(dirs "$2"); do [ ! -d "$d" ] || find "$d" -depth -type d -exec rmdir {} + 2>/dev/null; done ;;
  *) usage ;;
esac
exit 0
