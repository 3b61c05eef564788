#!/usr/bin/env bash
# cluster.elastic_relay_<fault>: an elastic group that relays, across hosts of an emulated cluster:
# the sample trainer on h0 (membership=elastic, commit_quorum=1, route=chain, timeout_ms 5000) and
# sample engines on h1, h2 and h3, all staged; the chain is h0 -> h1 -> h2 -> h3, so engine 2 is
# the relay that feeds engine 3, which runs with the receiver option rejoin. Version 1 commits;
# while version 2 is on the wire to h2 (a quarter of it arrived there), h2 suffers FAULT
# (partition: its switch port goes down; kill: SIGKILL; hang: SIGSTOP).
# What a user would notice, and this test asserts:
#   - the trainer removes engine 2, naming it, within its timeout plus 1 s (a kill: within 2 s),
#     and engine 3 with it, naming the relay that fed it ("fed by relay rank 2");
#   - version 2 commits on engine 1 (outside the victim's subtree), then versions 3 and 4 on
#     engines 1 and 3, through the same group: nothing was rebuilt;
#   - engine 3 joins again by itself and takes its place in the route: below engine 1 (h1 relays
#     to h3; every sender says "... joined the group below relay rank 1"), catches up to version 2
#     from engine 1 ("caught up from a peer") and verifies versions 1 to 4, as engine 1 does;
#   - engine 2 never took version 2.
# It prints the measured seconds ("removed after X s").
# --senders 2: the trainer is two ranks (sender 0 on h0, sender 1 on h4, each the rows it holds of
# every tensor; both plan the same chain). Both remove engines 2 and 3; engine 3 joins again and
# both senders install it at the same update (there is no catch-up with many senders yet, so it
# verifies version 1, then 3 and 4, the update it joined at and the next), and no group is rebuilt.
#
# Usage: elastic_relay_faults.sh <build dir> --fault partition|kill|hang [--rate 200mbit] [--senders 2]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fault_args "$@"
SENDERS=1
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" != --senders ] || SENDERS=${args[i + 1]:-1}; done
[ "$SENDERS" = 1 ] || [ "$SENDERS" = 2 ] || { echo "$(basename "$0"): --senders takes 1 or 2" >&2; exit 2; }
cluster_test_main $((3 + SENDERS)) "$RATE" "er$FAULT$SENDERS" "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
SCALE=0.2  # ~0.04 GB: at 200 Mbit/s one version takes ~2 s down the chain
TIMEOUT_MS=5000
LIMIT_S=$((TIMEOUT_MS / 1000 + 1))
[ "$FAULT" != kill ] || LIMIT_S=2

# (the pause after each version is when engine 3 joins again)
TRAINER_FLAGS=(--interval-ms 1500 --option route=chain --option membership=elastic --option commit_quorum=1
  --transport tcp)
if [ "$SENDERS" = 2 ]; then
  start_trainer 3 "$SCALE" 4 "$TIMEOUT_MS" "${TRAINER_FLAGS[@]}" --senders 2 --sender-rank 0
  on h4 trainer1 "$BUILD/bin/wsync-sample-trainer" --receivers 3 --versions 4 --store "$WSC_ADDR_4:$((STORE_PORT + 1))" \
    --sender0-store "$(store_addr)" --scale "$SCALE" --timeout-ms "$TIMEOUT_MS" "${TRAINER_FLAGS[@]}" --senders 2 \
    --sender-rank 1
  trainer1=$last_pid
else
  start_trainer 3 "$SCALE" 4 "$TIMEOUT_MS" "${TRAINER_FLAGS[@]}"
fi
start_engine 1 "$SCALE" --staged
start_engine 2 "$SCALE" --staged
start_engine 3 "$SCALE" --staged --rejoin --until-version 4
wait_for 60 v1_committed_or_trainer_gone || fail "version 1 did not commit within 60 s"
in_log trainer "version 1 committed" || fail "the trainer ended before version 1 committed"
base=$(sent_to_h2)
wait_for 30 h2_got_more_than $((base + $(model_bytes) / 4)) || fail "version 2 did not start moving to h2 within 30 s"

strike h2 "$engine2"

removed_within 2 "$LIMIT_S"
TRAINERS=(trainer)
[ "$SENDERS" = 1 ] || TRAINERS+=(trainer1)
for t in "${TRAINERS[@]}"; do
  reap "${!t}" 90
  [ "$rc" -eq 0 ] || fail "$t exited with $rc (0 expected: versions 2 to 4 commit): $(grep -v '^\[' "$LOGS/$t.log" | tail -3)"
  grep -q "fed by relay rank 2" <<<"$(grep "engine rank 3 left the group" "$LOGS/$t.log")" ||
    fail "$t did not remove engine 3 naming the relay that fed it"
  in_log "$t" "engine rank 2 left the group" || fail "$t did not remove engine 2"
  for v in 1 2 3 4; do in_log "$t" "version $v committed" || fail "$t did not commit version $v"; done
  in_log "$t" "version 2 committed on 1 engine" || fail "$t: version 2 was not committed on engine 1 alone"
  in_log "$t" "version 4 committed on 2 engine" || fail "$t: version 4 was not committed on engines 1 and 3"
  [ "$(count_in_log "$t" "group 'demo' up")" -eq 1 ] || fail "$t made its group more than once"
  grep -q "below relay rank 1" <<<"$(grep "engine rank 3 joined the group" "$LOGS/$t.log")" ||
    fail "$t did not place engine 3 below engine 1 when it joined again: $(grep "engine rank 3 joined" "$LOGS/$t.log")"
done
for e in 1 3; do
  reap "$(eval echo "\$engine$e")" 30
  [ "$rc" -eq 0 ] || fail "engine $e exited with $rc: $(grep -v '^\[' "$LOGS/engine$e.log" | tail -3)"
  versions="1 2 3 4"
  [ "$e/$SENDERS" != 3/2 ] || versions="1 3 4"
  for v in $versions; do
    [ "$(count_in_log "engine$e" "version $v: .* verified")" -eq 1 ] || fail "engine $e did not verify version $v once"
  done
done
if [ "$SENDERS" = 1 ]; then
  in_log engine3 "version 2: .*(caught up from a peer)" || fail "engine 3 did not catch up to version 2 from a peer"
else
  j0=$(sed -n 's/.*engine rank 3 joined the group from update \([0-9]*\).*/\1/p' "$LOGS/trainer.log" | head -1)
  j1=$(sed -n 's/.*engine rank 3 joined the group from update \([0-9]*\).*/\1/p' "$LOGS/trainer1.log" | head -1)
  [ -n "$j0" ] && [ "$j0" = "$j1" ] || fail "the senders did not install engine 3 at the same update ('$j0' and '$j1')"
fi

heal h2 "$engine2"
reap "$engine2" 30
! in_log engine2 "version 2:" || fail "engine 2 took version 2, which it never held whole"

echo "elastic_relay_$FAULT: NICs $WSC_RATE, chain h0 -> h1 -> h2 -> h3, trainer timeout ${TIMEOUT_MS} ms, commit_quorum 1; the $FAULT struck relay h2 mid-version 2"
echo "  trainer: removed engine 2 after $removed_s s (limit $LIMIT_S s): $(grep "engine rank 2 left the group" "$LOGS/trainer.log" | head -1)"
echo "  $(grep "engine rank 3 left the group" "$LOGS/trainer.log" | head -1)"
echo "  $(grep "engine rank 3 joined" "$LOGS/trainer.log" | head -1)"
echo "  $(grep "version 2 committed" "$LOGS/trainer.log" | head -1)"
echo "  $(grep "version 4 committed" "$LOGS/trainer.log" | head -1)"
[ "$SENDERS" = 1 ] || echo "  sender 1: $(grep "engine rank 3 joined" "$LOGS/trainer1.log" | head -1)"
echo "ROW fault=$FAULT relay senders=$SENDERS removed_s=$removed_s"
