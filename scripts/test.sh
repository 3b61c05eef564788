#!/usr/bin/env bash
# The whole test suite: set up, build, run every test (GPU tests skip themselves without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure -j"${WSYNC_JOBS:-$(nproc)}" --timeout 600 "$@"
