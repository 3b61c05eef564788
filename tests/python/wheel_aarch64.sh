#!/usr/bin/env bash
# python.wheel_aarch64: the portable aarch64 wheel, built here as docs/PYTHON.md says
# (scripts/wheel.sh --arch aarch64, zig as the cross compiler), checked as the x86-64 one is
# (scripts/wheel-check.sh: tag, no glibc symbol newer than 2.28, auditwheel show), then installed
# with the pip of an arm64 Python 3.11 running under qemu-user in a Debian arm64 root
# (scripts/arm64-root.sh, made once and kept in build-dist/arm64-root), with PyPI's aarch64
# libucx-cu12 (no index). There: `import wsync`, `python -m wsync info` (every plugin of the wheel
# loads), and a model moved between two arm64 processes over loopback, every tensor compared by
# SHA-256, over wsync's tcp transport and over UCX.
# Skipped (exit 77) without qemu-aarch64, debootstrap or Debian's arm64 packages (scripts/setup.sh
# provides them).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v qemu-aarch64 >/dev/null || ! command -v debootstrap >/dev/null ||
   ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "SKIPPED: needs qemu-user, debootstrap and dpkg's arm64 architecture (scripts/setup.sh)"
  exit 77
fi
scripts/wheel.sh --arch aarch64  # exactly as docs/PYTHON.md says: into dist/
whl=$(ls "$PWD"/dist/wsync-*-py3-none-manylinux_2_28_aarch64.whl)
scripts/wheel-check.sh "$whl" aarch64
scripts/arm64-root.sh
root=$PWD/build-dist/arm64-root
work=$(mktemp -d /tmp/wsync-aarch64-XXXXXX)
trap 'rm -rf "$work"' EXIT
arm=(qemu-aarch64 -L "$root")
py=("${arm[@]}" "$root/usr/bin/python3.11")
t0=$(date +%s)
# Debian's pip in the root; --target: the root's python gets the wheel and its dependency on its path.
"${py[@]}" -m pip install -q --disable-pip-version-check --no-index --break-system-packages \
  --find-links "$PWD/build-dist/aarch64/download" --target "$work/site" "$whl"
echo "wheel_aarch64: installed into an arm64 Python under qemu in $(( $(date +%s) - t0 )) s"
cd "$work"  # not the checkout: the installed package, nothing else
export PYTHONPATH=$work/site
"${py[@]}" - <<'PY'
import platform, wsync
assert platform.machine() == "aarch64", platform.machine()
assert "/site/wsync/" in str(wsync.library_path), wsync.library_path
print("wheel_aarch64: import wsync on %s: %s" % (platform.machine(), wsync.library_path))
bad = [p for p in wsync.info()["plugins"] if p["status"] != "WSYNC_OK"]
assert not bad, bad
PY
"${py[@]}" -m wsync info
export WSYNC_TEST_LAUNCHER="qemu-aarch64 -L $root"
for transport in tcp ucx; do
  mkdir -p "$work/$transport"
  WSYNC_TEST_TRANSPORT=$transport timeout 300 "${py[@]}" "$OLDPWD/tests/python/wheel_move.py" "$work/$transport"
done
echo "wheel_aarch64: OK"
