#!/usr/bin/env bash
# Makes a Debian 12 (bookworm) arm64 root with Python 3.11, venv and pip, from Debian's packages
# only, to run aarch64 programs here under qemu-user (`qemu-aarch64 -L ROOT ROOT/usr/bin/python3`):
# debootstrap's first stage fetches the packages, and each is unpacked with dpkg-deb (the second
# stage would have to run arm64 programs, which needs binfmt_misc; nothing here needs the packages
# configured). About 80 s and 310 MB; a root already made is kept.
#
#   scripts/arm64-root.sh [ROOT]      (default build-dist/arm64-root)
#
# Needs debootstrap and qemu-user (scripts/setup.sh installs both) and Debian's archive
# (WSYNC_DEBIAN_MIRROR, default http://deb.debian.org/debian).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${1:-build-dist/arm64-root}
MIRROR=${WSYNC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [ -x "$ROOT/usr/bin/python3.11" ] && [ -f "$ROOT/.wsync-root-ready" ]; then
  echo "arm64-root: $ROOT is there"
  exit 0
fi
command -v debootstrap >/dev/null && command -v qemu-aarch64 >/dev/null \
  || { echo "arm64-root: FAILED: needs debootstrap and qemu-user (apt-get install debootstrap qemu-user)" >&2; exit 1; }
start=$(date +%s)
rm -rf "$ROOT"
mkdir -p "$(dirname "$ROOT")"
if ! debootstrap --foreign --arch=arm64 --variant=minbase --include=python3.11-venv,python3-pip \
       bookworm "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1; then
  tail -n 20 "$ROOT.log" >&2
  echo "arm64-root: FAILED: debootstrap could not fetch the arm64 packages (log: $ROOT.log)" >&2
  exit 1
fi
for deb in "$ROOT"/var/cache/apt/archives/*.deb; do dpkg-deb -x "$deb" "$ROOT"; done
qemu-aarch64 -L "$ROOT" "$ROOT/usr/bin/python3.11" -c "import platform, sys, venv, ssl; assert platform.machine() == 'aarch64'" \
  || { echo "arm64-root: FAILED: the root's python does not run under qemu-aarch64" >&2; exit 1; }
touch "$ROOT/.wsync-root-ready"
echo "arm64-root: $ROOT made in $(( $(date +%s) - start )) s ($(du -sh "$ROOT" | cut -f1))"
