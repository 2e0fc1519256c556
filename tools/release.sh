#!/usr/bin/env bash
# The release tarball of the static build (docs/INSTALL.md, "Static build"):
#   tools/release.sh [amd64|arm64|armhf]
# builds build-static[-ARCH] (tools/build.sh --static ARCH) and the manual, and
# packs build-static[-ARCH]/nanolet-VERSION-linux-ARCH.tar.gz:
#   nanolet-VERSION-linux-ARCH/
#     README                         what goes where, for each init system
#     usr/bin/nanolet                the static binary, stripped
#     usr/share/man/man8/nanolet.8
#     etc/nanolet/config.yaml        the example configuration
#     etc/default/nanolet            the service's settings (sysvinit, runit, systemd, procd)
#     etc/kubernetes/manifests/      the static pod directory (empty)
#     init/{sysv,openrc,procd,runit,systemd,logrotate}/...   the service files
# Paths inside the files are the install build's: /usr/bin, /etc, /var/log, /run.
# The archive is reproducible: owner root, names sorted, times of the commit.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-amd64}
case $arch in
amd64) dir=build-static strip=strip ;;
arm64) dir=build-static-arm64 strip=aarch64-linux-gnu-strip ;;
armhf) dir=build-static-armhf strip=arm-linux-gnueabihf-strip ;;
*) echo "usage: $0 [amd64|arm64|armhf]" >&2; exit 2 ;;
esac
tools/build.sh --static "$arch" >&2
ninja -C "$dir" dist/nanolet.8 >&2
version=$(sed -n "s/^  version: '\(.*\)',$/\1/p" meson.build)
name=nanolet-$version-linux-$arch
stage=$dir/release/$name
rm -rf "$dir/release" && mkdir -p "$stage"
cd "$stage"
d=../../dist
mkdir -p usr/bin usr/share/man/man8 etc/nanolet etc/default etc/kubernetes/manifests \
  init/sysv init/openrc init/procd init/runit/nanolet/log init/runit/nanolet/control init/systemd init/logrotate
"$strip" -o usr/bin/nanolet ../../agent/nanolet
cp $d/nanolet.8 usr/share/man/man8/
cp $d/config.yaml etc/nanolet/
cp $d/nanolet.default etc/default/nanolet
cp $d/sysv-nanolet init/sysv/nanolet
cp $d/openrc-nanolet init/openrc/nanolet
cp $d/openrc-nanolet.confd init/openrc/nanolet.confd
cp $d/procd-nanolet init/procd/nanolet
cp $d/runit-run init/runit/nanolet/run
cp $d/runit-finish init/runit/nanolet/finish
cp $d/runit-log-run init/runit/nanolet/log/run
cp $d/runit-control-t init/runit/nanolet/control/t
cp $d/systemd-nanolet.service init/systemd/nanolet.service
cp $d/logrotate init/logrotate/nanolet
chmod 755 usr/bin/nanolet init/sysv/nanolet init/openrc/nanolet init/procd/nanolet \
  init/runit/nanolet/run init/runit/nanolet/finish init/runit/nanolet/log/run init/runit/nanolet/control/t
chmod 644 usr/share/man/man8/nanolet.8 etc/nanolet/config.yaml etc/default/nanolet \
  init/openrc/nanolet.confd init/systemd/nanolet.service init/logrotate/nanolet
cat >README <<EOR
nanolet $version for linux/$arch: one static binary (musl, no shared
libraries), its example configuration, its manual and its service files.

Install, as root (keeps an existing /etc/nanolet/config.yaml):
  cp usr/bin/nanolet /usr/bin/ && cp usr/share/man/man8/nanolet.8 /usr/share/man/man8/
  mkdir -p /etc/nanolet /etc/kubernetes/manifests
  cp -n etc/nanolet/config.yaml /etc/nanolet/

Then the service of the machine's init system:
  OpenWrt (procd):  cp init/procd/nanolet /etc/init.d/ && cp -n etc/default/nanolet /etc/default/
                    /etc/init.d/nanolet enable && /etc/init.d/nanolet start
                    (log: logread -e nanolet)
  Alpine (OpenRC):  cp init/openrc/nanolet /etc/init.d/ && cp -n init/openrc/nanolet.confd /etc/conf.d/nanolet
                    cp init/logrotate/nanolet /etc/logrotate.d/
                    rc-update add nanolet default && rc-service nanolet start
  sysvinit:         cp init/sysv/nanolet /etc/init.d/ && cp -n etc/default/nanolet /etc/default/
                    cp init/logrotate/nanolet /etc/logrotate.d/ && update-rc.d nanolet defaults
  runit:            cp -r init/runit/nanolet /etc/sv/ && cp -n etc/default/nanolet /etc/default/
                    ln -s /etc/sv/nanolet /etc/service/
  systemd:          cp init/systemd/nanolet.service /usr/lib/systemd/system/
                    cp -n etc/default/nanolet /etc/default/ && systemctl enable --now nanolet

nanolet needs a CRI runtime (containerd) at the configuration's
containerRuntimeEndpoint. The manual: man nanolet; the project's
docs/INSTALL.md says more.
EOR
cd ..
mtime=$(git log -1 --format=%ct 2>/dev/null || date +%s)
tar --owner=0 --group=0 --numeric-owner --sort=name --mtime="@$mtime" -czf "../$name.tar.gz" "$name"
echo "$(cd ../.. && pwd)/$dir/$name.tar.gz"
