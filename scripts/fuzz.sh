#!/usr/bin/env bash
# Runs one forkvm fuzz target under AFL++ (cargo-afl, stable Rust) for N
# seconds, then prints its speed and coverage and lists any crash found.
#
#   [FUZZ_RESUME=1] scripts/fuzz.sh TARGET SECONDS   TARGET: loader | syscalls | staging | gdb
# (gdb needs /dev/kvm: its harness runs a real VM per input)
#
# Needs once: apt-get install clang llvm; cargo install cargo-afl
# (cargo-afl builds AFL++ on first use). Seeds: fuzz/corpus/TARGET/.
# Findings: fuzz/out/TARGET/default/{crashes,hangs}/ (not committed): replay
# one with `fuzz/target/release/TARGET < FILE` (FORKVM_FUZZ_TRACE=1 prints
# each syscall), then copy it to fuzz/regressions/TARGET/ and add a test in
# crates/forkvm/tests/fuzz_regressions.rs.
set -euo pipefail

target=${1:?usage: scripts/fuzz.sh TARGET SECONDS}
seconds=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
case $target in
loader | syscalls | staging | gdb) ;;
*)
    echo "unknown target $target (loader, syscalls, staging, gdb)" >&2
    exit 2
    ;;
esac
fuzz=$(cd "$(dirname "$0")/../fuzz" && pwd)
cd "$fuzz"

if ! cargo afl --version >/dev/null 2>&1; then
    echo "cargo-afl missing: apt-get install clang llvm && cargo install cargo-afl" >&2
    exit 2
fi
cargo afl build --release --bin "$target" >&2

out=$fuzz/out/$target
# FUZZ_RESUME=1 goes on from the last run's queue instead of the seeds.
input=corpus/$target
if [ "${FUZZ_RESUME:-}" = 1 ] && [ -d "$out/default/queue" ]; then
    input=-
else
    rm -rf "$out"
fi
mkdir -p "$out/tmp"
# The syscall target's sandbox lives under this TMPDIR; removed at the end.
export TMPDIR=$out/tmp
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
export AFL_NO_AFFINITY=1 AFL_SKIP_CRASHES=1
# -t: ms per input (a syscall sequence waits at most 50 ms a call).
cargo afl fuzz -i "$input" -o "$out" -V "$seconds" -t 2000 -m none \
    -- "target/release/$target" >"$out/afl.log" 2>&1 || {
    tail -30 "$out/afl.log" >&2
    exit 1
}
rm -rf "$out/tmp"

stats=$out/default/fuzzer_stats
get() { awk -F' *: *' -v k="$1" '$1 == k { print $2 }' "$stats"; }
echo "target:        $target (${seconds}s)"
echo "execs_done:    $(get execs_done)"
echo "execs_per_sec: $(get execs_per_sec)"
echo "bitmap_cvg:    $(get bitmap_cvg)"
echo "edges_found:   $(get edges_found) of $(get total_edges)"
echo "corpus_count:  $(get corpus_count)"
echo "saved_crashes: $(get saved_crashes)"
echo "saved_hangs:   $(get saved_hangs)"
ls "$out/default/crashes" 2>/dev/null | grep -v README || true
