#!/usr/bin/env bash
# Instructions per tensor of wsync's control path, counted by callgrind (repeatable: it counts
# instructions, not seconds). Runs wsync-host-overhead with the test transport 'stub' for two
# tensor counts and prints (Ir(N2) - Ir(N1)) / (N2 - N1), so the fixed cost of a group (plugins,
# store, threads) drops out.
# Usage: samples/bench/host_overhead.sh [build dir] [N1] [N2]
set -euo pipefail
build=${1:-build}
n1=${2:-2000}
n2=${3:-12000}
command -v valgrind >/dev/null || { echo "host_overhead: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
export WSYNC_PLUGIN_PATH="$build/lib/wsync-testing:$build/lib/wsync"
ir() {
  local log
  log=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$build/bin/wsync-host-overhead" --tensors "$1" >/dev/null 2>"$log" ||
    { cat "$log" >&2; rm -f "$log"; exit 1; }
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$log" | tail -n 1
  rm -f "$log"
}
a=$(ir "$n1")
b=$(ir "$n2")
echo "Ir($n1 tensors) = $a"
echo "Ir($n2 tensors) = $b"
echo "instructions_per_tensor: $(( (b - a) / (n2 - n1) ))"
