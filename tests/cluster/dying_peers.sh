#!/usr/bin/env bash
# The dying-peer matrix across hosts (docs/RELIABILITY.md "Dying peers across hosts"), by hand: each
# row of the suite's cluster fault tests, RUNS times, against a build (build-asan: ASan+UBSan), with
# every process's log kept and searched for aborts and sanitizer reports. One run of each row is
# in the suite (label cluster; the sanitizer pass runs them under ASan too); this is the soak.
#
#   row       test script                          the member struck mid-update
#   receiver  faults.sh --shape star               engine 1 of 2, fed by the trainer
#   relay     faults.sh --shape chain --victim 1   engine 1, relaying to engine 2
#   sender    senders_faults.sh                    sender 1 of 2 (many senders)
#   elastic   membership_faults.sh                 engine 2 of an elastic group (removed, the rest go on)
#   joiner    joiner_faults.sh                     engine 2 of an elastic group, in its catch-up from engine 1
#
# Prints one line per run and a table: row, fault, runs, passed, failed, aborts, sanitizer reports.
# Exit 0 when every run passed with no abort and no report, 1 otherwise, 2 on a bad command line.
#
# Usage: tests/cluster/dying_peers.sh <build dir> [--runs 20] [--rows receiver,relay,sender,elastic,joiner]
#                                     [--faults kill,hang,partition]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
BUILD=$(cd "$1" && pwd)
shift
RUNS=20
ROWS=receiver,relay,sender,elastic,joiner
FAULTS=kill,hang,partition
while [ $# -gt 0 ]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --rows) ROWS=$2; shift 2 ;;
    --faults) FAULTS=$2; shift 2 ;;
    *) echo "dying_peers.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
row_cmd() {
  case $1 in
    receiver) echo "faults.sh --shape star" ;;
    relay) echo "faults.sh --shape chain --victim 1" ;;
    sender) echo "senders_faults.sh" ;;
    elastic) echo "membership_faults.sh" ;;
    joiner) echo "joiner_faults.sh" ;;
    *) echo "dying_peers.sh: unknown row $1" >&2; exit 2 ;;
  esac
}
PATTERN='AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|LeakSanitizer|Assertion .* failed|Aborted|SIGABRT|Caught signal'
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
table=()
bad=0
for row in ${ROWS//,/ }; do
  read -r -a cmd <<<"$(row_cmd "$row")"
  for fault in ${FAULTS//,/ }; do
    passed=0 failed=0 aborts=0 reports=0
    for run in $(seq 1 "$RUNS"); do
      logs="$WORK/$row-$fault-$run"
      mkdir -p "$logs"
      rc=0
      WSC_KEEP_LOGS="$logs" "$HERE/${cmd[0]}" "$BUILD" --fault "$fault" "${cmd[@]:1}" >"$logs/out.txt" 2>&1 || rc=$?
      if [ "$rc" -eq 77 ]; then echo "dying_peers: no emulated cluster here (exit 77)"; exit 77; fi
      n_abort=$(cat "$logs"/out.txt $(find "$logs" -name '*.log') 2>/dev/null | grep -c -E 'Assertion .* failed|Aborted|SIGABRT|Caught signal' || true)
      n_san=$(cat "$logs"/out.txt $(find "$logs" -name '*.log') 2>/dev/null | grep -c -E 'AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|LeakSanitizer' || true)
      [ "$rc" -eq 0 ] && passed=$((passed + 1)) || failed=$((failed + 1))
      [ "$n_abort" -eq 0 ] || aborts=$((aborts + 1))
      [ "$n_san" -eq 0 ] || reports=$((reports + 1))
      echo "$row $fault run $run: exit $rc, abort lines $n_abort, sanitizer lines $n_san: $(grep -E '^[a-z_]+: ' "$logs/out.txt" | grep -v -E "$PATTERN" | tail -n 1)"
      if [ "$rc" -ne 0 ] || [ "$n_abort" -ne 0 ] || [ "$n_san" -ne 0 ]; then
        bad=1
        mkdir -p "${DYING_PEERS_KEEP:-/tmp/dying-peers-failures}"
        cp -r "$logs" "${DYING_PEERS_KEEP:-/tmp/dying-peers-failures}/"
      fi
    done
    table+=("$(printf '%-9s %-10s %5d %7d %7d %7d %10d' "$row" "$fault" "$RUNS" "$passed" "$failed" "$aborts" "$reports")")
  done
done
printf '%-9s %-10s %5s %7s %7s %7s %10s\n' row fault runs passed failed aborts sanitizer
printf '%s\n' "${table[@]}"
[ "$bad" -eq 0 ] || echo "dying_peers: some runs failed; their logs are in ${DYING_PEERS_KEEP:-/tmp/dying-peers-failures}"
exit "$bad"
