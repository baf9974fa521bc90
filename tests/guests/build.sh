#!/usr/bin/env bash
# Builds the guest test programs into tests/guests/out/ (git-ignored).
#
#   out/<name>.glibc   gcc -static -O2          (C programs)
#   out/<name>.musl    musl-gcc -static -O2     (C programs)
#   out/<name>.glibc   g++ -static -O2          (C++ programs, <name> ends in _cpp)
#   out/<name>         Rust, static-pie          (tests/guests/rust, <name> ends in _rs)
#
# Idempotent: an output is rebuilt only when it is older than its source, common.h, tcp_pair.h or this
# script. Quiet when everything is up to date. Usage: tests/guests/build.sh [-f] (force).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
HERE=$(pwd)
OUT="$HERE/out"
mkdir -p "$OUT"

# Serialise concurrent invocations (e.g. two test binaries starting at once).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$OUT/.build.lock"
    flock 9
fi

FORCE=0
if [[ "${1:-}" == "-f" ]]; then
    FORCE=1
fi

C_PROGRAMS=(hello ifaddrs getrandom_edges wild_read args_env read_file refused_file malloc_big sort floats time_random
    null_write infinite_loop memory_bomb hostile cat_stdin cat sigsegv_recover pthreads
    thread_signal alarm vector_state unix_sockets posix_timers fast_identity vdso_clock exitless_files exitless_memory
    thread_ids tcp_loopback shared_mappings sigwait pipe_writes sigpipe file_locks child_sleep wait_masks append_and_cpu_clocks signal_restart sendfile_blocking sigchld_ignored recv_waitall signal_info file_mappings select_sets tcp_names cpu_timers memfd tmpfile fd_links tcp_close epoll_edges epoll_sets symlink_paths synthetic_stat dir_moves copy_range inotify memory_protection dir_perms fd_listing odd_cwd sysv_shm ignored_blocked thread_interrupt thread_altstack unix_creds proc_cmdline mremap_rights sync_calls tcp_buffer fd_path_chmod proc_load mount_table removed_dirs file_clone madvise_ranges wipe_on_fork trace_wait signal_io proc_maps vdso_reads udp pty tcp_urgent splice signal_routing thread_sleep_signal)
CPP_PROGRAMS=(hello_cpp sort_cpp exceptions_cpp)
RUST_PROGRAMS=(hello_rs panic_rs threads_rs tokio_rs tokio_signal_rs)

CFLAGS=(-static -O2 -Wall -Wextra -g0)
LIBS=(-lm -pthread)

log() { echo "build.sh: $*" >&2; }

# shellcheck source=/dev/null
source "$HERE/../../scripts/build-lib.sh"

ensure_musl_gcc() {
    command -v musl-gcc >/dev/null 2>&1 && return 0
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        log "musl-gcc not found; installing musl-tools"
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q musl-tools >&2; then
            DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q musl-tools >&2
        fi
        command -v musl-gcc >/dev/null 2>&1 && return 0
    fi
    log "error: musl-gcc is missing. Install it with: sudo apt-get install -y musl-tools"
    exit 1
}

# compile COMPILER OUTPUT SOURCE : build into a temporary file, then rename (never a half-written output).
compile() {
    local cc=$1 out=$2 src=$3
    log "$cc $(basename "$src") -> out/$(basename "$out")"
    "$cc" "${CFLAGS[@]}" -o "$out.tmp" "$src" "${LIBS[@]}"
    mv -f "$out.tmp" "$out"
}

COMMON_DEPS=("$HERE/common.h" "$HERE/tcp_pair.h" "$HERE/build.sh")

for p in "${C_PROGRAMS[@]}"; do
    if needs_build "$OUT/$p.glibc" "$HERE/$p.c" "${COMMON_DEPS[@]}"; then
        compile gcc "$OUT/$p.glibc" "$HERE/$p.c"
    fi
done

need_musl=0
for p in "${C_PROGRAMS[@]}"; do
    if needs_build "$OUT/$p.musl" "$HERE/$p.c" "${COMMON_DEPS[@]}"; then
        need_musl=1
    fi
done
if [[ $need_musl == 1 ]]; then
    ensure_musl_gcc
    for p in "${C_PROGRAMS[@]}"; do
        if needs_build "$OUT/$p.musl" "$HERE/$p.c" "${COMMON_DEPS[@]}"; then
            compile musl-gcc "$OUT/$p.musl" "$HERE/$p.c"
        fi
    done
fi

# Child processes (fork, exec, wait): tests/guests/children/*.c.
for p in forkexec forkbomb forkloop pipe_pingpong forkmem fork_server shared_sockets proc_self bigspawn sleep_signals send_whole nice_values stop_cont orphans rlimits fifos unix_dgram vfork_share mask_race sleep_restarts futex_shared pidfd wait_signal vfork_fresh process_group child_rusage proc_others proc_state; do
    if needs_build "$OUT/$p.glibc" "$HERE/children/$p.c" "${COMMON_DEPS[@]}"; then
        compile gcc "$OUT/$p.glibc" "$HERE/children/$p.c"
    fi
    if needs_build "$OUT/$p.musl" "$HERE/children/$p.c" "${COMMON_DEPS[@]}"; then
        ensure_musl_gcc
        compile musl-gcc "$OUT/$p.musl" "$HERE/children/$p.c"
    fi
done

for p in "${CPP_PROGRAMS[@]}"; do
    if needs_build "$OUT/$p.glibc" "$HERE/$p.cpp" "${COMMON_DEPS[@]}"; then
        compile g++ "$OUT/$p.glibc" "$HERE/$p.cpp"
    fi
done

# Guests of the machine API (forkvm_ready and exported functions), with the C API header.
API_HEADER="$HERE/../../guest/include/forkvm.h"
for p in api_demo; do
    if needs_build "$OUT/$p.musl" "$HERE/api/$p.c" "$API_HEADER" "$HERE/build.sh"; then
        ensure_musl_gcc
        log "musl-gcc api/$p.c -> out/$p.musl"
        musl-gcc "${CFLAGS[@]}" -I "$(dirname "$API_HEADER")" -o "$OUT/$p.musl.tmp" "$HERE/api/$p.c"
        mv -f "$OUT/$p.musl.tmp" "$OUT/$p.musl"
    fi
done

# Go guest (static, CGO_ENABLED=0), when Go is installed.
if command -v go >/dev/null 2>&1; then
    if needs_build "$OUT/goroutines" "$HERE/go/main.go" "$HERE/go/go.mod" "$HERE/build.sh"; then
        log "go build go/ -> out/goroutines"
        (cd "$HERE/go" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o "$OUT/goroutines.tmp" .)
        mv -f "$OUT/goroutines.tmp" "$OUT/goroutines"
    fi
else
    log "go not found: the Go guest is skipped (install Go to test it)"
fi

# Dynamically linked: such programs get an address space far larger than
# their memory limit, which is what memory_size checks they do not see as RAM.
if needs_build "$OUT/memory_size.dyn" "$HERE/memory_size.c" "$HERE/build.sh"; then
    log "gcc (dynamic) memory_size.c -> out/memory_size.dyn"
    gcc -O2 -Wall -Wextra -g0 -o "$OUT/memory_size.dyn.tmp" "$HERE/memory_size.c"
    mv -f "$OUT/memory_size.dyn.tmp" "$OUT/memory_size.dyn"
fi

# Unmodified network servers (crates/forkvm-cli/tests/servers.rs): the C epoll server
# static with musl and dynamic with glibc; the Go net/http server when Go is installed.
SRV="$HERE/servers"
if needs_build "$OUT/epoll_server.musl" "$SRV/epoll_server.c" "$HERE/build.sh"; then
    ensure_musl_gcc
    log "musl-gcc servers/epoll_server.c -> out/epoll_server.musl"
    musl-gcc "${CFLAGS[@]}" -o "$OUT/epoll_server.musl.tmp" "$SRV/epoll_server.c"
    mv -f "$OUT/epoll_server.musl.tmp" "$OUT/epoll_server.musl"
fi
if needs_build "$OUT/epoll_server.dyn" "$SRV/epoll_server.c" "$HERE/build.sh"; then
    log "gcc (dynamic) servers/epoll_server.c -> out/epoll_server.dyn"
    gcc -O2 -Wall -Wextra -g0 -o "$OUT/epoll_server.dyn.tmp" "$SRV/epoll_server.c"
    mv -f "$OUT/epoll_server.dyn.tmp" "$OUT/epoll_server.dyn"
fi
if command -v go >/dev/null 2>&1; then
    if needs_build "$OUT/go_server" "$SRV/go/main.go" "$SRV/go/go.mod" "$HERE/build.sh"; then
        log "go build servers/go -> out/go_server"
        (cd "$SRV/go" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o "$OUT/go_server.tmp" .)
        mv -f "$OUT/go_server.tmp" "$OUT/go_server"
    fi
fi
if needs_build "$OUT/rust_server" "$SRV/rust/src/main.rs" "$SRV/rust/Cargo.toml" "$HERE/build.sh"; then
    log "cargo build servers/rust -> out/rust_server (tokio + hyper, static)"
    (
        unset CARGO_ENCODED_RUSTFLAGS CARGO_BUILD_RUSTFLAGS CARGO_TARGET_DIR CARGO_BUILD_TARGET
        RUSTFLAGS="-C target-feature=+crt-static" cargo build --quiet --release \
            --manifest-path "$SRV/rust/Cargo.toml" --target x86_64-unknown-linux-gnu \
            --target-dir "$OUT/rust-server-target"
    )
    cp -f "$OUT/rust-server-target/x86_64-unknown-linux-gnu/release/rust_server" "$OUT/rust_server.tmp"
    mv -f "$OUT/rust_server.tmp" "$OUT/rust_server"
fi

# Outbound connections (crates/forkvm-cli/tests/outbound.rs): a C client, and a Go
# server whose handler fetches from a backend.
if needs_build "$OUT/fetch.musl" "$SRV/fetch.c" "$HERE/build.sh"; then
    ensure_musl_gcc
    log "musl-gcc servers/fetch.c -> out/fetch.musl"
    musl-gcc "${CFLAGS[@]}" -o "$OUT/fetch.musl.tmp" "$SRV/fetch.c"
    mv -f "$OUT/fetch.musl.tmp" "$OUT/fetch.musl"
fi
# Small musl servers of the serve tests: two listening sockets, a shared
# mapping between requests, a pre-fork server.
for s in two_ports shared_map prefork; do
    if needs_build "$OUT/$s.musl" "$SRV/$s.c" "$HERE/build.sh"; then
        ensure_musl_gcc
        log "musl-gcc servers/$s.c -> out/$s.musl"
        musl-gcc "${CFLAGS[@]}" -o "$OUT/$s.musl.tmp" "$SRV/$s.c"
        mv -f "$OUT/$s.musl.tmp" "$OUT/$s.musl"
    fi
done
if command -v go >/dev/null 2>&1; then
    if needs_build "$OUT/go_proxy" "$SRV/go_proxy/main.go" "$SRV/go_proxy/go.mod" "$HERE/build.sh"; then
        log "go build servers/go_proxy -> out/go_proxy"
        (cd "$SRV/go_proxy" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o "$OUT/go_proxy.tmp" .)
        mv -f "$OUT/go_proxy.tmp" "$OUT/go_proxy"
    fi
fi

RUST_DIR="$HERE/rust"
RUST_DEPS=("$RUST_DIR/Cargo.toml" "$HERE/build.sh")
while IFS= read -r -d '' f; do
    RUST_DEPS+=("$f")
done < <(find "$RUST_DIR/src" -name '*.rs' -print0)
need_rust=0
for p in "${RUST_PROGRAMS[@]}"; do
    if needs_build "$OUT/$p" "${RUST_DEPS[@]}"; then
        need_rust=1
    fi
done
if [[ $need_rust == 1 ]]; then
    log "cargo build (rust guests, static-pie)"
    # Our settings must win over whatever the calling environment (e.g. `cargo test`) set.
    unset CARGO_ENCODED_RUSTFLAGS CARGO_BUILD_RUSTFLAGS CARGO_TARGET_DIR CARGO_BUILD_TARGET
    RUST_TARGET=x86_64-unknown-linux-gnu
    RUSTFLAGS="-C target-feature=+crt-static" cargo build --quiet --release \
        --manifest-path "$RUST_DIR/Cargo.toml" --target "$RUST_TARGET" \
        --target-dir "$OUT/rust-target"
    for p in "${RUST_PROGRAMS[@]}"; do
        cp -f "$OUT/rust-target/$RUST_TARGET/release/$p" "$OUT/$p.tmp"
        mv -f "$OUT/$p.tmp" "$OUT/$p"
    done
fi
