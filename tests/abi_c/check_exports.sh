#!/bin/sh
# check_exports.sh <libwsync.so> <plugin-dir>
#
# Fails unless
#   - every symbol that libwsync.so defines in its dynamic symbol table starts with wsync_
#     (the only other entries allowed are the version nodes of libwsync.map, e.g. "A WSYNC_1",
#     which the linker adds as absolute symbols of value 0 and which name no code or data), and
#   - every plugin libwsync_<kind>_<name>.so in <plugin-dir> defines exactly one dynamic symbol:
#     wsync_<kind>_entry_v1.
# Lines of nm's output that are not symbols (blank lines, "file:" headers) are the only ones skipped.
set -u
lib=${1:?usage: check_exports.sh <libwsync.so> <plugin-dir>}
plugdir=${2:?usage: check_exports.sh <libwsync.so> <plugin-dir>}
NM=${NM:-nm}
status=0

# Prints "<type> <name>" for each defined dynamic symbol of $1, with @VERSION / @@VERSION removed.
symbols() {
  out=$("$NM" -D --defined-only "$1" 2>&1) || { echo "check_exports: $NM -D failed on $1: $out" >&2; return 1; }
  printf '%s\n' "$out" | awk '
    NF == 3 { name = $3; sub(/@.*/, "", name); print $2, name; next }   # value type name
    NF == 2 && $1 ~ /^[A-Za-z]$/ { name = $2; sub(/@.*/, "", name); print $1, name; next }
    NF == 0 { next }                                                   # blank
    /:$/ { next }                                                      # "file:" header
    { print "? " $0 }                                                  # anything else: report it
  '
}

if [ ! -f "$lib" ]; then
  echo "check_exports: $lib does not exist" >&2
  exit 1
fi
syms=$(symbols "$lib") || exit 1
count=0
bad=$(printf '%s\n' "$syms" | awk '
  $1 == "A" && $2 ~ /^WSYNC_[0-9]+(\.[0-9]+)*$/ { next }   # version node of libwsync.map
  $2 ~ /^wsync_/ && $1 != "?" { next }
  NF > 0 { print }')
count=$(printf '%s\n' "$syms" | grep -c ' wsync_' || true)
if [ -n "$bad" ]; then
  echo "FAIL: $lib exports symbols outside the wsync_ namespace:" >&2
  printf '%s\n' "$bad" | sed 's/^/  /' >&2
  status=1
elif [ "$count" -eq 0 ]; then
  echo "FAIL: $lib exports no wsync_ symbol at all" >&2
  status=1
else
  echo "ok: $lib exports $count wsync_* symbols and nothing else"
fi

nplug=0
for p in "$plugdir"/libwsync_*.so; do
  [ -e "$p" ] || continue
  nplug=$((nplug + 1))
  base=$(basename "$p" .so)
  kind=$(printf '%s\n' "$base" | sed -n 's/^libwsync_\([a-z]*\)_.*$/\1/p')
  want="wsync_${kind}_entry_v1"
  syms=$(symbols "$p") || { status=1; continue; }
  names=$(printf '%s\n' "$syms" | awk 'NF > 0 { print $2 }' | sort -u)
  if [ "$names" != "$want" ]; then
    echo "FAIL: $p must export exactly $want; it exports:" >&2
    printf '%s\n' "$syms" | sed 's/^/  /' >&2
    status=1
  else
    echo "ok: $p exports only $want"
  fi
done
if [ "$nplug" -eq 0 ]; then
  echo "FAIL: no plugin libwsync_*.so in $plugdir" >&2
  status=1
fi
exit $status
