#!/usr/bin/env bash
# One step of the Rust binding's tests, against this build tree's libwsync (found through
# build/pkgconfig/wsync.pc; the programs run with build/lib on LD_LIBRARY_PATH):
#   tests/rust/run.sh BUILD_DIR sys|api|sample
# Exits 77 (skipped) where there is no cargo. Builds offline: the crates have no dependencies.
set -euo pipefail
build=$(cd "$1" && pwd) step=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
command -v cargo >/dev/null 2>&1 || { echo "SKIPPED: no cargo on PATH (scripts/setup.sh installs Debian's)"; exit 77; }
export PKG_CONFIG_PATH="$build/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RUST_BACKTRACE=0
cargo --version
case "$step" in
  sys) cd "$src/bindings/rust" && exec cargo test --offline --target-dir "$build/rust/target" -p wsync-sys ;;
  api) cd "$src/bindings/rust" && WSYNC_SAMPLE_ENGINE="$build/bin/wsync-sample-engine" \
         exec cargo test --offline --target-dir "$build/rust/target" -p wsync ;;
  sample)
    cd "$src/samples/rust/trainer"
    cargo build --offline --release --target-dir "$build/rust/sample-target"
    exec "$src/samples/engine/with_engines.sh" "$build" 3 0.25 -- "$build/rust/sample-target/release/wsync-sample-trainer-rust" ;;
  *) echo "usage: $0 BUILD_DIR sys|api|sample" >&2; exit 2 ;;
esac
