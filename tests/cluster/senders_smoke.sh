#!/usr/bin/env bash
# cluster.senders_smoke: scripts/senders-bench.sh --smoke as docs/PERFORMANCE.md tells a user to run
# it (with this build and a cluster name of its own): every row runs (1 and 2 senders to 2
# receivers, full tensors and TP-2 halves), the table and the summary lines come out with figures the NICs allow, and the cluster
# is gone afterwards; then the same for --lanes --smoke (many senders x relays: TP-2 replicas in
# lanes, route auto and star). Its command line refuses an unknown flag (exit 2) and prints its usage.
#
# Usage: senders_smoke.sh <build dir>
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$1" && pwd)
NAME=senderssmoke
fail() { echo "senders_smoke: FAILED: $*" >&2; exit 1; }

grep -q "^Usage: scripts/senders-bench.sh" <<<"$("$REPO/scripts/senders-bench.sh" --help)" || fail "--help printed no usage"
"$REPO/scripts/senders-bench.sh" --no-such-flag >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "an unknown flag gave exit $rc, not 2"

out=$("$REPO/scripts/senders-bench.sh" --smoke --build "$BUILD" --name "$NAME" 2>&1)
rc=$?
echo "$out"
[ $rc -ne 77 ] || exit 77
left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^wsc-$NAME-" || true)
[ -z "$left" ] || fail "namespaces left behind: $left"
[ $rc -eq 0 ] || fail "scripts/senders-bench.sh --smoke exited with $rc"
rows=$(echo "$out" | grep -cE '^[12] +[12] +2 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +star$')
[ "$rows" -eq 4 ] || fail "$rows rows, 4 expected (1 and 2 senders to 2 receivers, full tensors and TP-2 halves)"
grep -qE "^senders_2_speedup: [0-9.]+ \(2 receivers, full tensors\)" <<<"$out" || fail "no senders_2_speedup line"
grep -qE "^tp2_time_ratio: [0-9.]+ \(2 senders, 2 receivers" <<<"$out" || fail "no tp2_time_ratio line"
grep -q "^NIC rate: 200mbit" <<<"$out" || fail "no NIC rate line"

# Lanes (many senders x relays), as docs/PERFORMANCE.md runs it: TP-2 receivers of 1 and 2
# replicas, route auto (lanes) and star.
out=$("$REPO/scripts/senders-bench.sh" --lanes --smoke --build "$BUILD" --name "$NAME" 2>&1)
rc=$?
echo "$out"
left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^wsc-$NAME-" || true)
[ -z "$left" ] || fail "namespaces left behind after --lanes: $left"
[ $rc -eq 0 ] || fail "scripts/senders-bench.sh --lanes --smoke exited with $rc"
rows=$(echo "$out" | grep -cE '^2 +[12] +[24] +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +(auto|star)$')
[ "$rows" -eq 8 ] || fail "--lanes: $rows rows, 8 expected (1 and 2 senders to 1 and 2 TP-2 replicas, auto and star)"
for line in "lanes_k2_over_k1: [0-9.]+ \(2 senders" "lanes_vs_floor: [0-9.]+ \(2 senders, 2 replicas" \
  "lanes_vs_one_sender: [0-9.]+ \(2 senders against 1" "lanes_vs_star: [0-9.]+ "; do
  grep -qE "^$line" <<<"$out" || fail "--lanes: no line like '$line'"
done
echo "senders_smoke: OK"
