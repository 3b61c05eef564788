#!/usr/bin/env bash
# cluster.joiner_<fault>: a joiner struck in the middle of its catch-up, across hosts. The sample
# trainer on h0 (membership=elastic, commit_quorum=1, timeout_ms 5000, a version every 2 s) with
# engine 1 on h1 (staged: it serves catch-ups); after version 1, engine 2 starts on h2 (staged),
# joins, and catches up from engine 1; once a quarter of the model reached h2 it suffers FAULT
# (partition: its switch port goes down; kill: SIGKILL; hang: SIGSTOP). What a user would notice,
# and this test asserts:
#   - the trainer removes engine 2, naming it, and goes on: versions 2, 3 and 4 commit on engine 1
#     through the same group (the trainer exits 0 having committed all four);
#   - engine 1, the catch-up source, verified every version and ended well (a joiner that stops
#     taking bytes costs its source at most its catch-up budget, never its membership);
#   - engine 2 never commits a version; once the fault heals it ends;
#   - no process aborts (the dying-peer matrix greps every log for it: tests/cluster/dying_peers.sh).
# It prints the measured seconds ("removed after X s").
#
# Usage: joiner_faults.sh <build dir> --fault partition|kill|hang [--rate 200mbit]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fault_args "$@"
cluster_test_main 3 "$RATE" "j$FAULT" "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
SCALE=0.2  # ~0.04 GB: at 200 Mbit/s a catch-up takes ~1.7 s
TIMEOUT_MS=5000
# A kill is seen at the next boundary; a hang or a partition when the next update waits for the
# joiner's READY (its timeout, after the catch-up's budget and the interval).
LIMIT_S=$((TIMEOUT_MS / 1000 + 5))

start_trainer 2 "$SCALE" 4 "$TIMEOUT_MS" --interval-ms 2000 --keep-going 1 --option route=star \
  --option membership=elastic --option commit_quorum=1 --option init_receivers=1
start_engine 1 "$SCALE" --staged
wait_for 60 v1_committed_or_trainer_gone || fail "version 1 did not commit within 60 s"
in_log trainer "version 1 committed" || fail "the trainer ended before version 1 committed"
base=$(sent_to_h2)
start_engine 2 "$SCALE" --staged
wait_for 30 h2_got_more_than $((base + $(model_bytes) / 4)) || fail "the catch-up did not start moving to h2 within 30 s"

strike h2 "$engine2"

removed_within 2 "$LIMIT_S"
reap "$trainer" 90
[ "$rc" -eq 0 ] || fail "the trainer exited with $rc (0 expected: every version commits on engine 1): $(grep -v '^\[' "$LOGS/trainer.log" | tail -3)"
for v in 1 2 3 4; do in_log trainer "version $v committed" || fail "the trainer did not commit version $v"; done
# (the trainer prints member events after each version: the join is in its log by now)
in_log trainer "engine rank 2 joined the group.*catches up to version 1 from receiver rank 1" ||
  fail "engine 2 did not join to catch up from engine 1: $(grep "engine rank 2" "$LOGS/trainer.log" | head -1)"
reap "$engine1" 20
[ "$rc" -eq 0 ] || fail "engine 1 exited with $rc: $(grep -v '^\[' "$LOGS/engine1.log" | tail -3)"
for v in 1 2 3 4; do
  [ "$(count_in_log engine1 "version $v: .* verified")" -eq 1 ] || fail "engine 1 did not verify version $v"
done

heal h2 "$engine2"
reap "$engine2" 30
! in_log engine2 "version [0-9]*: .* verified" || fail "engine 2 committed a version it never held whole"

echo "joiner_$FAULT: NICs $WSC_RATE, trainer timeout ${TIMEOUT_MS} ms; the $FAULT struck engine 2 (h2) mid-catch-up"
echo "  trainer: removed engine 2 after $removed_s s (limit $LIMIT_S s): $(grep "engine rank 2 left the group" "$LOGS/trainer.log" | head -1)"
echo "  engine 1 (the source): $(grep -i "catch" "$LOGS/engine1.log" | head -1)"
echo "ROW fault=$FAULT removed_s=$removed_s"
