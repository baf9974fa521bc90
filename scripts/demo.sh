#!/usr/bin/env bash
# forkvm demo: build it, then run a couple of static programs inside VMs.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "==== Building forkvm (release) and the guest programs"
cargo build --release -p forkvm-cli
tests/guests/build.sh
FORKVM=target/release/forkvm

# run TEXT... : show a command, run it, show its exit status (the demo goes on either way).
run() {
    echo
    echo "\$ $*"
    local status=0
    "$@" || status=$?
    echo "[exit status $status]"
}

echo
echo "==== A static musl hello world in a fresh VM"
run "$FORKVM" run tests/guests/out/hello.musl

FILE=/etc/hostname
[[ -r $FILE ]] || FILE=/etc/os-release
echo
echo "==== Reading a host file the guest was allowed to see (--allow-read /etc)"
run "$FORKVM" run --allow-read /etc -- tests/guests/out/cat.musl "$FILE"

echo
echo "==== ...and one it was not: the repository's Cargo.toml is outside /etc"
run "$FORKVM" run --allow-read /etc -- tests/guests/out/cat.musl "$(pwd)/Cargo.toml"
