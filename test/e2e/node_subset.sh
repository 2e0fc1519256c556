#!/usr/bin/env bash
# Upstream's node validation suite (test/e2e_node), its CI subset: one fast
# spec of each group (tools/node-conformance.sh --subset, the list there),
# against this tree's nanolet as the node's kubelet, with the suite's own API
# server (docs/CONFORMANCE.md, "The node suite"). Each spec of the list that
# passed is one `ok`; one that failed or did not run (renamed upstream: its
# expression no longer matches) is a FAIL.
. "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)

# The list, read from the runner itself: one regular expression a line.
mapfile -t subset < <(sed -n '/^SUBSET=(/,/^)/{/^  /{s/^  '\''//;s/'\''$//;p}}' \
  "$top/tools/node-conformance.sh")
check "the runner names a subset" [ "${#subset[@]}" -gt 0 ]

report=$E2E_TMP/report
NANOLET=$NANOLET NODE_CONFORMANCE_REPORT_DIR=$report \
  "$top/tools/node-conformance.sh" --subset >"$E2E_TMP/run.log" 2>&1
rc=$?
tail -3 "$E2E_TMP/run.log"

for re in "${subset[@]}"; do
  row=$(RE=$re awk -F'\t' 'match($2 " ", ENVIRON["RE"]) { print; exit }' "$report/specs.tsv" 2>/dev/null)
  name=$(sed 's/\\//g' <<<"$re")
  case ${row%%$'\t'*} in
    passed) ok "${name% }" ;;
    "") fail "${name% }" "did not run" ;;
    *) fail "${name% }" "${row%%$'\t'*}: $(cut -f3 <<<"$row")" ;;
  esac
done
ran=$(grep -c . "$report/specs.tsv" 2>/dev/null) || ran=0
check "the run holds exactly the subset's ${#subset[@]} specs" [ "$ran" -eq "${#subset[@]}" ]
check "tools/node-conformance.sh --subset exits 0" [ "$rc" -eq 0 ]
check "its last line is '${#subset[@]} passed, 0 failed'" \
  [ "$(tail -1 "$E2E_TMP/run.log")" = "${#subset[@]} passed, 0 failed" ]
if [ "$E2E_FAILED" -gt 0 ]; then
  echo "--- run ---"; tail -40 "$E2E_TMP/run.log"
  echo "--- nanolet (last 60 lines) ---"; tail -60 "$report/nanolet.log" 2>/dev/null
  keep=$top/build/node-conformance/subset-failed
  rm -rf "$keep" && mkdir -p "$keep" && cp -a "$report/." "$keep/" && echo "report kept in $keep"
fi
