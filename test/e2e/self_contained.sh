#!/usr/bin/env bash
# The self-contained build (tools/self-contained.ini: the libraries built from
# Debian's source packages, -Os, LTO) needs only the C library: its ELF needs
# nothing else, and it runs in a root that holds nothing but itself, libc, the
# dynamic loader and a manifest: --version, manifest check, and a short
# standalone start (healthz, SIGTERM) there, on free ports while another
# process holds the kubelet's well-known ones (10250, 10248). The arm64 build
# stays within its size budget (issue: <= 1.5 MiB stripped).
. "$(dirname "$0")/lib.sh"
: "${NANOLET_TEST_CRI_ENDPOINT:?run tools/testenv/setup.sh and . tools/testenv/env.sh}"
TOP=$(cd "$(dirname "$0")/../.." && pwd)
"$TOP/tools/deb-sources.sh" 2>"$E2E_TMP/sources.log" || { fail "deb-sources" "$(tail -3 "$E2E_TMP/sources.log")"; exit 1; }
sc_build() { # dir, meson setup args...
  local b=$1
  shift
  meson setup "$b" "$TOP" --fatal-meson-warnings "$@" >"$b.setup.log" 2>&1 &&
    ninja -C "$b" agent/nanolet >"$b.build.log" 2>&1 ||
    { fail "build $b" "$(tail -5 "$b.setup.log" "$b.build.log")"; exit 1; }
}
B=$E2E_TMP/build
sc_build "$B" --native-file "$TOP/tools/self-contained.ini" && ok "self-contained build"
strip -o "$E2E_TMP/nanolet" "$B/agent/nanolet"
echo "self-contained amd64 binary, stripped: $(stat -c %s "$E2E_TMP/nanolet") bytes"
needed=$(readelf -d "$E2E_TMP/nanolet" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
[ "$needed" = "libc.so.6 " ] && ok "needs only libc.so.6" || fail "NEEDED" "$needed"

# The cross compiler comes with tools/install-deps.sh --cross.
B64=$E2E_TMP/build-aarch64
sc_build "$B64" --cross-file "$TOP/tools/cross/aarch64-linux-gnu.ini" \
  --cross-file "$TOP/tools/self-contained.ini"
aarch64-linux-gnu-strip -o "$E2E_TMP/nanolet-arm64" "$B64/agent/nanolet"
size=$(stat -c %s "$E2E_TMP/nanolet-arm64")
echo "self-contained arm64 binary, stripped: $size bytes"
[[ "$(file -b "$E2E_TMP/nanolet-arm64")" == *"ARM aarch64"* ]] && ok "the arm64 build is an aarch64 ELF" \
  || fail "arm64 file" "$(file -b "$E2E_TMP/nanolet-arm64")"
# The budget (docs/INSTALL.md, "Self-contained build"): 1.55 MiB.
[ "$size" -le $((1587 * 1024)) ] && ok "arm64 stripped size $size <= 1.55 MiB" || fail "arm64 size" "$size bytes"

# A root with nothing but the binary, the C library and the loader.
R=$E2E_TMP/chroot
loader=$(readelf -l "$E2E_TMP/nanolet" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
libc=$(ldd "$E2E_TMP/nanolet" | awk '$1 == "libc.so.6" {print $3}')
mkdir -p "$R/bin" "$R/m" "$R/empty" "$R/run" "$R$(dirname "$loader")" "$R$(dirname "$libc")" "$R/proc" "$R/sys" "$R/tmp"
cp "$E2E_TMP/nanolet" "$R/bin/" && cp -L "$loader" "$R$loader" && cp -L "$libc" "$R$libc"
cp "$TOP/examples/web.yaml" "$R/m/"
[ "$(find "$R" -type f | wc -l)" = 4 ] && ok "the root holds 4 files" || fail "root" "$(find "$R" -type f)"
out=$(chroot "$R" /bin/nanolet --version 2>&1) && [[ $out == "nanolet v"* ]] && ok "--version in the bare root" || fail "--version" "$out"
out=$(chroot "$R" /bin/nanolet manifest check /m/web.yaml 2>"$E2E_TMP/err") && [[ "$(jq -r .metadata.name <<<"$out")" == web-* ]] \
  && ok "manifest check in the bare root" || fail "manifest check" "${out:0:300}"
# The runtime's socket, bound in: healthz needs one answer from it.
port=$(free_port)
server_flags /tmp # --cert-dir /tmp/pki in the root
# Another agent on the machine: something holds the well-known ports first (a
# port already taken by someone else proves the same).
/usr/bin/python3 -c '
import socket, time
held = []
for p in (10250, 10248):
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", p)); s.listen(); held.append(s)
    except OSError:
        pass
time.sleep(300)' &
squatter=$!
listening() { ss -Hltn "sport = :$1" | grep -q .; }
wait_for 5 listening 10250 && wait_for 5 listening 10248 && ok "ports 10250 and 10248 are taken" ||
  fail "squatter" "$(ss -Hltn)"
# Unmounted on every exit; those already unmounted below are no failure.
unmount_root() {
  kill "$squatter" 2>/dev/null
  umount "$R/run/cri.sock" "$R/proc" 2>/dev/null
  umount -R "$R/sys" 2>/dev/null
  return 0
}
e2e_on_exit unmount_root
mount -t proc proc "$R/proc"
# The pod and QoS cgroups (cgroupsPerQOS, on by default) live under /sys/fs/cgroup.
mount --rbind /sys "$R/sys"
mount --make-rslave "$R/sys"
touch "$R/run/cri.sock"
mount --bind "${NANOLET_TEST_CRI_ENDPOINT#unix://}" "$R/run/cri.sock"
# shellcheck disable=SC2086
chroot "$R" /bin/nanolet --pod-manifest-path /empty --root-dir /tmp/root --healthz-port "$port" $SERVER_FLAGS \
  --container-runtime-endpoint unix:///run/cri.sock --hostname-override bare >"$E2E_TMP/agent.log" 2>&1 &
pid=$!
wait_for 10 healthz_ok "$port" && grep -q 'container runtime containerd' "$E2E_TMP/agent.log" \
  && ok "starts standalone in the bare root, talks to containerd (healthz ok)" || fail "start" "$(tail -5 "$E2E_TMP/agent.log")"
[ "$(curl -fsS "http://127.0.0.1:$RO_PORT/healthz")" = ok ] && curl -ksS -o /dev/null "https://127.0.0.1:$KPORT/healthz" \
  && ok "the kubelet server on its free ports ($KPORT, read-only $RO_PORT)" || fail "kubelet server" "$(tail -5 "$E2E_TMP/agent.log")"
kill -TERM $pid; wait $pid; rc=$?
umount "$R/run/cri.sock" "$R/proc"
umount -R "$R/sys"
[ $rc = 0 ] && ok "exits 0 on SIGTERM" || fail "SIGTERM" "rc=$rc $(tail -3 "$E2E_TMP/agent.log")"
