#!/usr/bin/env bash
# failure-digest.sh BUILD_DIR: after a ctest run that failed, the lines that say why, per failed
# test: gtest's failures (with the lines that follow them), sanitizer reports (their first frames)
# and FAILED lines (a script's "x.sh: FAILED: ...", not a status such as WSYNC_ERR_PEER_FAILED quoted
# in a log it dumps), at most 40 per test. scripts/test.sh prints it last, so that a CI log cut in
# the middle (a failed test's full output can be long) still ends with the reason.
set -uo pipefail
dir=${1:?usage: failure-digest.sh BUILD_DIR}
log=$dir/Testing/Temporary/LastTest.log
failed=$dir/Testing/Temporary/LastTestsFailed.log
[ -r "$log" ] && [ -r "$failed" ] || exit 0
echo "=== why the tests failed in $dir (from $log) ==="
cut -d: -f2- "$failed" | while IFS= read -r name; do
  echo "--- $name"
  awk -v name="$name" '
    $0 ~ "^[0-9]+/[0-9]+ Testing: " && $3 == name { inside = 1; next }
    inside && /^Test (Passed|Failed)\.|^Test time =/ { if (/Failed/) inside = 0 }
    inside && /^[0-9]+\/[0-9]+ Testing: / { inside = 0 }
    !inside { next }
    /Failure$|: Failure|runtime error|ERROR: [A-Za-z]*Sanitizer|^SUMMARY:|\[  FAILED  \]|^FAILED:|[^_A-Z]FAILED:|Segmentation|Aborted/ {
      follow = /Sanitizer/ ? 8 : 4
      print; next
    }
    follow > 0 { print; follow-- }
  ' "$log" | head -n 40
done
