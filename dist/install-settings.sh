#!/bin/sh
# install-settings.sh SRC DEST: installs a file of settings unless DEST exists,
# so that an edited one survives a reinstall (and an uninstall). meson sets DESTDIR.
set -eu
dest=${DESTDIR:-}$2
[ -e "$dest" ] && { echo "Keeping $dest"; exit 0; }
mkdir -p "$(dirname "$dest")"
cp "$1" "$dest"
chmod 644 "$dest"
echo "Installing $1 to $dest"
