#!/usr/bin/env bash
# Runs store_interop.py with the Python in WSYNC_TORCH_PYTHON (else python3). Without torch the
# test is skipped (exit 77), not failed: CI has no torch; machines with PyTorch run it.
set -u
py=${WSYNC_TORCH_PYTHON:-python3}
if ! "$py" -c "import torch.distributed" >/dev/null 2>&1; then
  echo "SKIPPED: '$py' has no torch (set WSYNC_TORCH_PYTHON to a Python with PyTorch)"
  exit 77
fi
# $2: another script of this folder to run the same way (nccl_store_keys.py).
exec "$py" "${2:-$(dirname "$0")/store_interop.py}" "$1"
