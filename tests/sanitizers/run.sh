#!/usr/bin/env bash
# The test suite once more, built with sanitizers (cmake/Sanitizers.cmake), in a build dir of its
# own. scripts/test.sh runs the address,undefined flavour after the normal suite; by hand:
#   tests/sanitizers/run.sh                      # ASan+UBSan into build-asan, the suite minus exclusions
#   tests/sanitizers/run.sh thread               # TSan into build-tsan, the threaded tests
#   tests/sanitizers/run.sh address,undefined -R unit   # extra arguments go to ctest
# Exits 0 when every test passed (or the compiler has no such sanitizer: then it says so and
# skips), non-zero when the build or any test failed. Prints what it cost.
#
# Left out of the ASan+UBSan run, and why (docs/TESTING-SANITIZERS.md):
#   python, torch, vllm   an un-instrumented interpreter dlopens libwsync: the ASan runtime must be
#                         the first library of the process, which it is not there
#   rust, go              their toolchains build and link their own binaries against libwsync
#                         (the same problem, and no sanitizer flags of ours reach them)
#   install               cmake --install, then builds samples against the installed SDK with
#                         plain flags: tests the layout, not our code's memory
#   fuzz                  the libFuzzer targets run in their own clang build (tests/fuzz)
#   gpu                   no GPU in CI; where there is one, CUDA's driver is not ASan-clean
#   cluster.* but the fault rows  the soaks, joiners, rejoins, smokes and benches in network
#                         namespaces: run one cluster at a time, the cluster tests were 335 of the
#                         pass's 714 test-seconds and its critical path. The fault rows stay (kill,
#                         hang, partition of a star's, a relay's, a sender's and an elastic group's
#                         peer, and cluster.outsider: issue 37's evidence under ASan); the normal
#                         pass runs them all; by hand under ASan: WSYNC_SAN_CLUSTER=1
#                         tests/sanitizers/run.sh address,undefined -L cluster
#   conformance.example_out_of_tree  builds a plugin from the installed SDK (as install)
set -euo pipefail
cd "$(dirname "$0")/../.."
SAN=${1:-address,undefined}
shift || true
JOBS=${WSYNC_JOBS:-$(nproc)}
case "$SAN" in
  address,undefined) dir=build-asan
    opt=-O0  # (see the build below)
    exclude_labels='^(python|torch|vllm|rust|go|install|fuzz|gpu)$'
    exclude_tests='^(conformance\.example_out_of_tree|cluster\.(.*smoke.*|.*soak.*|joiner_.*|elastic_rejoin|elastic_relay_.*|outsider_catchup|trainer_restart.*|tcp_bench_smoke))$'
    [ "${WSYNC_SAN_CLUSTER:-0}" != 1 ] || exclude_tests='^conformance\.example_out_of_tree$'
    include=() ;;
  thread) dir=build-tsan
    opt=-O1
    exclude_labels='^(python|torch|vllm|rust|go|install|fuzz|gpu)$'
    # rogue_sender and membership fork their receivers after threads exist (membership: joiners
    # and rejoiners forked while the sender's pipeline runs), which TSan cannot follow ("starting
    # new threads after multi-threaded fork is not supported"; with die_after_fork=0 the children
    # crash). rogue_sender has no threads of its own.
    exclude_tests='^(conformance\.example_out_of_tree|integration\.(rogue_sender|membership))$'
    # The parts with threads: the store server, async send (a pipeline thread), the receiver and
    # the HTTP engines (a worker per server), end to end.
    include=(-R '^(unit\.test_store.*|unit\.test_http_client|unit\.test_transport_ucx|abi\.(group|receiver)|integration\..*)$') ;;
  *) echo "usage: $0 [address,undefined|thread] [ctest args...]" >&2; exit 2 ;;
esac

CXX=${CXX:-c++}
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
if ! echo 'int main() { return 0; }' | "$CXX" -x c++ -fsanitize="$SAN" - -o "$probe/a.out" >/dev/null 2>&1 ||
   ! "$probe/a.out"; then
  echo "sanitizers: skipped: $CXX cannot build and run with -fsanitize=$SAN (Debian: libasan8 libubsan1 libtsan2)"
  exit 0
fi

start=$(date +%s)
# ASan+UBSan at -O0: its build is the critical path of scripts/test.sh (it runs beside the normal
# suite at nice 19), and -O0 halves it (its 291 compiles: 726 CPU-s against 1475 at -O1) while the
# pass took about as long (314 s against 293 s). TSan at -O1: its runtime costs much more without
# optimisation. -g1: line tables only (a report's frames
# keep file:line; no variables), which halves the compile time of -g.
if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWSYNC_SANITIZE="$SAN" -DWSYNC_FUZZ=OFF \
       "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$opt -g1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$opt -g1 -DNDEBUG" \
       >"$dir-configure.log" 2>&1; then
  cat "$dir-configure.log" >&2
  echo "sanitizers: FAILED: cmake could not configure $dir (log above, also in $dir-configure.log)" >&2
  exit 1
fi
if ! cmake --build "$dir" -j"$JOBS" >"$dir.log" 2>&1; then
  grep -E -B2 -A6 "error|Error" "$dir.log" | tail -n 80 >&2
  echo "sanitizers: FAILED: the $SAN build failed (full log: $dir.log)" >&2
  exit 1
fi
built=$(date +%s)
echo "sanitizers: $SAN build in $dir: $((built - start)) s"
# WSYNC_SAN_STEP=build: only the build (scripts/test.sh runs it at nice 19 beside the normal suite,
# then this script again, whose build is then up to date, for the tests).
[ "${WSYNC_SAN_STEP:-all}" != build ] || exit 0
rc=0
(cd "$dir" && ctest --output-on-failure --no-tests=error -j"$JOBS" --timeout 900 \
   -LE "$exclude_labels" -E "$exclude_tests" "${include[@]}" "$@") || rc=$?
end=$(date +%s)
echo "sanitizers: $SAN: build $((built - start)) s + tests $((end - built)) s = $((end - start)) s on $JOBS job(s)" \
     "(left out: labels $exclude_labels, tests $exclude_tests)"
if [ "$rc" -ne 0 ]; then
  scripts/failure-digest.sh "$dir" >&2
  echo "sanitizers: FAILED: a test failed under $SAN (its sanitizer report is in the output above)" >&2
fi
exit "$rc"
