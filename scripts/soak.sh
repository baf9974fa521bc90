#!/usr/bin/env bash
# Soak test of `forkvm serve`: sends many requests with mixed handlers and checks that the
# server's resources stay flat and that no request sees anything an earlier one left.
#
#   scripts/soak.sh [--requests N] [--seconds S] [--forkvm BIN] [--concurrency C]
#                   [--interval SECS] [--keep]
#
# SOAK_SERVE_FLAGS adds flags to `forkvm serve` (`--ephemeral false` shows a failing run).
# Defaults: 1,000,000 requests, no time limit, target/release/forkvm (else target/debug),
# 2 worker VMs, a sample every 10 s. With --seconds the run stops after S seconds (or N
# requests, whichever comes first). CI runs `scripts/soak.sh --seconds 20`
# (crates/forkvm-cli/tests/isolation.rs).
#
# The guest is tests/guests/serve/isolation.c, served with --allow-write on a scratch
# directory. The mix (loopback only: wrk, curl, bash's /dev/tcp):
#   wrk       op=normal (200; the handler first checks that no global, fd, /tmp file or
#             --allow-write file of an earlier request is left, answering 500 "leak" if
#             one is, then leaves all four behind), op=crash (500 "crashed"), op=big
#             (256 KiB request body and response), op=spin (504 "timed out")
#   curl      a 64 KiB body uploaded at 32 KiB/s (a slow client)
#   /dev/tcp  a client that sends its headers in two parts a second apart
# Every interval it records the server's RSS (/proc/PID/status), open fds (/proc/PID/fd),
# threads, worker VMs (forkvm_workers_live on the admin listener's metrics) and forkvm's
# scratch directories in /dev/shm, into samples.csv. It fails if any unexpected status or
# a leak is seen, if the --allow-write directory changed on the host, or if fds, threads,
# VMs or scratch directories at the end exceed their level halfway through the run (RSS:
# by more than 25% + 32 MiB); pools reach their working size first, a leak keeps growing.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REQUESTS=1000000
SECONDS_LIMIT=0
FORKVM=""
CONCURRENCY=2
INTERVAL=10
KEEP=0

usage() {
    sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

while [[ $# -gt 0 ]]; do
    case $1 in
    --requests) REQUESTS=$2; shift 2 ;;
    --seconds) SECONDS_LIMIT=$2; shift 2 ;;
    --forkvm) FORKVM=$2; shift 2 ;;
    --concurrency) CONCURRENCY=$2; shift 2 ;;
    --interval) INTERVAL=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) usage ;;
    *) echo "soak.sh: unknown argument $1" >&2; usage ;;
    esac
done
[[ $REQUESTS =~ ^[0-9]+$ && $SECONDS_LIMIT =~ ^[0-9]+$ && $INTERVAL =~ ^[0-9]+$ ]] || usage
if [[ $SECONDS_LIMIT -gt 0 && $INTERVAL -gt $((SECONDS_LIMIT / 4)) ]]; then
    # A short run still gets a few samples.
    INTERVAL=$(((SECONDS_LIMIT + 3) / 4))
fi
[[ $INTERVAL -ge 1 ]] || INTERVAL=1

if [[ -z $FORKVM ]]; then
    FORKVM=$ROOT/target/release/forkvm
    [[ -x $FORKVM ]] || FORKVM=$ROOT/target/debug/forkvm
fi
[[ -x $FORKVM ]] || { echo "soak.sh: no forkvm binary at $FORKVM (cargo build)" >&2; exit 2; }
for tool in wrk curl; do
    command -v $tool >/dev/null || { echo "soak.sh: $tool is required (apt-get install $tool)" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/forkvm-soak.XXXXXX")
SERVER_PID=""
BG_PIDS=()
cleanup() {
    touch "$WORK/stop"
    for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    wait 2>/dev/null || true
    if [[ $KEEP == 1 ]]; then echo "soak.sh: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# The guest, built as examples/build.sh builds serve guests.
CC_GUEST=${CC_GUEST:-$(command -v musl-gcc || echo gcc)}
"$CC_GUEST" -static -O2 -g0 -I "$ROOT/guest/include" -o "$WORK/isolation" \
    "$ROOT/tests/guests/serve/isolation.c"

mkdir -p "$WORK/data"
echo original >"$WORK/data/data.txt"
echo old >"$WORK/data/old.txt"
echo victim >"$WORK/data/victim.txt"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + RANDOM % 20000))
}
PORT=$(free_port)
ADMIN=$(free_port)
while [[ $ADMIN == "$PORT" ]]; do ADMIN=$(free_port); done

"$FORKVM" serve --quiet --listen "127.0.0.1:$PORT" --admin "127.0.0.1:$ADMIN" \
    --concurrency "$CONCURRENCY" --request-timeout 0.5 --allow-write "$WORK/data" \
    ${SOAK_SERVE_FLAGS:-} "$WORK/isolation" "$WORK/data" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
# The program wrote init.txt while it initialised (write-through); that is the baseline.
for _ in $(seq 600); do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/?op=list" && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; echo "soak.sh: the server exited" >&2; exit 1; }
    sleep 0.1
done
snapshot_dir() { (cd "$WORK/data" && find . -printf '%p %s %m\n' | sort && cat data.txt); }
snapshot_dir >"$WORK/data.before"

# --- load ---------------------------------------------------------------------------------
# wrk's script: globals of each thread are read back with t:get() in done().
cat >"$WORK/mix.lua" <<'EOF'
limit = tonumber(os.getenv("SOAK_PER_THREAD") or "0")
n, seen, bad, leaks = 0, 0, 0, 0
big = string.rep("q", 262144)
request = function()
    n = n + 1
    if n % 1000 == 0 then return wrk.format("GET", "/?op=spin") end
    if n % 50 == 0 then return wrk.format("GET", "/?op=crash") end
    if n % 50 == 25 then return wrk.format("POST", "/?op=big", nil, big) end
    return wrk.format("GET", "/?op=normal")
end
response = function(status, headers, body)
    seen = seen + 1
    local ok = (status == 200 and (body:sub(1, 2) == "ok" or body:sub(1, 9) == "body_len="))
        or (status == 500 and body:find("crashed", 1, true) ~= nil)
        or (status == 504 and body:find("timed out", 1, true) ~= nil)
    if not ok then
        bad = bad + 1
        if body:find("leak", 1, true) then leaks = leaks + 1 end
        if bad <= 5 then io.stderr:write("unexpected: " .. status .. " " .. body:sub(1, 80) .. "\n") end
    end
    if limit > 0 and seen == limit then
        -- wrk runs for its duration even when every thread stopped: say so, and the
        -- script interrupts it.
        local f = io.open(os.getenv("SOAK_STOPPED"), "a")
        if f then f:write("stopped\n") f:close() end
        wrk.thread:stop()
    end
end
threads = {}
setup = function(thread) table.insert(threads, thread) end
done = function(summary, latency, requests)
    local b, l, s = 0, 0, 0
    for _, t in ipairs(threads) do
        b = b + t:get("bad")
        l = l + t:get("leaks")
        s = s + t:get("seen")
    end
    local e = summary.errors
    io.write(string.format("SOAK responses=%d unexpected=%d leaks=%d errors=%d\n",
        s, b, l, e.connect + e.read + e.write + e.timeout))
end
EOF

WRK_THREADS=2
: >"$WORK/stopped"
WRK_CONNS=4
DURATION=$SECONDS_LIMIT
[[ $DURATION -gt 0 ]] || DURATION=$((365 * 86400))
PER_THREAD=$(((REQUESTS + WRK_THREADS - 1) / WRK_THREADS))
SOAK_STOPPED=$WORK/stopped SOAK_PER_THREAD=$PER_THREAD wrk -t$WRK_THREADS -c$WRK_CONNS -d"${DURATION}s" --timeout 10s \
    -s "$WORK/mix.lua" "http://127.0.0.1:$PORT" >"$WORK/wrk.out" 2>"$WORK/wrk.err" &
WRK_PID=$!
BG_PIDS+=("$WRK_PID")

# Slow clients: an upload at 32 KiB/s, and headers sent in two parts.
head -c 65536 /dev/zero >"$WORK/body64k"
slow_upload() {
    while [[ ! -e $WORK/stop ]]; do
        code=$(curl -s -o "$WORK/slow.body" -w '%{http_code}' --max-time 30 --limit-rate 32k \
            -X POST --data-binary @"$WORK/body64k" "http://127.0.0.1:$PORT/?op=big" || true)
        if [[ ! -e $WORK/stop ]]; then
            if [[ $code == 200 ]] && grep -q 'body_len=65536' "$WORK/slow.body"; then
                echo ok >>"$WORK/slow.results"
            else
                echo "slow upload: $code" >>"$WORK/slow.results"
            fi
        fi
    done
}
split_headers() {
    while [[ ! -e $WORK/stop ]]; do
        line=$(
            exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 0
            printf 'GET /?op=normal HTTP/1.1\r\n' >&3
            sleep 1
            printf 'Host: soak\r\nConnection: close\r\n\r\n' >&3
            head -n 1 <&3 | tr -d '\r'
        ) || true
        if [[ ! -e $WORK/stop ]]; then
            if [[ $line == "HTTP/1.1 200"* ]]; then
                echo ok >>"$WORK/slow.results"
            else
                echo "split headers: $line" >>"$WORK/slow.results"
            fi
        fi
    done
}
slow_upload &
BG_PIDS+=($!)
split_headers &
BG_PIDS+=($!)

# --- samples ------------------------------------------------------------------------------
sample() {
    local rss fds threads vms shm
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null || echo 0)
    threads=$(awk '/^Threads:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null || echo 0)
    fds=$(find "/proc/$SERVER_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    vms=$(curl -s --max-time 5 "http://127.0.0.1:$ADMIN/.forkvm/metrics" |
        awk '/^forkvm_workers_live / {print $2}')
    shm=$(find /dev/shm -maxdepth 1 -name "forkvm-tmp-$SERVER_PID-*" 2>/dev/null | wc -l)
    echo "$(($(date +%s) - START)),$rss,$fds,$threads,${vms:-?},$shm"
}
START=$(date +%s)
echo "t_s,rss_kib,fds,threads,vms,scratch_dirs" >"$WORK/samples.csv"
echo "soak.sh: forkvm $FORKVM, pid $SERVER_PID, $CONCURRENCY VMs, sampling every ${INTERVAL}s" >&2
while kill -0 "$WRK_PID" 2>/dev/null; do
    for _ in $(seq $((INTERVAL * 10))); do
        kill -0 "$WRK_PID" 2>/dev/null || break
        if [[ $(wc -l <"$WORK/stopped" 2>/dev/null || echo 0) -ge $WRK_THREADS ]]; then
            kill -INT "$WRK_PID" 2>/dev/null || true
        fi
        sleep 0.1
    done
    kill -0 "$SERVER_PID" 2>/dev/null || break
    s=$(sample)
    echo "$s" >>"$WORK/samples.csv"
    echo "soak.sh: sample $s" >&2
done
wait "$WRK_PID" || true
touch "$WORK/stop"
# Let the slow clients finish their current exchange (an upload takes ~2 s).
sleep 3
for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
final=$(sample)
echo "$final" >>"$WORK/samples.csv"

# --- verdict ------------------------------------------------------------------------------
fail=()
kill -0 "$SERVER_PID" 2>/dev/null || fail+=("the server died")
summary=$(grep '^SOAK ' "$WORK/wrk.out" || true)
[[ -n $summary ]] || fail+=("wrk printed no summary: $(tail -3 "$WORK/wrk.err" "$WORK/wrk.out" | tr '\n' ' ')")
get() { sed -n "s/.*$1=\([0-9]*\).*/\1/p" <<<"$summary"; }
responses=$(get responses)
[[ ${responses:-0} -gt 0 ]] || fail+=("no responses")
[[ $(get unexpected) == 0 ]] || fail+=("unexpected statuses: $(get unexpected) ($(head -3 "$WORK/wrk.err" | tr '\n' ' '))")
[[ $(get leaks) == 0 ]] || fail+=("state leaks: $(get leaks)")
[[ $(get errors) == 0 ]] || fail+=("wrk socket/status errors: $(get errors)")
slow_ok=$(grep -c '^ok$' "$WORK/slow.results" 2>/dev/null || true)
slow_bad=$(grep -vc '^ok$' "$WORK/slow.results" 2>/dev/null || true)
[[ ${slow_bad:-0} == 0 ]] || fail+=("slow clients: $(grep -v '^ok$' "$WORK/slow.results" | sort | uniq -c | tr '\n' ' ')")
# A slow exchange takes about 2 s: a run of 10 s or more must have completed some.
if [[ $(($(date +%s) - START)) -ge 10 && ${slow_ok:-0} -eq 0 ]]; then
    fail+=("no slow client completed")
fi
snapshot_dir >"$WORK/data.after"
cmp -s "$WORK/data.before" "$WORK/data.after" ||
    fail+=("the --allow-write directory changed on the host: $(diff "$WORK/data.before" "$WORK/data.after" | tr '\n' ' ')")

# Flat: the end is no higher than the level halfway through. Pools (tokio's
# blocking threads, fds of slow clients) grow to the load's working size in the
# first minutes and then stay; a leak keeps growing through the second half.
rows=$(($(wc -l <"$WORK/samples.csv") - 1))
base=$(sed -n "$((rows / 2 + 1 > 2 ? rows / 2 + 1 : 2))p" "$WORK/samples.csv")
if [[ -z $base ]]; then
    fail+=("no sample taken")
else
    IFS=, read -r _ b_rss b_fds b_thr b_vms b_shm <<<"$base"
    IFS=, read -r _ e_rss e_fds e_thr e_vms e_shm <<<"$final"
    [[ $e_fds -le $((b_fds + 4)) ]] || fail+=("open fds grew: $b_fds -> $e_fds")
    # tokio's blocking pool adds a thread when every one it has is busy at once (a burst of
    # slow clients), so it may still grow a little after halfway: at most one per worker
    # VM and a few more. A leaked thread per request would be thousands.
    m_thr=$(sed -n "2,$((rows / 2 + 1 > 2 ? rows / 2 + 1 : 2))p" "$WORK/samples.csv" | cut -d, -f4 | sort -n | tail -1)
    [[ $e_thr -le $((m_thr + CONCURRENCY + 4)) ]] || fail+=("threads grew: $m_thr -> $e_thr")
    [[ $e_vms == "$CONCURRENCY" && $b_vms == "$CONCURRENCY" ]] || fail+=("worker VMs: $b_vms -> $e_vms (want $CONCURRENCY)")
    [[ $e_shm -le $((CONCURRENCY + 1)) ]] || fail+=("scratch directories: $b_shm -> $e_shm")
    [[ $e_rss -le $((b_rss + b_rss / 4 + 32768)) ]] || fail+=("RSS grew: $b_rss KiB -> $e_rss KiB")
fi

echo "soak.sh: $summary slow_clients=${slow_ok:-0}" >&2
column -s, -t <"$WORK/samples.csv" >&2 || cat "$WORK/samples.csv" >&2
if [[ ${#fail[@]} -gt 0 ]]; then
    for f in "${fail[@]}"; do echo "soak.sh: FAIL: $f" >&2; done
    tail -20 "$WORK/server.log" >&2
    exit 1
fi
echo "soak.sh: PASS" >&2
