#!/usr/bin/env bash
# cluster.trainer_restart: a trainer that restarts without its engines, across hosts. The sample
# trainer on h0 publishes versions 1 and 2 to sample engines on h1 (staged) and h2 (in place),
# both with the receiver option rejoin, and is killed (SIGKILL) after the third batch of version
# 3; a new trainer process on h0, at the same store address, publishes versions 3 and 4 from its
# "checkpoint". The engines are never restarted: each verifies every tensor of versions 1..4, the
# staged one holds version 2 bit for bit after the failed update, and both end at the new
# trainer's close.
#
# Usage: trainer_restart.sh <build dir>
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cluster_test_main 3 1gbit trainerrestart "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
SCALE=0.2

start_trainer 2 "$SCALE" 3 20000 --die-in 3
first=$trainer
start_engine 1 "$SCALE" --staged --rejoin --until-version 4
start_engine 2 "$SCALE" --rejoin --until-version 4
reap "$first" 120
[ "$rc" -eq 137 ] || fail "the first trainer exited with $rc, not killed (137) in version 3"
in_log trainer "version 2 committed on 2 engine(s)" || fail "the first trainer did not commit version 2"
cp "$LOGS/trainer.log" "$LOGS/trainer-first.log"
start_trainer 2 "$SCALE" 2 20000 --first-version 3
reap "$trainer" 120
[ "$rc" -eq 0 ] || fail "the restarted trainer exited with $rc (124: still running, killed)"
reap "$engine1" 60
rc_1=$rc
reap "$engine2" 60
rc_2=$rc
[ "$rc_1/$rc_2" = 0/0 ] || fail "exit codes engine1/engine2: $rc_1/$rc_2 (124: still running, killed)"
in_log trainer "version 4 committed on 2 engine(s)" || fail "the restarted trainer did not commit version 4"
for e in engine1 engine2; do
  for v in 1 2 3 4; do
    in_log "$e" "version $v: .* verified" || fail "$e did not verify version $v"
  done
  n=$(count_in_log "$e" "joined group 'demo'")
  [ "$n" -eq 1 ] || fail "$e was initialised $n times, not once"
done
in_log engine1 "staged: every buffer still holds version 2 bit for bit" ||
  fail "the staged engine did not show version 2 intact after the failed update"
echo "trainer_restart: trainer killed in version 3; a new trainer published 3 and 4 into the same engines (NICs $WSC_RATE)"
grep -h "committed on\|verified\|rejoin\|failed\|staged:" "$LOGS"/trainer*.log "$LOGS"/engine*.log
