#!/usr/bin/env bash
# The whole test suite: set up, build, make the Python test venv (.venv-test, with the wsync wheel
# installed), run every test (GPU tests skip themselves without a GPU; the real-vLLM test without
# .venv-vllm, see scripts/vllm-e2e.sh).
# Exits non-zero when the build fails (no test runs then) or any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/python-venv.sh
cd build
ctest --output-on-failure --no-tests=error -j"${WSYNC_JOBS:-$(nproc)}" --timeout 600 "$@"
