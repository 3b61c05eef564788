#!/usr/bin/env bash
# Installs what wsync needs from Debian (when missing) and builds it into build/.
# Needs only Debian's package archive: the Rust and Go bindings have no third-party dependencies.
# Fails (non-zero exit, the compiler's errors on stderr) when anything does not configure or build,
# so nothing after it ever runs binaries left over from an earlier build.
# Usage: scripts/setup.sh [extra cmake args]
# WSYNC_SETUP_STEP=packages: only the packages, no build (scripts/test.sh starts the Python venv and
# the sanitizer build after it, beside this build).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config libucx-dev ucx-utils libcjson-dev libcurl4-openssl-dev libssl-dev
          libcmocka-dev libgtest-dev libxxhash-dev libcpp-httplib-dev valgrind iperf3
          file qemu-user debootstrap procps)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# The Rust and Go bindings' toolchains: Debian's cargo and Go when none is on PATH (a rustup
# cargo or another Go already there is used as it is; the bindings need Rust 1.63, Go 1.19).
command -v cargo >/dev/null 2>&1 || missing+=(cargo)
command -v go >/dev/null 2>&1 || missing+=(golang-go)
# The aarch64 wheel (scripts/wheel.sh --arch aarch64) takes Debian's arm64 cJSON and xxHash, and its
# test runs an arm64 Debian root under qemu-user: dpkg must know the architecture.
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
update=0
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
  update=1
fi
if [ ${#missing[@]} -gt 0 ] || [ "$update" -eq 1 ]; then
  [ "$update" -eq 0 ] || echo "setup: dpkg architecture arm64 added"
  [ ${#missing[@]} -eq 0 ] || echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  [ ${#missing[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

[ "${WSYNC_SETUP_STEP:-all}" != packages ] || exit 0

JOBS=${WSYNC_JOBS:-$(nproc)}
# RelWithDebInfo with line tables only (-g1): backtraces and perf keep file:line, the code is -O2's,
# and the build takes a quarter less time than with -g (full debug info: pass -DCMAKE_BUILD_TYPE=Debug,
# or your own -DCMAKE_CXX_FLAGS_RELWITHDEBINFO, as an extra argument).
if ! cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
       "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "$@" >build-configure.log 2>&1; then
  cat build-configure.log >&2
  echo "setup: FAILED: cmake could not configure the project (log above, also in build-configure.log)" >&2
  exit 1
fi
sed -n '/configuration summary/,/^-- $/p' build-configure.log | sed 's/^-- //'
if ! cmake --build build -j"$JOBS" >build.log 2>&1; then
  grep -E -B2 -A6 "error|Error" build.log | tail -n 80 >&2 || tail -n 80 build.log >&2
  echo "setup: FAILED: the build failed (full log: build.log)" >&2
  exit 1
fi
warnings=$(grep -c "warning:" build.log || true)
[ "$warnings" -eq 0 ] || grep "warning:" build.log | sort -u | head -n 20
echo "setup: built into build/ ($warnings compiler warning(s))"
