#!/usr/bin/env bash
# Builds the `forkvm serve` examples into examples/out/ (git-ignored):
#
#   out/hello, out/render, out/counter        C guests: musl-gcc -static -O2 (gcc -static
#                                             if musl-gcc is missing)
#   out/hello_rs, out/render_rs               Rust guests (examples/rust), static-pie
#   out/hello.native, out/render.native, ...  the same C handlers linked into an ordinary
#                                             host HTTP server (examples/native/server.c)
#   out/tests/echo, out/tests/hostile         test guests from tests/guests/serve/
#
# Idempotent: a C output is rebuilt only when older than one of its inputs; cargo decides
# for Rust. Quiet when everything is up to date.
#
# Usage: examples/build.sh [-f]     -f: rebuild everything
# Environment: SKIP_RUST=1 skips the Rust guests; CC_GUEST overrides the guest compiler.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
EX="$ROOT/examples"
OUT="$EX/out"
mkdir -p "$OUT/tests"

# Serialise concurrent invocations (several test binaries starting at once).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$OUT/.build.lock"
    flock 9
fi

FORCE=0
[[ "${1:-}" == "-f" ]] && FORCE=1

log() { echo "examples/build.sh: $*" >&2; }

# shellcheck source=/dev/null
source "$ROOT/scripts/build-lib.sh"

if [[ -n "${CC_GUEST:-}" ]]; then
    GUEST_CC=$CC_GUEST
elif command -v musl-gcc >/dev/null 2>&1; then
    GUEST_CC=musl-gcc
else
    GUEST_CC=gcc
fi
WARN=(-Wall -Wextra)
GUEST_FLAGS=(-static -O2 -g0 "${WARN[@]}" -I "$ROOT/guest/include" -I "$EX/c")
NATIVE_FLAGS=(-O2 -g0 "${WARN[@]}" -pthread -DFORKVM_NATIVE -I "$ROOT/guest/include" -I "$EX/c"
    -I "$EX/native" -include forkvm_native.h)
HEADER_DEPS=("$ROOT/guest/include/forkvm.h" "$EX/c/example_util.h" "$EX/build.sh")
NATIVE_DEPS=("$EX/native/server.c" "$EX/native/forkvm_native.h")

# build OUTPUT COMPILER FLAGS... -- SOURCES... : compile into a temporary file, then rename.
build() {
    local out=$1 cc=$2
    shift 2
    local flags=()
    while [[ $1 != -- ]]; do
        flags+=("$1")
        shift
    done
    shift
    log "$cc ${*#"$ROOT/"} -> ${out#"$ROOT/"}"
    "$cc" "${flags[@]}" -o "$out.tmp" "$@"
    mv -f "$out.tmp" "$out"
}

warned_gcc=0
guest() {
    local out=$1 src=$2
    if needs_build "$out" "$src" "${HEADER_DEPS[@]}"; then
        if [[ $GUEST_CC == gcc && $warned_gcc == 0 ]]; then
            log "musl-gcc not found; using gcc -static (apt-get install musl-tools for musl)"
            warned_gcc=1
        fi
        build "$out" "$GUEST_CC" "${GUEST_FLAGS[@]}" -- "$src"
    fi
}

for p in hello render counter; do
    guest "$OUT/$p" "$EX/c/$p.c"
    if needs_build "$OUT/$p.native" "$EX/c/$p.c" "${HEADER_DEPS[@]}" "${NATIVE_DEPS[@]}"; then
        build "$OUT/$p.native" gcc "${NATIVE_FLAGS[@]}" -- "$EX/c/$p.c" "$EX/native/server.c"
    fi
done

for p in echo hostile; do
    guest "$OUT/tests/$p" "$ROOT/tests/guests/serve/$p.c"
done
if needs_build "$OUT/tests/echo.native" "$ROOT/tests/guests/serve/echo.c" "${HEADER_DEPS[@]}" \
    "${NATIVE_DEPS[@]}"; then
    build "$OUT/tests/echo.native" gcc "${NATIVE_FLAGS[@]}" -- "$ROOT/tests/guests/serve/echo.c" \
        "$EX/native/server.c"
fi

if [[ "${SKIP_RUST:-0}" != 1 ]]; then
    # Our settings must win over whatever the calling environment (e.g. `cargo test`) set.
    unset CARGO_ENCODED_RUSTFLAGS CARGO_BUILD_RUSTFLAGS CARGO_TARGET_DIR CARGO_BUILD_TARGET
    RUST_TARGET=x86_64-unknown-linux-gnu
    RUSTFLAGS="-C target-feature=+crt-static" cargo build --quiet --release \
        --manifest-path "$EX/rust/Cargo.toml" --target "$RUST_TARGET" \
        --target-dir "$OUT/rust-target"
    for p in hello render; do
        src="$OUT/rust-target/$RUST_TARGET/release/$p"
        if ! cmp -s "$src" "$OUT/${p}_rs"; then
            log "cargo -> out/${p}_rs"
            cp -f "$src" "$OUT/${p}_rs.tmp"
            mv -f "$OUT/${p}_rs.tmp" "$OUT/${p}_rs"
        fi
    done
fi
