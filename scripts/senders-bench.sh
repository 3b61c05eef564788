#!/usr/bin/env bash
# The many-senders bench: whole updates from M = 1, 2, 4 sender hosts (each holding 1/M of every
# tensor, torch.chunk rows, sent as slices) to N = 2 and 8 receiver hosts that take full tensors
# (tp 1) or, as TP-2 engine workers, half of every tensor each (tp 2), on an emulated cluster
# (scripts/cluster.sh: network namespaces, NICs shaped with tc tbf both ways). Senders are on
# h0..h(M-1), receivers on h4..h(3+N): the same hosts in every row. One invocation makes the
# cluster, runs every row with wsync-cluster-bench, removes the cluster and prints:
#
#   tp senders receivers rx_MiB seconds aggregate_GB/s floor_s ratio_to_floor speedup_vs_1
#   senders_4_speedup: time with 1 sender over time with 4 (8 receivers, or the most asked; tp 1)
#   tp2_time_ratio: time with TP-2 halves over time with full tensors (the most senders and receivers)
#
# seconds: the slowest sender's median over --iters of one whole update (--batches send_batch calls
# + finalize: a version commits only when every sender finalized it). rx_MiB: what each receiver takes (the
# update, or its half). floor_s: the larger of the busiest sender NIC's time (what it sends to all N
# receivers) and a receiver NIC's time (rx_MiB): ratio_to_floor = floor_s / seconds (<= 1).
# aggregate: bytes delivered to all receivers per second. One sender to full tensors is today's
# star (no planning): the baseline; with TP-2 receivers one sender plans (num_senders=1).
#
# Lanes (--lanes: many senders x relays): M = 4 senders (and 1, the baseline) into K = 1, 2, 4
# replicas of TP-2 receivers (N = 2K, each on its own host, lane = its TP rank), with route auto
# (each sender's shard goes to the first replica's receiver of that TP rank, which relays it down
# its lane) and with route star (each sender feeds every replica itself). It adds a route column
# and prints:
#
#   lanes_k4_over_k1: time into 4 replicas over time into 1 (4 senders, auto; ideal 1)
#   lanes_vs_floor: floor_s / seconds with 4 senders into 4 replicas (auto; ideal 1)
#   lanes_vs_one_sender: time from 1 sender over time from 4 (4 replicas, auto; ideal about 2:
#     one sender's NIC carries the whole update once, a TP-2 receiver's NIC half)
#
# With route auto a sender's NIC carries its share once per lane that needs it, not once per
# replica: floor_s counts that.
#
# Usage: scripts/senders-bench.sh [--rate 200mbit] [--mib 64] [--iters 3] [--warmup 1] [--batches 6]
#          [--senders 1,2,4] [--receivers 2,8] [--tp 1,2] [--routes star] [--build build] [--name senders]
#          [--option key=value ...] [--lanes] [--smoke]
#   --batches: send_batch calls per version (the 8 MiB tensors in that many groups, at most one each).
#   --tp: the receivers' modes, a list of 1 (full tensors) and 2 (TP-2 halves; even receiver counts).
#   --routes: the senders' route option, a list of star and auto (default star).
#   --option: a group option for every sender (wsync-cluster-bench --option), e.g. window=8.
#   --lanes: senders 1,4, receivers 2,4,8, tp 2, routes auto,star, and the lanes summary.
#   --smoke: senders 1,2, receivers 2, 4 MiB, 1 iteration, no warm-up (the suite's cluster.senders_smoke);
#     with --lanes: senders 1,2, receivers 2,4 (the suite runs both).
# Needs root (network namespaces); exits 77 where an emulated cluster cannot be made, 2 on a bad
# command line, 1 when a row fails or a figure is impossible (faster than the NICs allow).
set -euo pipefail
cd "$(dirname "$0")/.."
readonly REPO=$PWD
. "$REPO/scripts/bench-lib.sh"  # wait_bounded
RATE=200mbit MIB=64 ITERS=3 WARMUP=1 BATCHES=6 SENDERS=1,2,4 RECEIVERS=2,8 TPS=1,2 ROUTES=star BUILD=build NAME=senders
LANES=0 SMOKE=0 SENDER_OPTS=()
readonly PORT_BASE=29700 RX_BASE=4

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
bad_usage() { echo "senders-bench.sh: $*" >&2; echo "(scripts/senders-bench.sh --help prints the usage)" >&2; exit 2; }
die() { echo "senders-bench.sh: $*" >&2; exit 1; }

parse_args() {
  while [ $# -gt 0 ]; do
    case $1 in
      -h|--help) usage; exit 0 ;;
      --smoke) SMOKE=1; shift; continue ;;
      --lanes) LANES=1; shift; continue ;;
      --inside) INSIDE=1; shift; continue ;;
      --rate|--mib|--iters|--warmup|--batches|--senders|--receivers|--tp|--routes|--build|--name|--option) [ $# -ge 2 ] || bad_usage "$1 needs a value" ;;
      *) bad_usage "unknown flag $1" ;;
    esac
    case $1 in
      --rate) RATE=$2 ;;
      --mib) MIB=$2 ;;
      --iters) ITERS=$2 ;;
      --warmup) WARMUP=$2 ;;
      --batches) BATCHES=$2 ;;
      --senders) SENDERS=$2 ;;
      --receivers) RECEIVERS=$2 ;;
      --tp) TPS=$2 ;;
      --routes) ROUTES=$2 ;;
      --option) [[ $2 == ?*=* ]] || bad_usage "--option takes key=value"; SENDER_OPTS+=(--option "$2") ;;
      --build) BUILD=$2 ;;
      --name) NAME=$2 ;;
    esac
    shift 2
  done
  if [ $LANES -eq 1 ]; then
    SENDERS=1,4 RECEIVERS=2,4,8 TPS=2 ROUTES=auto,star
    [ $SMOKE -eq 0 ] || SENDERS=1,2 RECEIVERS=2,4
  fi
  [ $SMOKE -eq 0 ] || { MIB=4 ITERS=1 WARMUP=0; [ $LANES -eq 1 ] || SENDERS=1,2 RECEIVERS=2; }
  [[ $MIB =~ ^[1-9][0-9]*$ ]] || bad_usage "--mib takes a whole number >= 1"
  [[ $ITERS =~ ^[1-9][0-9]*$ ]] || bad_usage "--iters takes a whole number >= 1"
  [[ $WARMUP =~ ^[0-9]+$ ]] || bad_usage "--warmup takes a whole number >= 0"
  [[ $BATCHES =~ ^[1-9][0-9]*$ ]] || bad_usage "--batches takes a whole number >= 1"
  [[ $SENDERS =~ ^[1-4](,[1-4])*$ ]] || bad_usage "--senders takes a list of 1..4 like 1,2,4"
  [[ $RECEIVERS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || bad_usage "--receivers takes a list like 2,8"
  [[ $TPS =~ ^[12](,[12])*$ ]] || bad_usage "--tp takes a list of 1 and 2"
  [[ $ROUTES =~ ^(star|auto)(,(star|auto))*$ ]] || bad_usage "--routes takes a list of star and auto"
  [[ ,$SENDERS, == *,1,* ]] || SENDERS=1,$SENDERS  # the speedup needs the row of 1
  [ $LANES -eq 1 ] || [[ ,$TPS, == *,1,* ]] || TPS=1,$TPS  # the TP-2 ratio needs full tensors
  if [[ ,$TPS, == *,2,* ]]; then
    local n
    for n in ${RECEIVERS//,/ }; do [ $((n % 2)) -eq 0 ] || bad_usage "TP-2 rows need even receiver counts, not $n"; done
  fi
}

max_of() { echo "${1//,/$'\n'}" | sort -n | tail -1; }
bench_bin() { echo "$BUILD_DIR/bin/wsync-cluster-bench"; }

row_failed() {
  echo "senders-bench.sh: row senders=$1 receivers=$2 failed: $3" >&2
  local f
  for f in "$ROW_DIR"/*.out; do echo "--- $(basename "$f")"; grep -v "^\[wsync info" "$f" | tail -n 5; done >&2
  exit 1
}

# run_row M N PORT TP ROUTE: senders on h0..h(M-1), receivers on h4..h(3+N); prints the slowest
# sender's median.
run_row() {
  local m=$1 n=$2 port=$3 tp=$4 route=$5 pids=() k i p rc=0 s0 limit secs="" s planned=1 rxflags=()
  # one sender to full tensors is today's star; every other row plans (--senders)
  [ "$m" -gt 1 ] || [ "$tp" -gt 1 ] || planned=0
  [ "$tp" -eq 1 ] || rxflags=(--tp "$tp")
  rm -rf "$ROW_DIR" && mkdir -p "$ROW_DIR"
  s0="$WSC_ADDR_0:$port"
  for ((k = 0; k < m; k++)); do
    local addr_var="WSC_ADDR_$k" extra=()
    [ "$planned" -eq 0 ] || extra=(--senders "$m" --sender-rank "$k")
    [ "$k" -eq 0 ] || extra+=(--sender0-store "$s0")
    "$WSC_CLUSTER" exec "h$k" "$(bench_bin)" --role sender --receivers "$n" --store "${!addr_var}:$port" \
      "${extra[@]}" --mib "$MIB" --tensor-mib 8 --iters "$ITERS" --batches "$BATCHES" \
      --warmup "$WARMUP" --option route="$route" "${SENDER_OPTS[@]}" >"$ROW_DIR/sender$k.out" 2>&1 &
    pids+=($!)
  done
  for ((i = 1; i <= n; i++)); do
    "$WSC_CLUSTER" exec "h$((RX_BASE + i - 1))" "$(bench_bin)" --role receiver --rank "$i" --store "$s0" \
      --mib "$MIB" --tensor-mib 8 "${rxflags[@]}" >"$ROW_DIR/receiver$i.out" 2>&1 &
    pids+=($!)
  done
  limit=$(awk -v n="$n" -v m="$MIB" -v k="$((ITERS + WARMUP))" -v r="$WSC_RATE_BPS" \
    'BEGIN { printf "%d", 60 + 4 * k * n * m * 8388608 / r }')
  wait_bounded "$limit" "${pids[@]}" || row_failed "$m" "$n" "still running after $limit s (killed)"
  for p in "${pids[@]}"; do { wait "$p"; } 2>/dev/null || rc=1; done
  [ $rc -eq 0 ] || row_failed "$m" "$n" "a process failed"
  for ((k = 0; k < m; k++)); do
    s=$(sed -n 's/^cluster-bench: .*median_s=\([0-9.]*\).*/\1/p' "$ROW_DIR/sender$k.out")
    [ -n "$s" ] || row_failed "$m" "$n" "sender $k printed no figures"
    secs=$(awk -v a="$secs" -v b="$s" 'BEGIN { print (a == "" || b > a) ? b : a }')
  done
  echo "$secs"
}

# floor_s M N TP ROUTE: the busiest NIC's time: what a sender sends (to each receiver, the part of
# its 1/M that receiver's 1/TP needs; with route auto, once per lane instead of once per replica),
# or what a receiver takes (1/TP of the update).
floor_s() {
  local copies=1  # receivers of one TP rank a sender feeds itself
  [ "$4" != star ] || copies=$(($2 / $3))
  awk -v m="$1" -v n="$copies" -v tp="$3" -v b="$MIB" -v r="$WSC_RATE_BPS" 'BEGIN {
    busiest = 0
    for (k = 0; k < m; k++) {
      tot = 0
      for (c = 0; c < tp; c++) {
        lo = (k / m > c / tp) ? k / m : c / tp
        hi = ((k + 1) / m < (c + 1) / tp) ? (k + 1) / m : (c + 1) / tp
        if (hi > lo) tot += (hi - lo) * n
      }
      if (tot > busiest) busiest = tot
    }
    s = busiest * b
    if (s < b / tp) s = b / tp
    print s * 8388608 / r
  }'
}

declare -A SECS FLOOR

inside() {
  BUILD_DIR=$(cd "$BUILD" && pwd)
  ROW_DIR=$(mktemp -d)
  trap 'rm -rf "$ROW_DIR"' EXIT
  echo "senders-bench: wsync-cluster-bench on an emulated cluster of $WSC_HOSTS hosts, NICs $WSC_RATE each way" \
    "(tc tbf), MTU $WSC_MTU; update $MIB MiB (8 MiB tensors) in $((BATCHES < (MIB + 7) / 8 ? BATCHES : (MIB + 7) / 8))" \
    "batch(es), median of $ITERS after $WARMUP warm-up; this machine:" \
    "$(nproc) cores"
  printf '%-3s %8s %9s %7s %9s %15s %9s %15s %13s %6s\n' tp senders receivers rx_MiB seconds aggregate_GB/s \
    floor_s ratio_to_floor speedup_vs_1 route
  local m n tp route port=$PORT_BASE s f
  for route in ${ROUTES//,/ }; do
    for tp in ${TPS//,/ }; do
      for n in ${RECEIVERS//,/ }; do
        for m in ${SENDERS//,/ }; do
          s=$(run_row "$m" "$n" "$port" "$tp" "$route")  # (a subshell: the port moves on out here)
          port=$((port + 1))
          SECS["$m $n $tp $route"]=$s
          f=$(floor_s "$m" "$n" "$tp" "$route")
          FLOOR["$m $n $tp $route"]=$f
          awk -v tp="$tp" -v m="$m" -v n="$n" -v s="$s" -v b="$MIB" -v f="$f" -v one="${SECS["1 $n $tp $route"]}" \
            -v route="$route" 'BEGIN { printf "%-3d %8d %9d %7.1f %9.3f %15.3f %9.3f %15.3f %13.2f %6s\n", tp, m, n,
                                       b / tp, s, n * b / tp * 1048576 / 1e9 / s, f, f / s, one / s, route }'
          # tbf passes its bucket at once: a row may beat its floor by that much, never by more than 10%
          awk -v f="$f" -v s="$s" -v burst="${WSC_BURST_BYTES:-0}" -v r="$WSC_RATE_BPS" \
            'BEGIN { exit !(s < 0.9 * (f - burst * 8 / r)) }' &&
            die "tp=$tp senders=$m receivers=$n route=$route took $s s, less than its NICs allow ($f s): the bytes did not cross the emulated network"
        done
      done
    done
  done
  local top most low route1
  top=$(max_of "$RECEIVERS")
  most=$(max_of "$SENDERS")
  route1=${ROUTES%%,*}
  if [ $LANES -eq 1 ]; then
    low=$(echo "${RECEIVERS//,/$'\n'}" | sort -n | head -1)
    awk -v a="${SECS["$most $top 2 auto"]}" -v b="${SECS["$most $low 2 auto"]}" -v m="$most" -v k="$((top / 2))" \
      -v k1="$((low / 2))" 'BEGIN { printf "lanes_k%d_over_k%d: %.2f (%d senders, route auto, TP-2 replicas)\n", k, k1, a / b, m }'
    awk -v s="${SECS["$most $top 2 auto"]}" -v f="${FLOOR["$most $top 2 auto"]}" -v m="$most" -v k="$((top / 2))" \
      'BEGIN { printf "lanes_vs_floor: %.2f (%d senders, %d replicas, route auto)\n", f / s, m, k }'
    awk -v a="${SECS["1 $top 2 auto"]}" -v b="${SECS["$most $top 2 auto"]}" -v m="$most" -v k="$((top / 2))" \
      'BEGIN { printf "lanes_vs_one_sender: %.2f (%d senders against 1, %d replicas, route auto)\n", a / b, m, k }'
    awk -v a="${SECS["$most $top 2 star"]}" -v b="${SECS["$most $top 2 auto"]}" -v m="$most" -v k="$((top / 2))" \
      'BEGIN { printf "lanes_vs_star: %.2f (%d senders, %d replicas: route star over route auto)\n", a / b, m, k }'
  else
    awk -v a="${SECS["1 $top 1 $route1"]}" -v b="${SECS["$most $top 1 $route1"]}" -v m="$most" -v n="$top" \
      'BEGIN { printf "senders_%d_speedup: %.2f (%d receivers, full tensors)\n", m, a / b, n }'
    [ -z "${SECS["$most $top 2 $route1"]:-}" ] ||
      awk -v a="${SECS["$most $top 2 $route1"]}" -v b="${SECS["$most $top 1 $route1"]}" -v m="$most" -v n="$top" \
        'BEGIN { printf "tp2_time_ratio: %.2f (%d senders, %d receivers: TP-2 halves against full tensors)\n", a / b, m, n }'
  fi
  echo "NIC rate: $WSC_RATE each way per host"
}

INSIDE=0
parse_args "$@"
if [ $INSIDE -eq 1 ]; then
  inside
  exit 0
fi
[ -x "$BUILD/bin/wsync-cluster-bench" ] ||
  die "$BUILD/bin/wsync-cluster-bench is missing: build it (scripts/setup.sh, or cmake --build $BUILD --target wsync-cluster-bench wsync_transport_ucx wsync_adapter_native)"
[ -n "${WSYNC_GROUP_SECRET:-}${WSYNC_GROUP_SECRET_FILE:-}" ] ||
  export WSYNC_GROUP_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
export UCX_WARN_UNUSED_ENV_VARS=n
exec "$REPO/scripts/cluster.sh" run $((RX_BASE + $(max_of "$RECEIVERS"))) "$RATE" --name "$NAME" -- \
  "$REPO/scripts/senders-bench.sh" --inside "$@"
