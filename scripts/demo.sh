#!/usr/bin/env bash
# forkvm demo: build it, then run a couple of static programs inside VMs.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v curl >/dev/null 2>&1; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get -y -q install curl
    else
        echo "error: curl is needed for the HTTP part; install it with: sudo apt-get install -y curl" >&2
        exit 1
    fi
fi

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

echo
echo "==== forkvm serve: every HTTP request in its own VM (built-in example guest)"
PORT=${FORKVM_DEMO_PORT:-18080}
"$FORKVM" serve --listen "127.0.0.1:$PORT" --concurrency 2 &
SERVE_PID=$!
trap 'kill "$SERVE_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
    sleep 0.1
done
run curl -s -D - "http://127.0.0.1:$PORT/hello?from=demo"
kill -TERM "$SERVE_PID"
wait "$SERVE_PID" || true
trap - EXIT
