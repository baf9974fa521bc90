//! /proc as the processes of a run see it: their own directory (from their
//! live state) and each other's (what each published: name, command line,
//! program, ids). Differential against native runs.

mod common;

use common::{check, glibc_and_musl, installed, Case};
use std::time::Duration;

const BUSYBOX: &str = "/usr/bin/busybox";

/// /proc/self and /proc/<pid> describe the process that reads them: a child
/// read the first process's pid and parent.
#[test]
fn proc_self_is_the_reading_process() {
    glibc_and_musl("proc_self");
}

/// /proc/<pid> of the run's other processes: a child reads its parent's
/// comm, stat and status, the parent its child's (renamed with
/// PR_SET_NAME), cmdline and exe, running, as a zombie and once reaped, and
/// /proc lists them. (Only a process's own directory existed: `cat
/// /proc/$$/status` from a shell's child, ps and pgrep found nothing.)
#[test]
fn other_processes_of_the_run_are_in_proc() {
    glibc_and_musl("proc_others");
}

/// Another process's state in /proc/<pid>/stat is 'R' while it computes
/// and 'S' while it waits in a call (it was 'S' always, so a parent that
/// waits for 'S' before signalling its child signalled before the child's
/// epoll_wait began, and the wait went on: LTP's epoll_wait08).
#[test]
fn other_processes_show_running_or_sleeping() {
    glibc_and_musl("proc_state");
}

/// /proc/self/maps says what each mapping is, as Linux does: executable or
/// not, shared or private, the file, offset, device and inode it maps
/// (through mprotect, munmap and mremap), the program's own segments, the
/// stack and the vDSO. forkvm showed no x, no s, no file and offset 0.
#[test]
fn proc_self_maps_names_what_each_mapping_maps() {
    glibc_and_musl("proc_maps");
}

/// System calls read from the vDSO's pages as from any readable user memory
/// (ld.so's ldd listing writes the vDSO's name straight from them); writing
/// into them is EFAULT.
#[test]
fn system_calls_read_from_the_vdso_as_on_linux() {
    glibc_and_musl("vdso_reads");
}

/// A shell's children read the shell's /proc directory and their siblings'
/// as they would natively.
#[test]
fn a_shells_children_read_its_proc_directory() {
    if !installed(BUSYBOX) {
        return;
    }
    let script = r#"
cat /proc/$$/comm
$0 sleep 5 & p=$!
i=0; while [ "$($0 tr '\0' ' ' < /proc/$p/cmdline)" != "$0 sleep 5 " ] && [ $i -lt 200 ]; do $0 sleep 0.05; i=$((i+1)); done
$0 cat /proc/$p/comm
$0 tr '\0' ' ' < /proc/$p/cmdline; echo
$0 sed -n 's/^PPid:\t//p' /proc/$p/status | $0 grep -qx "$$" && echo "sleep's parent is the shell"
$0 cut -d' ' -f3 /proc/$p/stat
kill $p; wait $p >/dev/null 2>&1
"#;
    check(
        &Case::new(BUSYBOX)
            .args(["sh", "-c", script, BUSYBOX])
            .flags(["--allow-read", BUSYBOX])
            .limit(Duration::from_secs(60)),
    );
}

/// procps's ps and pgrep see the processes of the run (only themselves before).
#[test]
fn ps_and_pgrep_see_the_run() {
    if !installed("/usr/bin/ps") || !installed("/usr/bin/pgrep") {
        return;
    }
    let script = "sleep 5 & ps -eo pid,ppid,comm,args; pgrep -a -P $$ sleep; kill $!";
    let run = Case::new("/bin/sh")
        .args(["-c", script])
        .flags(["--allow-read", "/usr/bin"])
        .limit(Duration::from_secs(60))
        .run_forkvm();
    let out = run.stdout_str();
    assert_eq!(run.status, 0, "{}", run.describe());
    let sleep = out
        .lines()
        .find(|l| l.contains("sleep 5") && !l.contains("sh -c"))
        .unwrap_or_else(|| panic!("ps shows no sleep:\n{}", run.describe()));
    assert!(
        out.lines().any(|l| l.ends_with(script)),
        "ps shows no shell:\n{}",
        run.describe()
    );
    let pid = sleep.split_whitespace().next().unwrap_or("");
    assert!(
        out.lines().any(|l| l == format!("{pid} sleep 5")),
        "pgrep -a found no sleep {pid}:\n{}",
        run.describe()
    );
}

/// The heap starts at a 2 MiB boundary of its own, not in the image's last
/// 2 MiB (where Linux may put it, at a random offset). On PVM a change of
/// host rights makes every page used in its 2 MiB fault again, and musl
/// puts a guard page at the heap's start in each request that grows it:
/// next to the image, the program's text faulted again in every request.
#[test]
fn the_heap_starts_in_a_2_mib_region_of_its_own() {
    if !installed(BUSYBOX) {
        return;
    }
    let run = Case::new(BUSYBOX)
        .args(["cat", "/proc/self/maps"])
        .flags(["--allow-read", BUSYBOX])
        .run_forkvm();
    assert_eq!(run.status, 0, "{}", run.describe());
    let out = run.stdout_str();
    let start = |l: &str| u64::from_str_radix(l.split('-').next().unwrap_or(""), 16).ok();
    let end = |l: &str| {
        let range = l.split_whitespace().next().unwrap_or("");
        u64::from_str_radix(range.split('-').nth(1).unwrap_or(""), 16).ok()
    };
    let heap = out
        .lines()
        .find(|l| l.ends_with("[heap]"))
        .and_then(start)
        .unwrap_or_else(|| panic!("no heap in /proc/self/maps:\n{out}"));
    // The program's image is what lies below its heap.
    let image_end = out
        .lines()
        .filter(|l| start(l).is_some_and(|s| s < heap))
        .filter_map(end)
        .max()
        .unwrap_or_else(|| panic!("no image in /proc/self/maps:\n{out}"));
    assert_eq!(heap % (2 << 20), 0, "{out}");
    assert!(heap >= image_end.next_multiple_of(2 << 20), "{out}");
}

/// Every way to count CPUs gives the VM's one, also where the host's /sys
/// shows (`--allow-read /`): glibc's sysconf read the host's CPU lists
/// there, so `os.cpu_count()` said 2 while sched_getaffinity said 1.
#[test]
fn every_cpu_count_agrees_when_the_hosts_sys_shows() {
    if !installed("/usr/bin/python3") || !installed("/usr/bin/getconf") {
        return;
    }
    let script = "nproc; nproc --all; getconf _NPROCESSORS_ONLN; getconf _NPROCESSORS_CONF; \
                  python3 -c 'import os; print(os.cpu_count(), len(os.sched_getaffinity(0)))'; \
                  cat /sys/devices/system/cpu/online /sys/devices/system/cpu/possible; \
                  grep -c ^processor /proc/cpuinfo";
    let run = Case::new("/bin/sh")
        .args(["-c", script])
        .flags(["--allow-read", "/"])
        .limit(Duration::from_secs(60))
        .run_forkvm();
    assert_eq!(run.status, 0, "{}", run.describe());
    assert_eq!(
        run.stdout_str(),
        "1\n1\n1\n1\n1 1\n0\n0\n1\n",
        "{}",
        run.describe()
    );
}
