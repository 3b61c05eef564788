#!/usr/bin/env bash
# cluster.bench_smoke: scripts/cluster-bench.sh --smoke as docs/CLUSTER.md tells a user to run it
# (with this build, a cluster name of its own and --timeout-ms): every row runs, the table and the summary
# lines come out with figures a NIC allows, and the cluster is gone afterwards. Its command line
# refuses an unknown flag (exit 2) and prints its usage on --help.
#
# Usage: bench_smoke.sh <build dir>
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$1" && pwd)
NAME=benchsmoke
fail() { echo "bench_smoke: FAILED: $*" >&2; exit 1; }

grep -q "^Usage: scripts/cluster-bench.sh" <<<"$("$REPO/scripts/cluster-bench.sh" --help)" || fail "--help printed no usage"
"$REPO/scripts/cluster-bench.sh" --no-such-flag >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "an unknown flag gave exit $rc, not 2"

"$REPO/scripts/cluster-bench.sh" --timeout-ms 5s >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--timeout-ms 5s gave exit $rc, not 2"

# (with the short timeout docs/PERFORMANCE.md uses for its large updates: the flag reaches every member)
out=$("$REPO/scripts/cluster-bench.sh" --smoke --build "$BUILD" --name "$NAME" --timeout-ms 5000 2>&1)
rc=$?
echo "$out"
[ $rc -ne 77 ] || exit 77
left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^wsc-$NAME-" || true)
[ -z "$left" ] || fail "namespaces left behind: $left"
[ $rc -eq 0 ] || fail "scripts/cluster-bench.sh --smoke exited with $rc"
rows=$(echo "$out" | grep -cE '^auto +[0-9]+ +[01] +[0-9.]+ ')
[ "$rows" -eq 4 ] || fail "$rows rows of the default shape (auto), 4 expected (receivers 1 and 2, verify_payload 1 and 0)"
rows=$(echo "$out" | grep -cE '^star +[0-9]+ +1 +[0-9.]+ ')
[ "$rows" -eq 2 ] || fail "$rows star rows, 2 expected beside the default (receivers 1 and 2)"
for line in "fanout_2_over_1: [0-9.]+ \(auto\)" "nic_efficiency_1: [01]\.[0-9]+" \
            "checksum_cost_cluster: -?[0-9.]+%" "NIC rate: 1gbit"; do
  grep -qE "^($line)" <<<"$out" || fail "no line matching '$line'"
done
echo "bench_smoke: OK"
