#!/usr/bin/env bash
# Builds plugins/example_adapter the way a third party would: against this build installed into a
# fresh prefix, from a copy of the folder that has nothing of the wsync tree around it, twice
# (CMake with find_package(wsync), then the Makefile with pkg-config), warning-free. Each result
# must export only wsync_adapter_entry_v1, must not link libwsync, and must pass wsync-conformance.
# Usage: check_example_out_of_tree.sh <build dir> <source dir> <wsync-conformance>
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
conformance=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
work=$(mktemp -d /tmp/wsync-example-XXXXXX)
trap 'rm -rf "$work"' EXIT

step() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

# What a plugin file must look like: one exported symbol, no libwsync dependency.
check_plugin_file() {
  local so=$1 syms
  test -f "$so" || fail "$so was not built"
  syms=$(nm -D --defined-only "$so" | awk 'NF >= 2 { print $NF }' | sed 's/@.*//' | sort -u)
  [ "$syms" = "wsync_adapter_entry_v1" ] || fail "$so must export exactly wsync_adapter_entry_v1; it exports: $syms"
  if grep -q 'NEEDED.*libwsync' <<<"$(readelf -d "$so")"; then
    fail "$so links libwsync; a plugin reaches the core through the host table only"
  fi
  echo "ok: $so exports only wsync_adapter_entry_v1 and does not link libwsync"
}

step "install the SDK into $work/sdk"
cmake --install "$build" --prefix "$work/sdk" >/dev/null
libdir=$(ls -d "$work"/sdk/lib*/ | head -1)
libdir=${libdir%/}
test -f "$libdir/cmake/wsync/wsyncConfig.cmake" || fail "no CMake package in $libdir/cmake/wsync"
test -f "$libdir/pkgconfig/wsync.pc" || fail "no wsync.pc in $libdir/pkgconfig"

step "a copy of plugins/example_adapter, outside the tree"
cp -r "$src/plugins/example_adapter" "$work/example"
rm -rf "$work/example/build" "$work/example"/*.so

step "CMake: find_package(wsync) with CMAKE_PREFIX_PATH=$work/sdk"
cmake -S "$work/example" -B "$work/build-cmake" -DCMAKE_PREFIX_PATH="$work/sdk" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="-Werror" >"$work/cmake-configure.log" 2>&1 || { cat "$work/cmake-configure.log"; fail "configure failed"; }
cmake --build "$work/build-cmake" >"$work/cmake-build.log" 2>&1 || { cat "$work/cmake-build.log"; fail "build failed"; }
if grep -qi 'warning' "$work/cmake-build.log"; then cat "$work/cmake-build.log"; fail "the CMake build warns"; fi
so_cmake="$work/build-cmake/libwsync_adapter_example.so"
check_plugin_file "$so_cmake"
# Its include path comes from the installed package, not from the source tree.
if grep -rqF -- "$src/include" "$work/build-cmake" 2>/dev/null; then fail "the CMake build used headers from $src/include"; fi
cmake --install "$work/build-cmake" --prefix "$work/plugin-prefix" >/dev/null
test -f "$work/plugin-prefix/$(basename "$libdir")/wsync/libwsync_adapter_example.so" ||
  fail "cmake --install did not put the plugin into <prefix>/$(basename "$libdir")/wsync"

step "Makefile: pkg-config --cflags wsync with PKG_CONFIG_PATH=$libdir/pkgconfig"
make -C "$work/example" PKG_CONFIG_PATH="$libdir/pkgconfig" BUILDDIR="$work/build-make" CFLAGS="-O2 -Werror" \
  >"$work/make.log" 2>&1 || { cat "$work/make.log"; fail "make failed"; }
cat "$work/make.log"
grep -q -- "-I$work/sdk" "$work/make.log" || grep -q -- "-I$libdir/../include" "$work/make.log" ||
  fail "make did not take the include path from the installed wsync.pc"
so_make="$work/build-make/libwsync_adapter_example.so"
check_plugin_file "$so_make"
# Without pkg-config finding wsync, the Makefile says so instead of failing obscurely.
if PKG_CONFIG_PATH="$work/nowhere" PKG_CONFIG_LIBDIR="$work/nowhere" make -C "$work/example" BUILDDIR="$work/x" \
  >"$work/make-nopc.log" 2>&1; then
  fail "make succeeded without wsync.pc"
fi
grep -q "pkg-config cannot find wsync" "$work/make-nopc.log" || { cat "$work/make-nopc.log"; fail "no clear message without wsync.pc"; }

step "wsync-conformance on the CMake build"
"$conformance" "$so_cmake"
step "wsync-conformance on the Makefile build, with every option of the example set"
"$conformance" --option pause=1 --option flush_cache=0 --option alignment=64 "$so_make"

echo
echo "example out-of-tree check passed"
