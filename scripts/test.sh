#!/usr/bin/env bash
# forkvm's test command: installs what is missing, builds the guest test programs, then runs
# cargo fmt --check, cargo clippy (warnings are errors) and cargo test for the whole workspace.
# Every step runs even if an earlier one failed; the script exits non-zero if any failed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

section() {
    printf '\n==== %s ====\n' "$*"
}

FAILED=()

# step NAME COMMAND... : run a step, remember it if it fails.
step() {
    local name=$1
    shift
    section "$name"
    echo "+ $*"
    if "$@"; then
        echo "---- $name: ok"
    else
        echo "---- $name: FAILED (exit $?)"
        FAILED+=("$name")
    fi
}

section "Prerequisites"
for tool in cargo rustc gcc g++; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "error: $tool is required but not installed" >&2
        exit 1
    fi
done
# Debian packages the tests use: musl-gcc for guests, nginx/curl for the HTTP tests,
# python3/lua/busybox/postgresql/redis/gunicorn as real-world guests.
need=()
command -v musl-gcc >/dev/null 2>&1 || need+=(musl-tools)
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || need+=(nginx-light)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v lua5.4 >/dev/null 2>&1 || need+=(lua5.4)
[[ -x /bin/busybox ]] || need+=(busybox-static)
command -v node >/dev/null 2>&1 || need+=(nodejs)
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || need+=(postgresql)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v gunicorn >/dev/null 2>&1 || need+=(gunicorn)
for t in xz:xz-utils bzip2:bzip2 git:git; do command -v "${t%%:*}" >/dev/null 2>&1 || need+=("${t#*:}"); done
if ((${#need[@]})); then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "installing: ${need[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get -y -q install "${need[@]}" || { apt-get -q update && apt-get -y -q install "${need[@]}"; }
    else
        echo "error: missing packages; install them with: sudo apt-get install -y ${need[*]}" >&2
        exit 1
    fi
fi
if [[ ! -r /dev/kvm || ! -w /dev/kvm ]]; then
    echo "warning: /dev/kvm is not accessible to $(id -un); tests that start VMs will fail" >&2
fi
echo "$(cargo --version); $(rustc --version); $(gcc --version | head -n1); musl-gcc: $(command -v musl-gcc)"

step "Build guest programs (tests/guests/build.sh)" tests/guests/build.sh
step "Build example programs (examples/build.sh)" examples/build.sh
step "cargo fmt --check" cargo fmt --all -- --check
step "cargo clippy" cargo clippy --workspace --all-targets -- -D warnings
step "cargo test" cargo test --workspace

section "Summary"
if ((${#FAILED[@]})); then
    printf 'FAILED: %s\n' "${FAILED[@]}"
    exit 1
fi
echo "all checks passed"
