#!/usr/bin/env bash
# HTTP benchmark of `forkvm serve` against a native server running the same handler.
#
# For each example (hello, render) it starts, one at a time on loopback:
#   native        examples/out/<ex>.native: the handler linked into a plain host server
#                 (examples/native/server.c, one thread per connection): the floor
#   ephemeral     forkvm serve <ex>                    (VM reset after every request)
#   persistent    forkvm serve --ephemeral false <ex>  (no reset)
# and runs `wrk --latency` against each with -t1 -c1 (latency of one request at a time)
# and -t2 -c16 (throughput under load), DURATION seconds each. It prints mean, p50 and
# p99 latency, requests/s, errors (socket errors + non-2xx/3xx answers) and the ratio of
# the mean latency to the native server's, and the forkvm server's RSS (VmRSS) before
# and after its runs.
#
# Environment:
#   DURATION=10              seconds per wrk run
#   EXAMPLES="hello render"  which examples
#   CONCURRENCY=$(nproc)     forkvm serve --concurrency
#   WRK_SETS="1:1 2:16"      wrk threads:connections pairs
#   REQUESTS=100000          long mode: afterwards, hammer `forkvm serve` (ephemeral,
#                            hello) until this many requests were answered, printing
#                            VmRSS after every segment (SEGMENT=5 s) to show it is flat
#   FORKVM=path              use this forkvm binary instead of building target/release
#   FORKVM_SERVE_FLAGS=...   more `forkvm serve` flags, for A/B runs (e.g. "--syscalls guest")
#
# Needs wrk (Debian's `wrk`; installed with apt-get when missing and running as root),
# curl, gcc/musl-gcc and cargo. Stops everything it started on exit.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
DURATION=${DURATION:-10}
EXAMPLES=${EXAMPLES:-hello render}
CONCURRENCY=${CONCURRENCY:-$(nproc)}
WRK_SETS=${WRK_SETS:-1:1 2:16}
REQUESTS=${REQUESTS:-0}
SEGMENT=${SEGMENT:-5}

log() { echo "bench/http.sh: $*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# ------------------------------------------------------------------------ cleanup
PIDS=()
WORK=$(mktemp -d "${TMPDIR:-/tmp}/forkvm-http-bench.XXXXXX")
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    for pid in "${PIDS[@]}"; do
        # Give each a moment to exit gracefully, then insist.
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [[ ${KEEP_LOGS:-0} == 1 ]]; then
        log "logs kept in $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# -------------------------------------------------------------------------- tools
if ! command -v wrk >/dev/null 2>&1; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        log "wrk not found; installing it (apt-get install -y wrk)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk >&2 ||
            { DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk >&2; }
    fi
    command -v wrk >/dev/null 2>&1 || die "wrk is missing: sudo apt-get install -y wrk"
fi
command -v curl >/dev/null 2>&1 || die "curl is missing: sudo apt-get install -y curl"

if [[ -z "${FORKVM:-}" ]]; then
    log "cargo build --release -p forkvm-cli"
    cargo build --quiet --release -p forkvm-cli
    FORKVM="$ROOT/target/release/forkvm"
fi
[[ -x $FORKVM ]] || die "$FORKVM is not an executable"
"$ROOT/examples/build.sh"
OUT="$ROOT/examples/out"

# ------------------------------------------------------------------------ servers
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + RANDOM % 20000))
}

SERVER_PID=
SERVER_PORT=
# start_server NAME COMMAND... : starts it in the background (listening on $SERVER_PORT,
# picked by the caller with free_port) and waits until it answers.
start_server() {
    local name=$1
    shift
    local logf="$WORK/$name.log"
    "$@" >"$logf" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    local deadline=$((SECONDS + 60))
    until curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$SERVER_PORT/"; do
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            cat "$logf" >&2
            die "$name exited before answering"
        fi
        ((SECONDS < deadline)) || die "$name did not answer within 60 s (log: $logf)"
        sleep 0.1
    done
}

stop_server() {
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
}

rss_kb() {
    awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo "?"
}

# --------------------------------------------------------------------------- wrk
# run_wrk THREADS CONNECTIONS DURATION URL : prints "mean_us p50_us p99_us rps errors requests".
run_wrk() {
    local t=$1 c=$2 d=$3 url=$4 out
    out=$(wrk --latency -t"$t" -c"$c" -d"${d}s" --timeout 10s "$url" 2>&1) || {
        echo "$out" >&2
        die "wrk failed against $url"
    }
    echo "$out" >>"$WORK/wrk.log"
    awk '
        function us(v) {
            if (v ~ /us$/) { sub(/us$/, "", v); return v + 0 }
            if (v ~ /ms$/) { sub(/ms$/, "", v); return v * 1000 }
            if (v ~ /m$/)  { sub(/m$/, "", v);  return v * 60000000 }
            if (v ~ /s$/)  { sub(/s$/, "", v);  return v * 1000000 }
            return v + 0
        }
        /^ +Latency +[0-9]/      { mean = us($2) }
        /^ +50%/                 { p50 = us($2) }
        /^ +99%/                 { p99 = us($2) }
        /requests in/            { reqs = $1 }
        /^Requests\/sec:/        { rps = $2 }
        /Non-2xx or 3xx/         { errors += $NF }
        /Socket errors:/ {
            for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) { v = $i; sub(/,/, "", v); errors += v }
        }
        END { printf "%s %s %s %s %d %s\n", mean, p50, p99, rps, errors, reqs }
    ' <<<"$out"
}

fmt_us() {
    awk -v v="$1" 'BEGIN {
        if (v == "") { print "-"; exit }
        if (v >= 1000000) printf "%.2fs", v / 1000000
        else if (v >= 1000) printf "%.2fms", v / 1000
        else printf "%.1fus", v
    }'
}

ROWS=()
declare -A NATIVE_MEAN

# bench_server EXAMPLE KIND : wrk runs against the running server, rows appended to ROWS.
bench_server() {
    local ex=$1 kind=$2 set t c res mean p50 p99 rps errors reqs ratio
    # A short warm-up (not measured): page-in, connection set-up, worker start.
    wrk -t1 -c1 -d1s "http://127.0.0.1:$SERVER_PORT/" >/dev/null 2>&1 || true
    for set in $WRK_SETS; do
        t=${set%%:*}
        c=${set##*:}
        log "$ex / $kind: wrk -t$t -c$c -d${DURATION}s"
        res=$(run_wrk "$t" "$c" "$DURATION" "http://127.0.0.1:$SERVER_PORT/")
        read -r mean p50 p99 rps errors reqs <<<"$res"
        if [[ $kind == native ]]; then
            NATIVE_MEAN["$ex/$set"]=$mean
            ratio="1.00"
        elif [[ -n "${NATIVE_MEAN["$ex/$set"]:-}" ]]; then
            ratio=$(awk -v a="$mean" -v b="${NATIVE_MEAN["$ex/$set"]}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
        else
            ratio="-"
        fi
        ROWS+=("$(printf '%-7s %-11s %-6s %10s %10s %10s %11s %7s %9s' "$ex" "$kind" "$t/$c" \
            "$(fmt_us "$mean")" "$(fmt_us "$p50")" "$(fmt_us "$p99")" "$rps" "$errors" "$ratio")")
    done
}

RSS_LINES=()
for ex in $EXAMPLES; do
    [[ -x "$OUT/$ex" && -x "$OUT/$ex.native" ]] || die "unknown example $ex"
done
for ex in $EXAMPLES; do
    log "$ex: native server"
    SERVER_PORT=$(free_port)
    start_server "$ex-native" env FORKVM_NATIVE_LISTEN="127.0.0.1:$SERVER_PORT" "$OUT/$ex.native"
    bench_server "$ex" native
    stop_server

    for mode in ephemeral persistent; do
        flags=(--concurrency "$CONCURRENCY")
        [[ $mode == persistent ]] && flags+=(--ephemeral false)
        # shellcheck disable=SC2206 # word splitting wanted: several flags
        flags+=(${FORKVM_SERVE_FLAGS:-})
        log "$ex: forkvm serve ${flags[*]}"
        SERVER_PORT=$(free_port)
        start_server "$ex-$mode" "$FORKVM" serve --listen "127.0.0.1:$SERVER_PORT" "${flags[@]}" "$OUT/$ex"
        before=$(rss_kb "$SERVER_PID")
        bench_server "$ex" "$mode"
        after=$(rss_kb "$SERVER_PID")
        RSS_LINES+=("$(printf '%-7s %-11s VmRSS before %8s kB, after %8s kB' "$ex" "$mode" "$before" "$after")")
        stop_server
    done
done

echo
echo "forkvm serve vs native, loopback, ${DURATION}s per run, forkvm --concurrency $CONCURRENCY, $(nproc) CPUs"
printf '%-7s %-11s %-6s %10s %10s %10s %11s %7s %9s\n' example server "t/c" mean p50 p99 "req/s" errors "mean/nat"
for row in "${ROWS[@]}"; do
    echo "$row"
done
echo
for line in "${RSS_LINES[@]}"; do
    echo "$line"
done

# --------------------------------------------------------------------- long mode
if ((REQUESTS > 0)); then
    echo
    echo "long run: forkvm serve (ephemeral) hello until $REQUESTS requests, wrk -t2 -c16, ${SEGMENT}s segments"
    SERVER_PORT=$(free_port)
    start_server long "$FORKVM" serve --listen "127.0.0.1:$SERVER_PORT" --concurrency "$CONCURRENCY" \
        "$OUT/hello"
    total=0
    first_rss=$(rss_kb "$SERVER_PID")
    printf '%12s %12s %8s\n' requests "VmRSS kB" errors
    printf '%12s %12s %8s\n' 0 "$first_rss" 0
    segments=0
    while ((total < REQUESTS && segments < 10000)); do
        read -r _ _ _ _ errors reqs <<<"$(run_wrk 2 16 "$SEGMENT" "http://127.0.0.1:$SERVER_PORT/")"
        total=$((total + ${reqs:-0}))
        segments=$((segments + 1))
        printf '%12s %12s %8s\n' "$total" "$(rss_kb "$SERVER_PID")" "$errors"
        ((${reqs:-0} > 0)) || die "no requests answered in a segment"
    done
    last_rss=$(rss_kb "$SERVER_PID")
    echo "VmRSS: $first_rss kB at start, $last_rss kB after $total requests"
    stop_server
fi
