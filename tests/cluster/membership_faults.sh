#!/usr/bin/env bash
# cluster.elastic_<fault>: option membership=elastic across hosts of an emulated cluster: the
# sample trainer on h0 (commit_quorum=1, timeout_ms 5000) and sample engines on h1 (staged) and h2
# (views). Version 1 commits; while version 2 is on the wire to h2 (a quarter of it arrived
# there), h2 suffers FAULT (partition: its switch port goes down; kill: SIGKILL; hang: SIGSTOP).
# What a user would notice, and this test asserts:
#   - the trainer removes engine 2, naming it, within its timeout plus 1 s (a kill: within 2 s);
#   - version 2 commits on engine 1, and version 3 after it, through the same group (the trainer
#     exits 0 having committed all three; nothing was rebuilt);
#   - engine 1 verified versions 1, 2 and 3 and ended well at the close;
#   - engine 2 never took version 2; once the fault heals it ends.
# It prints the measured seconds ("removed after X s").
#
# Usage: membership_faults.sh <build dir> --fault partition|kill|hang [--rate 200mbit]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fault_args "$@"
cluster_test_main 3 "$RATE" "e$FAULT" "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
SCALE=0.2  # ~0.04 GB: at 200 Mbit/s one version takes ~3.5 s to two engines
TIMEOUT_MS=5000
LIMIT_S=$((TIMEOUT_MS / 1000 + 1))
[ "$FAULT" != kill ] || LIMIT_S=2

start_trainer 2 "$SCALE" 3 "$TIMEOUT_MS" --option route=star --option membership=elastic --option commit_quorum=1
start_engine 1 "$SCALE" --staged
start_engine 2 "$SCALE" --views
wait_for 60 v1_committed_or_trainer_gone || fail "version 1 did not commit within 60 s"
in_log trainer "version 1 committed" || fail "the trainer ended before version 1 committed"
base=$(sent_to_h2)
wait_for 30 h2_got_more_than $((base + $(model_bytes) / 4)) || fail "version 2 did not start moving to h2 within 30 s"

strike h2 "$engine2"

removed_within 2 "$LIMIT_S"
reap "$trainer" 60
[ "$rc" -eq 0 ] || fail "the trainer exited with $rc (0 expected: versions 2 and 3 commit on engine 1): $(grep -v '^\[' "$LOGS/trainer.log" | tail -3)"
for v in 1 2 3; do in_log trainer "version $v committed" || fail "the trainer did not commit version $v"; done
in_log trainer "version 3 committed on 1 engine" || fail "version 3 was not committed on the one engine left"
reap "$engine1" 20
[ "$rc" -eq 0 ] || fail "engine 1 exited with $rc: $(grep -v '^\[' "$LOGS/engine1.log" | tail -3)"
for v in 1 2 3; do
  [ "$(count_in_log engine1 "version $v: .* verified")" -eq 1 ] || fail "engine 1 did not verify version $v"
done

heal h2 "$engine2"
reap "$engine2" 30
! in_log engine2 "version 2:" || fail "engine 2 took version 2, which it never held whole"

echo "elastic_$FAULT: NICs $WSC_RATE, trainer timeout ${TIMEOUT_MS} ms, commit_quorum 1; the $FAULT struck h2 mid-version 2"
echo "  trainer: removed engine 2 after $removed_s s (limit $LIMIT_S s): $(grep "engine rank 2 left the group" "$LOGS/trainer.log" | head -1)"
echo "  $(grep "version 2 committed" "$LOGS/trainer.log" | head -1)"
echo "  $(grep "version 3 committed" "$LOGS/trainer.log" | head -1)"
echo "ROW fault=$FAULT removed_s=$removed_s"
