#!/usr/bin/env bash
# cluster.senders_<fault>: a group of two senders (sender 0 on h0, sender 1 on h1, each holding
# half of every tensor) and three receivers (h2, h3, h4) on an emulated cluster, run with
# wsync-cluster-bench (8 versions of 64 MiB, timeout_ms 3000, 4 MiB buckets). While a version is
# on the wire (sender 1's NIC sent a version and a quarter), sender 1 suffers FAULT:
#
#   partition  h1's switch port goes down: its packets and those sent to it vanish, no RST
#   kill       sender 1 is SIGKILLed (its kernel closes its sockets)
#   hang       sender 1 is SIGSTOPped (its kernel keeps its sockets open; nothing answers)
#
# What a user would notice, and this test asserts: sender 0 fails naming "sender 1", and every
# receiver fails naming it, or sees the update aborted with a reason naming it (sender 0 gave up
# first) and then the group close, within timeout_ms plus 1 s (plus 1 s for the processes to
# print and exit); nobody hangs. (That staged receivers keep their bytes bit for bit is asserted on loopback, where the
# bytes can be checked: integration.many_senders.) It prints the measured seconds.
#
# Usage: senders_faults.sh <build dir> --fault partition|kill|hang [--rate 200mbit]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fault_args "$@"
cluster_test_main 5 "$RATE" "s$FAULT" "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
TIMEOUT_MS=3000
LIMIT_S=$((TIMEOUT_MS / 1000 + 1 + 1))
PORT=29800
BENCH="$BUILD/bin/wsync-cluster-bench"
COMMON=(--mib 64 --tensor-mib 8 --timeout-ms "$TIMEOUT_MS")
SENDER=(--role sender --receivers 3 --senders 2 --iters 8 --warmup 0 --option bucket_bytes=4194304 --option route=star)

on h0 sender0 "$BENCH" "${SENDER[@]}" --sender-rank 0 --store "$WSC_ADDR_0:$PORT" "${COMMON[@]}"
s0=$last_pid
on h1 sender1 "$BENCH" "${SENDER[@]}" --sender-rank 1 --store "$WSC_ADDR_1:$PORT" --sender0-store "$WSC_ADDR_0:$PORT" \
  "${COMMON[@]}"
s1=$last_pid
rx=()
for r in 1 2 3; do
  on "h$((r + 1))" "receiver$r" "$BENCH" --role receiver --rank "$r" --store "$WSC_ADDR_0:$PORT" "${COMMON[@]}"
  rx+=("$last_pid")
done

# Mid-update: sender 1's NIC sent one version (its half to 3 receivers: 96 MiB) and a quarter.
h1_sent_more_than() { [ "$(nic_sent_bytes h1)" -gt "$1" ]; }
wait_for 60 h1_sent_more_than $((96 * 1048576 * 5 / 4)) || fail "sender 1 did not get a version and a quarter out within 60 s"
alive "$s1" || fail "sender 1 ended before the fault"

t_fault=$(now)
case $FAULT in
  partition) "$WSC_CLUSTER" port h1 down ;;
  kill) kill -KILL "$s1" ;;
  hang) kill -STOP "$s1" ;;
esac

# check NAME PID ALLOWED_RC: it ends (exit 1, or ALLOWED_RC) naming sender 1 within the limit.
check() {
  reap "$2" $((LIMIT_S + 10))
  local took
  took=$(seconds_since "$t_fault")
  [ "$rc" -ne 124 ] || fail "$1 still ran $((LIMIT_S + 10)) s after the $FAULT"
  [ "$rc" -eq 1 ] || [ "$rc" -eq "${3:-1}" ] || fail "$1 exited with $rc after the $FAULT (1 expected: a failed update)"
  grep -q "sender 1 " "$LOGS/$1.log" || fail "$1's error does not name sender 1: $(grep -v '^\[' "$LOGS/$1.log" | tail -2)"
  awk -v s="$took" -v l="$LIMIT_S" 'BEGIN { exit !(s <= l) }' || fail "$1 ended $took s after the $FAULT, over $LIMIT_S s"
  echo "$1: ended (exit $rc) naming sender 1 after at most $took s"
}
check sender0 "$s0"
# A receiver may end well (exit 0): the update aborted (its log names sender 1), then the close.
for r in 1 2 3; do check "receiver$r" "${rx[r - 1]}" 0; done

case $FAULT in
  partition) "$WSC_CLUSTER" port h1 up ;;
  hang) kill -CONT "$s1" ;;
esac
reap "$s1" 20  # it ends, one way or another, once its peers are gone
echo "senders_faults ($FAULT): OK: sender 0 and all 3 receivers named sender 1 within ${LIMIT_S} s"
