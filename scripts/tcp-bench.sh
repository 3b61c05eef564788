#!/usr/bin/env bash
# The transport 'tcp' bench: wsync's whole updates over its own TCP transport against iperf3
# (Debian's) moving bytes between the same two endpoints, in the same run.
#
#   loopback: one sender and one receiver process on 127.0.0.1, for each stream count S of
#             --streams: iperf3 -P S for --seconds, then wsync (transport.streams=S);
#             tcp_vs_iperf3_loopback_S = wsync's rate / iperf3's.
#   cluster:  two hosts of an emulated cluster (scripts/cluster.sh, NICs shaped to --rate): iperf3
#             with one stream against wsync with every default (the transport it picks across hosts,
#             its stream count): tcp_vs_iperf3 (needs root; skipped with a line where no cluster can
#             be made, or with --no-cluster).
#
# wsync's rate is the model's bytes over the median whole update (send_batch of every tensor +
# finalize, wsync-cluster-bench: every manifest, READY, ACK and commit inside), with
# verify_payload=0: the transport against iperf3, not the checksum (PERFORMANCE.md has its cost).
# iperf3's is its receiver's bits per second over --seconds.
#
# Usage: scripts/tcp-bench.sh [--mib 512] [--iters 5] [--streams 1,2,4] [--seconds 3] [--rate 1gbit]
#          [--build build] [--no-cluster] [--smoke]
#   --smoke: 32 MiB, 2 iterations, streams 1,2, 1 s, a 100mbit cluster (the suite's tcp.bench_smoke:
#            that it runs and reports, not its figures).
# Exit: 0, 1 when a run fails or a figure is missing, 2 on a bad command line.
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=512
ITERS=5
STREAMS=1,2,4
SECONDS_IPERF=3
RATE=1gbit
BUILD=build
CLUSTER=1
while [ $# -gt 0 ]; do
  case $1 in
    --mib) MIB=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    --seconds) SECONDS_IPERF=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --no-cluster) CLUSTER=0; shift ;;
    --smoke) MIB=32; ITERS=2; STREAMS=1,2; SECONDS_IPERF=1; RATE=100mbit; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tcp-bench: unknown flag $1" >&2; exit 2 ;;
  esac
done
BENCH=$(cd "$BUILD" && pwd)/bin/wsync-cluster-bench
die() { echo "tcp-bench: $*" >&2; exit 1; }
[ -x "$BENCH" ] || die "$BENCH is missing: build it (scripts/setup.sh)"
command -v iperf3 >/dev/null || die "iperf3 is missing: apt-get install iperf3 (scripts/setup.sh installs it)"
[ -n "${WSYNC_GROUP_SECRET:-}" ] || export WSYNC_GROUP_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
TMP=$(mktemp -d)
CLUSTER_UP=""
cleanup() {
  jobs -p | xargs -r kill -9 2>/dev/null || true
  [ -z "$CLUSTER_UP" ] || scripts/cluster.sh down --name tcpbench >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT

# iperf3_bps PREFIX HOST PORT STREAMS: iperf3's received rate in bytes/s (PREFIX: a command to run
# the client and server under, e.g. the cluster's exec; empty on loopback). The server runs under
# SERVER_PREFIX.
iperf3_bps() {
  local client=$1 server=$2 host=$3 port=$4 streams=$5 spid
  $server iperf3 -s -1 -B "$host" -p "$port" >"$TMP/iperf3-server.log" 2>&1 &
  spid=$!
  local json="" try
  for try in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.2
    json=$($client iperf3 -c "$host" -p "$port" -P "$streams" -t "$SECONDS_IPERF" -J 2>/dev/null) && break || json=""
  done
  wait "$spid" 2>/dev/null || true
  [ -n "$json" ] || die "iperf3 to $host:$port did not run (log: $(tail -n 3 "$TMP/iperf3-server.log"))"
  echo "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8)'
}

# wsync_bps CLIENT SERVER HOST PORT STREAMS TRANSPORT: wsync's whole-update rate in bytes/s, the
# receiver under SERVER, the sender (store at HOST:PORT) under CLIENT.
wsync_bps() {
  local client=$1 server=$2 host=$3 port=$4 streams=$5 transport=$6 rpid line median
  $server "$BENCH" --role receiver --rank 1 --store "$host:$port" --mib "$MIB" --timeout-ms 120000 \
    >"$TMP/receiver.log" 2>&1 &
  rpid=$!
  local extra=()
  [ -z "$streams" ] || extra=(--option "transport.streams=$streams")
  line=$($client "$BENCH" --role sender --receivers 1 --store "$host:$port" --mib "$MIB" --iters "$ITERS" \
    --warmup 1 --transport "$transport" --option verify_payload=0 ${extra[@]+"${extra[@]}"} \
    2>"$TMP/sender.err" | grep "^cluster-bench: receivers=") || die "the wsync sender failed: $(tail -n 3 "$TMP/sender.err")"
  wait "$rpid" || die "the wsync receiver failed: $(tail -n 3 "$TMP/receiver.log")"
  median=$(echo "$line" | sed -n 's/.*median_s=\([0-9.e+-]*\).*/\1/p')
  awk -v m="$MIB" -v s="$median" 'BEGIN { printf "%.0f", m * 1048576 / s }'
}

# A TCP port of 127.0.0.1 free right now (the kernel's pick). Loopback rows take fresh ones per
# run: a fixed port could be some other process's ephemeral port (the suite runs tests in parallel).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

row() {  # row LABEL WSYNC_BPS IPERF_BPS: prints a row, sets RATIO
  RATIO=$(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.3f", a / b }')
  printf "%-22s %12.1f %12.1f %7s\n" "$1" "$(awk -v a="$2" 'BEGIN { print a / 1048576 }')" \
    "$(awk -v b="$3" 'BEGIN { print b / 1048576 }')" "$RATIO"
}

echo "tcp-bench: wsync $MIB MiB whole updates over transport 'tcp' (verify_payload=0, median of $ITERS) vs iperf3 ($SECONDS_IPERF s)"
printf "%-22s %12s %12s %7s\n" "where" "wsync MiB/s" "iperf3 MiB/s" "ratio"
for s in ${STREAMS//,/ }; do
  # (a port taken between free_port and the bind: another try, on another port)
  for try in 1 2 3; do i=$(iperf3_bps "" "" 127.0.0.1 "$(free_port)" "$s") && break; [ "$try" -lt 3 ] || exit 1; done
  for try in 1 2 3; do w=$(wsync_bps "" "" 127.0.0.1 "$(free_port)" "$s" tcp) && break; [ "$try" -lt 3 ] || exit 1; done
  row "loopback, $s stream(s)" "$w" "$i"
  echo "tcp_vs_iperf3_loopback_$s: $RATIO"
done

if [ "$CLUSTER" = 1 ]; then
  if scripts/cluster.sh up 2 --rate "$RATE" --name tcpbench >"$TMP/cluster.log" 2>&1; then
    CLUSTER_UP=1
    on0="scripts/cluster.sh exec --name tcpbench h0"
    on1="scripts/cluster.sh exec --name tcpbench h1"
    # iperf3 from h0 to h1 (server on h1); wsync's sender on h0 (store on h0), receiver on h1, the
    # default transport (tcp across hosts without RDMA).
    i=$(iperf3_bps "$on0" "$on1" 198.18.0.2 5201 1)
    w=$(wsync_bps "$on0" "$on1" 198.18.0.1 29500 "" auto)
    row "cluster $RATE, defaults" "$w" "$i"
    echo "tcp_vs_iperf3: $RATIO"
  else
    echo "tcp-bench: no emulated cluster here ($(tail -n 1 "$TMP/cluster.log")); the cluster row is skipped"
  fi
fi
