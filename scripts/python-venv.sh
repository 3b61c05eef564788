#!/usr/bin/env bash
# Creates (or refreshes) the venv the Python tests run in, .venv-test/ (or $WSYNC_TEST_VENV):
# pytest, numpy, torch (PyPI's build; WSYNC_TEST_TORCH=0 leaves it out and the torch tests skip),
# and wsync itself installed the way a pip user gets it: the portable wheel (scripts/wheel.sh,
# manylinux_2_28, libwsync and its plugins built by zig) with its dependency libucx-cu12 (PyPI's
# wheel that scripts/wheel.sh downloaded). WSYNC_TEST_WHEEL=source installs `pip install .`
# instead (the source build against this machine's UCX, as an InfiniBand cluster would).
# Fails when the wheel does not build or install.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${WSYNC_TEST_VENV:-$PWD/.venv-test}
TORCH_SPEC=${WSYNC_TEST_TORCH_SPEC:-torch==2.13.0}
PY=${PYTHON:-python3}
start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
if ! "$VENV/bin/python" -c "import pytest, numpy" >/dev/null 2>&1; then
  "${PIP[@]}" pytest numpy
fi
if [ "${WSYNC_TEST_TORCH:-1}" != "0" ] && ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
  t0=$(date +%s)
  "${PIP[@]}" "$TORCH_SPEC"
  echo "python-venv: installed $TORCH_SPEC in $(( $(date +%s) - t0 )) s ($(du -sh "$VENV" | cut -f1) venv)"
fi
t0=$(date +%s)
if [ "${WSYNC_TEST_WHEEL:-portable}" = source ]; then
  install=(--force-reinstall --no-deps .)
else
  if ! scripts/wheel.sh >python-wheel.log 2>&1; then
    tail -n 40 python-wheel.log >&2
    echo "python-venv: FAILED: scripts/wheel.sh did not build the portable wheel (full log: python-wheel.log)" >&2
    exit 1
  fi
  "${PIP[@]}" --no-index --find-links "build-dist/$(uname -m)/download" libucx-cu12
  install=(--force-reinstall --no-deps "$(ls dist/wsync-*-py3-none-manylinux_2_28_"$(uname -m)".whl)")
fi
if ! "${PIP[@]}" "${install[@]}" >>python-wheel.log 2>&1; then
  tail -n 40 python-wheel.log >&2
  echo "python-venv: FAILED: the wsync wheel did not build or install (full log: python-wheel.log)" >&2
  exit 1
fi
"$VENV/bin/python" -c "import wsync; print('python-venv: wsync', wsync.__version__, 'from', wsync.library_path)"
echo "python-venv: wheel built and installed in $(( $(date +%s) - t0 )) s; venv ready in $(( $(date +%s) - start )) s"
