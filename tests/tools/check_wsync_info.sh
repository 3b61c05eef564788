#!/usr/bin/env bash
# Runs wsync-info as a user would and checks what it prints: the bundled plugins with no
# WSYNC_PLUGIN_PATH; the deliberately broken test plugins (each refusal with its status name and
# reason) plus a folder that does not exist; a copy of a plugin in an earlier folder, which
# shadows the later file; --json (parsed by Python, strings with quotes, control characters and
# non-UTF-8 bytes included); --help and a bad argument (exit status 2).
# Usage: check_wsync_info.sh <wsync-info> <testing plugin dir> <bundled plugin dir> <expect ucx: 0|1>
#        <plugin ABI of the headers, e.g. 1.3>
set -euo pipefail
info=$1
testing=$2
bundled=$3
expect_ucx=$4
plugin_abi=$5
tmp=$(mktemp -d /tmp/wsync-info-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
unset WSYNC_PLUGIN_PATH WSYNC_LOG_LEVEL

# Prints the failure and the output it was about, then stops.
die() {
  echo "FAIL: $1"
  [ -n "${2:-}" ] && [ -f "$2" ] && { echo "--- $2"; cat "$2"; }
  exit 1
}

# The lines of the n-th (default first) entry "  <kind> <name>..." of a text listing.
entry() { # <file> <kind> <name> [n]
  awk -v head="  $2 $3" -v want="${4:-1}" '
    /^  [^ ]/ || /^[^ ]/ { inside = 0 }
    (index($0, head " ") == 1 || index($0, head ":") == 1) && ++seen == want { inside = 1 }
    inside { print }' "$1"
}

# Does the n-th entry have a line matching the extended regex <re> (head: its first line)?
has() { # <file> <kind> <name> <n> <re>
  local e
  e=$(entry "$1" "$2" "$3" "$4")
  grep -qE -- "$5" <<<"$e"
}
head_has() { # <file> <kind> <name> <n> <re>
  local e
  e=$(entry "$1" "$2" "$3" "$4")
  grep -qE -- "$5" <<<"${e%%$'\n'*}"
}

# Checks that the entry loads, or is refused with <status> and a reason containing <reason>.
expect_loads() { # <file> <kind> <name>
  head_has "$1" "$2" "$3" 1 ': loads' || die "$2 $3 should load" "$1"
  if has "$1" "$2" "$3" 1 '^    error:'; then die "$2 $3 loads but shows an error" "$1"; fi
}
expect_refused() { # <file> <kind> <name> <status> <reason regex>
  head_has "$1" "$2" "$3" 1 ": refused, $4\$" || die "$2 $3 should be refused with $4" "$1"
  has "$1" "$2" "$3" 1 "^    error:    .*$5" || die "$2 $3: the reason should say '$5'" "$1"
}

summary_re='^wsync-info: [0-9]+ plugins? found, [0-9]+ load, [0-9]+ refused(, [0-9]+ shadowed)?$'

# 1. No WSYNC_PLUGIN_PATH: only the folder beside libwsync, with the bundled plugins.
out=$tmp/default.txt
"$info" >"$out" 2>"$tmp/default.err" || die "wsync-info exited with $? with the bundled plugins" "$out"
grep -qE '^wsync [0-9]+\.[0-9]+\.[0-9]+, ABI [0-9]+\.[0-9]+ \(wsync-info built against ABI [0-9]+\.[0-9]+, plugin ABI' \
  "$out" || die "no version/ABI line" "$out"
grep -qE '^library: /.*libwsync\.so' "$out" || die "no library path" "$out"
grep -qxF "  1. $bundled" "$out" || die "the bundled folder $bundled is not the only folder searched" "$out"
grep -qE '^  2\. ' "$out" && die "more than one folder searched with no WSYNC_PLUGIN_PATH" "$out"
expect_loads "$out" adapter native
if [ "$expect_ucx" = 1 ]; then
  expect_loads "$out" transport ucx
  has "$out" transport ucx 1 '^    runtime:  UCX [0-9]' || die "ucx has no 'UCX <version>' detail line" "$out"
  has "$out" transport ucx 1 '^    caps:     .*host_memory' || die "ucx caps are not decoded" "$out"
fi
grep -qF wsync-testing "$out" && die "test plugins listed without WSYNC_PLUGIN_PATH" "$out"
grep -qE "$summary_re" "$out" || die "no summary line" "$out"
[ "$(tail -1 "$out" | grep -cE "$summary_re")" = 1 ] || die "the summary is not the last line" "$out"

# 2. The broken test plugins, after a folder that does not exist.
out=$tmp/testing.txt
WSYNC_PLUGIN_PATH="$tmp/missing:$testing" "$info" >"$out" 2>"$tmp/testing.err" ||
  die "wsync-info must exit 0 when plugins refuse" "$out"
grep -qxF "  1. $tmp/missing  (does not exist)" "$out" || die "the missing folder is not marked" "$out"
grep -qxF "  2. $testing" "$out" || die "the testing folder is not second" "$out"
grep -qxF "  3. $bundled" "$out" || die "the bundled folder is not last" "$out"
expect_refused "$out" transport abi99 WSYNC_ERR_VERSION_MISMATCH "plugin ABI 99"
expect_refused "$out" transport smalltable WSYNC_ERR_VERSION_MISMATCH "smaller than"
expect_refused "$out" transport noentry WSYNC_ERR_NOT_FOUND "does not export wsync_transport_entry_v1"
expect_refused "$out" transport nocuda WSYNC_ERR_NO_DEVICE "no CUDA device"
expect_refused "$out" transport nullfn WSYNC_ERR_UNSUPPORTED "send_post"
expect_refused "$out" adapter abi99 WSYNC_ERR_VERSION_MISMATCH "plugin ABI 99"
expect_loads "$out" transport stub
head_has "$out" transport stub 1 '^  transport stub 0\.0\.0-test: loads$' || die "stub version" "$out"
[ "$(entry "$out" transport stub | grep '^    file:')" = "    file:     $testing/libwsync_transport_stub.so" ] ||
  die "stub path" "$out"
has "$out" transport stub 1 '^    caps:     host_memory$' || die "stub caps" "$out"
has "$out" transport stub 1 "^    ABI:      plugin ABI ${plugin_abi//./\\.}\$" || die "stub plugin ABI" "$out"
expect_loads "$out" transport v10
has "$out" transport v10 1 '^    ABI:      plugin ABI 1\.0$' || die "v10 is a plugin ABI 1.0 table" "$out"
expect_loads "$out" adapter stub
has "$out" adapter stub 1 '^    caps:     inband_manifest$' || die "adapter stub caps" "$out"
expect_loads "$out" adapter native # the bundled folder is still searched after WSYNC_PLUGIN_PATH
grep -q '(shadowed)' "$out" && die "nothing is shadowed here" "$out"
# The summary counts what was listed.
found=$(grep -cE '^  (transport|adapter) [^ ]+.*: (loads|refused)' "$out")
loads=$(grep -cE '^  (transport|adapter) [^ ]+.*: loads' "$out")
refused=$(grep -cE '^  (transport|adapter) [^ ]+.*: refused' "$out")
[ "$refused" -ge 6 ] || die "expected at least 6 refusals, saw $refused" "$out"
tail -1 "$out" | grep -qxF "wsync-info: $found plugins found, $loads load, $refused refused" ||
  die "the summary does not match the entries ($found found, $loads load, $refused refused)" "$out"

# 3. A copy of the stub in an earlier folder: the testing folder's file is shadowed by it.
mkdir -p "$tmp/first"
cp "$testing/libwsync_transport_stub.so" "$tmp/first/"
out=$tmp/shadow.txt
WSYNC_PLUGIN_PATH="$tmp/first:$testing" "$info" >"$out" 2>"$tmp/shadow.err" || die "shadow run failed" "$out"
[ "$(entry "$out" transport stub 1 | grep '^    file:')" = "    file:     $tmp/first/libwsync_transport_stub.so" ] ||
  die "the first stub is not the copy" "$out"
if head_has "$out" transport stub 1 'shadowed'; then die "the first stub must not be shadowed" "$out"; fi
head_has "$out" transport stub 2 ': loads \(shadowed\)$' || die "the second stub is not shadowed" "$out"
[ "$(entry "$out" transport stub 2 | grep '^    file:')" = "    file:     $testing/libwsync_transport_stub.so" ] ||
  die "the second stub is not the testing folder's" "$out"
[ "$(entry "$out" transport stub 2 | grep '^    shadowed:')" = \
  "    shadowed: by $tmp/first/libwsync_transport_stub.so (an earlier folder; wsync loads that one for 'stub')" ] ||
  die "the shadowed entry does not name the file that wins" "$out"
tail -1 "$out" | grep -qE ', 1 shadowed$' || die "the summary does not count the shadowed file" "$out"

# 4. --json: one object any JSON parser takes, with the same facts. The shadowing copy sits in
# a folder whose name needs escaping (quote, backslash, tab, newline, a control character and a
# byte that is not UTF-8).
weird="$tmp/we\"ird\\ta"$'\t'"b"$'\n'"c"$'\001'"d"$'\377'
mkdir -p "$weird"
cp "$testing/libwsync_transport_stub.so" "$weird/"
json=$tmp/out.json
WSYNC_PLUGIN_PATH="$weird:$testing" "$info" --json >"$json" 2>"$tmp/json.err" || die "--json exited with $?" "$json"
python3 -c 'import json,sys; json.load(sys.stdin)' <"$json" || die "--json output is not JSON" "$json"
WEIRD_DIR="$weird" TESTING_DIR="$testing" python3 - "$json" <<'EOF' || die "--json content" "$json"
import json, os, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
def check(cond, what):
    if not cond:
        sys.exit("json: " + what)
check(d["abi"]["major"] == d["header_abi"]["major"] and d["abi_compatible"] is True, "abi")
check(d["header_plugin_abi"]["major"] >= 1, "header_plugin_abi")
# Our strings are bytes: the invalid byte comes back as U+FFFD, everything else verbatim.
weird = os.fsencode(os.environ["WEIRD_DIR"]).decode("utf-8", errors="replace")
dirs = [x["path"] for x in d["plugin_dirs"]]
check(dirs[0] == weird and dirs[1] == os.environ["TESTING_DIR"], "plugin_dirs %r" % dirs)
check(all(x["exists"] for x in d["plugin_dirs"]), "exists")
by = {}
for p in d["plugins"]:
    by.setdefault((p["kind"], p["name"]), []).append(p)
stubs = by[("transport", "stub")]
check(len(stubs) == 2 and stubs[0]["path"] == weird + "/libwsync_transport_stub.so", "stub copy path")
check(stubs[0]["loads"] and not stubs[0]["shadowed"] and stubs[0]["shadowed_by"] is None, "first stub")
check(stubs[1]["shadowed"] and stubs[1]["shadowed_by"] == stubs[0]["path"], "second stub shadowed")
check(stubs[0]["cap_names"] == ["host_memory"] and stubs[0]["caps"] == 1, "stub caps")
check(stubs[0]["version"] == "0.0.0-test" and stubs[0]["abi_major"] == 1, "stub version")
a = by[("transport", "abi99")][0]
check(not a["loads"] and a["status"] == "WSYNC_ERR_VERSION_MISMATCH" and "plugin ABI 99" in a["error"], "abi99")
n = by[("transport", "nocuda")][0]
check(n["status"] == "WSYNC_ERR_NO_DEVICE" and n["status_code"] == 14, "nocuda")
s = d["summary"]
check(s["found"] == len(d["plugins"]) and s["load"] + s["refused"] == s["found"], "summary counts")
check(s["load"] == sum(p["loads"] for p in d["plugins"]) and s["shadowed"] == 1, "summary load/shadowed")
EOF

# 5. Arguments: --help exits 0; anything unknown is refused with exit status 2.
"$info" --help >"$tmp/help.txt" || die "--help exited with $?" "$tmp/help.txt"
grep -q '^usage: wsync-info' "$tmp/help.txt" || die "--help prints no usage" "$tmp/help.txt"
rc=0
"$info" --bogus >"$tmp/bad.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] || die "a bad argument gave exit status $rc, not 2" "$tmp/bad.txt"
grep -qF -- "--bogus" "$tmp/bad.txt" || die "the bad argument is not named" "$tmp/bad.txt"
rc=0
"$info" extra >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || die "a stray operand gave exit status $rc, not 2"

echo "wsync-info checks passed"
