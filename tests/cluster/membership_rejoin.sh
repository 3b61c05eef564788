#!/usr/bin/env bash
# cluster.elastic_rejoin: an engine killed mid-update comes back with its old rank (issue 25):
# the sample trainer on h0 (membership=elastic, commit_quorum=1, timeout_ms 5000, a pause of 1.5 s
# after each version, as a training step) and sample engines on h1 (staged) and h2 (views). While
# version 2 is on the wire to h2, engine 2 is SIGKILLed; once the trainer removed it, a new engine
# process with rank 2 starts on h2 (staged). What a user would notice, and this test asserts:
#   - the trainer removes engine 2 and later reports it joined again (a member event), through the
#     same group: it exits 0 with every version committed, the last on 2 engines;
#   - the new engine 2 verified every version it took, bit for bit, from the first update after it
#     joined to the last, and ended well at the close; engine 1 verified all of them.
# It prints how long the new engine took from its start to its first verified version.
#
# Usage: membership_rejoin.sh <build dir> [--rate 200mbit]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
FAULT=rejoin
RATE=200mbit
[ "${1:-}" = --inside ] || { [ "${2:-}" != --rate ] || RATE=$3; }
cluster_test_main 3 "$RATE" "erejoin" "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
SCALE=0.2  # ~0.04 GB: at 200 Mbit/s one version takes ~3.5 s to two engines
TIMEOUT_MS=5000
VERSIONS=7

start_trainer 2 "$SCALE" "$VERSIONS" "$TIMEOUT_MS" --interval-ms 1500 --option route=star \
  --option membership=elastic --option commit_quorum=1
start_engine 1 "$SCALE" --staged
start_engine 2 "$SCALE" --views
wait_for 60 v1_committed_or_trainer_gone || fail "version 1 did not commit within 60 s"
in_log trainer "version 1 committed" || fail "the trainer ended before version 1 committed"
base=$(sent_to_h2)
wait_for 30 h2_got_more_than $((base + $(model_bytes) / 4)) || fail "version 2 did not start moving to h2 within 30 s"
kill -KILL "$engine2"
removed() { in_log trainer "engine rank 2 left the group"; }
wait_for 15 removed || fail "the trainer did not remove engine 2 within 15 s of the kill"

t_restart=$(now)
on h2 engine2b "$BUILD/bin/wsync-sample-engine" --rank 2 --store "$(store_addr)" --scale "$SCALE" --staged
engine2b=$last_pid
first_verified() { in_log engine2b "version [0-9]*: .* verified"; }
wait_for 30 first_verified || fail "the restarted engine 2 verified no version within 30 s: $(grep -v '^\[' "$LOGS/engine2b.log" | tail -3)"
caught_up_s=$(seconds_since "$t_restart")

reap "$trainer" 90
[ "$rc" -eq 0 ] || fail "the trainer exited with $rc: $(grep -v '^\[' "$LOGS/trainer.log" | tail -3)"
in_log trainer "engine rank 2 joined the group" || fail "the trainer reported no join of engine 2"
in_log trainer "version $VERSIONS committed on 2 engine" || fail "version $VERSIONS was not committed on 2 engines"
reap "$engine1" 20
[ "$rc" -eq 0 ] || fail "engine 1 exited with $rc: $(grep -v '^\[' "$LOGS/engine1.log" | tail -3)"
for v in $(seq 1 "$VERSIONS"); do
  [ "$(count_in_log engine1 "version $v: .* verified")" -eq 1 ] || fail "engine 1 did not verify version $v"
done
reap "$engine2b" 20
[ "$rc" -eq 0 ] || fail "the restarted engine 2 exited with $rc: $(grep -v '^\[' "$LOGS/engine2b.log" | tail -3)"
first=$(sed -n 's/.*version \([0-9]*\): .* verified.*/\1/p' "$LOGS/engine2b.log" | head -1)
for v in $(seq "$first" "$VERSIONS"); do
  [ "$(count_in_log engine2b "version $v: .* verified")" -eq 1 ] || fail "the restarted engine 2 did not verify version $v"
done

echo "elastic_rejoin: NICs $WSC_RATE, trainer timeout ${TIMEOUT_MS} ms, 1.5 s between versions, commit_quorum 1"
echo "  $(grep "engine rank 2 left the group" "$LOGS/trainer.log" | head -1)"
echo "  $(grep "engine rank 2 joined the group" "$LOGS/trainer.log" | head -1)"
echo "  restarted engine 2: first verified version $first, $caught_up_s s after its start; verified $first..$VERSIONS"
echo "ROW fault=rejoin caught_up_s=$caught_up_s first_version=$first"
