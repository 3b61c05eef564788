#!/usr/bin/env bash
# Creates (or refreshes) the venv the Python tests run in, .venv-test/ (or $WSYNC_TEST_VENV):
# pytest, numpy, torch (PyPI's build; WSYNC_TEST_TORCH=0 leaves it out and the torch tests skip),
# and wsync itself installed the way a user installs it: `pip install .`, a wheel built by
# scikit-build-core that carries libwsync and its plugins.
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
if ! "${PIP[@]}" --force-reinstall --no-deps . >python-wheel.log 2>&1; then
  tail -n 40 python-wheel.log >&2
  echo "python-venv: FAILED: the wsync wheel did not build or install (full log: python-wheel.log)" >&2
  exit 1
fi
"$VENV/bin/python" -c "import wsync; print('python-venv: wsync', wsync.__version__, 'from', wsync.library_path)"
echo "python-venv: wheel built and installed in $(( $(date +%s) - t0 )) s; venv ready in $(( $(date +%s) - start )) s"
