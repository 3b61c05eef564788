#!/usr/bin/env bash
# python.wheel_portable: the portable x86-64 wheel, built exactly as docs/PYTHON.md says
# (scripts/wheel.sh). First what it is: tagged manylinux_2_28; no file in it needs a glibc symbol
# newer than 2.28 (objdump -T of every shared object, not only auditwheel); `auditwheel show` finds
# its symbols within manylinux_2_28 and no outside library but UCX's (PyPI's libucx-cu12, its
# dependency) and NCCL's (the host's). Then it is installed with pip (and libucx-cu12, from PyPI's
# wheel that scripts/wheel.sh downloaded; no index) into a fresh venv in a mount namespace where this
# machine's UCX, libcurl, cJSON and xxHash are hidden (each library file has /dev/null mounted over
# it, UCX's module folder an empty tmpfs; checked: loading them fails there). There it imports
# wsync, prints wsync.info(), runs `python -m wsync info` and `doctor` (which must show UCX's CUDA
# module found), and moves a model between two processes over UCX, every tensor compared by
# SHA-256. Root only (mount namespaces): exit 77 (skipped) otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
  echo "SKIPPED: needs root and mount namespaces (unshare -m)"
  exit 77
fi
work=$(mktemp -d /tmp/wsync-wheel-XXXXXX)
trap 'rm -rf "$work"' EXIT
scripts/wheel.sh  # exactly as docs/PYTHON.md says: into dist/ (ignored by git)
whl=$(ls "$PWD"/dist/wsync-*-py3-none-manylinux_2_28_x86_64.whl)
scripts/wheel-check.sh "$whl" x86_64
exec unshare -m --propagation private bash -s "$whl" "$work" "$PWD/tests/python/wheel_move.py" \
  "$PWD/build-dist/x86_64/download" <<'INSIDE'
set -euo pipefail
whl=$1 work=$2 move=$3 wheels=$4
libdir=/usr/lib/x86_64-linux-gnu
hidden=0
for f in "$libdir"/lib{ucp,uct,ucs,ucm,curl,cjson,xxhash}*.so*; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  mount --bind /dev/null "$f"
  hidden=$((hidden + 1))
done
[ -d "$libdir/ucx" ] && mount -t tmpfs none "$libdir/ucx"
echo "wheel_portable: $hidden library files hidden in $libdir (and its ucx/ module folder)"
python3 - <<'PY'
import ctypes
for name in ("libucp.so.0", "libucs.so.0", "libcurl.so.4", "libcjson.so.1", "libxxhash.so.0"):
    try:
        ctypes.CDLL(name)
    except OSError as e:
        print("hidden: %s (%s)" % (name, str(e).split(":")[-1].strip()))
    else:
        raise SystemExit("wheel_portable: FAILED: %s still loads: the libraries are not hidden" % name)
PY
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check --no-index --find-links "$wheels" "$whl"
cd "$work"  # not the checkout: the installed package, nothing else
py="$work/venv/bin/python"
"$py" - <<'PY'
import json, wsync
print("wsync.info():", json.dumps({k: v for k, v in wsync.info().items() if k != "plugins"}))
assert "/venv/" in str(wsync.library_path), wsync.library_path
PY
"$py" -m wsync info
"$py" -m wsync doctor | tee "$work/doctor.txt"
grep -q "UCX CUDA module: found" "$work/doctor.txt" \
  || { echo "wheel_portable: FAILED: doctor does not show UCX's CUDA module found" >&2; exit 1; }
"$py" "$move" "$work"
echo "wheel_portable: OK"
INSIDE
