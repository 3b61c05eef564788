# Shared by the cluster tests (sourced): run a test's body on an emulated cluster made by
# scripts/cluster.sh, start the sample trainer and engines on its hosts, wait with a bound, time,
# and fail with the logs. The body runs under `cluster.sh run`, which removes the cluster on
# every exit; the outer half then checks that nothing was left behind.

# A test script calls, first thing:
#   cluster_test_main <hosts> <rate> <name> "$@"
# The outer call (ctest's) re-runs the script inside `cluster.sh run` with --inside; the inner
# call returns and the script goes on with its body. Exit 77 (skip) where no cluster can be made.
CLUSTER_SH="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/cluster.sh"

# WSC_KEEP_LOGS=DIR (by hand): the processes' logs are copied to DIR when the test ends; they are
# deleted otherwise.
# The fault tests' flags, read before cluster_test_main: --fault partition|kill|hang (required)
# into FAULT, --rate (default 200mbit) into RATE; other flags are the script's own.
fault_args() {
  RATE=200mbit
  FAULT=""
  local args=("$@") i
  for ((i = 0; i < ${#args[@]}; i++)); do
    [ "${args[i]}" != --rate ] || RATE=${args[i + 1]:-}
    [ "${args[i]}" != --fault ] || FAULT=${args[i + 1]:-}
  done
  case $FAULT in partition|kill|hang) ;; *) echo "$(basename "$0"): --fault takes partition, kill or hang" >&2; exit 2 ;; esac
}

# strike HOST PID: the fault ($FAULT) on HOST, whose process is PID (partition: its switch port
# goes down; kill: SIGKILL; hang: SIGSTOP); t_fault is when. heal HOST PID undoes what can be undone.
strike() {
  case $FAULT in
    partition) "$WSC_CLUSTER" port "$1" down ;;
    kill) kill -KILL "$2" ;;
    hang) kill -STOP "$2" ;;
  esac
  t_fault=$(now)
}
heal() {
  case $FAULT in
    partition) "$WSC_CLUSTER" port "$1" up ;;
    hang) kill -CONT "$2" ;;
  esac
}
# removed_within RANK LIMIT_S: the trainer's log says engine RANK left the group, within LIMIT_S
# seconds of t_fault (waited for up to LIMIT_S + 10 s); removed_s is how long it took.
removed_within() {
  local rank=$1 limit=$2
  engine_removed() { in_log trainer "engine rank $rank left the group"; }
  wait_for $((limit + 10)) engine_removed || fail "the trainer did not remove engine $rank within $((limit + 10)) s of the $FAULT"
  removed_s=$(seconds_since "$t_fault")
  awk -v s="$removed_s" -v l="$limit" 'BEGIN { exit !(s <= l) }' ||
    fail "the trainer removed engine $rank after $removed_s s, over the limit of $limit s"
}

cluster_test_main() {
  local hosts=$1 rate=$2 name=$3 script
  shift 3
  [ "${1:-}" != --inside ] || return 0
  script=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
  [ -n "${WSYNC_GROUP_SECRET:-}" ] || WSYNC_GROUP_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  export WSYNC_GROUP_SECRET UCX_WARN_UNUSED_ENV_VARS=n
  local rc=0
  "$CLUSTER_SH" run "$hosts" "$rate" --name "$name" -- "$script" --inside "$@" || rc=$?
  local left
  left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^wsc-$name-" || true)
  if [ -n "$left" ]; then
    echo "$(basename "$0"): FAILED: namespaces left behind: $left" >&2
    rc=1
  fi
  exit "$rc"
}

LOGS=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; if [ -n "${WSC_KEEP_LOGS:-}" ]; then cp -r "$LOGS" "$WSC_KEEP_LOGS"; fi; rm -rf "$LOGS"' EXIT

fail() {
  echo "$(basename "$0"): FAILED: $*" >&2
  local f
  for f in "$LOGS"/*.log; do
    [ -f "$f" ] && { echo "--- $(basename "$f") (last 15 lines)"; tail -n 15 "$f"; }
  done >&2
  # (again after the logs: a CI report that keeps only the output's end still says why)
  echo "$(basename "$0"): FAILED: $*" >&2
  exit 1
}

now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
alive() { kill -0 "$1" 2>/dev/null; }

# wait_for SECONDS CMD...: true once CMD succeeds, false when SECONDS passed first.
wait_for() {
  local until
  until=$(awk -v t="$(now)" -v s="$1" 'BEGIN { printf "%.2f", t + s }')
  shift
  until "$@"; do
    awk -v t="$(now)" -v u="$until" 'BEGIN { exit !(t < u) }' || return 1
    sleep 0.05
  done
}

# reap PID SECONDS: the child's exit code in $rc, or 124 when it still ran after SECONDS (it is
# killed then). Not in a subshell: only this shell can wait for its children.
reap() {
  if ! wait_for "$2" eval "! alive $1"; then
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    rc=124
    return
  fi
  rc=0
  { wait "$1"; } 2>/dev/null || rc=$?  # no "Killed" line for a child the test killed
}

# on HOST CMD...: CMD on cluster host HOST, in the background; its pid in $last_pid.
on() {
  local host=$1 log=$2
  shift 2
  "$WSC_CLUSTER" exec "$host" "$@" >"$LOGS/$log.log" 2>&1 &
  last_pid=$!
  PIDS+=("$last_pid")
}

# The sample trainer on h0 with its store on h0's address, port 29500, for RECEIVERS engines.
STORE_PORT=29500
store_addr() { echo "$WSC_ADDR_0:$STORE_PORT"; }
start_trainer() {  # start_trainer RECEIVERS SCALE VERSIONS TIMEOUT_MS [trainer flags...]
  local receivers=$1 scale=$2 versions=$3 timeout=$4
  shift 4
  on h0 trainer "$BUILD/bin/wsync-sample-trainer" --receivers "$receivers" --versions "$versions" \
    --store "$(store_addr)" --scale "$scale" --timeout-ms "$timeout" "$@"
  trainer=$last_pid
}
start_engine() {  # start_engine RANK SCALE [engine flags...]: on host h<RANK>; its pid in engine<RANK>
  local rank=$1 scale=$2
  shift 2
  on "h$rank" "engine$rank" "$BUILD/bin/wsync-sample-engine" --rank "$rank" --store "$(store_addr)" --scale "$scale" "$@"
  printf -v "engine$rank" '%s' "$last_pid"
}

in_log() { grep -q -- "$2" "$LOGS/$1.log" 2>/dev/null; }
count_in_log() { grep -c -- "$2" "$LOGS/$1.log" 2>/dev/null || true; }

# Bytes host HOST's NIC sent (tbf's counter on its eth0).
nic_sent_bytes() {
  ip netns exec "$(eval echo "\$WSC_NS_${1#h}")" tc -s qdisc show dev eth0 | sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p' | head -1
}

# The sample trainer on h0 and engine 2 on h2 (the elastic tests): bytes the switch sent to h2 (tbf's
# counter on its port), the model's size from the trainer's log, and the waits built on them.
sent_to_h2() {
  ip netns exec "wsc-$WSC_NAME-sw" tc -s qdisc show dev p2 | sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p' | head -1
}
model_bytes() {
  awk -v g="$(sed -n 's/.*model of [0-9]* tensors, \([0-9.]*\) GB.*/\1/p' "$LOGS/trainer.log")" 'BEGIN { printf "%.0f", g * 1e9 }'
}
h2_got_more_than() { [ "$(sent_to_h2)" -gt "$1" ]; }
v1_committed_or_trainer_gone() { in_log trainer "version 1 committed" || ! alive "$trainer"; }

# route_flags SHAPE: ROUTE_FLAGS, the trainer flags that select the route shape SHAPE: star, chain,
# tree, tree:K or auto (another word: exit 2), as the group option --option route=SHAPE (star too:
# a group without the option takes auto, which relays across hosts), as scripts/cluster-bench.sh does.
route_flags() {
  [[ $1 =~ ^(star|chain|tree|tree:[1-9][0-9]*|auto)$ ]] ||
    { echo "$(basename "$0"): --shape takes star, chain, tree, tree:K or auto (not '$1')" >&2; exit 2; }
  ROUTE_FLAGS=(--option "route=$1")
}

# trainer_gone: the trainer has exited (e.g. init refused an option); its log says why.
trainer_gone() { ! alive "$trainer"; }
