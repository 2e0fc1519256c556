#!/bin/sh
# promtool_check.sh PROMTOOL CMD [ARG...]: CMD's output (a test binary's
# --dump) through Prometheus's own linter, `promtool check metrics`. Without
# promtool the test fails and says why: a check that cannot run is not a pass.
promtool=$1
shift
if ! command -v "$promtool" >/dev/null 2>&1; then
  echo "promtool not found ($promtool): install Debian's prometheus package (tools/install-deps.sh --test)" >&2
  exit 1
fi
out=$("$@") || exit 1
printf '%s\n' "$out" | "$promtool" check metrics
