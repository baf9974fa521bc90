#!/usr/bin/env bash
# JavaScript per request (issue 11), in the style of background document 003:
# three workloads (hello; ~30 KB of prerendered HTML; React renderToString of
# ~30 KB), each served by node natively (forkvm's adapter, same module),
# forkvm ephemeral (a fresh fork per request) and forkvm non-ephemeral, with
# `wrk -t1 -c1 -d${SECS}s --latency`, with each engine (`--engine node`, V8;
# `--engine quickjs`, forkvm-qjs). One table, ratios against native node
# measured in the same run. Not run in CI (it installs react/esbuild from npm).
#
#   bench/js.sh [SECS]        (default 10)
#
# Each server is measured once it is AGE seconds old (default 10): timers a
# master armed before its snapshot come due in every fork after a few seconds,
# so a figure taken right after start-up can miss what a long-lived service pays.
#
# Environment: WORKLOADS="hello static react" (which to run); ENGINES="node quickjs";
# AGE; CONCURRENCY (forkvm serve --concurrency, default 1: one VM, whose reset
# then lies between two requests; 2 lets it overlap the next one); FORKVM_SERVE_FLAGS
# (more `forkvm serve` flags, for A/B runs: e.g. "--warmup 0", or
# "--v8-flag=--max-old-space-size=64" to drop the other default V8 flags).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-10}
FORKVM=${FORKVM:-target/release/forkvm}
[[ -x $FORKVM ]] || cargo build --release -q -p forkvm-cli
command -v node >/dev/null || { echo "needs node (apt-get install nodejs)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }

# React and esbuild from npm, once, outside the repository.
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/forkvm-bench-js
mkdir -p "$CACHE"
if [[ ! -d $CACHE/node_modules/react-dom ]]; then
    (cd "$CACHE" && npm init -y >/dev/null && npm install --silent react@18 react-dom@18 esbuild@0.24 >/dev/null)
fi
cp bench/js/hello.mjs bench/js/static.mjs bench/js/render.jsx "$CACHE/"
"$CACHE/node_modules/.bin/esbuild" "$CACHE/render.jsx" --bundle --platform=node --format=esm \
    --define:process.env.NODE_ENV='"production"' --log-level=warning --outfile="$CACHE/react.mjs" \
    --banner:js="import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);"
# QuickJS has no node modules: React's browser build (renderToString is the same).
"$CACHE/node_modules/.bin/esbuild" "$CACHE/render.jsx" --bundle --platform=neutral --format=esm \
    --main-fields=browser,module,main --conditions=browser \
    --define:process.env.NODE_ENV='"production"' --log-level=warning --outfile="$CACHE/react-quickjs.mjs"

ADAPTER=$(cat crates/forkvm-cli/src/serve/node_adapter.mjs)
PORT=${PORT:-18480}
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

wait_up() {
    for _ in $(seq 1 300); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.2; done
    echo "server on $1 never answered" >&2; return 1
}
AGE=${AGE:-10}

# measure NAME -> "mean p50 p99" in µs
measure() {
    wrk -t1 -c1 -d"${SECS}s" --latency "http://127.0.0.1:$1/" | awk '
        function us(v) { if (v ~ /us$/) return v+0; if (v ~ /ms$/) return (v+0)*1000; if (v ~ /s$/) return (v+0)*1e6; return v }
        /^    Latency/ { mean = us($2) }
        /^     50%/ { p50 = us($2) }
        /^     99%/ { p99 = us($2) }
        END { printf "%.0f %.0f %.0f\n", mean, p50, p99 }'
}

printf '%-8s %-24s %10s %10s %10s %8s\n' workload server "mean µs" "p50 µs" "p99 µs" "x node"
read -r -a EXTRA <<<"${FORKVM_SERVE_FLAGS:-}"
for w in ${WORKLOADS:-hello static react}; do
    app=$CACHE/$w.mjs
    node --input-type=module -e "$ADAPTER" -- "$app" "$PORT" 5 >/dev/null 2>&1 &
    PIDS+=($!)
    wait_up "$PORT"
    sleep "$AGE"
    read -r nm n50 n99 < <(measure "$PORT")
    kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true
    printf '%-8s %-24s %10s %10s %10s %8s\n' "$w" "node (native)" "$nm" "$n50" "$n99" "1.00"
    for engine in ${ENGINES:-node quickjs}; do
        mod=$app
        [[ $engine == quickjs && $w == react ]] && mod=$CACHE/react-quickjs.mjs
        for eph in true false; do
            PORT=$((PORT + 1))
            "$FORKVM" serve -q --concurrency "${CONCURRENCY:-1}" --engine "$engine" --ephemeral "$eph" "${EXTRA[@]}" \
                --listen "127.0.0.1:$PORT" "$mod" &
            PIDS+=($!)
            wait_up "$PORT"
            sleep "$AGE"
            read -r m p50 p99 < <(measure "$PORT")
            kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true
            printf '%-8s %-24s %10s %10s %10s %8s\n' "$w" "$engine ephemeral=$eph" "$m" "$p50" "$p99" \
                "$(awk -v a="$m" -v b="$nm" 'BEGIN { printf "%.2f", a / b }')"
        done
    done
    PORT=$((PORT + 1))
done
