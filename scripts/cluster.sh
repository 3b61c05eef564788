#!/usr/bin/env bash
# An emulated cluster on this Linux machine (root): each host is a network namespace with one NIC
# (veth) on a switch (a Linux bridge in a namespace of its own), every NIC shaped to one rate in
# both directions with tc tbf. Nothing is added to the root namespace's network. docs/CLUSTER.md
# says what it emulates and what not.
#
#   cluster.sh up H --rate RATE [--name N] [--mtu M]   make (or remake) cluster N with hosts h0..h(H-1)
#   cluster.sh down [--name N]                         kill what runs on it and remove it
#   cluster.sh exec [--name N] HOST cmd...             run cmd on HOST (h0, h1, ... or 0, 1, ...)
#   cluster.sh port [--name N] HOST down|up            set HOST's switch port down (a partition) or up
#   cluster.sh probe [--name N] [FROM TO | --chain] [--seconds S]
#                                                      TCP transfers (h0 -> h1, or h0 -> h1 -> ... -> last, all at
#                                                      once): the rate each met, and the machine's CPU meanwhile
#   cluster.sh status                                  every cluster: hosts, addresses, rates, ports
#   cluster.sh run H RATE [--name N] [--mtu M] -- cmd...  up, run cmd (env below), down on any exit
#
# RATE: tc's notation, a whole number with bit, kbit, mbit or gbit (e.g. 1gbit). Host i has the
# address 198.18.0.(i+1)/24 (198.18.0.0/15 is the benchmarking range, RFC 2544; nothing else is
# used) in namespace wsc-N-hi; the switch is namespace wsc-N-sw, host i's port on it is p<i>.
# --name defaults to $WSC_NAME, else "main". `run` exports to cmd: WSC_NAME, WSC_HOSTS,
# WSC_RATE, WSC_RATE_BPS, WSC_BURST_BYTES (tbf's bucket), WSC_MTU, WSC_CLUSTER (this script), WSC_NS_<i>, WSC_ADDR_<i>.
#
# Exit status: 0 done, 1 failed, 2 bad command line, 77 an emulated cluster cannot be made here
# (not root, no `ip netns`, no tbf): ctest reads 77 as "skipped".
set -euo pipefail

readonly PREFIX=wsc
readonly SUBNET=198.18.0        # host i: $SUBNET.(i+1)/24
readonly MAX_HOSTS=250
readonly DEFAULT_MTU=9000       # docs/CLUSTER.md: 1500, 9000 and 65520 measured
readonly SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
NAME=${WSC_NAME:-main}

usage() { sed -n '2,/^set -euo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "cluster.sh: $*" >&2; exit 1; }
bad_usage() { echo "cluster.sh: $*" >&2; echo "(cluster.sh --help prints the usage)" >&2; exit 2; }
cannot() { echo "cluster.sh: cannot make an emulated cluster here: $*" >&2; exit 77; }

# --- names and numbers ---------------------------------------------------------------------------

switch_ns() { echo "$PREFIX-$NAME-sw"; }
host_ns() { echo "$PREFIX-$NAME-h$1"; }
host_addr() { echo "$SUBNET.$(($1 + 1))"; }

check_name() {
  [[ $NAME =~ ^[a-z0-9][a-z0-9_]{0,23}$ ]] || bad_usage "--name takes 1-24 of a-z 0-9 _ (not '$NAME')"
}

# host_index HOST: the number of h<i> or <i>, checked against the hosts that exist.
host_index() {
  local h=${1#h}
  [[ $h =~ ^[0-9]+$ ]] || bad_usage "a host is h0, h1, ... (not '$1')"
  ns_exists "$(host_ns "$h")" || die "cluster '$NAME' has no host h$h (cluster.sh status lists them)"
  echo "$h"
}

# rate_bps RATE: RATE (tc notation) in bits per second.
rate_bps() {
  [[ $1 =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] || bad_usage "--rate takes e.g. 500mbit or 2gbit (not '$1')"
  local n=${BASH_REMATCH[1]}
  case ${BASH_REMATCH[2]} in
    bit) echo "$n" ;;
    kbit) echo $((n * 1000)) ;;
    mbit) echo $((n * 1000000)) ;;
    gbit) echo $((n * 1000000000)) ;;
  esac
}

# tbf_burst BPS: the bucket, in bytes: 8 ms of the rate, and at least 128 KiB. tbf refills it from
# a timer; on a busy 2-core machine that timer fires late, and with a bucket of 1 ms a late wake-up
# lost its tokens (measured at 500 Mbit/s: a relay forwarding at full load reached 95-97 % of the
# rate, the sender with the same load 99.8 %; with 8 ms, 98-99 %). A whole 64 KiB TSO/GSO packet
# fits too: tbf segments a bigger packet than its bucket, which costs more CPU than the transfer.
# Over any window longer than the burst's time (8 ms) the rate is RATE.
tbf_burst() {
  local per_ms=$(($1 / 8 / 1000)) min=131072
  echo $((per_ms * 8 > min ? per_ms * 8 : min))
}
# The queue behind the bucket: 20 ms of the rate. Enough for a few flows into one port to share
# it without drops at every burst; short enough that a queued packet is not a stale one.
readonly TBF_LATENCY=20ms

# --- checks ----------------------------------------------------------------------------------------

ns_exists() { [ -e "/run/netns/$1" ]; }
our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX-$NAME-" || true; }

check_can_make() {
  [ "$(id -u)" -eq 0 ] || cannot "it needs root (network namespaces, veth, tc); run it as root"
  command -v ip >/dev/null || cannot "there is no 'ip' command (Debian: apt-get install iproute2)"
  command -v tc >/dev/null || cannot "there is no 'tc' command (Debian: apt-get install iproute2)"
  ip netns list >/dev/null 2>&1 || cannot "'ip netns list' fails: $(ip netns list 2>&1 | head -1)"
}

# --- up ----------------------------------------------------------------------------------------------

add_ns() {
  ip netns add "$1" 2>/dev/null || cannot "'ip netns add $1' fails (in a container without CAP_SYS_ADMIN?): $(ip netns add "$1" 2>&1)"
  ip -n "$1" link set lo up
  # Long-lived bulk connections keep their window between updates (as tuned training clusters
  # do): with the default, TCP restarts slow start after each idle gap, and a chain of relays pays
  # that ramp once per hop, in series.
  ip netns exec "$1" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 2>/dev/null || true
  # Linux's default congestion control, whatever this machine chose (BBR's bandwidth probes misread
  # tbf's bursts): the figures then do not depend on the machine's setting.
  ip netns exec "$1" sysctl -qw net.ipv4.tcp_congestion_control=cubic 2>/dev/null || true
}

make_switch() {
  local sw
  sw=$(switch_ns)
  add_ns "$sw"
  # No STP: ports forward as soon as they are up; no multicast snooping to learn.
  ip -n "$sw" link add br0 type bridge stp_state 0 mcast_snooping 0
  ip -n "$sw" link set br0 up
}

# shape NS DEV BPS MTU: DEV's egress limited to BPS with tbf (the only shaper this kernel has).
shape() {
  local burst
  burst=$(tbf_burst "$3")
  tc -n "$1" qdisc replace dev "$2" root tbf rate "$3"bit burst "$burst" latency "$TBF_LATENCY" 2>/dev/null ||
    cannot "tc cannot add a tbf qdisc to $2 in $1: $(tc -n "$1" qdisc replace dev "$2" root tbf rate "$3"bit burst "$burst" latency "$TBF_LATENCY" 2>&1)"
}

# make_host I BPS MTU: namespace wsc-N-hI, its eth0 wired to port pI of the switch, both ends shaped.
make_host() {
  local i=$1 bps=$2 mtu=$3 ns sw
  ns=$(host_ns "$i")
  sw=$(switch_ns)
  add_ns "$ns"
  ip link add eth0 netns "$ns" mtu "$mtu" type veth peer name "p$i" netns "$sw" mtu "$mtu"
  ip -n "$sw" link set "p$i" master br0 up
  ip -n "$ns" addr add "$(host_addr "$i")/24" dev eth0
  ip -n "$ns" link set eth0 up
  shape "$ns" eth0 "$bps" "$mtu"      # what the host sends
  shape "$sw" "p$i" "$bps" "$mtu"     # what the host receives
}

# build_cluster HOSTS BPS MTU, in a subshell: a failing step stops it and `up` removes the rest.
build_cluster() (
  make_switch
  local i
  for ((i = 0; i < $1; i++)); do make_host "$i" "$2" "$3"; done
)

cmd_up() {
  local hosts="" rate="" mtu=$DEFAULT_MTU
  while [ $# -gt 0 ]; do
    case $1 in
      --rate) rate=${2:-}; shift 2 || bad_usage "--rate needs a value" ;;
      --name) NAME=${2:-}; shift 2 || bad_usage "--name needs a value" ;;
      --mtu) mtu=${2:-}; shift 2 || bad_usage "--mtu needs a value" ;;
      -*) bad_usage "up: unknown flag $1" ;;
      *) [ -z "$hosts" ] || bad_usage "up: one host count, not '$hosts' and '$1'"; hosts=$1; shift ;;
    esac
  done
  [[ $hosts =~ ^[0-9]+$ ]] && [ "$hosts" -ge 1 ] && [ "$hosts" -le $MAX_HOSTS ] ||
    bad_usage "up takes a host count 1-$MAX_HOSTS (not '$hosts')"
  [ -n "$rate" ] || bad_usage "up needs --rate (e.g. --rate 1gbit)"
  [[ $mtu =~ ^[0-9]+$ ]] && [ "$mtu" -ge 1280 ] && [ "$mtu" -le 65520 ] || bad_usage "--mtu takes 1280-65520 (not '$mtu')"
  check_name
  local bps
  bps=$(rate_bps "$rate")
  [ "$bps" -ge 1000000 ] || bad_usage "--rate must be at least 1mbit (not '$rate')"
  check_can_make
  remove_cluster  # leftovers of a run that could not clean up (kill -9, a crash)
  local rc=0
  build_cluster "$hosts" "$bps" "$mtu" || rc=$?
  if [ $rc -ne 0 ]; then
    remove_cluster
    exit $rc
  fi
  echo "cluster '$NAME' up: $hosts host(s) $(host_addr 0)..$(host_addr $((hosts - 1))), NICs $rate each way, MTU $mtu"
}

# --- down --------------------------------------------------------------------------------------------

# kill_in NS: SIGKILL every process in NS (stopped ones too) and wait up to 5 s for them to go.
kill_in() {
  local pids p tries=50
  pids=$(ip netns pids "$1" 2>/dev/null || true)
  [ -n "$pids" ] || return 0
  for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
  while [ $tries -gt 0 ] && [ -n "$(ip netns pids "$1" 2>/dev/null || true)" ]; do
    sleep 0.1
    tries=$((tries - 1))
  done
}

remove_cluster() {
  local ns
  for ns in $(our_namespaces); do kill_in "$ns"; done
  # Hosts first: deleting a namespace deletes its veth ends and their peers on the switch.
  for ns in $(our_namespaces); do
    [ "$ns" = "$(switch_ns)" ] || ip netns del "$ns"
  done
  ! ns_exists "$(switch_ns)" || ip netns del "$(switch_ns)"
  local left
  left=$(our_namespaces)
  [ -z "$left" ] || die "could not remove namespace(s) $left"
}

cmd_down() {
  while [ $# -gt 0 ]; do
    case $1 in
      --name) NAME=${2:-}; shift 2 || bad_usage "--name needs a value" ;;
      *) bad_usage "down: unknown argument $1" ;;
    esac
  done
  check_name
  [ "$(id -u)" -eq 0 ] || cannot "it needs root"
  remove_cluster
}

# --- exec, port, status ---------------------------------------------------------------------------------

cmd_exec() {
  [ "${1:-}" != --name ] || { NAME=${2:-}; shift 2 || bad_usage "--name needs a value"; }
  check_name
  [ $# -ge 2 ] || bad_usage "exec takes a host and a command"
  local i
  i=$(host_index "$1")
  shift
  exec ip netns exec "$(host_ns "$i")" "$@"
}

# port HOST down|up: the switch's end of HOST's cable. Down, the bridge drops what goes to the
# host and the host's NIC loses carrier: its packets and those sent to it vanish, nobody gets a RST.
cmd_port() {
  [ "${1:-}" != --name ] || { NAME=${2:-}; shift 2 || bad_usage "--name needs a value"; }
  check_name
  [ $# -eq 2 ] && { [ "$2" = down ] || [ "$2" = up ]; } || bad_usage "port takes a host and down or up"
  local i
  i=$(host_index "$1")
  ip -n "$(switch_ns)" link set "p$i" "$2"
}

# The rate tbf enforces on DEV in NS, as tc prints it (e.g. 1Gbit), or '-'.
shaped_rate() { tc -n "$1" qdisc show dev "$2" 2>/dev/null | sed -n 's/.* rate \([^ ]*\) .*/\1/p' | head -1; }

cmd_status() {
  local names n ns i
  names=$(ip netns list 2>/dev/null | awk '{print $1}' | sed -n "s/^$PREFIX-\(.*\)-sw\$/\1/p")
  [ -n "$names" ] || { echo "no emulated cluster"; return 0; }
  for n in $names; do
    NAME=$n
    echo "cluster '$n' (switch namespace $(switch_ns)):"
    for ns in $(our_namespaces | sort -V); do
      [ "$ns" != "$(switch_ns)" ] || continue
      i=${ns##*-h}
      printf '  h%-3s %-22s %-15s out %-8s in %-8s port %s, processes %s\n' "$i" "$ns" "$(host_addr "$i")" \
        "$(shaped_rate "$ns" eth0)" "$(shaped_rate "$(switch_ns)" "p$i")" \
        "$(ip -n "$(switch_ns)" -o link show "p$i" 2>/dev/null | grep -q 'state UP' && echo up || echo DOWN)" \
        "$(ip netns pids "$ns" 2>/dev/null | wc -l)"
    done
  done
}

# --- probe ---------------------------------------------------------------------------------------------------

# A TCP sink on port 5201 that prints the bytes it read and the seconds between first and last byte.
readonly PROBE_SINK='
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5201)); s.listen(1); s.settimeout(30)
c, _ = s.accept(); c.settimeout(30)
n = 0; t0 = None; buf = bytearray(1 << 20)
while True:
    k = c.recv_into(buf)  # into one buffer: a new 1 MiB object per read costs more CPU than the network
    if not k: break
    if t0 is None: t0 = time.monotonic()
    n += k
print(n, time.monotonic() - (t0 or time.monotonic()))'
# A TCP source that sends to $1 for $2 seconds.
readonly PROBE_SOURCE='
import socket, sys, time
c = socket.create_connection((sys.argv[1], 5201), timeout=10)
buf = bytes(1 << 20); until = time.monotonic() + float(sys.argv[2])
while time.monotonic() < until: c.sendall(buf)
c.close()'

# probe_flows SECONDS FROM:TO...: every flow at once, each a TCP transfer of SECONDS; prints each
# flow's rate, their sum, and the machine's CPU busy share meanwhile (other users included).
probe_flows() {
  local secs=$1 dir f from to sinks=() sources=() p rc=0 b0 t0 b1 t1 bytes took
  shift
  dir=$(mktemp -d)
  for f in "$@"; do
    to=${f#*:}
    ip netns exec "$(host_ns "$to")" python3 -c "$PROBE_SINK" >"$dir/$f" &
    sinks+=($!)
  done
  sleep 0.5
  read -r b0 t0 < <(cpu_snapshot)
  for f in "$@"; do
    from=${f%:*} to=${f#*:}
    ip netns exec "$(host_ns "$from")" python3 -c "$PROBE_SOURCE" "$(host_addr "$to")" "$secs" &
    sources+=($!)
  done
  for p in "${sources[@]}" "${sinks[@]}"; do wait "$p" || rc=1; done
  read -r b1 t1 < <(cpu_snapshot)
  [ $rc -eq 0 ] || { rm -rf "$dir"; die "probe: a transfer failed"; }
  for f in "$@"; do
    read -r bytes took <"$dir/$f"
    echo "${f%:*} ${f#*:} $bytes $took"
  done | awk -v r="$(shaped_rate "$(host_ns 0)" eth0)" -v b="$((b1 - b0))" -v t="$((t1 - t0))" '
    { mbps = $3 * 8 / $4 / 1e6; sum += mbps; printf "probe h%s -> h%s: %.1f Mbit/s over TCP\n", $1, $2, mbps }
    END { printf "probe: %d flow(s), %.1f Mbit/s in all; NICs shaped to %s; machine CPU busy %.0f%%\n",
                 NR, sum, r, (t > 0 ? 100 * b / t : 0) }'
  rm -rf "$dir"
}

cpu_snapshot() { awk '/^cpu /{ busy = $2 + $3 + $4 + $7 + $8 + $9; print busy, busy + $5 + $6 }' /proc/stat; }

cmd_probe() {
  local secs=3 chain=0 args=() flows=() i
  while [ $# -gt 0 ]; do
    case $1 in
      --name) NAME=${2:-}; shift 2 || bad_usage "--name needs a value" ;;
      --seconds) secs=${2:-}; shift 2 || bad_usage "--seconds needs a value" ;;
      --chain) chain=1; shift ;;
      -*) bad_usage "probe: unknown flag $1" ;;
      *) args+=("$1"); shift ;;
    esac
  done
  check_name
  [[ $secs =~ ^[0-9]+$ ]] && [ "$secs" -ge 1 ] || bad_usage "--seconds takes a whole number >= 1"
  [ ${#args[@]} -eq 0 ] || [ ${#args[@]} -eq 2 ] || bad_usage "probe takes no hosts, or FROM and TO"
  [ ${#args[@]} -eq 0 ] || [ $chain -eq 0 ] || bad_usage "probe takes FROM and TO or --chain, not both"
  [ ${#args[@]} -eq 2 ] || args=(h0 h1)
  flows=("$(host_index "${args[0]}"):$(host_index "${args[1]}")")
  if [ $chain -eq 1 ]; then
    flows=()
    for ((i = 0; i + 1 < $(our_namespaces | grep -c -- "-h[0-9]*$"); i++)); do flows+=("$i:$((i + 1))"); done
  fi
  probe_flows "$secs" "${flows[@]}"
}

# --- run -----------------------------------------------------------------------------------------------------

# The environment `run` gives its command.
export_cluster_env() {
  local hosts=$1 rate=$2 mtu=$3 i
  export WSC_NAME=$NAME WSC_HOSTS=$hosts WSC_RATE=$rate WSC_RATE_BPS WSC_BURST_BYTES WSC_MTU=$mtu WSC_CLUSTER=$SELF
  WSC_RATE_BPS=$(rate_bps "$rate")
  WSC_BURST_BYTES=$(tbf_burst "$WSC_RATE_BPS")
  for ((i = 0; i < hosts; i++)); do
    export "WSC_NS_$i=$(host_ns "$i")" "WSC_ADDR_$i=$(host_addr "$i")"
  done
}

cmd_run() {
  [ $# -ge 2 ] || bad_usage "run takes a host count, a rate, -- and a command"
  local hosts=$1 rate=$2 mtu=$DEFAULT_MTU
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case $1 in
      --name) NAME=${2:-}; shift 2 || bad_usage "--name needs a value" ;;
      --mtu) mtu=${2:-}; shift 2 || bad_usage "--mtu needs a value" ;;
      *) bad_usage "run: unknown argument $1 (the command follows --)" ;;
    esac
  done
  [ "${1:-}" = -- ] && [ $# -ge 2 ] || bad_usage "run needs -- and a command"
  shift
  check_name
  trap 'stop_command; remove_cluster' EXIT
  cmd_up "$hosts" --rate "$rate" --name "$NAME" --mtu "$mtu"
  export_cluster_env "$hosts" "$rate" "$mtu"
  # In the background, in a process group of its own (set -m), so that a signal to this script is
  # handled at once (bash runs traps only between commands) and reaches everything the command
  # started; EXIT then removes the cluster. (An interactive shell on a host: `up`, then `exec`.)
  set -m
  "$@" &
  RUN_PID=$!
  set +m
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  local rc=0
  wait "$RUN_PID" || rc=$?
  return $rc
}

# What the command of `run` left running, in the root namespace too: its process group.
RUN_PID=""
stop_command() {
  [ -n "$RUN_PID" ] || return 0
  kill -KILL -- "-$RUN_PID" 2>/dev/null || true
  { wait "$RUN_PID"; } 2>/dev/null || true  # no "Killed" line: the command's status is already known
}

main() {
  local cmd=${1:-}
  [ $# -eq 0 ] || shift
  case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    exec) cmd_exec "$@" ;;
    port) cmd_port "$@" ;;
    probe) cmd_probe "$@" ;;
    status) cmd_status ;;
    run) cmd_run "$@" ;;
    -h|--help|help) usage ;;
    "") usage >&2; exit 2 ;;
    *) bad_usage "unknown command '$cmd'" ;;
  esac
}

main "$@"
