#!/usr/bin/env bash
# Runs the Python samples: one trainer and two engines, three versions; then the sharded trainer
# (four ranks, many senders) and its two engines. Fails if any fails.
# Usage: samples/python/run.sh [python]   (a Python where `import wsync, torch` works)
set -u
py=${1:-python3}
case "$py" in */*) py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")" ;; esac
cd "$(dirname "$0")"
if ! "$py" -c "import wsync, torch" >/dev/null 2>&1; then
  echo "SKIPPED: '$py' cannot import wsync and torch"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"; kill $(jobs -p) 2>/dev/null' EXIT
# The trainer and its engines share a group secret out of band (here: the environment).
export WSYNC_GROUP_SECRET="${WSYNC_GROUP_SECRET:-$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')}"
"$py" engine.py --rank 1 --store-file "$dir/store" & e1=$!
"$py" engine.py --rank 2 --store-file "$dir/store" & e2=$!
"$py" trainer.py --engines 2 --store-file "$dir/store"; rc=$?
wait $e1 || rc=1
wait $e2 || rc=1
# Many senders: four trainer ranks (gloo) publish their DTensor shards to two engines, and to a
# TP-2 engine whose two workers take only their halves.
"$py" sharded_trainer.py --ranks 4 --engines 2 --tp 2 --steps 3 || rc=1
[ $rc -eq 0 ] && echo "python samples: OK" || echo "python samples: FAILED"
exit $rc
