#!/usr/bin/env bash
# cluster.smoke: the sample trainer on host h0 (its store on h0's address) and two sample engines
# on h1 and h2 of an emulated cluster (scripts/cluster.sh): VERSIONS versions commit, both
# engines verify every tensor of each, and the bytes crossed the emulated NICs (their counters),
# so UCX took the network (TCP), not this machine's shared memory.
#
# Usage: smoke.sh <build dir> [--shape star|chain|tree|tree:K|auto] [--rate 1gbit]
#        (env: WSYNC_TEST_ROUTE, the default shape; another than star is the trainer's group option
#        route=<shape>: lib.sh, route_flags)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
RATE=1gbit
args=("$@")
for ((i = 1; i < ${#args[@]}; i++)); do [ "${args[i]}" != --rate ] || RATE=${args[i + 1]:-}; done
cluster_test_main 3 "$RATE" smoke "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
shift
SHAPE=${WSYNC_TEST_ROUTE:-star}
while [ $# -gt 0 ]; do
  case $1 in
    --shape) SHAPE=$2; shift 2 ;;
    --rate) shift 2 ;;
    *) echo "smoke.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
route_flags "$SHAPE"
SCALE=0.2
VERSIONS=2

start_trainer 2 "$SCALE" "$VERSIONS" 20000 ${ROUTE_FLAGS[@]+"${ROUTE_FLAGS[@]}"}
start_engine 1 "$SCALE"
start_engine 2 "$SCALE" --views
t0=$(now)
reap "$trainer" 120
rc_t=$rc
secs=$(seconds_since "$t0")
# A trainer that failed (e.g. init refused --option route=...) leaves the engines waiting: say why now.
[ "$rc_t" -eq 0 ] || fail "the trainer exited with $rc_t (124: still running, killed)"
reap "$engine1" 30
rc_1=$rc
reap "$engine2" 30
rc_2=$rc
[ "$rc_t/$rc_1/$rc_2" = 0/0/0 ] || fail "exit codes trainer/engine1/engine2: $rc_t/$rc_1/$rc_2 (124: still running, killed)"
in_log trainer "version $VERSIONS committed on 2 engine(s)" || fail "the trainer did not commit version $VERSIONS"
for e in engine1 engine2; do
  n=$(count_in_log "$e" " verified")
  [ "$n" -eq "$VERSIONS" ] || fail "$e verified $n of $VERSIONS versions"
done

# The model's size from the trainer's first line ("model of 340 tensors, 0.04 GB"), and what the
# switch sent each engine's host: every version's bytes, at least.
gb=$(sed -n 's/.*model of [0-9]* tensors, \([0-9.]*\) GB.*/\1/p' "$LOGS/trainer.log")
want=$(awk -v g="$gb" -v v="$VERSIONS" 'BEGIN { printf "%.0f", g * 1e9 * v * 0.9 }')
sent_h0=$(nic_sent_bytes h0)
[ "$sent_h0" -ge $((2 * want)) ] ||
  fail "h0's NIC sent $sent_h0 bytes, less than $VERSIONS versions of $gb GB to 2 engines: the bytes did not cross the emulated network"
echo "smoke: $VERSIONS versions of $gb GB committed on 2 engines on other hosts ($SHAPE, NICs $WSC_RATE), verified by both;" \
  "h0's NIC sent $((sent_h0 / 1000000)) MB; $secs s in all"
grep -h "committed on\|verified" "$LOGS"/trainer.log "$LOGS"/engine*.log
