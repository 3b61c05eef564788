#!/usr/bin/env bash
# cluster.<fault>_<shape>: docs/RELIABILITY.md's fault rows across hosts of an emulated cluster
# (scripts/cluster.sh), the sample trainer on h0 and sample engines on h1 and h2. Version 1
# commits; while version 2 is on the wire to h2 (a quarter of it arrived there), the victim's host
# (h2, or h1 with --victim 1) suffers FAULT:
#
#   partition  its switch port goes down: its packets and those sent to it vanish, no RST
#   kill       its engine is SIGKILLed (its kernel closes its sockets)
#   hang       its engine is SIGSTOPped (its kernel keeps its sockets open; nothing answers)
#
# With --shape chain the bytes go h0 -> h1 -> h2: engine 1 is a relay, and --victim 1 strikes it
# in the middle of forwarding (engine 2 is downstream of it). What a user would notice, and this
# test asserts:
#   - the trainer fails version 2 naming the victim's rank, within its --timeout-ms plus 1 s (a
#     kill: within KILL_LIMIT_S, through the closed socket, long before the timeout), and, when the
#     victim relays, the receivers downstream of it ("downstream of it (cut off with it): rank 2");
#   - the other engine ends (an error, or the abort and the close) within the timeout plus 1 s
#     (plus a margin for the trainer's exit), never a hang; it never verified nor committed
#     version 2; it runs in staged mode and says every registered buffer still holds version 1 bit
#     for bit;
#   - nobody commits version 2;
#   - the victim, once the fault heals (port up, SIGCONT), ends without committing version 2.
# It prints the measured seconds ("named after X s").
#
# Usage: faults.sh <build dir> --fault partition|kill|hang [--shape star|chain|tree|tree:K|auto]
#                  [--victim 2|1] [--rate 200mbit]   (env: WSYNC_TEST_ROUTE, the default shape)
# The shape is the trainer's group option route=<shape> (lib.sh, route_flags).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fault_args "$@"
cluster_test_main 3 "$RATE" "f$FAULT" "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
shift
SHAPE=${WSYNC_TEST_ROUTE:-star}
VICTIM=2
while [ $# -gt 0 ]; do
  case $1 in
    --shape) SHAPE=$2; shift 2 ;;
    --victim) VICTIM=$2; shift 2 ;;
    --rate|--fault) shift 2 ;;
    *) echo "faults.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
route_flags "$SHAPE"
case $VICTIM in 1|2) ;; *) echo "faults.sh: --victim takes 1 or 2" >&2; exit 2 ;; esac
OTHER=$((3 - VICTIM))
SCALE=0.2            # ~0.04 GB: at 200 Mbit/s one version takes ~3.5 s to two engines
TIMEOUT_MS=5000
GRACE_S=5            # the receivers' grace: min(their timeout_ms, 5 s) (docs/RELIABILITY.md)
KILL_LIMIT_S=2
TIMEOUT_S=$((TIMEOUT_MS / 1000))

# Waits until version 1 committed and a quarter of version 2 reached h2.
v1_committed_or_trainer_gone() { in_log trainer "version 1 committed" || trainer_gone; }
wait_mid_update() {
  wait_for 60 v1_committed_or_trainer_gone || fail "version 1 did not commit within 60 s"
  in_log trainer "version 1 committed" || fail "the trainer ended before version 1 committed"
  local base
  base=$(sent_to_h2)
  wait_for 30 h2_got_more_than $((base + $(model_bytes) / 4)) || fail "version 2 did not start moving to h2 within 30 s"
}

victim_pid() { eval echo "\$engine$VICTIM"; }
other_pid() { eval echo "\$engine$OTHER"; }
strike() {
  case $FAULT in
    partition) "$WSC_CLUSTER" port "h$VICTIM" down ;;
    kill) kill -KILL "$(victim_pid)" ;;
    hang) kill -STOP "$(victim_pid)" ;;
  esac
}
heal() {
  case $FAULT in
    partition) "$WSC_CLUSTER" port "h$VICTIM" up ;;
    hang) kill -CONT "$(victim_pid)" ;;
  esac
}

# The trainer fails naming the victim's rank (and, when it relays, rank 2 downstream of it) within
# the limit; sets named_s.
check_trainer() {
  local limit=$1
  wait_for $((limit + 10)) in_log trainer "^trainer: .*failed:" || fail "the trainer did not report a failure within $((limit + 10)) s of the $FAULT"
  named_s=$(seconds_since "$t_fault")
  reap "$trainer" 10
  [ "$rc" -eq 1 ] || fail "the trainer exited with $rc after the $FAULT (1 expected: an error; 124: still running)"
  local said
  said=$(grep "^trainer: .*failed:" "$LOGS/trainer.log" | head -1)
  grep -q "receiver rank $VICTIM " <<<"$said" || fail "the trainer's error does not name rank $VICTIM: $said"
  if [ "$SHAPE" = chain ] && [ "$VICTIM" = 1 ]; then
    grep -q "downstream of it (cut off with it): rank 2" <<<"$said" ||
      fail "the trainer's error does not say that rank 2 was downstream of rank 1: $said"
  fi
  awk -v s="$named_s" -v l="$limit" 'BEGIN { exit !(s <= l) }' ||
    fail "the trainer named rank $VICTIM after $named_s s, over the limit of $limit s"
}

# The other engine ends within the trainer's timeout plus 1 s plus a margin for the trainer's exit,
# keeping version 1 (staged: bit for bit).
OTHER_LIMIT_S=$((TIMEOUT_S + 1 + 2))
check_other() {
  local log="engine$OTHER"
  reap "$(other_pid)" $((OTHER_LIMIT_S + 1))
  other_rc=$rc
  other_s=$(seconds_since "$t_fault")
  [ "$other_rc" -ne 124 ] || fail "engine $OTHER still waited $((OTHER_LIMIT_S + 1)) s after the $FAULT"
  awk -v s="$other_s" -v l="$OTHER_LIMIT_S" 'BEGIN { exit !(s <= l) }' ||
    fail "engine $OTHER ended $other_s s after the $FAULT, over the limit of $OTHER_LIMIT_S s"
  [ "$(count_in_log "$log" "version 1: .* verified")" -eq 1 ] || fail "engine $OTHER did not verify version 1"
  ! in_log "$log" "version 2:" || fail "engine $OTHER took version 2, which never committed: $(grep "version 2:" "$LOGS/$log.log")"
  in_log "$log" "staged: every buffer still holds version 1 bit for bit" ||
    fail "engine $OTHER (staged) did not find its buffers holding version 1 after the failure: $(grep -v "^\[" "$LOGS/$log.log" | tail -2)"
}

# After the fault heals, the victim ends (its sender is gone) without taking version 2.
check_victim() {
  if [ "$FAULT" = kill ]; then
    reap "$(victim_pid)" 5
    return 0
  fi
  local t_heal
  heal
  t_heal=$(now)
  reap "$(victim_pid)" 30
  victim_after_heal="ended $(seconds_since "$t_heal") s after the heal (exit $rc)"
  [ "$rc" -ne 124 ] || victim_after_heal="still waited 30 s after the heal (killed)"
  ! in_log "engine$VICTIM" "version 2:" || fail "engine $VICTIM took version 2, which never committed"
}

start_trainer 2 "$SCALE" 2 "$TIMEOUT_MS" ${ROUTE_FLAGS[@]+"${ROUTE_FLAGS[@]}"}
if [ "$VICTIM" = 2 ]; then
  start_engine 1 "$SCALE" --staged
  start_engine 2 "$SCALE" --views
else
  start_engine 1 "$SCALE" --views
  start_engine 2 "$SCALE" --staged
fi
wait_mid_update
strike
t_fault=$(now)
limit=$((TIMEOUT_S + 1))
[ "$FAULT" != kill ] || limit=$KILL_LIMIT_S
check_trainer "$limit"
check_other
check_victim
! in_log trainer "version 2 committed" || fail "the trainer committed version 2"

echo "${FAULT}_$SHAPE: NICs $WSC_RATE, trainer timeout ${TIMEOUT_MS} ms; the $FAULT struck h$VICTIM mid-version 2"
echo "  trainer: named rank $VICTIM after $named_s s (limit $limit s): $(grep "^trainer: .*failed:" "$LOGS/trainer.log" | head -1)"
echo "  engine $OTHER: ended after $other_s s (exit $other_rc, limit $OTHER_LIMIT_S s): $(grep -v "^\[" "$LOGS/engine$OTHER.log" | tail -3 | tr '\n' ' ')"
[ "$FAULT" = kill ] || echo "  engine $VICTIM: $victim_after_heal: $(grep -v "^\[" "$LOGS/engine$VICTIM.log" | tail -1)"
echo "ROW fault=$FAULT shape=$SHAPE victim=$VICTIM named_s=$named_s other_s=$other_s"
