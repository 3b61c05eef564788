# Shared by the benches (sourced by scripts/cluster-bench.sh and scripts/senders-bench.sh).

# wait_bounded SECONDS PID...: true once every PID ended; false (and every PID killed) after SECONDS.
wait_bounded() {
  local until=$((SECONDS + $1)) p running
  shift
  while :; do
    running=0
    for p in "$@"; do ! kill -0 "$p" 2>/dev/null || running=1; done
    [ $running -eq 1 ] || return 0
    [ $SECONDS -lt $until ] || break
    sleep 0.2
  done
  for p in "$@"; do kill -KILL "$p" 2>/dev/null || true; done
  return 1
}
