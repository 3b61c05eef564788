#!/usr/bin/env bash
# The whole test suite: set up, build, make the Python test venv (.venv-test, with the wsync wheel
# installed), run every test (GPU tests skip themselves without a GPU; the real-vLLM test without
# .venv-vllm, see scripts/vllm-e2e.sh; the fuzz targets, label fuzz, without clang; those labelled
# `long` are left out, see below), then run the
# suite once more built with ASan+UBSan in build-asan (tests/sanitizers/run.sh: what it leaves
# out and why is written there; it skips itself when the compiler has no sanitizers;
# WSYNC_TEST_SANITIZE=0 leaves it out). Extra arguments go to the first ctest run only.
# Tests labelled `long` (the aarch64 wheel under qemu: about 10 minutes of one core) run by hand:
# `ctest -L long` in build/, or WSYNC_TEST_LONG=1 scripts/test.sh.
# Order: the packages (scripts/setup.sh's first step); then, beside the build of build/, the Python
# venv (its torch download waits on the network, its wheel build takes a core) and the sanitizer
# build at nice 19 (it takes the CPU the others leave idle, and keeps doing so beside the suite,
# whose tests wait on sockets, timeouts and clusters much of the time).
# Exits non-zero when a build fails or any test fails, in either run.
set -euo pipefail
cd "$(dirname "$0")/.."
WSYNC_SETUP_STEP=packages scripts/setup.sh
san_build=""
venv=""
# (an interrupted run takes the background jobs down with it: run.sh, cmake, make, the compilers, pip)
killtree() { local c; for c in $(pgrep -P "$1" || true); do killtree "$c"; done; kill "$1" 2>/dev/null || true; }
trap '[ -z "$san_build" ] || killtree "$san_build"; [ -z "$venv" ] || killtree "$venv"' EXIT
trap 'exit 130' INT TERM
if [ "${WSYNC_TEST_SANITIZE:-1}" != "0" ]; then
  WSYNC_SAN_STEP=build nice -n 19 tests/sanitizers/run.sh address,undefined >sanitizer-build.log 2>&1 &
  san_build=$!
fi
scripts/python-venv.sh >python-venv.log 2>&1 &
venv=$!
setup=0
scripts/setup.sh || setup=$?
if [ "$setup" -ne 0 ]; then  # (its errors are above; the venv is not waited for)
  echo "test.sh: FAILED: scripts/setup.sh could not build (see above)" >&2
  exit "$setup"
fi
venv_rc=0
wait "$venv" || venv_rc=$?
venv=""
if [ "$venv_rc" -ne 0 ]; then
  cat python-venv.log >&2
  echo "test.sh: FAILED: scripts/python-venv.sh (its log above, also in python-venv.log)" >&2
  exit "$venv_rc"
fi
cat python-venv.log
long=(-LE '^long$')
[ "${WSYNC_TEST_LONG:-0}" != 1 ] || long=()
rc=0
start=$(date +%s)
(cd build && ctest --output-on-failure --no-tests=error -j"${WSYNC_JOBS:-$(nproc)}" --timeout 600 "${long[@]}" "$@") || rc=$?
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
