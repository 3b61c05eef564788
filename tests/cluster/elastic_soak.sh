#!/usr/bin/env bash
# Elastic soak (issue 25): the sample trainer on h0 publishes a version every INTERVAL ms into
# engines on h1..h8 (membership=elastic, commit_quorum=3, init_receivers=6, timeout_ms 5000,
# --keep-going) while a seeded chaos loop strikes a random running engine every 3..8 s and
# restarts it (same rank, same host) 1..4 s after it is gone; engines 7 and 8 are added midway; at
# the end every engine is back for the last versions. A strike is one of:
#   kill       SIGKILL
#   hang       SIGSTOP for 7 s (past the trainer's timeout_ms, so it is removed), then SIGKILL
#   partition  its switch port down for 7 s (removed the same way), SIGKILL while cut off, port up
# (A hung or partitioned engine is killed rather than resumed: a receiver removed while alive that
# later closes its UCX endpoint in order can hit UCX 1.13's TCP use-after-free in the trainer,
# docs/ABI.md "Membership".) An engine whose catch-up failed (its source was struck) exits on its
# own, naming the source, and is restarted like the others. Afterwards it asserts:
#   - the trainer never rebuilt its group (one process, one group, exit 0), every version either
#     committed or failed naming its reason, and at most a tenth of them failed;
#   - no engine served bytes that differ from the trainer's: each staged engine checksums every
#     version it commits against the trainer's bytes for that version and logs "verified" or
#     "CHECKSUM MISMATCH"; none logs a mismatch or a staged buffer that lost its version; every
#     engine process ends with 0 at the close, or was killed by the chaos;
#   - every engine that joined later (restarted or added) caught up: it verified the version a peer
#     held when it joined (catch-up), or the first or the second version the trainer committed after
#     the engine started ("within one update interval"), unless the chaos killed it before that
#     second version (with --composed: the third, see there); its catch-up time is from its start
#     to its first verified version.
# It prints a table and the line
#   soak: seed=S mode=M versions=V committed_all=A committed_quorum=Q failed=F joins=J leaves=L catchups=C
#         sender_restarts=R served_mismatch=M rebuilds=B
# committed_quorum: versions that committed while an engine was removed during them (not those
# removed between updates, which the next version simply does not include). The seed fixes every
# random draw (the waits, the downtimes, the index of the victim among the engines up then); which
# engines are up at a draw depends on timing.
#
# --composed (issue 39, everything on at once): the trainer is two ranks (sender 0 on h0, sender
# 1 on h9, each the rows it holds of every tensor), the engines are TP-2 workers (engine R holds
# TP rank (R - 1) % 2 of every tensor, lane = its TP rank: replicas {1,2} {3,4} {5,6}, {7,8} added
# midway), route=auto (lanes: each sender's shard relayed from replica to replica), every engine
# with the receiver option rejoin. Besides the strikes on engines (relays among them), the chaos
# restarts the trainer: a sender rank (rank 1 first, then alternating; every 150 s, or once at 40 %
# of a shorter run) is SIGKILLed, the other rank is stopped 1 s later as torchrun's agent stops the
# survivors of a failed worker, and both start again at the same stores from the next version;
# the engines are not restarted (only the chaos restarts an engine, and only one it struck). A
# restart waits until no engine is down, struck or still joining (no new strike begins once it is
# due), and no engine is struck until the restarted trainer committed a version. One strike at a
# time: a relay at the head of a lane takes its lane with it (every engine below it is cut off and
# joins again), and two heads struck together leave an elastic group with no member, which it does
# not survive (docs/ABI.md "Membership": every receiver gone breaks the group). rebuilds counts groups
# made again inside one process (a trainer rank's; an engine process says "joined group" once, and
# a trainer restart restarts no engine: the engines' receivers rejoin by themselves, option rejoin).
#
# Usage: elastic_soak.sh <build dir> [--seconds 600] [--seed 1] [--interval-ms 2000] [--rate 1gbit] [--composed]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SECONDS_RUN=600 SEED=1 INTERVAL=2000 RATE=1gbit MODE=elastic
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --composed) MODE=composed ;;
    --seconds) SECONDS_RUN=${args[i + 1]:?--seconds needs a value} ;;
    --seed) SEED=${args[i + 1]:?--seed needs a value} ;;
    --interval-ms) INTERVAL=${args[i + 1]:?--interval-ms needs a value} ;;
    --rate) RATE=${args[i + 1]:?--rate needs a value} ;;
  esac
done
if [ "$MODE" = composed ]; then cluster_test_main 10 "$RATE" "csoak" "$@"; else cluster_test_main 9 "$RATE" "esoak" "$@"; fi
shift  # --inside
BUILD=$(cd "$1" && pwd)
SCALE=0.05
RANDOM=$SEED
later() { awk -v t="$(now)" -v d="$1" 'BEGIN { printf "%.3f", t + d }'; }  # (no $RANDOM in here: a subshell)
past() { awk -v a="$(now)" -v b="$1" 'BEGIN { exit !(a >= b) }'; }

GROUP_FLAGS=(--until-file "$LOGS/stop" --interval-ms "$INTERVAL" --keep-going 1 --option membership=elastic
  --option commit_quorum=3 --option init_receivers=6)
ENGINE_FLAGS=()
generation=1  # the trainer's: 1, then one more per restart; rank K's log is rank<K>_<generation>
if [ "$MODE" = composed ]; then
  ENGINE_FLAGS=(--tp 2 --rejoin --until-file "$LOGS/stop")
  # trainer_ranks FIRST: both ranks of the trainer from version FIRST; pids in rank0 and rank1.
  trainer_ranks() {
    on h0 "rank0_$generation" "$BUILD/bin/wsync-sample-trainer" --receivers 8 --versions 1 --first-version "$1" \
      --store "$(store_addr)" --scale "$SCALE" --timeout-ms 5000 "${GROUP_FLAGS[@]}" --option route=auto \
      --senders 2 --sender-rank 0
    rank0=$last_pid
    on h9 "rank1_$generation" "$BUILD/bin/wsync-sample-trainer" --receivers 8 --versions 1 --first-version "$1" \
      --store "$WSC_ADDR_9:$((STORE_PORT + 1))" --sender0-store "$(store_addr)" --scale "$SCALE" --timeout-ms 5000 \
      "${GROUP_FLAGS[@]}" --option route=auto --senders 2 --sender-rank 1
    rank1=$last_pid
    trainer=$rank0
    T=$LOGS/rank0_$generation.log
    FIRSTS[$generation]=$1
  }
  declare -A FIRSTS  # generation -> its first version (a trainer numbers its updates from 1)
  trainer_ranks 1
else
  start_trainer 8 "$SCALE" 1 5000 "${GROUP_FLAGS[@]}" --option route=star
  T=$LOGS/trainer.log
fi
trainer_alive() { alive "$trainer" && { [ "$MODE" != composed ] || alive "$rank1"; }; }
declare -A runs started killed self_ended  # rank -> processes so far; log -> start time; log -> when struck / ended by itself
declare -A member_struck=()  # log -> it was a member of the trainer when struck
PROCS=()                         # "pid log" of every engine process
launch() {  # launch RANK: a staged engine on h<RANK>, log engine<RANK>_<n>
  local r=$1 n=$((${runs[$1]:-0} + 1))
  runs[$r]=$n
  on "h$r" "engine${r}_$n" "$BUILD/bin/wsync-sample-engine" --rank "$r" --store "$(store_addr)" --scale "$SCALE" --staged \
    ${ENGINE_FLAGS[@]+"${ENGINE_FLAGS[@]}"}
  printf -v "pid$r" '%s' "$last_pid"
  started["engine${r}_$n"]=$(now)
  PROCS+=("$last_pid engine${r}_$n")
}
for r in 1 2 3 4 5 6; do launch "$r"; done
v1() { grep -q "version 1 committed" "$T" || ! trainer_alive; }
wait_for 60 v1 || fail "version 1 did not commit within 60 s"
trainer_alive || fail "the trainer ended: $(grep -v '^\[' "$T" | tail -3)"

# The next version a restarted trainer publishes: past every version any trainer or engine logged.
next_version() {
  cat "$LOGS"/rank*.log "$LOGS"/engine*.log | sed -n 's/.*version \([0-9][0-9]*\)[: ].*/\1/p' |
    sort -n | tail -1 | awk '{ print $1 + 1 }'
}
restarts=0 restart_at="" calm_after=0
if [ "$MODE" = composed ]; then
  every=150
  [ "$SECONDS_RUN" -ge 300 ] || every=$((SECONDS_RUN * 2 / 5))
  restart_at=$(later "$every")
fi
# restart_trainer: rank V (1, 0, 1, ... by turns) SIGKILLed, the other stopped a second later, both
# started again from the next version; no strike until the new trainer committed (calm_after).
restart_trainer() {
  local victim=$((1 - restarts % 2)) v first
  v="rank$victim"
  kill -KILL "${!v}" 2>/dev/null || true
  sleep 1
  kill -TERM "$rank0" "$rank1" 2>/dev/null || true
  reap "$rank0" 30
  reap "$rank1" 30
  first=$(next_version)
  restarts=$((restarts + 1)) generation=$((generation + 1))
  echo "soak: $(seconds_since "$t0") s: sender rank $victim killed; the trainer restarts from version $first"
  trainer_ranks "$first"
  calm_after=$first
  restart_at=$(later "$every")
}
calm() { [ "$calm_after" = 0 ] || grep -q "^trainer: version [0-9]* committed on" "$T"; }
restart_due() { [ -n "$restart_at" ] && past "$restart_at"; }
settled() {  # every engine process started has verified a version (none is new and still joining)
  local r l
  for r in 1 2 3 4 5 6 7 8; do
    [ -n "${runs[$r]:-}" ] || continue
    l="engine${r}_${runs[$r]}"
    grep -q " verified$" "$LOGS/$l.log" 2>/dev/null || return 1
  done
}

t0=$(now)
end=$(awk -v t="$t0" -v s="$SECONDS_RUN" 'BEGIN { printf "%.3f", t + s }')
half=$(awk -v t="$t0" -v s="$SECONDS_RUN" 'BEGIN { printf "%.3f", t + s / 2 }')
added=0 kills=0 hangs=0 partitions=0 catchup_failures=0
declare -A down_until=()  # rank -> when it is restarted
declare -A strike_end=()  # rank -> when its hang or partition ends (SIGKILL then)
declare -A strike_kind  # rank -> hang or partition
gone() {  # gone RANK: it is dead; restart it 1..4 s later (the draw was made at the strike)
  down_until[$1]=$(later "${down_of[$1]}")
}
declare -A down_of
d=$((3 + RANDOM % 6)); next_chaos=$(later "$d")
# (composed: a run whose trainer restart never found a calm moment goes on, with no new strike, until
# it did, for up to 60 s)
hard_end=$(awk -v t="$end" 'BEGIN { printf "%.3f", t + 60 }')
while ! past "$end" || { [ "$MODE" = composed ] && [ "$restarts" -eq 0 ] && ! past "$hard_end"; }; do
  trainer_alive || fail "the trainer ended during the soak: $(grep -v '^\[' "$T" | tail -3)"
  if restart_due && [ ${#down_until[@]} -eq 0 ] && [ ${#strike_end[@]} -eq 0 ] && calm && settled; then
    restart_trainer
  fi
  if [ "$added" = 0 ] && past "$half"; then
    launch 7; launch 8; added=1
    echo "soak: $(seconds_since "$t0") s: engines 7 and 8 added"
  fi
  for r in "${!down_until[@]}"; do
    if past "${down_until[$r]}"; then unset "down_until[$r]"; launch "$r"; fi
  done
  for r in "${!strike_end[@]}"; do  # a hang or partition ends: SIGKILL, then the port comes back
    if past "${strike_end[$r]}"; then
      p="pid$r"
      kill -KILL "${!p}" 2>/dev/null || true
      [ "${strike_kind[$r]}" != partition ] || "$WSC_CLUSTER" port "h$r" up
      unset "strike_end[$r]" "strike_kind[$r]"
      gone "$r"
    fi
  done
  for r in 1 2 3 4 5 6 7 8; do  # an engine that ended on its own (its catch-up failed): restarted
    p="pid$r"
    l="engine${r}_${runs[$r]:-0}"
    if [ -n "${!p:-}" ] && [ -z "${down_until[$r]:-}" ] && [ -z "${strike_end[$r]:-}" ] && [ -z "${killed[$l]:-}" ] &&
       ! alive "${!p}" && [ -z "${self_ended[$l]:-}" ]; then
      self_ended[$l]=$(now)
      if grep -q "the catch-up to version" "$LOGS/$l.log"; then catchup_failures=$((catchup_failures + 1)); fi
      down_of[$r]=1
      gone "$r"
      echo "soak: $(seconds_since "$t0") s: engine $r ended on its own: $(grep -v '^\[' "$LOGS/$l.log" | tail -1)"
    fi
  done
  one_at_a_time=1  # (composed: a strike only when no engine is down or struck, see above)
  [ "$MODE" != composed ] || { [ ${#down_until[@]} -eq 0 ] && [ ${#strike_end[@]} -eq 0 ]; } || one_at_a_time=0
  if past "$next_chaos" && calm && ! restart_due && [ "$one_at_a_time" = 1 ]; then  # (a due restart: no new strike)
    up=()
    for r in 1 2 3 4 5 6 7 8; do
      p="pid$r"
      if [ -n "${!p:-}" ] && [ -z "${down_until[$r]:-}" ] && [ -z "${strike_end[$r]:-}" ] && alive "${!p}"; then
        up+=("$r")
      fi
    done
    pick=$RANDOM down=$((1 + RANDOM % 4)) d=$((3 + RANDOM % 6)) kind=$((RANDOM % 3))
    if [ ${#up[@]} -gt 4 ]; then  # (the chaos alone never takes the group to the quorum of 3)
      r=${up[$((pick % ${#up[@]}))]}
      p="pid$r"
      killed["engine${r}_${runs[$r]}"]=$(now)
      # (a member of the trainer now for certain: it verified a version this trainer published)
      l="engine${r}_${runs[$r]}"
      since=1
      [ "$MODE" != composed ] || since=${FIRSTS[$generation]}
      if sed -n 's/.*version \([0-9]*\): .* verified$/\1/p' "$LOGS/$l.log" | awk -v f="$since" '$1 >= f { ok = 1 } END { exit !ok }'; then
        member_struck[$l]=1
      fi
      down_of[$r]=$down
      case $kind in
        0)
          kill -KILL "${!p}" 2>/dev/null || true
          kills=$((kills + 1))
          gone "$r"
          echo "soak: $(seconds_since "$t0") s: engine $r killed (back in $down s)" ;;
        1)
          kill -STOP "${!p}" 2>/dev/null || true
          hangs=$((hangs + 1))
          strike_end[$r]=$(later 7) strike_kind[$r]=hang
          echo "soak: $(seconds_since "$t0") s: engine $r hung (killed in 7 s, back $down s later)" ;;
        2)
          "$WSC_CLUSTER" port "h$r" down
          partitions=$((partitions + 1))
          strike_end[$r]=$(later 7) strike_kind[$r]=partition
          echo "soak: $(seconds_since "$t0") s: engine $r cut off (killed in 7 s, back $down s later)" ;;
      esac
    fi
    next_chaos=$(later "$d")
  fi
  sleep 0.2
done
for r in "${!strike_end[@]}"; do  # (a strike still running ends now)
  p="pid$r"
  kill -KILL "${!p}" 2>/dev/null || true
  [ "${strike_kind[$r]}" != partition ] || "$WSC_CLUSTER" port "h$r" up
  unset "strike_end[$r]"
  down_until[$r]=0
done
for r in "${!down_until[@]}"; do launch "$r"; done  # everyone back for the last versions
sleep $(( (INTERVAL * 4) / 1000 + 4 ))
touch "$LOGS/stop"
reap "$trainer" 60
trainer_rc=$rc
if [ "$MODE" = composed ]; then
  reap "$rank1" 60
  [ "$rc" -eq 0 ] || trainer_rc=$rc
fi
bad_exit=()
for pl in "${PROCS[@]}"; do
  pid=${pl% *} l=${pl#* }
  reap "$pid" 30
  if [ -z "${killed[$l]:-}" ] && [ "$rc" -ne 0 ] && ! grep -q "the catch-up to version" "$LOGS/$l.log"; then
    bad_exit+=("$l:$rc")
  fi
done

if [ "$MODE" = composed ]; then  # every generation of rank 0, in order
  for ((g = 1; g <= generation; g++)); do cat "$LOGS/rank0_$g.log"; done >"$LOGS/trainers.txt"
  T=$LOGS/trainers.txt
fi
versions=$(grep -c -E "^trainer: version [0-9]+ (committed on|failed)" "$T" || true)
committed=$(grep -c "^trainer: version [0-9]* committed on" "$T" || true)
failed=$(grep -c "^trainer: version [0-9]* failed" "$T" || true)
leaves=$(grep -c "^trainer: engine rank [0-9]* left the group" "$T" || true)
joins=$(grep -c "^trainer: engine rank [0-9]* joined the group" "$T" || true)
# (a group made more than once by one process: a trainer rank, or an engine that initialised again)
rebuilds=0
for f in "$LOGS"/trainer.log "$LOGS"/rank*_*.log "$LOGS"/engine*.log; do
  [ -f "$f" ] || continue
  n=$(grep -c "^trainer: group 'demo' up\|^engine rank [0-9]*: joined group" "$f" || true)
  [ "$n" -le 1 ] || rebuilds=$((rebuilds + n - 1))
done
quorum=0
quorum_in() {  # quorum_in LOG FIRST: versions of LOG (whose update U is version FIRST + U - 1) committed with a removal
  local u
  for u in $(grep "^trainer: engine rank [0-9]* left the group during update" "$1" | grep -v "between updates" |
             sed -n 's/.*during update \([0-9]*\).*/\1/p' | sort -nu); do
    if grep -q "^trainer: version $(($2 + u - 1)) committed on" "$1"; then quorum=$((quorum + 1)); fi
  done
}
if [ "$MODE" = composed ]; then
  for ((g = 1; g <= generation; g++)); do quorum_in "$LOGS/rank0_$g.log" "${FIRSTS[$g]}"; done
else
  quorum_in "$T" 1
fi
all=$((committed - quorum))
unnamed=$(grep "^trainer: version [0-9]* failed" "$T" | grep -v -c "receiver rank\|no receiver\|quorum\|sender [0-9]* (store at" || true)
mismatch=$(cat "$LOGS"/engine*.log | grep -c "CHECKSUM MISMATCH" || true)
lost=$(cat "$LOGS"/engine*.log | grep -c "no longer hold" || true)
verified=$(cat "$LOGS"/engine*.log | grep -c " verified$" || true)
# Catch-up of each engine that joined later and was not killed first: the first version the
# trainer committed after the engine started (V), and the engine's first verified version.
commit_times=$(sed -n 's/^trainer: version \([0-9]*\) committed at t=\([0-9.]*\)$/\1 \2/p' "$T")
catchups=0 CATCHUP_TIMES=() slow=()
# (one update interval: its first version is V or V + 1. With many senders V + 2: each sender
# takes a joiner at its own boundary and all install it at the first update where every one has
# it, docs/ABI.md "Joining a group of many senders", so one sender's boundary can cost one update)
late=1
[ "$MODE" != composed ] || late=2
for l in "${!started[@]}"; do
  r=${l#engine}; n=${r##*_}; r=${r%_*}
  { [ "$n" -gt 1 ] || [ "$r" -gt 6 ]; } || continue
  first=$(sed -n 's/.*version \([0-9]*\): .* t=\([0-9.]*\) verified$/\1 \2/p' "$LOGS/$l.log" | head -1)
  next=$(awk -v s="${started[$l]}" '$2 > s { print $1; exit }' <<<"$commit_times")
  if [ -z "$first" ]; then
    # None verified: slow, unless the chaos killed it before the second version after its start.
    second_t=$(awk -v n="${next:-0}" -v l="$late" '$1 == n + l { print $2; exit }' <<<"$commit_times")
    struck=${killed[$l]:-${self_ended[$l]:-}}  # (struck by the chaos, or its catch-up failed)
    if [ -z "$struck" ] || { [ -n "$second_t" ] && awk -v k="$struck" -v s="$second_t" 'BEGIN { exit !(k > s) }'; }; then
      slow+=("$l:none")
    fi
    continue
  fi
  catchups=$((catchups + 1))
  CATCHUP_TIMES+=("$(awk -v t="${first#* }" -v s="${started[$l]}" 'BEGIN { printf "%.2f", t - s }')")
  # (a catch-up from a peer verifies a version committed before the engine came: never slow)
  if [ -n "$next" ] && [ "${first% *}" -gt $((next + late)) ]; then slow+=("$l:first=${first% *},next=$next"); fi
done
catch_max=$(printf '%s\n' "${CATCHUP_TIMES[@]:-0}" | sort -g | tail -1)
catch_med=$(printf '%s\n' "${CATCHUP_TIMES[@]:-0}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo
echo "catch-up (engine start to its first verified version), $catchups engines: median $catch_med s, max $catch_max s (a version every $INTERVAL ms)"
peer=$(cat "$LOGS"/engine*.log | grep -c "caught up from a peer" || true)
echo "| seed | seconds | interval ms | versions | committed on all | committed on a quorum | failed | joins | leaves | catch-ups (from a peer) | catch-ups failed | engine-versions verified | served mismatch | kills / hangs / partitions | rebuilds |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
echo "| $SEED | $SECONDS_RUN | $INTERVAL | $versions | $all | $quorum | $failed | $joins | $leaves | $catchups ($peer) | $catchup_failures | $verified | $mismatch | $kills / $hangs / $partitions | $rebuilds |"
echo "soak: seed=$SEED mode=$MODE versions=$versions committed_all=$all committed_quorum=$quorum failed=$failed joins=$joins leaves=$leaves catchups=$catchups sender_restarts=$restarts served_mismatch=$mismatch rebuilds=$rebuilds"
[ "$trainer_rc" -eq 0 ] || fail "the trainer exited with $trainer_rc: $(grep -v '^\[' "$T" | tail -3)"
[ "$rebuilds" -eq 0 ] || fail "$rebuilds groups were made again inside a process (a trainer rank's, or an engine's)"
if [ "$MODE" = composed ]; then
  [ "$restarts" -ge 1 ] || fail "the trainer was never restarted (the run is too short for the restart's turn)"
  for ((g = 2; g <= generation; g++)); do
    grep -q "^trainer: version [0-9]* committed on" "$LOGS/rank0_$g.log" ||
      fail "the trainer restarted as generation $g committed no version"
  done
fi
[ "$mismatch" -eq 0 ] || fail "$mismatch committed versions differ from the trainer's"
[ "$lost" -eq 0 ] || fail "$lost staged engines lost their committed version after an abort"
[ "$unnamed" -eq 0 ] || fail "$unnamed failed versions name no reason: $(grep "failed" "$T" | head -2)"
[ "$versions" -gt 0 ] && [ $((failed * 10)) -le "$versions" ] || fail "$failed of $versions versions failed"
[ "${#bad_exit[@]}" -eq 0 ] || fail "engine processes that ended badly (log:exit): ${bad_exit[*]}"
[ "${#slow[@]}" -eq 0 ] || fail "engines that did not catch up within one update interval: ${slow[*]}"
[ "$joins" -ge "$catchups" ] || fail "$catchups engines caught up but only $joins joins were reported"
member_kills=${#member_struck[@]}  # strikes on processes that had verified a version of the trainer then: members for certain
[ "$leaves" -ge "$member_kills" ] || fail "$member_kills members were killed but only $leaves removals were reported"
echo "elastic_soak: OK"
