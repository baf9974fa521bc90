#!/usr/bin/env bash
# Benchmark of unmodified network servers under `forkvm serve` (not run in CI).
#
# For the C epoll server, the Go net/http server and the Rust tokio+hyper server
# (tests/guests/servers/, built by tests/guests/build.sh) it starts, one at a time on loopback:
#   native     the program itself: the floor
#   no-reset   forkvm serve --ephemeral false PROGRAM   (one VM, state kept)
#   reset      forkvm serve PROGRAM                     (VM reset after every request)
# and runs wrk against each: -t1 -c1 --latency (mean and p99 latency of one request at a
# time) and -t1 -c16 (requests/s). One table, with the ratio of each mean to native.
#
# Environment:
#   DURATION=5           seconds per wrk run
#   SERVERS="epoll go rust"   which servers
#   CONCURRENCY=$(nproc) forkvm serve --concurrency
#   FORKVM=path          use this forkvm binary instead of building target/release
#   MODES="native no-reset reset"  which rows; "reset-guest" adds reset with --syscalls guest
#                        (no exitless poller), for an A/B of the poller in one run
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
DURATION=${DURATION:-5}
SERVERS=${SERVERS:-epoll go rust}
MODES=${MODES:-native no-reset reset}
CONCURRENCY=${CONCURRENCY:-$(nproc)}

log() { echo "bench/servers.sh: $*" >&2; }

PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT

command -v wrk >/dev/null || { log "wrk is missing (apt-get install wrk)"; exit 1; }
tests/guests/build.sh
if [[ -z "${FORKVM:-}" ]]; then
    cargo build --release -q -p forkvm-cli
    FORKVM="$ROOT/target/release/forkvm"
fi

program() {
    case $1 in
        epoll) echo "$ROOT/tests/guests/out/epoll_server.musl" ;;
        go) echo "$ROOT/tests/guests/out/go_server" ;;
        rust) echo "$ROOT/tests/guests/out/rust_server" ;;
    esac
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_port() {
    for _ in $(seq 600); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    log "nothing listens on $1"
    exit 1
}

# ms VALUE: wrk's "12.34us" / "1.23ms" / "1.2s" in milliseconds.
ms() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
        else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
        else printf "?" }'
}

printf "%-6s %-9s %10s %10s %8s %10s\n" server mode "mean(ms)" "p99(ms)" "x native" "c16 req/s"
for s in $SERVERS; do
    prog=$(program "$s")
    [[ -x $prog ]] || { log "skipped $s: $prog was not built"; continue; }
    native_mean=""
    for mode in $MODES; do
        port=$(free_port)
        case $mode in
            native) "$prog" "$port" >/dev/null 2>&1 & ;;
            no-reset) "$FORKVM" serve -q --concurrency "$CONCURRENCY" --ephemeral false "$prog" "$port" >/dev/null 2>&1 & ;;
            reset) "$FORKVM" serve -q --concurrency "$CONCURRENCY" "$prog" "$port" >/dev/null 2>&1 & ;;
            reset-guest) "$FORKVM" serve -q --concurrency "$CONCURRENCY" --syscalls guest "$prog" "$port" >/dev/null 2>&1 & ;;
            *) log "unknown mode $mode"; exit 1 ;;
        esac
        PIDS+=($!)
        pid=$!
        wait_port "$port"
        url="http://127.0.0.1:$port/"
        wrk -t1 -c1 -d1s "$url" >/dev/null # warm up
        one=$(wrk -t1 -c1 -d"${DURATION}s" --latency "$url")
        many=$(wrk -t1 -c16 -d"${DURATION}s" "$url")
        mean=$(ms "$(awk '/Latency/ && !/Distribution/ {print $2; exit}' <<<"$one")")
        p99=$(ms "$(awk '$1 == "99%" {print $2}' <<<"$one")")
        rps=$(awk '/Requests\/sec/ {print $2}' <<<"$many")
        [[ $mode == native ]] && native_mean=$mean
        ratio=$(awk -v a="$mean" -v b="$native_mean" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')
        printf "%-6s %-9s %10s %10s %8s %10s\n" "$s" "$mode" "$mean" "$p99" "$ratio" "$rps"
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
done
