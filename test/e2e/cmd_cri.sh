#!/usr/bin/env bash
# `nanolet cri` against the real containerd (NANOLET_TEST_CRI_ENDPOINT): a
# sandbox with a running and an exited container made by cmd_cri_fixture
# (labelled nanolet-e2e-cmd=1), then every command on them, in tables and JSON,
# and the error paths with their exit statuses. Everything is removed at the end.
# (No `grep -q` at the end of a pipe: with pipefail, its early exit can kill the
# writer with SIGPIPE.)
. "$(dirname "$0")/lib.sh"

EP=${NANOLET_TEST_CRI_ENDPOINT:-${NANOLET_TEST_CRI_SOCKET:-}}
if [ -z "$EP" ]; then
  fail "NANOLET_TEST_CRI_ENDPOINT" "not set: run tools/testenv/setup.sh and . tools/testenv/env.sh"
  exit 1
fi
export NANOLET_TEST_CRI_ENDPOINT=$EP
export CONTAINER_RUNTIME_ENDPOINT=$EP # the default endpoint of `nanolet cri`
FIXTURE=${CMD_CRI_FIXTURE:-$(dirname "$NANOLET")/../test/e2e/cmd_cri_fixture}
LOGDIR=$E2E_TMP/logs
cri() { "$NANOLET" cri "$@"; }
cleanup() { "$FIXTURE" cleanup >/dev/null 2>&1; rm -rf "$LOGDIR"; }
e2e_on_exit cleanup
OUT=$E2E_TMP/out ERR=$E2E_TMP/err
run() { "$NANOLET" cri "$@" >"$OUT" 2>"$ERR"; RC=$?; } # sets RC, OUT, ERR

# ---- usage ----------------------------------------------------------------------
run --help
[ $RC -eq 0 ] && grep -q '^  pods' "$OUT" && grep -q '^  exec CONTAINER-ID' "$OUT" && grep -q -- '--runtime-endpoint' "$OUT" \
  && ok "--help lists commands and options" || fail "--help" "rc=$RC"
run frobnicate
[ $RC -eq 2 ] && grep -q 'nanolet cri: unknown command "frobnicate"' "$ERR" && ok "unknown command exits 2" \
  || fail "unknown command" "rc=$RC $(cat "$ERR")"
run inspect
[ $RC -eq 2 ] && grep -q 'wrong number of arguments' "$ERR" && ok "missing ID exits 2" || fail "missing ID" "rc=$RC"
run ps --tail 3
[ $RC -eq 2 ] && grep -q 'ps: unknown option --tail' "$ERR" && ok "option of another command exits 2" || fail "ps --tail" "rc=$RC"
run --timeout banana version
[ $RC -eq 2 ] && grep -q 'invalid --timeout banana' "$ERR" && ok "bad --timeout exits 2" || fail "bad --timeout" "rc=$RC"
run -r tcp://127.0.0.1:1 version
[ $RC -eq 2 ] && grep -q 'runtime-endpoint' "$ERR" && ok "tcp endpoint refused with 2" || fail "tcp endpoint" "rc=$RC $(cat "$ERR")"

# ---- runtime down: exit 1 with the gRPC status, quickly -------------------------
t0=$(date +%s%N)
run -r unix://"$E2E_TMP"/absent.sock pods
ms=$((($(date +%s%N) - t0) / 1000000))
[ $RC -eq 1 ] && grep -q '^nanolet cri: pods: rpc error: code = Unavailable desc = .*absent.sock' "$ERR" && [ $ms -lt 5000 ] \
  && ok "absent runtime: exit 1, Unavailable, in ${ms} ms" || fail "absent runtime" "rc=$RC ${ms}ms $(cat "$ERR")"

# ---- version, info, images -----------------------------------------------------------
run version
[ $RC -eq 0 ] && grep -q '^RuntimeName:  containerd$' "$OUT" && grep -q '^RuntimeApiVersion:  v1$' "$OUT" \
  && ok "version shows containerd" || fail "version" "rc=$RC $(cat "$OUT" "$ERR")"
run -r "$EP" --timeout 5s version -o json
[ $RC -eq 0 ] && [ "$(jq -r .runtimeName "$OUT")" = containerd ] && ok "version -o json (and -r, --timeout)" \
  || fail "version -o json" "rc=$RC $(cat "$OUT")"
run info
[ $RC -eq 0 ] && [ "$(jq -r '.status.conditions[] | select(.type == "RuntimeReady") | .status' "$OUT")" = true ] \
  && jq -e '.config | type == "object"' "$OUT" >/dev/null && ok "info: RuntimeReady and the parsed config" \
  || fail "info" "rc=$RC $(head -c 300 "$OUT")"
run images
[ $RC -eq 0 ] && head -1 "$OUT" | grep -Eq '^IMAGE +TAG +IMAGE ID +SIZE$' \
  && grep -Eq '^localhost/busybox +latest +[0-9a-f]{13} +[0-9.]+[kMG]?B$' "$OUT" \
  && ok "images lists localhost/busybox:latest" || fail "images" "rc=$RC $(cat "$OUT")"
run images -o json
[ $RC -eq 0 ] && jq -e '[.images[].repoTags[]] | index("localhost/busybox:latest")' "$OUT" >/dev/null \
  && jq -e '.images[0].size | type == "string"' "$OUT" >/dev/null \
  && ok "images -o json (repoTags, size as a string like protojson)" || fail "images -o json" "rc=$RC"

# ---- a sandbox with a running and an exited container ----------------------------------
mkdir -p "$LOGDIR"
if ! ids=$("$FIXTURE" create "$LOGDIR" 2>"$ERR"); then
  fail "fixture" "$(cat "$ERR")"
  exit 1
fi
read -r SID RID XID <<<"$ids"
ok "fixture: sandbox ${SID:0:13}, containers ${RID:0:13} ${XID:0:13}"

running_only() { cri ps -q | grep -x "$RID" >/dev/null && ! cri ps -q | grep -x "$XID" >/dev/null; }
wait_for 10 running_only || true
run pods
[ $RC -eq 0 ] && head -1 "$OUT" | grep -Eq '^POD ID +CREATED +STATE +NAME +NAMESPACE +ATTEMPT$' \
  && grep -Eq "^${SID:0:13} +([0-9]+ seconds?|Less than a second) ago +Ready +nanolet-e2e-cmd-[0-9]+ +e2e-cmd +0$" "$OUT" \
  && ok "pods: the sandbox, ID cut to 13" || fail "pods" "rc=$RC $(cat "$OUT")"
cri pods -q | grep -x "$SID" >/dev/null && ok "pods -q prints the full ID" || fail "pods -q"
run ps
[ $RC -eq 0 ] && head -1 "$OUT" | grep -Eq '^CONTAINER +IMAGE +CREATED +STATE +NAME +ATTEMPT +POD ID$' \
  && grep -Eq "^${RID:0:13} +localhost/busybox:latest +.* ago +Running +talker +0 +${SID:0:13}$" "$OUT" \
  && ! grep -q "^${XID:0:13}" "$OUT" && ok "ps: the running container only" || fail "ps" "rc=$RC $(cat "$OUT")"
run ps -a
[ $RC -eq 0 ] && grep -Eq "^${XID:0:13} +.* Exited +quitter +0 +${SID:0:13}$" "$OUT" \
  && grep -q "^${RID:0:13}" "$OUT" && ok "ps -a: the exited one too" || fail "ps -a" "rc=$RC $(cat "$OUT")"
run ps -a --no-trunc
grep -q "^$RID " "$OUT" && ok "ps --no-trunc: full IDs" || fail "ps --no-trunc" "$(cat "$OUT")"
run ps -o json
[ $RC -eq 0 ] && [ "$(jq -r --arg id "$RID" '.containers[] | select(.id == $id) | .podSandboxId' "$OUT")" = "$SID" ] \
  && ok "ps -o json: camelCase fields" || fail "ps -o json" "rc=$RC $(head -c 400 "$OUT")"

run inspectp "${SID:0:6}"
ip=$(jq -r .status.network.ip "$OUT" 2>/dev/null)
[ $RC -eq 0 ] && [ "$(jq -r .status.id "$OUT")" = "$SID" ] && [ "$(jq -r .status.state "$OUT")" = SANDBOX_READY ] \
  && [[ $ip =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] && [ "$(jq -r .info.image "$OUT")" != null ] \
  && ok "inspectp by ID prefix: ready, IP $ip, runtime info" || fail "inspectp" "rc=$RC $(head -c 400 "$OUT") $(cat "$ERR")"
run inspect "${RID:0:8}" -o json
[ $RC -eq 0 ] && [ "$(jq -r .status.state "$OUT")" = CONTAINER_RUNNING ] && [ "$(jq -r .status.metadata.name "$OUT")" = talker ] \
  && [ "$(jq -r .status.logPath "$OUT")" = "$LOGDIR/talker/0.log" ] && [ "$(jq -r .info.sandboxID "$OUT")" = "$SID" ] \
  && ok "inspect: running, log path, info" || fail "inspect" "rc=$RC $(head -c 400 "$OUT")"
run inspect "$XID"
[ $RC -eq 0 ] && [ "$(jq -r .status.state "$OUT")" = CONTAINER_EXITED ] && [ "$(jq -r .status.exitCode "$OUT")" = 0 ] \
  && [ "$(jq -r .status.finishedAt "$OUT")" != 0 ] && ok "inspect: exited, exit code 0" || fail "inspect exited" "rc=$RC"
run inspect "$XID" -o table
[ $RC -eq 2 ] && ok "inspect -o table exits 2 (JSON only)" || fail "inspect -o table" "rc=$RC"

# ---- exec -----------------------------------------------------------------------------
run exec "${RID:0:13}" -- sh -c 'echo out; echo err >&2; exit 7'
[ $RC -eq 7 ] && [ "$(cat "$OUT")" = out ] && [ "$(cat "$ERR")" = err ] \
  && ok "exec: stdout, stderr, exit code 7" || fail "exec" "rc=$RC out=$(cat "$OUT") err=$(cat "$ERR")"
run exec "$RID" cat /etc/hostname
[ $RC -eq 0 ] && [ "$(cat "$OUT")" = nanolet-e2e-cmd ] && ok "exec without --" || fail "exec without --" "rc=$RC $(cat "$OUT" "$ERR")"
run exec "$RID" ls -l /
[ $RC -eq 0 ] && grep -q ' bin$' "$OUT" && ok "exec: the command's own options are not ours" || fail "exec ls -l" "rc=$RC $(cat "$ERR")"
run exec -t "$RID" sh
[ $RC -eq 2 ] && grep -q 'not supported' "$ERR" && ok "exec -t exits 2: not supported" || fail "exec -t" "rc=$RC $(cat "$ERR")"
run exec "$RID" /nonexistent
[ $RC -ne 0 ] && [ $RC -ne 2 ] && ok "exec of a missing binary fails (rc=$RC)" || fail "exec missing binary" "rc=$RC"

# ---- logs -------------------------------------------------------------------------------
has_line_b() { grep -q 'stdout F line-b' "$LOGDIR/talker/0.log"; }
wait_for 10 has_line_b || fail "log written" "$(cat "$LOGDIR/talker/0.log" 2>&1 | cut -c1-80)"
grep -q ' stdout P ' "$LOGDIR/talker/0.log" && ok "the log has partial (P) records" || fail "P records"
run logs "${RID:0:10}"
xline=$(printf 'x%.0s' $(seq 40000))
[ $RC -eq 0 ] && [ "$(sed -n 1p "$OUT")" = hello-out ] && [ "$(sed -n 2p "$OUT")" = "$xline" ] \
  && [ "$(sed -n 3,4p "$OUT")" = "$(printf 'line-a\nline-b')" ] && [ "$(wc -l <"$OUT")" -eq 4 ] \
  && [ "$(cat "$ERR")" = hello-err ] \
  && ok "logs: messages only, P records joined, stderr to stderr" || fail "logs" "rc=$RC $(cut -c1-80 "$OUT") err=$(cat "$ERR")"
run logs --tail 2 "$RID"
[ $RC -eq 0 ] && [ "$(cat "$OUT")" = "$(printf 'line-a\nline-b')" ] && [ ! -s "$ERR" ] && ok "logs --tail 2" \
  || fail "logs --tail" "rc=$RC $(cut -c1-80 "$OUT")"
run logs "$XID"
[ $RC -eq 0 ] && [ ! -s "$OUT" ] && ok "logs of a silent container: empty" || fail "logs empty" "rc=$RC"
# -f: what is there (with --tail), then what is written later; it
# keeps running while the container runs, and ends by itself when it has exited.
FOUT=$E2E_TMP/follow.out
"$NANOLET" cri logs -f --tail 1 "$RID" >"$FOUT" 2>"$E2E_TMP/follow.err" &
FPID=$!
has_b() { grep -qx line-b "$FOUT"; }
wait_for 5 has_b || true
# A record appended as the runtime writes them (the container's own stdout is
# not writable from an exec'd process).
printf '%s stdout F followed-line\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)" >>"$LOGDIR/talker/0.log"
has_new() { grep -qx followed-line "$FOUT"; }
wait_for 5 has_new && kill -0 $FPID 2>/dev/null && [ "$(cat "$FOUT")" = "$(printf 'line-b\nfollowed-line')" ] \
  && ok "logs -f --tail 1: the last line, then a line written later, still following" \
  || fail "logs -f" "$(cat "$FOUT" "$E2E_TMP/follow.err")"
kill $FPID 2>/dev/null; wait $FPID 2>/dev/null
t0=$(date +%s%N)
timeout 10 "$NANOLET" cri logs -f "$XID" >"$OUT" 2>"$ERR"; RC=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $RC -eq 0 ] && [ ! -s "$OUT" ] && [ $ms -lt 3000 ] && ok "logs -f of an exited container ends by itself (${ms} ms)" \
  || fail "logs -f exited" "rc=$RC ${ms}ms $(cat "$ERR")"

# ---- bad IDs ------------------------------------------------------------------------------
run inspect nosuchcontainer
[ $RC -eq 1 ] && grep -q '^nanolet cri: inspect: container "nosuchcontainer" not found' "$ERR" \
  && ok "inspect of a bad ID: exit 1 with a clear message" || fail "bad ID" "rc=$RC $(cat "$ERR")"
run inspectp nosuchpod
[ $RC -eq 1 ] && grep -q '^nanolet cri: inspectp: pod sandbox "nosuchpod" not found' "$ERR" && ok "inspectp of a bad ID: exit 1" \
  || fail "inspectp bad ID" "rc=$RC $(cat "$ERR")"
run exec nosuchcontainer true
[ $RC -eq 1 ] && grep -q 'not found' "$ERR" && ok "exec in a bad ID: exit 1" || fail "exec bad ID" "rc=$RC"
run logs nosuchcontainer
[ $RC -eq 1 ] && grep -q '^nanolet cri: logs: container "nosuchcontainer" not found' "$ERR" && ok "logs of a bad ID: exit 1" \
  || fail "logs bad ID" "rc=$RC"

# ---- no leaks ----------------------------------------------------------------------------
if ldd "$NANOLET" 2>/dev/null | grep libasan >/dev/null; then
  ok "sanitizer build: ASan checked every command above for leaks and errors (valgrind cannot run it)"
elif command -v valgrind >/dev/null; then
  for args in "ps -a -o json" "inspect $RID" "logs $RID" "logs -f $XID" "exec $RID sh -c true" "inspect nosuch"; do
    # shellcheck disable=SC2086
    valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect \
      --errors-for-leak-kinds=definite,indirect --error-exitcode=99 "$NANOLET" cri $args >/dev/null 2>"$ERR"
    rc=$?
    [ $rc -ne 99 ] && ! grep -q '==[0-9]*==' "$ERR" && ok "valgrind clean: cri ${args:0:20}" || fail "valgrind: $args" "$(head -30 "$ERR")"
  done
else
  fail "valgrind" "not installed (tools/install-deps.sh --test installs it)"
fi

# ---- empty lists (the fake CRI server holds nothing) ------------------------------------
# qsort of zero items from a NULL array was undefined behaviour (UBSan builds).
FAKE_CRI=${NANOLET_FAKE_CRI:-$(dirname "$NANOLET")/../test/fakes/nanolet-fake-cri}
"$FAKE_CRI" --socket "$E2E_TMP/fake.sock" >/dev/null 2>&1 &
FAKE_PID=$!
wait_for 5 test -S "$E2E_TMP/fake.sock"
for args in pods "ps -a" images; do
  # shellcheck disable=SC2086
  UBSAN_OPTIONS=halt_on_error=1 run -r "unix://$E2E_TMP/fake.sock" $args
  [ $RC -eq 0 ] && [ "$(wc -l <"$OUT")" -eq 1 ] && ! [ -s "$ERR" ] && ok "empty runtime: cri $args prints the header only" \
    || fail "empty cri $args" "rc=$RC $(cat "$ERR")"
done
kill "$FAKE_PID"; wait "$FAKE_PID" 2>/dev/null

# ---- clean up ----------------------------------------------------------------------------
"$FIXTURE" cleanup && ! cri pods -q | grep -x "$SID" >/dev/null && ! cri ps -a -q | grep -x "$RID" >/dev/null \
  && ok "everything removed" || fail "cleanup"
