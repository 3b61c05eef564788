#!/usr/bin/env bash
# The cluster bench: wsync's whole updates from one sender to 1, 2, 4 and 8 receivers, each on a
# host of its own on an emulated cluster (scripts/cluster.sh: network namespaces, NICs shaped with
# tc tbf both ways), for each route shape asked. One invocation makes the cluster (1 + the largest
# receiver count hosts), runs every row with wsync-cluster-bench, removes the cluster and prints:
#
#   shape receivers verify seconds GB/s/receiver ratio_to_floor time(N)/time(1) cpu
#   fanout_<N>_over_1: time with the most receivers over time with 1 (the first shape; star: ~N)
#   nic_efficiency_1: the NIC floor over the time, 1 receiver (the first shape)
#   checksum_cost_cluster: what verify_payload=1 costs against 0 (1 and the most receivers)
#
# seconds: the median over --iters of one whole update (--batches send_batch calls, as a trainer
# publishes layer by layer, + finalize, after --warmup).
# The NIC floor is the update's bytes over the NIC rate: the time one receiver's copy takes on its
# NIC; ratio_to_floor = floor / seconds (<= 1; a star shares the sender's NIC, so ~1/N). cpu: the
# wsync processes' CPU seconds over the row's wall time (in cores of this machine), and the
# whole machine's busy share (/proc/stat, other users included) during the row.
#
# Usage: scripts/cluster-bench.sh [--rate 1gbit] [--mib 256] [--iters 3] [--warmup 1] [--batches 6]
#          [--receivers 1,2,4,8] [--shapes auto,star] [--mtu 9000] [--build build] [--name bench] [--smoke]
#          [--timeout-ms 120000]
#   --shapes: a list (auto,star,chain,tree:2); each is passed to the sender as the group option
#             route=<shape>; the first one gives the summary lines (auto: wsync's default).
#   --receivers: 1 is always run (the rows are compared with it).
#   --option KEY=VALUE: a group option for the sender (repeatable), e.g. --option piece_bytes=1m.
#   --batches: send_batch calls per version (the model's 32 MiB tensors split in that many groups;
#             at most one per tensor).
#   --smoke: receivers 1,2, 8 MiB, 1 iteration, no warm-up (the suite's cluster.bench_smoke).
#   --timeout-ms: the sender's and every receiver's timeout_ms. It bounds silence, not size: a short
#             one (5000) with a large update shows that a healthy fleet never times out.
# Needs root (network namespaces); exits 77 where an emulated cluster cannot be made, 2 on a bad
# command line, 1 when a row fails or a figure is impossible (faster than the NIC allows).
set -euo pipefail
cd "$(dirname "$0")/.."
readonly REPO=$PWD
. "$REPO/scripts/bench-lib.sh"  # wait_bounded
RATE=1gbit MIB=256 ITERS=3 WARMUP=1 BATCHES=6 RECEIVERS=1,2,4,8 SHAPES=auto,star MTU=9000 BUILD=build NAME=bench
TIMEOUT_MS=120000
EXTRA_OPTIONS=()
readonly PORT_BASE=29600

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
bad_usage() { echo "cluster-bench.sh: $*" >&2; echo "(scripts/cluster-bench.sh --help prints the usage)" >&2; exit 2; }
die() { echo "cluster-bench.sh: $*" >&2; exit 1; }

parse_args() {
  while [ $# -gt 0 ]; do
    case $1 in
      -h|--help) usage; exit 0 ;;
      --smoke) RECEIVERS=1,2 MIB=8 ITERS=1 WARMUP=0; shift; continue ;;
      --inside) INSIDE=1; shift; continue ;;
      --rate|--mib|--iters|--warmup|--batches|--receivers|--shapes|--mtu|--build|--name|--option|--timeout-ms) [ $# -ge 2 ] || bad_usage "$1 needs a value" ;;
      *) bad_usage "unknown flag $1" ;;
    esac
    case $1 in
      --rate) RATE=$2 ;;
      --mib) MIB=$2 ;;
      --timeout-ms) [[ $2 =~ ^[0-9]+$ ]] || bad_usage "--timeout-ms takes milliseconds"; TIMEOUT_MS=$2 ;;
      --iters) ITERS=$2 ;;
      --warmup) WARMUP=$2 ;;
      --batches) BATCHES=$2 ;;
      --receivers) RECEIVERS=$2 ;;
      --option) [[ $2 == ?*=* ]] || bad_usage "--option takes KEY=VALUE"; EXTRA_OPTIONS+=(--option "$2") ;;
      --shapes) SHAPES=$2 ;;
      --mtu) MTU=$2 ;;
      --build) BUILD=$2 ;;
      --name) NAME=$2 ;;
    esac
    shift 2
  done
  [[ $MIB =~ ^[1-9][0-9]*$ ]] || bad_usage "--mib takes a whole number >= 1"
  [[ $ITERS =~ ^[1-9][0-9]*$ ]] || bad_usage "--iters takes a whole number >= 1"
  [[ $WARMUP =~ ^[0-9]+$ ]] || bad_usage "--warmup takes a whole number >= 0"
  [[ $BATCHES =~ ^[1-9][0-9]*$ ]] || bad_usage "--batches takes a whole number >= 1"
  [[ $RECEIVERS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || bad_usage "--receivers takes a list like 1,2,4,8"
  [[ $SHAPES =~ ^[a-z0-9:]+(,[a-z0-9:]+)*$ ]] || bad_usage "--shapes takes a list like star,chain,tree:2"
  [[ ,$RECEIVERS, == *,1,* ]] || RECEIVERS=1,$RECEIVERS  # time(N)/time(1) needs the row of 1
}

# --- one row ------------------------------------------------------------------------------------------

cpu_snapshot() { awk '/^cpu /{ busy = $2 + $3 + $4 + $7 + $8 + $9; print busy, busy + $5 + $6 }' /proc/stat; }
bench_bin() { echo "$BUILD_DIR/bin/wsync-cluster-bench"; }

# sender_flags SHAPE N VERIFY PORT: the sender's command line.
sender_flags() {
  local flags=(--role sender --receivers "$2" --store "$WSC_ADDR_0:$4" --mib "$MIB" --iters "$ITERS"
               --warmup "$WARMUP" --batches "$BATCHES" --option "verify_payload=$3" --timeout-ms "$TIMEOUT_MS")
  flags+=(--option "route=$1" ${EXTRA_OPTIONS[@]+"${EXTRA_OPTIONS[@]}"})
  echo "${flags[@]}"
}

# A bound on a row's wall time: 4 times its floor at the sender's NIC (N copies), plus a minute.
row_limit_s() { awk -v n="$1" -v m="$MIB" -v k="$((ITERS + WARMUP))" -v r="$WSC_RATE_BPS" \
  'BEGIN { printf "%d", 60 + 4 * k * n * m * 8388608 / r }'; }

# run_row SHAPE N VERIFY PORT: sender on h0, receivers on h1..hN; leaves their output in $ROW_DIR.
run_row() {
  local shape=$1 n=$2 verify=$3 port=$4 pids=() i p rc=0
  rm -rf "$ROW_DIR" && mkdir -p "$ROW_DIR"
  # shellcheck disable=SC2046  # the flags are words without spaces
  "$WSC_CLUSTER" exec h0 "$(bench_bin)" $(sender_flags "$shape" "$n" "$verify" "$port") >"$ROW_DIR/sender.out" 2>&1 &
  pids+=($!)
  for ((i = 1; i <= n; i++)); do
    "$WSC_CLUSTER" exec "h$i" "$(bench_bin)" --role receiver --rank "$i" --store "$WSC_ADDR_0:$port" --mib "$MIB" \
      --timeout-ms "$TIMEOUT_MS" >"$ROW_DIR/receiver$i.out" 2>&1 &
    pids+=($!)
  done
  local limit
  limit=$(row_limit_s "$n")
  wait_bounded "$limit" "${pids[@]}" || row_failed "$shape" "$n" "$verify" "still running after $limit s (killed)"
  for p in "${pids[@]}"; do { wait "$p"; } 2>/dev/null || rc=1; done
  [ $rc -eq 0 ] || row_failed "$shape" "$n" "$verify" "a process failed"
}

row_failed() {
  echo "cluster-bench.sh: row $1 receivers=$2 verify_payload=$3 failed: $4" >&2
  local f
  for f in "$ROW_DIR"/*.out; do echo "--- $(basename "$f")"; grep -v "^\[" "$f" | tail -n 5; done >&2
  exit 1
}

# field NAME FILE: NAME=value from the "cluster-bench:" line of FILE.
field() { sed -n "s/^cluster-bench: .*\b$1=\([0-9.]*\).*/\1/p" "$2" | head -1; }

# measure_row SHAPE N VERIFY PORT: runs the row and prints "seconds cores busy%".
measure_row() {
  local b0 t0 b1 t1 start wall secs cpu=0 f c
  read -r b0 t0 < <(cpu_snapshot)
  start=$(date +%s.%N)
  run_row "$@"
  wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')
  read -r b1 t1 < <(cpu_snapshot)
  secs=$(field median_s "$ROW_DIR/sender.out")
  [ -n "$secs" ] || row_failed "$1" "$2" "$3" "the sender printed no figures"
  for f in "$ROW_DIR"/*.out; do
    c=$(field cpu_s "$f")
    [ -n "$c" ] || row_failed "$1" "$2" "$3" "$(basename "$f" .out) printed no CPU figure"
    cpu=$(awk -v a="$cpu" -v b="$c" 'BEGIN { print a + b }')
  done
  awk -v s="$secs" -v c="$cpu" -v w="$wall" -v b="$((b1 - b0))" -v t="$((t1 - t0))" \
    'BEGIN { printf "%s %.2f %.0f\n", s, c / w, (t > 0 ? 100 * b / t : 0) }'
}

# --- the table --------------------------------------------------------------------------------------------

declare -A SECONDS_OF  # "shape n verify" -> median seconds

floor_s() { awk -v m="$MIB" -v r="$WSC_RATE_BPS" 'BEGIN { print m * 8388608 / r }'; }
# The fastest a copy can cross a NIC: tbf passes its bucket (WSC_BURST_BYTES) at once, the rest at
# the rate. A small update (--smoke's) beats the floor by up to the bucket's time; none beats this.
fastest_s() {
  awk -v m="$MIB" -v b="${WSC_BURST_BYTES:-0}" -v r="$WSC_RATE_BPS" 'BEGIN { x = m * 1048576 - b; print (x > 0 ? x : 0) * 8 / r }'
}

# print_row SHAPE N VERIFY SECONDS CORES BUSY
print_row() {
  local one=${SECONDS_OF["$1 1 $3"]:-$4}
  awk -v sh="$1" -v n="$2" -v v="$3" -v s="$4" -v c="$5" -v b="$6" -v m="$MIB" -v f="$(floor_s)" -v one="$one" \
    'BEGIN { printf "%-8s %9d %6d %9.3f %14.3f %15.3f %16.2f %10.2f %7s%%\n",
             sh, n, v, s, m * 1048576 / 1e9 / s, f / s, s / one, c, b }'
}

# The batches a version is published in (wsync-cluster-bench: at most one per 32 MiB tensor).
batches_used() { local t=$(((MIB + 31) / 32)); echo $((BATCHES < t ? BATCHES : t)); }

print_header() {
  echo "cluster-bench: wsync-cluster-bench on an emulated cluster of $WSC_HOSTS hosts (one namespace each), NICs" \
    "$WSC_RATE each way (tc tbf), MTU $WSC_MTU; update $MIB MiB in $(batches_used) batch(es), median of $ITERS after" \
    "$WARMUP warm-up;" \
    "this machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
  echo "NIC floor (update bytes / NIC rate): $(awk -v f="$(floor_s)" 'BEGIN { printf "%.3f", f }') s"
  printf '%-8s %9s %6s %9s %14s %15s %16s %10s %8s\n' shape receivers verify seconds GB/s/receiver \
    ratio_to_floor "time(N)/time(1)" "cpu_cores" machine
}

# The rows: every shape and receiver count with verify_payload=1; verify_payload=0 for 1 and the
# most receivers of the first shape (the checksum's cost).
run_rows() {
  local shape n m port=$PORT_BASE out
  for shape in ${SHAPES//,/ }; do
    for n in ${RECEIVERS//,/ }; do
      out=$(measure_row "$shape" "$n" 1 $((port++)))
      SECONDS_OF["$shape $n 1"]=${out%% *}
      # shellcheck disable=SC2086
      print_row "$shape" "$n" 1 $out
    done
  done
  shape=${SHAPES%%,*}
  for n in 1 "$(max_receivers)"; do
    [ -z "${SECONDS_OF["$shape $n 0"]:-}" ] || continue
    out=$(measure_row "$shape" "$n" 0 $((port++)))
    SECONDS_OF["$shape $n 0"]=${out%% *}
    # shellcheck disable=SC2086
    print_row "$shape" "$n" 0 $out
  done
}

max_receivers() { echo "${RECEIVERS//,/$'\n'}" | sort -n | tail -1; }

# The summary lines; fails when a row beat its NIC (the bytes did not cross the emulated network).
print_summary() {
  local shape=${SHAPES%%,*} max one most
  max=$(max_receivers)
  one=${SECONDS_OF["$shape 1 1"]}
  most=${SECONDS_OF["$shape $max 1"]}
  awk -v a="$most" -v b="$one" -v n="$max" -v sh="$shape" 'BEGIN { printf "fanout_%d_over_1: %.2f (%s)\n", n, a / b, sh }'
  awk -v f="$(floor_s)" -v s="$one" -v sh="$shape" 'BEGIN { printf "nic_efficiency_1: %.3f (%s)\n", f / s, sh }'
  awk -v on1="$one" -v off1="${SECONDS_OF["$shape 1 0"]}" -v onN="$most" -v offN="${SECONDS_OF["$shape $max 0"]}" -v n="$max" \
    'BEGIN { c1 = 100 * (1 - off1 / on1); cN = 100 * (1 - offN / onN)
             printf "checksum_cost_cluster: %.1f%% (1 receiver %.1f%%, %d receivers %.1f%%)\n", (c1 > cN ? c1 : cN), c1, n, cN }'
  echo "NIC rate: $WSC_RATE each way per host"
  awk -v f="$(fastest_s)" -v s="$one" 'BEGIN { exit !(f / s > 1.05) }' &&
    die "one receiver got the update faster than its NIC allows ($one s; the NIC's bucket passes $WSC_BURST_BYTES bytes at once, the rest takes $(fastest_s) s): the bytes did not cross the emulated network"
  return 0
}

inside() {
  BUILD_DIR=$(cd "$BUILD" && pwd)
  ROW_DIR=$(mktemp -d)
  trap 'rm -rf "$ROW_DIR"' EXIT
  print_header
  run_rows
  print_summary
}

# --- main ----------------------------------------------------------------------------------------------------

INSIDE=0
parse_args "$@"
if [ $INSIDE -eq 1 ]; then
  inside
  exit 0
fi
[ -x "$BUILD/bin/wsync-cluster-bench" ] ||
  die "$BUILD/bin/wsync-cluster-bench is missing: build it (scripts/setup.sh, or cmake --build $BUILD --target wsync-cluster-bench wsync_transport_ucx wsync_adapter_native)"
# The bench's members share the group secret of the environment, else one made here.
[ -n "${WSYNC_GROUP_SECRET:-}${WSYNC_GROUP_SECRET_FILE:-}" ] ||
  export WSYNC_GROUP_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
export UCX_WARN_UNUSED_ENV_VARS=n
exec "$REPO/scripts/cluster.sh" run $(($(max_receivers) + 1)) "$RATE" --name "$NAME" --mtu "$MTU" -- \
  "$REPO/scripts/cluster-bench.sh" --inside "$@"
