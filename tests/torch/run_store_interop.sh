#!/usr/bin/env bash
# Runs store_interop.py with the Python in WSYNC_TORCH_PYTHON, else the Python test venv's
# (.venv-test, which scripts/test.sh fills with torch), else python3. Without torch the test is
# skipped (exit 77), not failed (WSYNC_TEST_TORCH=0 leaves torch out of the venv).
set -u
venv_py="$(dirname "$0")/../../.venv-test/bin/python"
if [ -z "${WSYNC_TORCH_PYTHON:-}" ] && [ -x "$venv_py" ]; then py=$venv_py; else py=${WSYNC_TORCH_PYTHON:-python3}; fi
if ! "$py" -c "import torch.distributed" >/dev/null 2>&1; then
  echo "SKIPPED: '$py' has no torch (set WSYNC_TORCH_PYTHON to a Python with PyTorch)"
  exit 77
fi
# $2: another script of this folder to run the same way (nccl_store_keys.py).
exec "$py" "${2:-$(dirname "$0")/store_interop.py}" "$1"
