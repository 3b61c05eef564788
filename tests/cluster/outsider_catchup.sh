#!/usr/bin/env bash
# cluster.outsider_catchup: an outsider on another host attacks a catch-up source while it serves.
# An elastic group with the defaults across hosts: the sample trainer on h0 (membership=elastic, a
# version every 2 s), engine 1 on h1 (staged), the outsider on h3. After version 1, engine 2 joins
# from h2 and catches up from engine 1, which for that listens on one TCP port (its catch-up
# world's, transport 'tcp'; docs/SECURITY.md "What listens where"). While it is open the outsider
# holds SILENT silent connections to it and makes ATTEMPTS crash attempts (tests/integration/
# socket_outsider.c: nothing, random bytes, a forged HELLO or data chunk, killed 0-40 ms in). The
# test asserts:
#   - engine 1 listened on no port before the catch-up and on exactly one during it;
#   - engine 2's catch-up completes regardless (it commits the version "caught up from a peer" and
#     verifies it), versions keep committing, and both engines verify every version they commit;
#   - everyone exits 0 and nobody aborted or logged a sanitizer report.
#
# Usage: outsider_catchup.sh <build dir> [--attempts N] [--silent N]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cluster_test_main 4 100mbit ocatchup "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
shift
ATTEMPTS=30
SILENT=60
while [ $# -gt 0 ]; do
  case $1 in
    --attempts) ATTEMPTS=$2; shift 2 ;;
    --silent) SILENT=$2; shift 2 ;;
    *) echo "outsider_catchup.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
OUTSIDER=$BUILD/bin/socket_outsider
[ -x "$OUTSIDER" ] || fail "$OUTSIDER is missing: build it (cmake --build $BUILD --target socket_outsider)"
SCALE=0.2  # ~0.04 GB: at 100 Mbit/s a catch-up takes ~3.5 s

ports_of() {
  ip netns exec "$(eval echo "\$WSC_NS_${1#h}")" ss -ltnH | awk '{ n = split($4, a, ":"); print a[n] }' | sort -n | paste -sd, -
}
no_abort() {
  if grep -l -E "Assertion|Aborted|SIGABRT|Caught signal|AddressSanitizer|runtime error" "$LOGS"/*.log >/dev/null 2>&1; then
    fail "a process aborted or a sanitizer spoke: $(grep -h -E 'Assertion|Aborted|SIGABRT|Caught signal|AddressSanitizer|runtime error' "$LOGS"/*.log | head -3)"
  fi
}

touch_stop="$LOGS/stop"
start_trainer 2 "$SCALE" 1 10000 --interval-ms 2000 --until-file "$touch_stop" --option route=star \
  --option membership=elastic --option init_receivers=1
start_engine 1 "$SCALE" --staged
wait_for 60 v1_committed_or_trainer_gone || fail "version 1 did not commit within 60 s"
in_log trainer "version 1 committed" || fail "the trainer ended before version 1 committed"
[ -z "$(ports_of h1)" ] || fail "engine 1 listens on TCP port(s) $(ports_of h1) before any catch-up"

start_engine 2 "$SCALE" --staged
source_port() { [ -n "$(ports_of h1)" ]; }
wait_for 30 source_port || fail "engine 1 opened no port to serve engine 2's catch-up within 30 s"
port=$(ports_of h1)
echo "catch-up source: engine 1 listens on: $(ip netns exec "$WSC_NS_1" ss -ltnH | tr '\n' ';')"
[[ $port =~ ^[0-9]+$ ]] || fail "engine 1 listens on more than one port while it serves: $port"
"$WSC_CLUSTER" exec h3 "$OUTSIDER" silent "$WSC_ADDR_1" "$port" "$SILENT" >"$LOGS/silent.log" 2>&1 &
silent=$!
PIDS+=($silent)
out=$("$WSC_CLUSTER" exec h3 "$OUTSIDER" crash "$WSC_ADDR_1" "$port" "$ATTEMPTS")
echo "catch-up source: $out"
made=$(echo "$out" | sed -n 's/.*, \([0-9]*\) connected.*/\1/p')
caught_up() { in_log engine2 "caught up from a peer.* verified"; }
wait_for 60 caught_up || { no_abort; fail "engine 2's catch-up did not complete: $(grep -v '^\[' "$LOGS/engine2.log" | tail -2)"; }
{ kill -9 "$silent" && wait "$silent"; } 2>/dev/null || true
alive "$trainer" && alive "$engine1" && alive "$engine2" || { no_abort; fail "a member died under the attack"; }
touch "$touch_stop"
reap "$trainer" 60
rc_t=$rc
reap "$engine1" 30
rc_1=$rc
reap "$engine2" 30
rc_2=$rc
no_abort
[ "$rc_t/$rc_1/$rc_2" = 0/0/0 ] || fail "exit codes trainer/engine1/engine2: $rc_t/$rc_1/$rc_2 (124: still running, killed)"
n_t=$(count_in_log trainer "committed on")
n_1=$(count_in_log engine1 " verified")
[ "$n_1" = "$n_t" ] || fail "$n_t versions committed, engine 1 verified $n_1"
! in_log engine2 "MISMATCH" || fail "engine 2 logged a checksum mismatch"
echo "outsider_catchup: engine 1 served engine 2's catch-up on port $port while an outsider on h3 held $SILENT silent connections to it and made $ATTEMPTS crash attempts (${made:-0} connected); engine 2 caught up and verified, $n_t versions committed, nobody aborted"
