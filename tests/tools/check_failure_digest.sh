#!/usr/bin/env bash
# tools.failure_digest: scripts/failure-digest.sh on a ctest log made here. A failed gtest and a
# failed script test whose log dump quotes WSYNC_ERR_PEER_FAILED: each test's reason is printed
# (the gtest failure with its message, the script's "FAILED:" line, first and last), the quoted
# status is not (it once took the 40 lines the digest keeps per test, and CI showed no reason).
set -euo pipefail
digest=${1:?usage: check_failure_digest.sh <scripts/failure-digest.sh>}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/Testing/Temporary"
printf '1:unit.one\n2:cluster.two\n' >"$dir/Testing/Temporary/LastTestsFailed.log"
{
  echo "1/2 Testing: unit.one"
  echo "[ RUN      ] A.B"
  echo "/src/a.cpp:12: Failure"
  echo "Expected: 1 == 2"
  echo "the reason of unit.one"
  echo "[  FAILED  ] A.B (1 ms)"
  echo "Test Failed."
  echo "2/2 Testing: cluster.two"
  echo "two.sh: FAILED: the reason of cluster.two"
  for i in $(seq 1 60); do
    echo "--- engine${i}.log (last 15 lines)"
    echo "engine rank $i: wsync_receiver_commit failed: WSYNC_ERR_PEER_FAILED: sender 1 closed its connection"
  done
  echo "two.sh: FAILED: the reason of cluster.two"
  echo "Test Failed."
} >"$dir/Testing/Temporary/LastTest.log"
rc=0
out=$("$digest" "$dir") || rc=$?
[ "$rc" -eq 0 ] || { echo "check_failure_digest: the digest exited with $rc:"; echo "$out"; exit 1; }
for want in "--- unit.one" "the reason of unit.one" "--- cluster.two" "two.sh: FAILED: the reason of cluster.two"; do
  grep -qF -- "$want" <<<"$out" || { echo "check_failure_digest: no '$want' in:"; echo "$out"; exit 1; }
done
if grep -q "engine rank 3:" <<<"$out"; then  # (beyond the lines that follow the first reason)
  echo "check_failure_digest: a quoted WSYNC_ERR_PEER_FAILED was taken for a failure:"; echo "$out"; exit 1
fi
[ "$(grep -c "the reason of cluster.two" <<<"$out")" -eq 2 ] || { echo "check_failure_digest: the script's reason is not both first and last:"; echo "$out"; exit 1; }
echo "check_failure_digest: OK"
