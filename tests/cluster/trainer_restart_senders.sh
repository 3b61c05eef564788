#!/usr/bin/env bash
# cluster.trainer_restart_senders: a trainer of two ranks (two senders, each the rows it holds of
# every tensor) that restarts without its engines, across hosts. Rank 0 on h0 (the group's store)
# and rank 1 on h3 publish versions 1 and 2 to sample engines on h1 (staged) and h2 (in place), both
# with the receiver option rejoin. Rank 1 is killed in version 3: rank 0's update fails naming sender
# 1. The trainer restarts from its checkpoint (both ranks, new processes: a trainer's ranks restart
# together), publishes 3, and rank 0 is killed in version 4: rank 1 fails naming sender 0. Restarted
# again, it publishes 4 and 5. The engines are never restarted: each verifies every tensor of
# versions 1..5 and joined once; the staged one shows its last version intact after each failure.
#
# Usage: trainer_restart_senders.sh <build dir>
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cluster_test_main 4 1gbit trainerrestartm "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
SCALE=0.2

# ranks FIRST VERSIONS [flags for rank 0] -- [flags for rank 1]: both ranks of the trainer, logs
# rank0-<FIRST>.log and rank1-<FIRST>.log, pids in r0 and r1.
ranks() {
  local first=$1 versions=$2 f0=() f1=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do f0+=("$1"); shift; done
  [ $# -eq 0 ] || shift
  f1=("$@")
  on h0 "rank0-$first" "$BUILD/bin/wsync-sample-trainer" --receivers 2 --versions "$versions" --first-version "$first" \
    --store "$(store_addr)" --scale "$SCALE" --timeout-ms 20000 --senders 2 --sender-rank 0 ${f0[@]+"${f0[@]}"}
  r0=$last_pid
  on h3 "rank1-$first" "$BUILD/bin/wsync-sample-trainer" --receivers 2 --versions "$versions" --first-version "$first" \
    --store "$WSC_ADDR_3:$((STORE_PORT + 1))" --sender0-store "$(store_addr)" --scale "$SCALE" --timeout-ms 20000 \
    --senders 2 --sender-rank 1 ${f1[@]+"${f1[@]}"}
  r1=$last_pid
}

# died_and_named DEAD_PID SURVIVOR_PID SURVIVOR_LOG LOST_RANK: the dead rank was killed, the
# survivor failed naming it.
died_and_named() {
  reap "$1" 120
  [ "$rc" -eq 137 ] || fail "the rank meant to die exited with $rc, not killed (137)"
  reap "$2" 120
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "the surviving rank exited with $rc (124: still running); it must fail"
  in_log "$3" "sender $4 (store at" || fail "$3 does not name sender $4 in its failure"
}

start_engine 1 "$SCALE" --staged --rejoin --until-version 5
start_engine 2 "$SCALE" --rejoin --until-version 5
ranks 1 3 -- --die-in 3
died_and_named "$r1" "$r0" rank0-1 1
in_log rank0-1 "version 2 committed on 2 engine(s)" || fail "the first trainer did not commit version 2"
ranks 3 2 --die-in 4 --
died_and_named "$r0" "$r1" rank1-3 0
in_log rank0-3 "version 3 committed on 2 engine(s)" || fail "the restarted trainer did not commit version 3"
ranks 4 2
reap "$r0" 120
rc_0=$rc
reap "$r1" 120
[ "$rc_0/$rc" = 0/0 ] || fail "exit codes of the third trainer's ranks: $rc_0/$rc (124: still running, killed)"
reap "$engine1" 60
rc_1=$rc
reap "$engine2" 60
[ "$rc_1/$rc" = 0/0 ] || fail "exit codes engine1/engine2: $rc_1/$rc (124: still running, killed)"
for e in engine1 engine2; do
  for v in 1 2 3 4 5; do
    in_log "$e" "version $v: .* verified" || fail "$e did not verify version $v"
  done
  n=$(count_in_log "$e" "joined group 'demo'")
  [ "$n" -eq 1 ] || fail "$e was initialised $n times, not once"
done
n=$(count_in_log engine1 "staged: every buffer still holds version")
[ "$n" -ge 2 ] || fail "the staged engine showed its version intact after $n of the 2 failed updates"
echo "trainer_restart_senders: rank 1 killed in version 3, rank 0 in version 4; the restarted trainer published 3, 4 and 5 into the same engines (NICs $WSC_RATE)"
grep -h "committed on\|verified\|rejoin\|failed\|staged:\|sender [01]" "$LOGS"/rank*.log "$LOGS"/engine*.log | sort | uniq -c | sort -rn | head -40
