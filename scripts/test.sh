#!/usr/bin/env bash
# The whole test suite: set up, build, make the Python test venv (.venv-test, with the wsync wheel
# installed), run every test (GPU tests skip themselves without a GPU; the real-vLLM test without
# .venv-vllm, see scripts/vllm-e2e.sh; the fuzz targets, label fuzz, without clang), then run the
# suite once more built with ASan+UBSan in build-asan (tests/sanitizers/run.sh: what it leaves
# out and why is written there; it skips itself when the compiler has no sanitizers;
# WSYNC_TEST_SANITIZE=0 leaves it out). Extra arguments go to the first ctest run only.
# The sanitizer build runs beside the normal suite at nice 19: it takes the CPU the tests leave
# idle (they wait on sockets, timeouts and clusters much of the time) and yields it when they need it.
# Exits non-zero when a build fails or any test fails, in either run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/python-venv.sh
rc=0
san_build=""
# (an interrupted run takes the background build down with it: run.sh, cmake, make, the compilers)
killtree() { local c; for c in $(pgrep -P "$1" || true); do killtree "$c"; done; kill "$1" 2>/dev/null || true; }
trap '[ -z "$san_build" ] || killtree "$san_build"' EXIT
trap 'exit 130' INT TERM
if [ "${WSYNC_TEST_SANITIZE:-1}" != "0" ]; then
  WSYNC_SAN_STEP=build nice -n 19 tests/sanitizers/run.sh address,undefined >sanitizer-build.log 2>&1 &
  san_build=$!
fi
start=$(date +%s)
(cd build && ctest --output-on-failure --no-tests=error -j"${WSYNC_JOBS:-$(nproc)}" --timeout 600 "$@") || rc=$?
first=$rc
echo "test.sh: the suite took $(( $(date +%s) - start )) s"
if [ -n "$san_build" ]; then
  san=0
  wait "$san_build" || san=$?
  san_build=""
  cat sanitizer-build.log
  echo "test.sh: the sanitizer build was done $(( $(date +%s) - start )) s after the suite began"
  [ "$san" -ne 0 ] || tests/sanitizers/run.sh address,undefined || san=$?
  [ "$san" -eq 0 ] || rc=$san
else
  echo "sanitizers: skipped (WSYNC_TEST_SANITIZE=0)"
fi
if [ "$rc" -ne 0 ]; then
  [ "$first" -eq 0 ] || scripts/failure-digest.sh build >&2
  echo "test.sh: FAILED (see above)" >&2
fi
exit "$rc"
