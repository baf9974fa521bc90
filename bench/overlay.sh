#!/usr/bin/env bash
# Cost of per-request file isolation in `forkvm serve`: the reset after a request that
# wrote nothing beside the reset after one that changed files under --allow-write (its
# copy of the write root is removed), and the handler's run time (the copy-up happens in
# the request that first changes something), in the same run, one worker VM.
#
#   bench/overlay.sh [N]     N requests of each kind (default 200)
#
# Rows: the write root holds 4 small files, then 4 files + 100 x 10 KiB (1 MiB).
# Times come from the server's own log line per request (`run=` and `reset=`; the reset
# logged on a request is the one after the previous request). FORKVM=path picks the
# binary (default target/release/forkvm, else target/debug/forkvm).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${1:-200}
FORKVM=${FORKVM:-$ROOT/target/release/forkvm}
[[ -x $FORKVM ]] || FORKVM=$ROOT/target/debug/forkvm
WORK=$(mktemp -d "${TMPDIR:-/tmp}/forkvm-overlay-bench.XXXXXX")
PID=""
trap '[[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT

CC=$(command -v musl-gcc || echo gcc)
"$CC" -static -O2 -g0 -I "$ROOT/guest/include" -o "$WORK/isolation" \
    "$ROOT/tests/guests/serve/isolation.c"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# median and mean of the `KEY=x.xxxms` values on lines FROM..TO of the log
stats() {
    sed -n "$2,$3p" "$WORK/log" | sed -n "s/.* $1=\([0-9.]*\)ms.*/\1/p" | sort -n |
        awk '{v[NR]=$1; s+=$1} END {if (NR) printf "%8.3f %8.3f", v[int((NR+1)/2)], s/NR; else printf "%8s %8s", "-", "-"}'
}

echo "forkvm: $FORKVM, $N requests per row, one worker"
printf '%-22s %-14s %17s %17s\n' "write root" "request" "run ms (med mean)" "reset after (med mean)"
for size in small 1MiB; do
    D=$WORK/data-$size
    mkdir -p "$D"
    echo original >"$D/data.txt"
    echo old >"$D/old.txt"
    echo victim >"$D/victim.txt"
    if [[ $size == 1MiB ]]; then
        for i in $(seq 100); do head -c 10240 /dev/urandom >"$D/blob$i"; done
    fi
    P=$(port)
    RUST_LOG=info "$FORKVM" serve --listen "127.0.0.1:$P" --concurrency 1 --allow-write "$D" \
        "$WORK/isolation" "$D" >"$WORK/log" 2>&1 &
    PID=$!
    until curl -s -o /dev/null "http://127.0.0.1:$P/?op=list"; do sleep 0.1; done
    # 1 warm-up line above; then N reads, N writes, and one read to log the last reset.
    for _ in $(seq "$N"); do curl -s -o /dev/null "http://127.0.0.1:$P/?op=list"; done
    for _ in $(seq "$N"); do curl -s -o /dev/null "http://127.0.0.1:$P/?op=mutate"; done
    curl -s -o /dev/null "http://127.0.0.1:$P/?op=list"
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=""
    # Request lines only; line k's reset is the one after request k-1.
    grep -a ' GET /?op=' "$WORK/log" >"$WORK/req" || true
    mv "$WORK/req" "$WORK/log"
    printf '%-22s %-14s %s   %s\n' "$size" "no change" "$(stats run 2 $((N + 1)))" "$(stats reset 3 $((N + 2)))"
    printf '%-22s %-14s %s   %s\n' "$size" "op=mutate" "$(stats run $((N + 2)) $((2 * N + 1)))" "$(stats reset $((N + 3)) $((2 * N + 2)))"
done
