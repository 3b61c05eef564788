#!/usr/bin/env bash
# Installs what wsync needs from Debian (when missing) and builds it into build/.
# Usage: scripts/setup.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config libucx-dev ucx-utils libcjson-dev libcurl4-openssl-dev
          libcmocka-dev libgtest-dev libxxhash-dev libcpp-httplib-dev)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

JOBS=${WSYNC_JOBS:-$(nproc)}
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
grep -A12 "configuration summary" build-configure.log | sed 's/^-- //'
cmake --build build -j"$JOBS" 2>&1 | grep -E "error|warning|Error" || true
test -x build/bin/wsync-sample-trainer
echo "setup: built into build/"
