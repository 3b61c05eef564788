#!/usr/bin/env bash
# Installs the build into a fresh prefix and checks what a user gets: the layout, a consumer
# built with find_package(wsync) and one built with pkg-config, and the installed sample trainer
# and engine syncing a (small) model and wsync-info listing the bundled plugins, with no
# WSYNC_PLUGIN_PATH and no LD_LIBRARY_PATH.
# Usage: check_install.sh <build dir> <source dir>
set -euo pipefail
build=$1
src=$2
prefix=$(mktemp -d /tmp/wsync-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -1)
libdir=${libdir%/}

for f in include/wsync.h include/wsync_plugin.h; do test -f "$prefix/$f" || { echo "missing $f"; exit 1; }; done
test -e "$libdir/libwsync.so.1" || { echo "missing libwsync.so.1"; exit 1; }
test -f "$libdir/wsync/libwsync_transport_ucx.so" || { echo "missing the ucx plugin in $libdir/wsync"; exit 1; }
test -f "$libdir/wsync/libwsync_adapter_native.so" || { echo "missing the native adapter"; exit 1; }
test -f "$libdir/cmake/wsync/wsyncConfig.cmake" || { echo "missing the CMake package"; exit 1; }
test -f "$libdir/pkgconfig/wsync.pc" || { echo "missing wsync.pc"; exit 1; }
if grep -q testing <<<"$(ls "$libdir"/wsync/)"; then echo "test plugins were installed"; exit 1; fi

# Programs outside the build tree run with no LD_LIBRARY_PATH: the CMake package's target and
# wsync.pc's Libs give them an rpath to the installed libwsync, and it finds its plugins beside it.
unset WSYNC_PLUGIN_PATH LD_LIBRARY_PATH
# find_package consumer
cmake -S "$src/tests/install/consumer" -B "$prefix/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer-build" >/dev/null
"$prefix/consumer-build/consumer"
# pkg-config consumer: exactly the flags wsync.pc gives
PKG_CONFIG_PATH="$libdir/pkgconfig" cc -std=c99 -o "$prefix/pc-consumer" "$src/tests/install/consumer/consumer.c" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs wsync)
"$prefix/pc-consumer"
found=$(ldd "$prefix/pc-consumer" | sed -n 's/^.*libwsync\.so\.1 => \([^ ]*\) .*/\1/p')
[ -n "$found" ] && [ "$(readlink -f "$found")" = "$(readlink -f "$libdir/libwsync.so.1")" ] ||
  { ldd "$prefix/pc-consumer"; echo "the pkg-config consumer does not find the installed libwsync"; exit 1; }

# The installed samples find libwsync through their rpath and the plugins beside it.
# So does wsync-info, which must see the bundled ucx transport and native adapter load.
test -x "$prefix/bin/wsync-info" || { echo "missing bin/wsync-info"; exit 1; }
info="$prefix/info.txt"
"$prefix/bin/wsync-info" >"$info" || { cat "$info"; echo "installed wsync-info failed"; exit 1; }
for p in "transport ucx" "adapter native"; do
  grep -qE "^  $p [^ ]+: loads" "$info" || { cat "$info"; echo "wsync-info: $p does not load"; exit 1; }
done
addr="$prefix/store.addr"
"$prefix/bin/wsync-sample-trainer" --receivers 1 --store-file "$addr" --scale 0.02 --versions 2 >"$prefix/trainer.log" 2>&1 &
t=$!
"$prefix/bin/wsync-sample-engine" --rank 1 --store-file "$addr" --scale 0.02 >"$prefix/engine.log" 2>&1 &
e=$!
rc=0
wait $t || rc=$?
wait $e || rc=$?
cat "$prefix/trainer.log" "$prefix/engine.log"
[ $rc -eq 0 ] || { echo "installed samples failed"; exit 1; }
[ "$(grep -c verified "$prefix/engine.log")" -eq 2 ] || { echo "expected 2 verified updates"; exit 1; }
echo "install check passed"
