#!/usr/bin/env bash
# One version everywhere: CMake's project version is the release; the headers hold the ABI
# numbers. This checks that every place a user reads them agrees: CHANGELOG's newest entry, the
# soname, wsync.pc, the CMake package, wsync_version_string() and the library's ABI (through
# wsync-info), the version every bundled plugin reports, and the Rust crates' versions.
# Usage: check_versions.sh <source dir> <build dir> <wsync-info> <libwsync.so>
set -euo pipefail
src=$1 build=$2 info=$3 lib=$4
bad=0
want() {  # want <what> <expected> <actual>
  if [[ "$2" == "$3" ]]; then echo "ok   $1: $3"; else echo "FAIL $1: '$3', expected '$2'"; bad=1; fi
}
define() { sed -n "s/^#define $2 \([0-9][0-9]*\).*/\1/p" "$1" | head -n 1; }

release=$(sed -n 's/^project(wsync VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[[ -n "$release" ]] || { echo "FAIL no 'project(wsync VERSION x.y.z' in CMakeLists.txt"; exit 1; }
abi="$(define "$src/include/wsync.h" WSYNC_ABI_VERSION_MAJOR).$(define "$src/include/wsync.h" WSYNC_ABI_VERSION_MINOR)"
pabi="$(define "$src/include/wsync_plugin.h" WSYNC_PLUGIN_ABI_VERSION).$(define "$src/include/wsync_plugin.h" WSYNC_PLUGIN_ABI_MINOR)"
echo "release $release, ABI $abi, plugin ABI $pabi (CMakeLists.txt and the headers)"

# The newest entry is the release, or "Unreleased" with the ABI of the headers above the release
# (whose own entry then comes next, with the ABI it shipped).
newest=$(grep -m1 '^## ' "$src/CHANGELOG.md" | sed 's/ *(.*$//')
if [[ "$newest" == "## Unreleased"* ]]; then
  want "CHANGELOG's Unreleased entry" "## Unreleased — ABI $abi, plugin ABI $pabi" "$newest"
  want "CHANGELOG's newest release" "## $release" "$(grep '^## ' "$src/CHANGELOG.md" | sed -n 2p | sed 's/ —.*$//')"
else
  want "CHANGELOG's newest entry" "## $release — ABI $abi, plugin ABI $pabi" "$newest"
fi
want "soname" "libwsync.so.${abi%%.*}" "$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')"
want "wsync.pc Version" "$release" "$(sed -n 's/^Version: //p' "$build/wsync.pc")"
want "CMake package version" "$release" \
  "$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "$build/wsyncConfigVersion.cmake" | head -n 1)"
for toml in bindings/rust/wsync-sys/Cargo.toml bindings/rust/wsync/Cargo.toml samples/rust/trainer/Cargo.toml; do
  want "$toml version" "$release" "$(sed -n 's/^version = "\(.*\)"/\1/p' "$src/$toml" | head -n 1)"
done
# The prose that names the ABI: the Rust -sys crate (its description and its doc comment) and the
# architecture document's first paragraph say the headers' ABI; the headers date their notes by
# ABI minor ("since 1.4"), a release only beside its ABI ("since release 0.5.0 (ABI 1.3)").
want "wsync-sys's description ABI" "ABI $abi" \
  "$(sed -n 's/^description = .*\(ABI [0-9]*\.[0-9]*\).*/\1/p' "$src/bindings/rust/wsync-sys/Cargo.toml")"
want "wsync-sys's doc comment ABI" "ABI $abi" \
  "$(head -n 1 "$src/bindings/rust/wsync-sys/src/lib.rs" | grep -o 'ABI [0-9]*\.[0-9]*' | head -n 1)"
want "ARCHITECTURE.md's ABIs" "public ABI $abi, plugin ABI $pabi" \
  "$(grep -m1 -o 'public ABI [0-9.]*, plugin ABI [0-9.]*' "$src/docs/ARCHITECTURE.md")"
dated=$(grep -nE '[Ss]ince (wsync |release )?0\.[0-9]' "$src/include/wsync.h" "$src/include/wsync_plugin.h" | grep -v 'ABI' || true)
want "header notes dated by release without their ABI" "" "$dated"

export WSYNC_PLUGIN_PATH=  # only the bundled plugins, beside libwsync
out=$("$info")
want "wsync_version_string() and the library's ABI" "wsync $release, ABI $abi" "$(head -n 1 <<<"$out" | sed 's/ (.*//')"
n=0
while read -r kind name version rest; do
  want "plugin $kind $name version" "$release" "${version%:}"
  n=$((n + 1))
done < <(grep -E '^  (transport|adapter) [^ ]+ [^ ]+: loads' <<<"$out")
[[ $n -gt 0 ]] || { echo "FAIL no bundled plugin loads (wsync-info):"; echo "$out"; bad=1; }
exit $bad
