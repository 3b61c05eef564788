#!/usr/bin/env bash
# The whole test suite: set up, build, run every test (GPU tests skip themselves without a GPU).
# Exits non-zero when the build fails (no test runs then) or any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure --no-tests=error -j"${WSYNC_JOBS:-$(nproc)}" --timeout 600 "$@"
