#!/usr/bin/env bash
# ctest's fuzz.<name>: run one libFuzzer target for a fixed time over its seed corpus.
# Usage: run_fuzzer.sh BINARY SEED_DIR WORK_DIR SECONDS [WHY_SKIPPED]
# New inputs go to WORK_DIR/corpus (a scratch directory, emptied first), crashes to
# WORK_DIR/artifacts; nothing is ever written into SEED_DIR (the repository). Exits 77 (skipped)
# when WHY_SKIPPED is given, non-zero when the target finds a crash, a leak, a timeout or UB.
set -euo pipefail
bin=$1 seeds=$2 work=$3 secs=$4 why=${5:-}
if [ -n "$why" ]; then
  echo "skipped: the fuzz targets are not built: $why"
  exit 77
fi
if [ ! -x "$bin" ]; then
  echo "FAILED: $bin is missing; build first (cmake --build on this build directory builds the fuzz targets)" >&2
  exit 1
fi
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
dirs=("$work/corpus")
if [ -d "$seeds" ]; then
  dirs+=("$seeds")
else
  echo "note: no seed corpus at $seeds; starting from nothing"
fi
# -timeout: one input taking 10 s is a finding; -rss_limit_mb: so is 2 GB of memory.
rc=0
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "${dirs[@]}" >"$work/log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
  tail -n 80 "$work/log"
  for a in "$work"/artifacts/*; do
    [ -e "$a" ] || continue
    echo "FAILED: $(basename "$bin") found $(basename "$a"); reproduce with: $bin $a"
    od -A d -t x1z -v "$a" | head -n 20
  done
  echo "FAILED: $(basename "$bin") exited with $rc (full log: $work/log)" >&2
  exit 1
fi
sed -n -E '/^(stat::number_of_executed_units|stat::peak_rss_mb)|^Done [0-9]+ runs/p' "$work/log"
echo "ok: $(basename "$bin"), ${secs} s over $(ls "$seeds" 2>/dev/null | wc -l) seed(s), no finding"
