#!/usr/bin/env bash
# What a portable wheel is, checked without installing it (scripts/wheel.sh runs it on what it
# made; so do the tests python.wheel_portable and python.wheel_aarch64):
#   scripts/wheel-check.sh WHEEL x86_64|aarch64
#   - its file name carries the tag manylinux_2_28_<arch>, and its WHEEL file says the same;
#   - every shared object in it is for <arch> and needs no glibc symbol newer than 2.28
#     (objdump -T, read here, not taken from auditwheel);
#   - `auditwheel show` finds its symbols within manylinux_2_28 and no library outside it but
#     those that come from elsewhere by design: UCX's (the dependency libucx-cu12) and NCCL's (the
#     host's). (Its "overall tag" is linux_<arch> for that reason: auditwheel does not know a
#     library may come from another wheel; `auditwheel repair --exclude` made it so.)
#   - it depends on libucx-cu12, and says so to `import wsync` (wsync/_lib/UCX_FROM_LIBUCX).
set -euo pipefail
whl=$1 arch=$2
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "wheel_check: FAILED: $*" >&2; exit 1; }
case "$(basename "$whl")" in
  *-py3-none-manylinux_2_28_"$arch".whl) ;;
  *) fail "$(basename "$whl") is not tagged py3-none-manylinux_2_28_$arch" ;;
esac
dir=$(mktemp -d /tmp/wsync-wheel-check-XXXXXX)
trap 'rm -rf "$dir"' EXIT
python3 -m zipfile -e "$whl" "$dir"
grep -q "^Tag: py3-none-manylinux_2_28_$arch\$" "$dir"/wsync-*.dist-info/WHEEL || fail "its WHEEL file has another tag"
grep -q "^Requires-Dist: libucx-cu12" "$dir"/wsync-*.dist-info/METADATA || fail "it does not depend on libucx-cu12"
[ -f "$dir/wsync/_lib/UCX_FROM_LIBUCX" ] || fail "it has no wsync/_lib/UCX_FROM_LIBUCX (import wsync would not preload libucx-cu12)"
case "$arch" in x86_64) machine="x86-64" ;; aarch64) machine="aarch64" ;; esac
n=0
while IFS= read -r so; do
  n=$((n + 1))
  file -bL "$so" | grep -qi "$machine" || fail "$so is not a $arch object: $(file -bL "$so")"
  newest=$(objdump -T "$so" | { grep -o 'GLIBC_2\.[0-9]*' || true; } | sort -uV | tail -1)
  [ -z "$newest" ] || [ "$(printf '%s\nGLIBC_2.28\n' "$newest" | sort -V | tail -1)" = GLIBC_2.28 ] \
    || fail "${so#"$dir"/} needs $newest (newer than 2.28)"
  echo "wheel_check: ${so#"$dir"/}: newest glibc symbol ${newest:-none}"
done < <(find "$dir" -name '*.so*' -type f)
[ "$n" -ge 5 ] || fail "only $n shared objects in the wheel"
aw=$root/build-dist/tools/bin/auditwheel
if [ -x "$aw" ]; then
  # --ldpaths: nothing of this machine's libraries (Debian's glibc 2.36 builds) is looked at.
  "$aw" show --json --ldpaths "$dir/none" "$whl" >"$dir/show.json"
  python3 - "$dir/show.json" "$arch" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
arch = sys.argv[2]
glibc = tuple(int(x) for x in d["sym_tag"].split("_")[1:3])
outside = set(d["external_libs"]) - {"libucp.so.0", "libucs.so.0", "libuct.so.0", "libucm.so.0", "libnccl.so.2"}
print("wheel_check: auditwheel show: symbols within %s, libraries from elsewhere: %s" % (
    d["sym_tag"], ", ".join(sorted(d["external_libs"])) or "none"))
if glibc > (2, 28) or not d["sym_tag"].endswith(arch):
    sys.exit("wheel_check: FAILED: auditwheel show puts its symbols at %s" % d["sym_tag"])
if outside:
    sys.exit("wheel_check: FAILED: it needs libraries no one provides: %s" % ", ".join(sorted(outside)))
PY
else
  echo "wheel_check: auditwheel not installed (build-dist/tools): its show was not run" >&2
  exit 1
fi
echo "wheel_check: $(basename "$whl"): $n shared objects, manylinux_2_28_$arch: OK"
