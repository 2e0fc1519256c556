#!/bin/sh
# promtool_check.sh PROMTOOL CMD [ARG...]: CMD's output (a test binary's
# --dump) through Prometheus's own linter, `promtool check metrics`. Without
# promtool the test fails and says why: a check that cannot run is not a pass.
# The lints accepted are the missing "_total" suffix of the counters, and the
# "_total" suffix of the gauges, listed in promtool_upstream_counters.txt
# (upstream's own names: cAdvisor's container_fs_inodes_total is a gauge).
promtool=$1
shift
if ! command -v "$promtool" >/dev/null 2>&1; then
  echo "promtool not found ($promtool): install Debian's prometheus package (tools/install-deps.sh --test)" >&2
  exit 1
fi
allow="$(dirname "$0")/promtool_upstream_counters.txt"
out=$("$@") || exit 1
lint=$(printf '%s\n' "$out" | "$promtool" check metrics 2>&1)
rc=$?
[ "$rc" -eq 0 ] && exit 0
[ "$rc" -eq 3 ] || { printf '%s\n' "$lint" >&2; exit "$rc"; } # not a lint problem
left=$(printf '%s\n' "$lint" | while IFS= read -r line; do
  name=${line%% *}
  if { [ "$line" = "$name counter metrics should have \"_total\" suffix" ] ||
    [ "$line" = "$name non-counter metrics should not have \"_total\" suffix" ]; } &&
    grep -qx "$name" "$allow"; then
    continue
  fi
  printf '%s\n' "$line"
done)
[ -z "$left" ] && exit 0
printf '%s\n' "$left" >&2
exit 3
