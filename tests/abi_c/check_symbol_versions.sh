#!/usr/bin/env bash
# abi.symbol_versions: libwsync's symbol version nodes (src/libwsync.map, docs/ABI.md "Symbol
# versions"). Every function wsync.h declares is exported with a node: the ones of ABI 1.0 .. 1.3
# under WSYNC_1 (as releases up to 0.6.0 exported them), each later one under its minor's node,
# which inherits the one before. Then what the nodes are for: a program that links a 1.4 function,
# started against a library without the WSYNC_1.4 node (a stand-in for 0.6.0, built here), is
# refused by the dynamic loader naming that version, not with an undefined symbol later.
# Usage: check_symbol_versions.sh <libwsync.so.1> <include dir>
set -euo pipefail
lib=$1 inc=$2
bad=0
fail() { echo "FAIL $*"; bad=1; }
minor=$(sed -n 's/^#define WSYNC_ABI_VERSION_MINOR \([0-9]*\).*/\1/p' "$inc/wsync.h")
declared=$(grep -E '^WSYNC_API ' "$inc/wsync.h" | sed -n 's/^[^(]*[ *]\(wsync_[a-z0-9_]*\)(.*/\1/p' | sort -u)
exported=$(objdump -T "$lib" | awk '$NF ~ /^wsync_/ && $2 != "*UND*" {print $NF, $(NF-1)}' | sort -u)
# The functions of ABI 1.4 (the first minor with a node of its own); later minors add theirs here.
declare -A since=([wsync_receiver_get_state]=1.4 [wsync_receiver_touched_name]=1.4 [wsync_group_next_member_event]=1.5
  [wsync_group_members]=1.5 [wsync_group_declare_update]=1.6)
n=0
for f in $declared; do
  v=$(awk -v f="$f" '$1 == f {print $2}' <<<"$exported")
  want=WSYNC_1
  [[ -n "${since[$f]:-}" ]] && want=WSYNC_${since[$f]}
  if [[ -z "$v" ]]; then fail "$f is declared in wsync.h but not exported (add it to src/libwsync.map)"
  elif [[ "$v" != "$want" ]]; then fail "$f has version $v, expected $want"
  else n=$((n + 1)); fi
done
extra=$(comm -13 <(tr ' ' '\n' <<<"$declared" | sort -u) <(awk '{print $1}' <<<"$exported"))
[[ -z "$extra" ]] || fail "exported but not declared in wsync.h: $extra"
defs=$(objdump -p "$lib" | sed -n '/Version definitions:/,/^$/p')
for m in $(seq 4 "$minor"); do
  grep -q "WSYNC_1\.$m\$" <<<"$defs" || fail "no version node WSYNC_1.$m for ABI 1.$m"
done
echo "ok   $n functions, each under its node (ABI $(sed -n 's/^#define WSYNC_ABI_VERSION_MAJOR \([0-9]*\).*/\1/p' "$inc/wsync.h").$minor)"

# The loader's refusal: a program using wsync_receiver_get_state (1.4) against a 0.6.0-like library.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/prog.c" <<'C'
#include <stdio.h>
#include "wsync.h"
int main(void) {
  printf("ABI %u\n", (unsigned)wsync_abi_version());
  return wsync_receiver_get_state(NULL, NULL) == WSYNC_OK;
}
C
cat >"$work/old.c" <<'C'
#include <stdint.h>
uint32_t wsync_abi_version(void) { return (1u << 16) | 3u; }
C
printf 'WSYNC_1 { global: wsync_abi_version; local: *; };\n' >"$work/old.map"
mkdir "$work/old"
cc -shared -fPIC -o "$work/old/libwsync.so.1" -Wl,-soname,libwsync.so.1 -Wl,--version-script="$work/old.map" "$work/old.c"
# A sanitizer build's library needs its runtime first in the program: build the program with it.
san=()
grep -q 'libasan\.' <<<"$(ldd "$lib")" && san+=(-fsanitize=address)
grep -q 'libubsan\.' <<<"$(ldd "$lib")" && san+=(-fsanitize=undefined)
cc ${san[@]+"${san[@]}"} -I"$inc" -o "$work/prog" "$work/prog.c" "$lib"
grep -q "WSYNC_1.4" <<<"$(objdump -p "$work/prog" | sed -n '/Version References:/,$p')" ||
  fail "a program using wsync_receiver_get_state does not record WSYNC_1.4"
# verify_asan_link_order=0: where the runtime landed in the list depends on the linker's order here.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" LD_LIBRARY_PATH="$(dirname "$lib")" \
  "$work/prog" >/dev/null || fail "the program does not run against $lib"
if out=$(LD_LIBRARY_PATH="$work/old" "$work/prog" 2>&1); then
  fail "the program ran against a library without WSYNC_1.4: $out"
elif grep -q "version \`WSYNC_1.4' not found" <<<"$out"; then
  echo "ok   against an ABI 1.3 library the loader refuses it: $out"
else
  fail "refused, but not naming WSYNC_1.4: $out"
fi
exit $bad
