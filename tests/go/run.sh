#!/usr/bin/env bash
# Runs one step of the Go binding's tests against this build tree's libwsync:
#   tests/go/run.sh vet|test|sample SOURCE_DIR BUILD_DIR
# vet: gofmt and go vet of bindings/go and samples/go/trainer; test: go test -race of
# bindings/go (GODEBUG=cgocheck=1); sample: the Go sample trainer against two C++ sample engines
# (samples/engine/with_engines.sh, 3 versions, scale 0.25).
# Exit 77 (skipped) where `go` is not on PATH. Nothing is fetched: the binding needs Go's standard
# library only, so GOPROXY=off, and the caches live in the build tree.
set -eu
step=$1 src=$2 build=$3
command -v go >/dev/null 2>&1 || { echo "go is not on PATH (Debian: apt-get install golang-go): skipped"; exit 77; }
export PKG_CONFIG_PATH="$build/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export GOCACHE="$build/go/cache" GOPATH="$build/go/path" GOPROXY=off GOFLAGS=-buildvcs=false GOENV=off
export CGO_ENABLED=1
go version
case $step in
  vet)
    for dir in bindings/go samples/go/trainer; do
      cd "$src/$dir"
      unformatted=$(gofmt -l .)
      [ -z "$unformatted" ] || { echo "run.sh: not gofmt'ed in $dir: $unformatted" >&2; exit 1; }
      go vet ./...
      echo "run.sh: $dir: gofmt and go vet clean"
    done
    ;;
  test)
    engine="$build/bin/wsync-sample-engine"
    # The test of a receiver process killed mid-update runs the C++ sample engine (skipped without it).
    [ -x "$engine" ] && export WSYNC_GO_TEST_ENGINE="$engine"
    cd "$src/bindings/go"
    GODEBUG=cgocheck=1 go test -race -count=1 -timeout 300s -v ./...
    ;;
  sample)
    mkdir -p "$build/go/bin"
    cd "$src/samples/go/trainer"
    go build -o "$build/go/bin/wsync-go-trainer" .
    "$src/samples/engine/with_engines.sh" "$build" 3 0.25 -- "$build/go/bin/wsync-go-trainer"
    ;;
  *)
    echo "run.sh: unknown step '$step' (vet, test or sample)" >&2
    exit 2
    ;;
esac
