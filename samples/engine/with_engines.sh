#!/usr/bin/env bash
# Runs a sample trainer (any language) against two C++ sample engines and checks what they say:
# engine 1 registers its parameters (bytes land in place), engine 2 takes views; both must print
# "verified" for every version and see the group close at the last one.
#   samples/engine/with_engines.sh BUILD_DIR VERSIONS SCALE -- TRAINER_COMMAND...
# The trainer gets "--receivers 2 --store-file F --versions V --scale S" appended; it must accept
# those flags as samples/trainer (C) does.
set -u
build=$1 versions=$2 scale=$3
shift 3
[ "${1:-}" = "--" ] && shift
engine="$build/bin/wsync-sample-engine"
[ -x "$engine" ] || { echo "with_engines: $engine is not built" >&2; exit 1; }
# The trainer and its engines share a group secret out of band (here: the environment); without
# it no process can join the group or read its store (docs/SECURITY.md).
export WSYNC_GROUP_SECRET="${WSYNC_GROUP_SECRET:-$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')}"
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
"$engine" --rank 1 --store-file "$dir/store" --scale "$scale" >"$dir/e1.log" 2>&1 & e1=$!
"$engine" --rank 2 --store-file "$dir/store" --scale "$scale" --views >"$dir/e2.log" 2>&1 & e2=$!
"$@" --receivers 2 --store-file "$dir/store" --versions "$versions" --scale "$scale"; rc=$?
# A trainer that failed may never have published the store: do not wait for the engines' timeout.
[ $rc -eq 0 ] || kill $e1 $e2 2>/dev/null
wait $e1 || { echo "with_engines: engine 1 failed" >&2; rc=1; }
wait $e2 || { echo "with_engines: engine 2 failed" >&2; rc=1; }
cat "$dir/e1.log" "$dir/e2.log"
for log in "$dir/e1.log" "$dir/e2.log"; do
  for v in $(seq 1 "$versions"); do
    grep -q "version $v: .* verified$" "$log" || { echo "with_engines: $(basename "$log" .log) did not verify version $v" >&2; rc=1; }
  done
  grep -q "closed the group at version $versions$" "$log" || { echo "with_engines: $(basename "$log" .log) did not end at version $versions" >&2; rc=1; }
done
[ $rc -eq 0 ] && echo "with_engines: OK: $versions versions verified by 2 engines" || echo "with_engines: FAILED"
exit $rc
