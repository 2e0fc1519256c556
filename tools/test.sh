#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine, as root:
#   dependencies, a private containerd with local images, a Kubernetes control
#   plane (built once per machine, then cached), the build, unit tests, unit tests
#   again under ASan+UBSan, then end-to-end tests on the real containerd and the
#   real control plane.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh --test --cross
# CI builds a fresh clone every time: compiler output is cached across clones
# (meson uses ccache when it is on PATH; paths are taken relative to the clone).
export CCACHE_DIR=${CCACHE_DIR:-/var/cache/nanolet-ccache} CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
endpoint=$(tools/testenv/setup.sh)
. tools/testenv/env.sh
export NANOLET_TEST_CRI_ENDPOINT="$endpoint"

status=0
t0=$SECONDS
# Every lane's meson log must be this run's: an older one left in a build
# directory is no count of this run (see the count at the end).
started=$(date +%s)
# Each stage says when it started: the suite has a time budget (docs/FUZZING.md,
# .ci/run), and this is where its minutes go.
stamp() { echo "== [$(((SECONDS - t0) / 60))m$(((SECONDS - t0) % 60))s] $*"; }
run() { stamp "$@"; "$@" || status=1; }

# Stopped on exit, failures included, unless it was running already. When it
# cannot be built or started the suite fails here, and the e2e tests that need
# it fail again with the reason.
if ! tools/testenv/controlplane.sh status 2>/dev/null; then
  trap 'tools/testenv/controlplane.sh down' EXIT
  trap 'exit 130' INT TERM
fi
if k8s_env=$(tools/testenv/controlplane.sh up); then
  . "$k8s_env"
else
  echo "== the test control plane is not up: tools/testenv/controlplane.sh up failed"
  status=1
fi
# Upstream's e2e suite (e2e_conformance_subset) and node validation suite
# with the sample device plugin (e2e_node_subset): built once per machine and
# cached beside the control plane, before the tests' time limits start.
run tools/testenv/k8s-build.sh suite >/dev/null
run tools/testenv/k8s-build.sh node-suite sample-device-plugin >/dev/null
stamp tools/build.sh --asan
tools/build.sh --asan

run meson test -C build --suite unit --print-errorlogs --logbase unit
run meson test -C build-asan --suite unit --print-errorlogs --logbase unit
# The unit tests again, compiled with musl and linked -static with the
# libraries and cmocka from Debian's sources (docs/INSTALL.md, "Static build
# (musl)"); test/e2e/static.sh runs the static binary itself.
# (No log when the sources or the set-up fail: the count below names the lane.)
if tools/deb-sources.sh 2>/dev/null && { [ -f build-static-test/build.ninja ] ||
  meson setup build-static-test --fatal-meson-warnings --native-file tools/musl.ini \
    -Dself_contained=true >/dev/null; }; then
  run meson test -C build-static-test --suite unit --print-errorlogs --logbase unit
fi
# The arm64 and armhf builds, their unit tests under qemu-user (tools/cross-test.sh
# says which).
run tools/cross-test.sh
# A subset again on containerd 2 (tools/e2e-runtime.sh containerd2 runs them
# all; docs/CRI.md), with its own containerd and control plane, beside the 1.6
# run: so also the long, mostly waiting tests of suite e2e-c2-ci, there only.
stamp "tools/e2e-runtime.sh containerd2 --ci (beside the next)"
NANOLET_MESON_TEST_ARGS=--no-rebuild tools/e2e-runtime.sh containerd2 --ci \
  >build/meson-logs/e2e-containerd2.out 2>&1 &
c2_pid=$!
# Every parser of outside input has a libFuzzer target: build them with clang and
# run each from its seeds for a short while (tools/fuzz.sh 300 for the long run),
# beside the e2e runs, which mostly wait, at the lowest priority: it takes the
# CPU they leave.
stamp "tools/fuzz.sh (beside the next, niced)"
nice -n 19 tools/fuzz.sh "${NANOLET_FUZZ_SECONDS:-5}" >build/meson-logs/fuzz.out 2>&1 &
fuzz_pid=$!
run meson test -C build --suite e2e --no-suite e2e-c2-ci --no-suite e2e-alone --print-errorlogs \
  --num-processes 1 --logbase e2e
stamp "(waiting for containerd 2)"
wait "$c2_pid" || status=1
cat build/meson-logs/e2e-containerd2.out
# what must not run beside another test (test/e2e/meson.build, suite e2e-alone)
run meson test -C build --suite e2e-alone --print-errorlogs --num-processes 1 --logbase e2e-alone
stamp "(waiting for tools/fuzz.sh)"
wait "$fuzz_pid" || status=1
fuzz_out=$(cat build/meson-logs/fuzz.out)
echo "$fuzz_out"
fuzz_passed=$(grep -c '^fuzz: .* clean' <<<"$fuzz_out" || true)
fuzz_failed=$(grep -c '^fuzz: .* FAILED' <<<"$fuzz_out" || true)

# The count: each lane's JSON log (meson's --logbase), and the fuzz targets.
# A lane that produced no log this run (it could not start: the containerd 2
# instance, a cross build) counts as one failure, named below; so does a fuzz
# run that reported no target (its build failed). The cross lanes are the ones
# tools/cross-test.sh runs (both, by default); the containerd 2 lane is
# tools/e2e-runtime.sh's `meson test -C build --logbase e2e-containerd2`.
lanes=(build/meson-logs/unit.json build-asan/meson-logs/unit.json build-static-test/meson-logs/unit.json
  build-aarch64/meson-logs/unit.json build-arm/meson-logs/unit.json
  build/meson-logs/e2e.json build/meson-logs/e2e-containerd2.json build/meson-logs/e2e-alone.json)
passed=0 failed=0 missing=() failed_tests=()
for f in "${lanes[@]}"; do
  if [ ! -f "$f" ] || [ "$(stat -c %Y "$f")" -lt "$started" ]; then
    missing+=("$f")
    continue
  fi
  passed=$((passed + $(grep -c '"result": "OK"' "$f" || true)))
  # A skipped test is a failure (STYLE.md): the suite must not look green by skipping.
  failed=$((failed + $(grep -cE '"result": "(FAIL|TIMEOUT|ERROR|SKIP|UNEXPECTEDPASS)"' "$f" || true)))
  # Named again here, after the long logs above, where a reader of the run's
  # last lines finds them.
  failed_tests+=("$(python3 -c 'import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t["result"] != "OK":
        print("== FAILED: %s (%s): %s" % (t["name"], sys.argv[1], t["result"]))' "$f")")
done
[ $((fuzz_passed + fuzz_failed)) -gt 0 ] || missing+=("tools/fuzz.sh (no target ran)")
passed=$((passed + fuzz_passed))
failed=$((failed + fuzz_failed + ${#missing[@]}))
for m in "${missing[@]}"; do echo "== FAILED: no log from this run: $m"; done
for t in "${failed_tests[@]}"; do [ -z "$t" ] || echo "$t"; done
grep "^fuzz: .* FAILED" <<<"$fuzz_out" | sed "s/^/== /" || true
stamp done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || status=1
exit $status
