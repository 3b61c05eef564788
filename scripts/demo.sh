#!/usr/bin/env bash
# The main job: set up, then one trainer publishes a ~1 GiB synthetic model to two engine
# processes over UCX on loopback, as weight versions 1, 2 and 3. Each engine prints one line per
# update and says "verified" only after checking every tensor's checksum.
# Usage: scripts/demo.sh [--versions N] [--scale S]   (other flags go to the trainer)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
echo "demo: built; starting 1 trainer and 2 engines"

SCALE=1.0
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) SCALE=$2; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

# The trainer and its engines share a group secret out of band (here: the environment); without
# it no process can join the group or read its store (docs/SECURITY.md).
export WSYNC_GROUP_SECRET="${WSYNC_GROUP_SECRET:-$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')}"
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
addr="$dir/store.addr"
build/bin/wsync-sample-trainer --receivers 2 --store 127.0.0.1:0 --store-file "$addr" --scale "$SCALE" ${ARGS[@]+"${ARGS[@]}"} &
trainer=$!
# Engine 1 registers its parameter buffers (bytes land in place); engine 2 takes views.
build/bin/wsync-sample-engine --rank 1 --store-file "$addr" --scale "$SCALE" &
e1=$!
build/bin/wsync-sample-engine --rank 2 --store-file "$addr" --scale "$SCALE" --views &
e2=$!
rc=0
wait $trainer || rc=$?
wait $e1 || rc=$?
wait $e2 || rc=$?
if [ $rc -eq 0 ]; then echo "demo: OK"; else echo "demo: FAILED (exit $rc)"; fi
exit $rc
