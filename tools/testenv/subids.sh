#!/usr/bin/env bash
# The node's user-namespace range the way upstream's kubelet reads it
# (docs/RUNTIME.md, "User namespaces"): a system user `kubelet` with
# subordinate ids in /etc/subuid and /etc/subgid, and getsubids (Debian's
# uidmap, which tools/install-deps.sh --test installs; installed here when
# missing) to read them. Idempotent, as root; prints the range: FIRST COUNT.
#
# The range: 1024 pods of 65536 ids from 2^30, apart from the ranges useradd
# gives people (from 100000) and from the agent's default (from 65536), so
# that a pod's ids show which one it came from. A `kubelet` line already there
# is left as it is. Once the user exists every agent on the machine reads
# getsubids at start (upstream's rule): the package comes first.
set -euo pipefail
FIRST=1073741824
COUNT=67108864
if ! command -v getsubids >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 install -y -q uidmap >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get -o DPkg::Lock::Timeout=300 install -y -q uidmap >/dev/null; }
fi
getent passwd kubelet >/dev/null ||
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin kubelet
for f in /etc/subuid /etc/subgid; do
  [ -e $f ] || install -m 0644 /dev/null $f
  grep -q '^kubelet:' $f || echo "kubelet:$FIRST:$COUNT" >>$f
done
u=$(getsubids kubelet) && g=$(getsubids -g kubelet) && [ "$u" = "$g" ] ||
  { echo "subids.sh: getsubids kubelet: uids '$u', gids '$g'" >&2; exit 1; }
set -- $u
echo "$3 $4"
