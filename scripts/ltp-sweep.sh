#!/bin/bash
# Runs Linux Test Project syscall tests natively (as uid 1000, the guest's
# uid) and inside forkvm, and compares their TPASS/TFAIL/TBROK/TCONF counts
# and exit status. LTP is not part of the build or the test suite: it is
# an oracle to find where forkvm answers differently from Linux.
#
# Setup (once; outside this repository, LTP built static):
#   git clone https://github.com/linux-test-project/ltp "$LTP"
#   cd "$LTP" && make autotools && ./configure LDFLAGS=-static && make -C lib
#   make -C testcases/kernel/syscalls/epoll_wait    # each directory wanted
#
# Usage: LTP=/path/to/ltp scripts/ltp-sweep.sh DIR [TEST...]
#   DIR   a directory under testcases/kernel/syscalls (epoll_wait, futex...)
#   TEST  test binaries in it (default: every one built)
# Env: F (forkvm binary, default target/release/forkvm), OUT (scratch and
# results, default /var/tmp/ltp-sweep). Prints one line per test, SAME or
# DIFF with both counts; the outputs are in $OUT/res/TEST.{native,vm}.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
: "${LTP:?set LTP to an LTP source tree built as above}"
F=${F:-$here/target/release/forkvm}
OUT=${OUT:-/var/tmp/ltp-sweep}
src=$LTP/testcases/kernel/syscalls/${1:?usage: $0 DIR [TEST...]}
shift
mkdir -p "$OUT/res"
# Tests that need the kernel's configuration read it from here, on both sides.
kconfig=$OUT/kconfig
[ -s "$kconfig" ] || zcat /proc/config.gz > "$kconfig" 2>/dev/null || : > "$kconfig"

tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
    for f in "$src"/*; do
        [ -f "$f" ] && [ -x "$f" ] && head -c4 "$f" | grep -q ELF && tests+=("$(basename "$f")")
    done
fi

counts() {
    local k out=""
    for k in TPASS TFAIL TBROK TCONF TWARN; do
        out+="${k:1:1}$(grep -c "$k" "$1") "
    done
    echo "$out$(tail -1 "$1")"
}

for t in "${tests[@]}"; do
    for mode in native vm; do
        d=$OUT/scratch/$t.$mode
        rm -rf "$d"
        mkdir -p "$d"
        env=(PATH="$src:/usr/bin:/bin" TMPDIR="$d" LTP_TIMEOUT_MUL=5 LTPROOT="$src" KCONFIG_PATH="$kconfig")
        if [ $mode = native ]; then
            # As the guest's uid; the scratch directory is its own.
            chown 1000:1000 "$d"
            (cd "$d" && timeout 300 setpriv --reuid 1000 --regid 1000 --clear-groups \
                env -i "${env[@]}" "$src/$t" > "$OUT/res/$t.native" 2>&1
             echo "rc=$?" >> "$OUT/res/$t.native")
        else
            # The guest owns what forkvm's user owns: the directory stays root's.
            vm_env=()
            for e in "${env[@]}"; do vm_env+=(--env "$e"); done
            (cd "$d" && timeout 600 "$F" run --memory 1024 --allow-read "$src" --allow-read /etc \
                --allow-read "$kconfig" --allow-write "$d" --cwd "$d" "${vm_env[@]}" --timeout 500 \
                -- "$src/$t" > "$OUT/res/$t.vm" 2>&1
             echo "rc=$?" >> "$OUT/res/$t.vm")
        fi
    done
    n=$(counts "$OUT/res/$t.native")
    v=$(counts "$OUT/res/$t.vm")
    if [ "$n" = "$v" ]; then echo "SAME $t $n"; else echo "DIFF $t native[$n] vm[$v]"; fi
done
