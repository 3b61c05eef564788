#!/usr/bin/env bash
# cluster.outsider: an outsider on another host attacks a multi-host group that runs with the
# defaults (docs/SECURITY.md "What listens where"). The sample trainer on h0 (its store on h0's
# address), engine 1 on h1 relaying to engine 2 on h2 (route=chain), the outsider on h3. Versions
# are published all along; the test asserts:
#
#   1. the doors: no member has UCX loaded (the default across hosts without RDMA is transport
#      'tcp'); engine 2 listens on no TCP port; engine 1 (a relay) on one (its relay world's); the
#      trainer on three (store, control, transport);
#   2. crash: tests/integration/socket_outsider.c connects to every one of those ports ATTEMPTS
#      times, sends nothing, random bytes, a forged handshake or a forged data chunk, and is killed
#      0-40 ms in (the recipe that aborted UCX's TCP transport's victims 8 of 8 times);
#   3. silent: SILENT connections held open to each of those ports meanwhile;
#   4. meanwhile versions keep committing, both engines verify every tensor of every version,
#      everyone exits 0, and nobody aborted or logged a sanitizer report.
#
# Usage: outsider.sh <build dir> [--attempts N] [--silent N]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cluster_test_main 4 1gbit outsider "$@"
shift  # --inside

BUILD=$(cd "$1" && pwd)
shift
ATTEMPTS=60
SILENT=100
while [ $# -gt 0 ]; do
  case $1 in
    --attempts) ATTEMPTS=$2; shift 2 ;;
    --silent) SILENT=$2; shift 2 ;;
    *) echo "outsider.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
OUTSIDER=$BUILD/bin/socket_outsider
[ -x "$OUTSIDER" ] || fail "$OUTSIDER is missing: build it (cmake --build $BUILD --target socket_outsider)"
SCALE=0.02

# The TCP ports host HOST listens on (only the member on it runs there), comma-separated.
ports_of() {
  ip netns exec "$(eval echo "\$WSC_NS_${1#h}")" ss -ltnH | awk '{ n = split($4, a, ":"); print a[n] }' | sort -n | paste -sd, -
}
count_ports() { [ -z "$1" ] && echo 0 || echo "$1" | tr ',' '\n' | wc -l; }
committed() { count_in_log trainer "committed on"; }
no_abort() {
  if grep -l -E "Assertion|Aborted|SIGABRT|Caught signal|AddressSanitizer|runtime error" "$LOGS"/*.log >/dev/null 2>&1; then
    fail "a process aborted or a sanitizer spoke: $(grep -h -E 'Assertion|Aborted|SIGABRT|Caught signal|AddressSanitizer|runtime error' "$LOGS"/*.log | head -3)"
  fi
}

touch_stop="$LOGS/stop"
start_trainer 2 "$SCALE" 1 10000 --option route=chain --until-file "$touch_stop"
start_engine 1 "$SCALE"
start_engine 2 "$SCALE" --views
wait_for 60 in_log trainer "version 1 committed" || fail "version 1 did not commit"

# 1. The doors.
for pid in "$trainer" "$engine1" "$engine2"; do
  for p in $(pgrep -P "$pid") "$pid"; do
    ! grep -q libwsync_transport_ucx "/proc/$p/maps" 2>/dev/null || fail "process $p has UCX's transport loaded"
  done
done
p0=$(ports_of h0)
p1=$(ports_of h1)
p2=$(ports_of h2)
[ "$(count_ports "$p2")" -eq 0 ] || fail "engine 2 (no relay) listens on TCP port(s) $p2"
[ "$(count_ports "$p1")" -eq 1 ] || fail "engine 1 (a relay) listens on TCP port(s) '$p1', one expected"
[ "$(count_ports "$p0")" -eq 3 ] || fail "the trainer listens on TCP port(s) '$p0', three expected (store, control, transport)"
echo "outsider: listening: trainer $p0, relay $p1, engine 2 none; no member has UCX loaded"

before=$(committed)
# 3. silent connections to every port, held while the crash attempts run.
silent=()
for hp in $(echo "$p0" | tr ',' '\n' | sed "s/^/$WSC_ADDR_0:/") "$WSC_ADDR_1:$p1"; do
  "$WSC_CLUSTER" exec h3 "$OUTSIDER" silent "${hp%:*}" "${hp##*:}" "$SILENT" >"$LOGS/silent-${hp##*:}.log" 2>&1 &
  silent+=($!)
  PIDS+=($!)
done
# 2. crash attempts, at the trainer's ports and the relay's.
out0=$("$WSC_CLUSTER" exec h3 "$OUTSIDER" crash "$WSC_ADDR_0" "$p0" "$ATTEMPTS")
out1=$("$WSC_CLUSTER" exec h3 "$OUTSIDER" crash "$WSC_ADDR_1" "$p1" "$ATTEMPTS")
echo "trainer: $out0"
echo "relay: $out1"
for o in "$out0" "$out1"; do
  made=$(echo "$o" | sed -n 's/.*, \([0-9]*\) connected.*/\1/p')
  [ "${made:-0}" -ge $((ATTEMPTS / 2)) ] || fail "the outsider connected too rarely to count: $o"
done
alive "$trainer" && alive "$engine1" && alive "$engine2" || { no_abort; fail "a member died under the attack"; }
wait_for 30 eval '[ "$(committed)" -ge $((before + 2)) ]' ||
  fail "versions stopped committing during the attack ($before before, $(committed) after)"
{ kill -9 "${silent[@]}" && wait "${silent[@]}"; } 2>/dev/null || true
touch "$touch_stop"
reap "$trainer" 60
rc_t=$rc
reap "$engine1" 30
rc_1=$rc
reap "$engine2" 30
rc_2=$rc
no_abort
[ "$rc_t/$rc_1/$rc_2" = 0/0/0 ] || fail "exit codes trainer/engine1/engine2: $rc_t/$rc_1/$rc_2 (124: still running, killed)"
n_t=$(committed)
n_1=$(count_in_log engine1 " verified")
n_2=$(count_in_log engine2 " verified")
[ "$n_1" = "$n_t" ] && [ "$n_2" = "$n_t" ] || fail "$n_t versions committed, engines verified $n_1 and $n_2"
refused=$(grep -h -o "closed a connection from [^:]*" "$LOGS"/trainer.log "$LOGS"/engine1.log 2>/dev/null | wc -l)
echo "outsider: $n_t versions committed and verified by both engines across hosts ($before before the attack), $((2 * ATTEMPTS)) crash attempts and $((${#silent[@]} * SILENT)) silent connections from another host, $refused refusal line(s) logged; nobody aborted"
