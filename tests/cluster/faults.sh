#!/usr/bin/env bash
# cluster.<fault>_<shape>: docs/RELIABILITY.md's fault rows across hosts of an emulated cluster
# (scripts/cluster.sh), the sample trainer on h0 and sample engines on h1 and h2. Version 1
# commits; while version 2 is on the wire to h2 (a quarter of it arrived there), h2 suffers FAULT:
#
#   partition  h2's switch port goes down: its packets and those sent to it vanish, no RST
#   kill       engine 2 is SIGKILLed (its kernel closes its sockets)
#   hang       engine 2 is SIGSTOPped (its kernel keeps its sockets open; nothing answers)
#
# What a user would notice, and this test asserts:
#   - the trainer fails version 2 naming rank 2, within its --timeout-ms plus 1 s (a kill: within
#     KILL_LIMIT_S, through the closed socket, long before the timeout);
#   - engine 1 ends (an error, or the abort and the close) within the timeout plus the receivers'
#     grace plus a margin, and keeps version 1: it never verified nor committed version 2;
#   - nobody commits version 2;
#   - engine 2, once the fault heals (port up, SIGCONT), ends without committing version 2.
# It prints the measured seconds ("named after X s").
#
# Usage: faults.sh <build dir> --fault partition|kill|hang [--shape star|chain|tree|tree:K|auto]
#                  [--rate 200mbit]   (env: WSYNC_TEST_ROUTE, the default shape)
# A shape other than star is the trainer's group option route=<shape> (lib.sh, route_flags).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
RATE=200mbit
FAULT=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[i]}" != --rate ] || RATE=${args[i + 1]:-}
  [ "${args[i]}" != --fault ] || FAULT=${args[i + 1]:-}
done
case $FAULT in partition|kill|hang) ;; *) echo "faults.sh: --fault takes partition, kill or hang" >&2; exit 2 ;; esac
cluster_test_main 3 "$RATE" "f$FAULT" "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
shift
SHAPE=${WSYNC_TEST_ROUTE:-star}
while [ $# -gt 0 ]; do
  case $1 in
    --shape) SHAPE=$2; shift 2 ;;
    --rate|--fault) shift 2 ;;
    *) echo "faults.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
route_flags "$SHAPE"
SCALE=0.2            # ~0.04 GB: at 200 Mbit/s one version takes ~3.5 s to two engines
TIMEOUT_MS=5000
GRACE_S=5            # the receivers' grace: min(their timeout_ms, 5 s) (docs/RELIABILITY.md)
KILL_LIMIT_S=2
TIMEOUT_S=$((TIMEOUT_MS / 1000))

# Bytes the switch sent to host h2 (tbf's counter on its port p2).
sent_to_h2() {
  ip netns exec "wsc-$WSC_NAME-sw" tc -s qdisc show dev p2 | sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p' | head -1
}
model_bytes() {
  awk -v g="$(sed -n 's/.*model of [0-9]* tensors, \([0-9.]*\) GB.*/\1/p' "$LOGS/trainer.log")" 'BEGIN { printf "%.0f", g * 1e9 }'
}
h2_got_more_than() { [ "$(sent_to_h2)" -gt "$1" ]; }

# Waits until version 1 committed and a quarter of version 2 reached h2.
v1_committed_or_trainer_gone() { in_log trainer "version 1 committed" || trainer_gone; }
wait_mid_update() {
  wait_for 60 v1_committed_or_trainer_gone || fail "version 1 did not commit within 60 s"
  in_log trainer "version 1 committed" || fail "the trainer ended before version 1 committed"
  local base
  base=$(sent_to_h2)
  wait_for 30 h2_got_more_than $((base + $(model_bytes) / 4)) || fail "version 2 did not start moving to h2 within 30 s"
}

strike() {
  case $FAULT in
    partition) "$WSC_CLUSTER" port h2 down ;;
    kill) kill -KILL "$engine2" ;;
    hang) kill -STOP "$engine2" ;;
  esac
}
heal() {
  case $FAULT in
    partition) "$WSC_CLUSTER" port h2 up ;;
    hang) kill -CONT "$engine2" ;;
  esac
}

# The trainer fails naming rank 2 within the limit; sets named_s.
check_trainer() {
  local limit=$1
  wait_for $((limit + 10)) in_log trainer "^trainer: .*failed:" || fail "the trainer did not report a failure within $((limit + 10)) s of the $FAULT"
  named_s=$(seconds_since "$t_fault")
  reap "$trainer" 10
  [ "$rc" -eq 1 ] || fail "the trainer exited with $rc after the $FAULT (1 expected: an error; 124: still running)"
  grep "^trainer: .*failed:" "$LOGS/trainer.log" | grep -q "rank 2" || fail "the trainer's error does not name rank 2: $(grep "^trainer: .*failed:" "$LOGS/trainer.log")"
  awk -v s="$named_s" -v l="$limit" 'BEGIN { exit !(s <= l) }' ||
    fail "the trainer named rank 2 after $named_s s, over the limit of $limit s"
}

# Engine 1 ends within the trainer's timeout plus the receivers' grace plus 5 s, keeping version 1.
check_engine1() {
  reap "$engine1" $((TIMEOUT_S + GRACE_S + 5))
  engine1_rc=$rc
  engine1_s=$(seconds_since "$t_fault")
  [ "$engine1_rc" -ne 124 ] || fail "engine 1 still waited $((TIMEOUT_S + GRACE_S + 5)) s after the $FAULT"
  [ "$(count_in_log engine1 "version 1: .* verified")" -eq 1 ] || fail "engine 1 did not verify version 1"
  ! in_log engine1 "version 2:" || fail "engine 1 took version 2, which never committed: $(grep "version 2:" "$LOGS/engine1.log")"
}

# After the fault heals, engine 2 ends (its sender is gone) without taking version 2.
check_engine2() {
  if [ "$FAULT" = kill ]; then
    reap "$engine2" 5
    return 0
  fi
  local t_heal
  heal
  t_heal=$(now)
  reap "$engine2" 30
  engine2_after_heal="ended $(seconds_since "$t_heal") s after the heal (exit $rc)"
  [ "$rc" -ne 124 ] || engine2_after_heal="still waited 30 s after the heal (killed)"
  ! in_log engine2 "version 2:" || fail "engine 2 took version 2, which never committed"
}

start_trainer 2 "$SCALE" 2 "$TIMEOUT_MS" ${ROUTE_FLAGS[@]+"${ROUTE_FLAGS[@]}"}
start_engine 1 "$SCALE"
start_engine 2 "$SCALE" --views
wait_mid_update
strike
t_fault=$(now)
limit=$((TIMEOUT_S + 1))
[ "$FAULT" != kill ] || limit=$KILL_LIMIT_S
check_trainer "$limit"
check_engine1
check_engine2
! in_log trainer "version 2 committed" || fail "the trainer committed version 2"

echo "${FAULT}_$SHAPE: NICs $WSC_RATE, trainer timeout ${TIMEOUT_MS} ms; the $FAULT struck h2 mid-version 2"
echo "  trainer: named rank 2 after $named_s s (limit $limit s): $(grep "^trainer: .*failed:" "$LOGS/trainer.log" | head -1)"
echo "  engine 1: ended after $engine1_s s (exit $engine1_rc), kept version 1: $(grep -v "^\[" "$LOGS/engine1.log" | tail -1)"
[ "$FAULT" = kill ] || echo "  engine 2: $engine2_after_heal: $(grep -v "^\[" "$LOGS/engine2.log" | tail -1)"
echo "ROW fault=$FAULT shape=$SHAPE named_s=$named_s engine1_s=$engine1_s"
