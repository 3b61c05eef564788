#!/usr/bin/env bash
# tools.bench_smoke: wsync-bench run the way docs/PERFORMANCE.md tells a user to run it (a shell with
# no group secret exported), at sizes small enough for the suite. It must print its usage on --help,
# refuse an unknown flag, and run every table to its summary lines. Its limits (ratios, cpu/wall,
# overlap) are the bench's business on a quiet machine, not this smoke's: exit 1 (a limit missed) is
# accepted, a bad command line (2), a crash or a missing table is not.
# Usage: bench_smoke.sh <wsync-bench>
set -uo pipefail
bench=$1
unset WSYNC_GROUP_SECRET WSYNC_GROUP_SECRET_FILE UCX_TLS
fail() { echo "bench_smoke: FAILED: $*" >&2; exit 1; }

out=$("$bench" --help) || fail "--help exited with $?"
grep -q "^usage: wsync-bench" <<<"$out" || fail "--help printed no usage: $out"
"$bench" --no-such-flag 1 >/dev/null 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "an unknown flag gave exit $rc, not 2"

out=$("$bench" --gpu off --tls sm --sizes-mib 4 --iters 3 --repeat 1 --overlap-layers 2 --overlap-layer-mib 1 2>&1)
rc=$?
echo "$out"
[ "$rc" -le 1 ] || fail "the bench exited with $rc"
# (grep reads a here-string, not a pipe: with pipefail, `echo | grep -q` fails when grep exits
# before echo finished writing, which once failed this smoke under the sanitizers' load)
for line in "ratio_vs_ucx_perftest: " "sender_cpu_over_wall: " "checksum_cost: " "overlap_speedup: "; do
  grep -q "^$line" <<<"$out" || fail "no '$line' line"
done
grep -q "did not join\|failed:" <<<"$out" && fail "a row failed"
echo "bench_smoke: OK (exit $rc)"
