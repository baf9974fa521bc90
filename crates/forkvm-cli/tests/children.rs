//! Child processes (issue 13): fork/vfork/clone without CLONE_VM make a new
//! VM, execve replaces the program, wait4/waitid report statuses, pipes work
//! across VMs. Differential against native runs wherever the output can be
//! the same.

mod common;

use common::{check, glibc_and_musl, guest, guests_out, installed, Case, LIBS};
use std::time::Duration;

const BUSYBOX: &str = "/usr/bin/busybox";

/// `busybox sh -c SCRIPT` with busybox as `$0` (scripts run its applets as
/// `$0 NAME`), busybox readable, and a minute to run.
fn busybox_sh(script: &str) -> Case {
    Case::new(BUSYBOX)
        .args(["sh", "-c", script, BUSYBOX])
        .flags(["--allow-read", BUSYBOX])
        .limit(Duration::from_secs(60))
}

fn out_dir() -> String {
    guests_out().to_str().expect("utf-8 path").to_string()
}

/// A C program doing fork, exec (of itself, with an inherited pipe and a
/// close-on-exec fd), waitpid, kill, posix_spawn, setpgid, SIGCHLD.
#[test]
fn c_fork_exec_waitpid_glibc_and_musl() {
    for libc in ["glibc", "musl"] {
        let prog = guest(&format!("forkexec.{libc}"));
        let (_, vm) = check(
            &Case::new(&prog)
                .flags(["--cwd", &out_dir(), "--allow-read", &out_dir()])
                .limit(Duration::from_secs(60)),
        );
        let out = vm.stdout_str();
        assert!(out.contains("child 1: exited 3"), "{}", vm.describe());
        assert!(out.contains("exec child: exited 42"), "{}", vm.describe());
        assert!(
            out.contains("spawned child: exited 42"),
            "{}",
            vm.describe()
        );
    }
}

/// A vfork child's stores are its parent's, as in its shared memory on
/// Linux: glibc's posix_spawn and posix_spawnp of a missing program fail
/// with ENOENT (they returned 0: the child's errno never reached the
/// parent), and a global, a stack variable and a buffer a vfork child sets
/// are set in the parent, before an exit, a kill, a crash and an exec. Only the
/// calling thread waits: the main thread lets a thread's vfork child go
/// on, and what each stored on one page is kept.
#[test]
fn vfork_children_store_into_their_parents_memory() {
    for libc in ["glibc", "musl"] {
        let prog = guest(&format!("vfork_share.{libc}"));
        let (_, vm) = check(
            &Case::new(&prog)
                .flags(["--cwd", &out_dir(), "--allow-read", &out_dir()])
                .limit(Duration::from_secs(60)),
        );
        let out = vm.stdout_str();
        assert!(
            out.contains("posix_spawn of a missing program: 2 "),
            "{}",
            vm.describe()
        );
        assert!(out.contains("global 2, stack 3"), "{}", vm.describe());
        assert!(
            out.contains("main stored 2, child stored 3"),
            "{}",
            vm.describe()
        );
    }
}

/// busybox sh: pipelines, subshells, command substitution, `$?`, a
/// background job and `wait`, a child killed by a signal, `trap`.
#[test]
fn busybox_sh_scripts() {
    if !installed(BUSYBOX) {
        return;
    }
    let script = r#"
echo one two three | $0 tr a-z A-Z | $0 wc -w
x=$(echo sub; echo shell)
echo "got: $x"
( exit 3 ); echo "subshell: $?"
$0 sh -c 'exit 7'; echo "child: $?"
$0 false || echo "false failed"
$0 sh -c 'kill -9 $$'; echo "killed: $?"
$0 sleep 0.05 & bg=$!
wait $bg; echo "waited: $?"
$0 sh -c 'exit 5' & wait $!; echo "bg status: $?"
trap 'echo trapped USR1' USR1
$0 sh -c "kill -USR1 $$"
n=0; for i in 1 2 3 4 5; do n=$(( n + $(echo $i | $0 wc -c) )); done; echo "sum: $n"
printf 'b\na\nc\n' | $0 sort | $0 head -n 2 | $0 tail -n 1
$0 sh -c 'while :; do :; done' & spinner=$!
$0 sleep 0.1; kill $spinner; wait $spinner; echo "spinner: $?"
echo done
"#;
    check(&busybox_sh(script));
}

/// Python's subprocess: run with captured output, check_output, Popen with
/// pipes both ways, a failing status, a missing program; os.posix_spawn
/// of a missing program (glibc's, which learns of exec's failure only
/// through the vfork child's store into the parent's memory).
#[test]
fn python_subprocess() {
    if !installed("/usr/bin/python3") || !installed(BUSYBOX) {
        return;
    }
    let script = r#"
import subprocess
r = subprocess.run(["/usr/bin/busybox", "echo", "hi"], capture_output=True)
print(r.returncode, r.stdout, r.stderr)
print(subprocess.check_output(["/usr/bin/busybox", "sh", "-c", "echo $((6 * 7))"]))
p = subprocess.Popen(["/usr/bin/busybox", "tr", "a-z", "A-Z"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
out, _ = p.communicate(b"hello pipes\n" * 1000)
print(p.returncode, len(out), out[:12])
print(subprocess.run(["/usr/bin/busybox", "sh", "-c", "exit 5"]).returncode)
try:
    subprocess.check_call(["/usr/bin/busybox", "false"])
except subprocess.CalledProcessError as e:
    print("CalledProcessError", e.returncode)
try:
    subprocess.run(["/nonexistent/program"])
except FileNotFoundError as e:
    print("FileNotFoundError", e.errno)
import os
try:
    os.posix_spawn("/nonexistent/program", ["program"], {})
    print("os.posix_spawn of a missing program succeeded")
except FileNotFoundError as e:
    print("os.posix_spawn: FileNotFoundError", e.errno)
"#;
    let mut flags: Vec<String> = LIBS.iter().map(|s| s.to_string()).collect();
    flags.extend(["--allow-read".into(), BUSYBOX.into()]);
    check(
        &Case::new("/usr/bin/python3")
            .args(["-S", "-c", script])
            .flags(flags)
            .limit(Duration::from_secs(60)),
    );
}

/// python's multiprocessing: a Pool of forked workers fed through pipes and
/// locked by POSIX semaphores (in a shared mapping of /dev/shm), and a
/// shared counter (an anonymous shared mapping) that every child adds to.
/// Before shared mappings were shared, the children's additions were lost.
#[test]
fn python_multiprocessing_pool_and_shared_value() {
    if !installed("/usr/bin/python3") {
        return;
    }
    let script = r#"
import multiprocessing as mp
def square(x):
    return x * x
def add(counter, n):
    for _ in range(n):
        with counter.get_lock():
            counter.value += 1
if __name__ == "__main__":
    with mp.Pool(2) as pool:
        print(sum(pool.map(square, range(1000))))
    counter = mp.Value("i", 0)
    workers = [mp.Process(target=add, args=(counter, 200)) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(counter.value, [w.exitcode for w in workers])
"#;
    check(
        &Case::new("/usr/bin/python3")
            .args(["-S", "-c", script])
            .flags(LIBS.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .limit(Duration::from_secs(60)),
    );
}

/// A fork bomb meets --max-processes: fork fails with EAGAIN, the program
/// reaps what it made, and forkvm exits normally.
/// A child's sleeps last as long as asked (its vCPU's 10 ms kick ended them
/// with EINTR), and its alarm interrupts a sleep and runs the handler.
#[test]
fn sleeps_and_alarms_in_a_child() {
    glibc_and_musl("child_sleep");
}

/// pselect, ppoll, epoll_pwait and sigsuspend let SIGCHLD through with
/// their own masks, and the mask from before is back after the handler;
/// a signal their masks block, sent during the wait, leaves them waiting
/// (it ended them with EINTR: LTP's epoll_pwait01).
#[test]
fn waits_under_their_own_signal_mask() {
    glibc_and_musl("wait_masks");
}

/// GNU make's parallel jobs: its jobserver waits for SIGCHLD in pselect
/// under its own mask (this hung for good when that mask was ignored).
#[test]
fn make_runs_parallel_jobs() {
    let make = "/usr/bin/make";
    if !installed(make) || !installed("/bin/sh") {
        return;
    }
    let dir = common::scratch_dir("make-j2");
    std::fs::write(
        dir.join("Makefile"),
        "all: a b c\n\t@cat a b c\n%:\n\t@sleep 0.1; echo $@ > $@\n",
    )
    .expect("write the Makefile");
    let d = dir.to_str().expect("utf-8 path");
    check(
        &Case::new(make)
            .args(["-s", "-j2", "-B", "-C", d])
            .flags([
                "--allow-read",
                "/usr",
                "--allow-read",
                "/bin",
                "--allow-write",
                d,
            ])
            .flags(["--env", "PATH=/usr/bin:/bin"])
            .limit(Duration::from_secs(60)),
    );
}

/// A parent that ignores SIGCHLD, or sets SA_NOCLDWAIT, leaves no zombies
/// (waitpid found the child's status; Linux answers ECHILD).
#[test]
fn ignoring_sigchld_leaves_no_zombies() {
    glibc_and_musl("sigchld_ignored");
}

/// A TCP listener or AF_UNIX socket made after fork, or closed on exec, is
/// reached by its address from the run's other processes; a path bind makes
/// a socket file; SO_PEERCRED names the other process.
#[test]
fn sockets_are_reached_across_processes() {
    glibc_and_musl("shared_sockets");
}

/// AF_UNIX datagrams sent to a bound path or abstract name, from unbound
/// and bound sockets, in one process and between processes (sd_notify,
/// syslog, Python's logging handlers): they were refused (ECONNREFUSED).
/// recvfrom names the sender, connect sets the destination, a full queue
/// waits or is EAGAIN, and the errors are Linux's.
#[test]
fn datagrams_reach_bound_names() {
    glibc_and_musl("unix_dgram");
}

/// A signal from another process ends a sleep with EINTR and its handler
/// has run when the sleep returns: the first process slept on through its
/// child's SIGCHLD or kill, and a child's sleep returned EINTR with the
/// handler not yet run (perl's `$SIG{TERM}` in a sleeping child never fired).
#[test]
fn signals_from_other_processes_end_sleeps() {
    glibc_and_musl("sleep_signals");
}

/// A signal with nothing to do (a child's exit with SIGCHLD ignored by
/// default, an ignored signal, a stop and its continue) does not end a
/// sleep: Linux restarts it. A child's exit cut its parent's sleep short
/// with EINTR, so `sleep 1` after starting a job slept on for nothing.
#[test]
fn signals_with_nothing_to_do_do_not_end_sleeps() {
    glibc_and_musl("sleep_restarts");
}

/// A FUTEX_WAIT on shared memory woken by another process's change and
/// FUTEX_WAKE returns 0, as on Linux (it said EAGAIN: the wait looks at
/// the word again, and the second look found it changed). A FUTEX_WAKE that
/// changes nothing wakes it too and counts it (LTP's checkpoints: the wait
/// timed out and the wake said 0), while a private one from another
/// process does not. A child's timed wait with no other thread ends with
/// ETIMEDOUT (EINTR at its 10 ms tick: LTP's futex_wait05), and a shared
/// wake on an inaccessible page is EFAULT (futex_wake05). FUTEX_CMP_REQUEUE
/// moves other processes' waiters to the second word, where a wake finds
/// them (it moved only the caller's own threads, and they hung:
/// futex_cmp_requeue01).
#[test]
fn shared_futex_waits_end_woken() {
    glibc_and_musl("futex_shared");
}

/// waitpid for a child that exits at once, with a SIGCHLD handler and no
/// SA_RESTART, returns the child every time (it failed with EINTR now and
/// then: the SIGCHLD announcing the exit was taken before the wait looked
/// again). Many rounds, since it is a race; the same output natively.
#[test]
fn waits_return_the_child_their_signal_announces() {
    glibc_and_musl("wait_signal");
}

/// Every vfork child sees its parent's memory as it is at that vfork,
/// round after round, while the parent changes a global, a stack array and
/// a heap block whose pages come and go: forkvm brings the snapshot behind
/// the last vfork child up to date for the next instead of capturing all
/// of memory again, and a page it missed would show a child stale bytes.
#[test]
fn vfork_children_see_the_parent_as_it_is_now() {
    glibc_and_musl("vfork_fresh");
}

/// A blocking send() or sendmsg() on a stream socket sends everything, as
/// write() does (it returned one send buffer's worth, and a program that
/// sends once lost the rest).
#[test]
fn blocking_sends_send_everything() {
    glibc_and_musl("send_whole");
}

/// Opening /dev/fd/N, /dev/stdout and friends opens a regular file anew,
/// as Linux does through the magic link: its own offset, O_TRUNC applied,
/// the access mode asked for (it shared the description: `cat /dev/fd/3`
/// after a read started mid-file, and `> /dev/fd/4` appended).
#[test]
fn dev_fd_opens_a_regular_file_anew() {
    let bash = "/bin/bash";
    if !installed(bash) {
        return;
    }
    let script = r#"
d=$(mktemp -d) && cd "$d" || exit 9
printf 'line1\nline2\nline3\n' > three
exec 3< three; read l <&3; cat /dev/fd/3
echo keep > out; exec 4>>out; echo x > /dev/fd/4; cat out
echo y >> /dev/fd/4; cat out
exec 5< three; echo z > /dev/fd/5 && head -1 three
exec 6> err; echo to-stderr >&6; echo again > /dev/stderr 2>&6; cat err
cd / && rm -r "$d"
"#;
    check(
        &Case::new(bash)
            .args(["-c", script])
            .flags(["--allow-read", "/bin", "--allow-read", "/usr/bin"])
            .limit(Duration::from_secs(60)),
    );
}

/// RLIMIT_NPROC is the run's --max-processes (it said 1, and programs that
/// size worker pools by it ran one).
#[test]
fn nproc_limit_is_the_runs_process_limit() {
    if !installed(BUSYBOX) {
        return;
    }
    let vm = busybox_sh("ulimit -u")
        .flags(["--max-processes", "10"])
        .run_forkvm();
    assert_eq!(vm.status, 0, "{}", vm.describe());
    assert_eq!(vm.stdout_str(), "10\n", "{}", vm.describe());
}

/// setpriority/nice are remembered and inherited (getpriority said 0).
#[test]
fn nice_values_are_remembered() {
    glibc_and_musl("nice_values");
}

/// What a signal carries and how signals queue: si_code and the sender's
/// pid for kill, tgkill, sigqueue (to itself and from a child), SIGCHLD's
/// child and status, SI_KERNEL and SI_TIMER with the timer's value;
/// real-time signals queued one per send, lowest number first; a forged
/// si_code to another process refused; signalfd reads, poll and epoll.
/// (Every siginfo said SI_TKILL and the receiver's pid, real-time signals
/// coalesced, and sigqueue and signalfd were ENOSYS.)
#[test]
fn signals_carry_their_siginfo_and_queue() {
    glibc_and_musl("signal_info");
}

/// A blocked signal waits even when ignored, as on Linux: a signalfd reads
/// it after another process's kill (PostgreSQL's latches: a lock waiter
/// slept until its deadlock timer, so pgbench with two clients ran at one
/// transaction a second), sigpending shows it and sigwait takes it (it
/// hung); SIG_IGN drops a pending one, and unblocking an ignored one does
/// not hold up a handled one.
#[test]
fn blocked_ignored_signals_wait_for_signalfd_and_sigwait() {
    glibc_and_musl("ignored_blocked");
}

#[test]
fn fork_bomb_is_refused_with_eagain() {
    let prog = guest("forkbomb.musl");
    let vm = Case::new(&prog)
        .flags(["--max-processes", "8"])
        .limit(Duration::from_secs(60))
        .run_forkvm();
    assert_eq!(vm.status, 0, "{}", vm.describe());
    assert_eq!(
        vm.stdout_str(),
        "forked 7, then EAGAIN; reaped 7\n",
        "{}",
        vm.describe()
    );
    // The default limit (64) holds as well, given memory for 64 processes
    // (--memory is shared by all of them: each holds its 8 MiB stack).
    let vm = Case::new(&prog)
        .flags(["--memory", "1024"])
        .limit(Duration::from_secs(60))
        .run_forkvm();
    assert_eq!(
        vm.stdout_str(),
        "forked 63, then EAGAIN; reaped 63\n",
        "{}",
        vm.describe()
    );
}

/// A program outside --allow-read cannot be executed; one inside can.
#[test]
fn exec_follows_the_read_policy() {
    if !installed(BUSYBOX) {
        return;
    }
    let vm = busybox_sh("/usr/bin/env; echo \"env: $?\"; /usr/bin/busybox echo allowed")
        .flags(["--no-default-allow"])
        .run_forkvm();
    assert_eq!(vm.status, 0, "{}", vm.describe());
    assert_eq!(vm.stdout_str(), "env: 127\nallowed\n", "{}", vm.describe());
}

/// A program or script the guest wrote in its private /tmp runs, and it is
/// that file, not the host's file at the same path: execve took the guest
/// path for a host path, so the script was "not found" and, where the host
/// had a file of that name, the host's file ran (a way to run, and load into
/// guest memory, a host file outside the allow-list).
#[test]
fn exec_runs_the_guests_own_files_in_its_private_tmp() {
    if !installed(BUSYBOX) {
        return;
    }
    let name = format!("/tmp/forkvm-exec-private-{}.sh", std::process::id());
    std::fs::write(
        &name,
        "#!/usr/bin/busybox sh\necho HOST FILE RAN\nexit 99\n",
    )
    .unwrap();
    let mut perm = std::fs::metadata(&name).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&name, perm).unwrap();
    let script = format!(
        "printf '#!/usr/bin/busybox sh\\necho guest script\\nexit 47\\n' > {name}; chmod +x {name}; {name}; echo \"script: $?\"; \
         cp /usr/bin/busybox /tmp/echo; chmod +x /tmp/echo; /tmp/echo copied binary runs; \
         ln -s echo /tmp/readlink; /tmp/readlink /proc/self/exe; \
         ln -s echo /tmp/grep; /tmp/grep -c forkvm-tmp /proc/self/maps; \
         /tmp/grep -q ' /tmp/echo$' /proc/self/maps && echo maps names /tmp/echo"
    );
    let vm = busybox_sh(&script).run_forkvm();
    let _ = std::fs::remove_file(&name);
    assert_eq!(vm.status, 0, "{}", vm.describe());
    assert_eq!(
        vm.stdout_str(),
        // /proc/self/exe names the program in the guest's namespace, not
        // where forkvm keeps the private /tmp on the host (Go's
        // os.Executable, then os.Remove of it, failed); so does
        // /proc/self/maps (pprof's symbolizer opened the host's path).
        "guest script\nscript: 47\ncopied binary runs\n/tmp/echo\n0\nmaps names /tmp/echo\n",
        "{}",
        vm.describe()
    );
}

/// A failed run's hint names what its children were refused too: python's
/// subprocess forks, and only the child tries (and fails) to exec a program
/// outside --allow-read.
#[test]
fn the_hint_names_what_a_child_was_refused() {
    if !installed("/usr/bin/python3") {
        return;
    }
    let vm = Case::new("/usr/bin/python3")
        .args(["-c", "import subprocess; subprocess.run(['/usr/bin/env'])"])
        .run_forkvm();
    assert_ne!(vm.status, 0, "{}", vm.describe());
    let hint = vm
        .stderr_str()
        .lines()
        .find(|l| l.contains("hint: the program was refused"))
        .map(str::to_string);
    assert!(
        hint.as_deref().is_some_and(|h| h.contains("/usr/bin/env")),
        "{}",
        vm.describe()
    );
}

/// ... and what memory a child was refused: a pipeline whose compressor
/// asks for more than --memory (xz -9 maps ~670 MiB) fails with a hint to
/// raise it, as the same program run alone does.
#[test]
fn the_hint_names_the_memory_a_child_was_refused() {
    if !installed("/usr/bin/python3") {
        return;
    }
    let vm = Case::new("/usr/bin/python3")
        .args([
            "-c",
            "import subprocess, sys; \
             sys.exit(subprocess.run(['/usr/bin/python3', '-c', 'bytearray(600 << 20)']).returncode)",
        ])
        .run_forkvm();
    assert_ne!(vm.status, 0, "{}", vm.describe());
    assert!(vm.stderr_str().contains("MemoryError"), "{}", vm.describe());
    let stderr = vm.stderr_str();
    let hints: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("hint: an mmap of"))
        .collect();
    assert_eq!(hints.len(), 1, "{}", vm.describe());
    assert!(hints[0].contains("--memory"), "{}", vm.describe());
}

/// --timeout ends the whole tree: children sleeping in the background do
/// not keep the run alive.
#[test]
fn timeout_ends_every_process() {
    if !installed(BUSYBOX) {
        return;
    }
    let vm = busybox_sh("$0 sleep 100 & $0 sleep 100; echo never")
        .flags(["--timeout", "1"])
        .run_forkvm();
    assert_eq!(vm.status, 124, "{}", vm.describe());
    assert!(!vm.stdout_str().contains("never"), "{}", vm.describe());
}

/// A vfork child that never execs keeps its parent waiting, as on Linux,
/// and --timeout still ends the run (the parent's wait looks at the
/// run's deadline; under `forkvm serve`, the request's).
#[test]
fn timeout_ends_a_wait_for_a_vfork_child() {
    let vm = Case::new(guest("vfork_share.glibc"))
        .args(["hang"])
        .flags(["--timeout", "1"])
        .limit(Duration::from_secs(60))
        .run_forkvm();
    assert_eq!(vm.status, 124, "{}", vm.describe());
    assert!(!vm.stdout_str().contains("went on"), "{}", vm.describe());
}

/// Files are the same for every process of a run: a child's write to
/// /dev/shm (the run's private one, as /tmp is) is the parent's and the next
/// child's, and a child's write under --allow-write lands on the host. Not
/// /tmp: when the checkout lies under /tmp, so does the write root, and the
/// guest's /tmp is then the policy's view of the host's (see fs/tmp.rs).
#[test]
fn children_share_tmp_and_write_roots() {
    if !installed(BUSYBOX) {
        return;
    }
    let dir = common::scratch_dir("children-write");
    let out = dir.join("from-child.txt");
    let _ = std::fs::remove_file(&out);
    let script = format!(
        "$0 sh -c 'echo deep > /dev/shm/y'; $0 cat /dev/shm/y; read line < /dev/shm/y; echo \"parent: $line\"; \
         $0 sh -c 'echo host > {}'",
        out.display()
    );
    let vm = busybox_sh(&script)
        .flags(["--allow-write", dir.to_str().expect("utf-8 path")])
        .run_forkvm();
    assert_eq!(vm.status, 0, "{}", vm.describe());
    assert_eq!(vm.stdout_str(), "deep\nparent: deep\n", "{}", vm.describe());
    assert_eq!(
        std::fs::read_to_string(&out).expect("the child's file"),
        "host\n"
    );
}

/// --memory is one limit for every process of a run: children that each
/// hold a 16 MiB chunk at once run out of it together (the later ones' malloc
/// or fork fails with ENOMEM), the run ends normally, and once they have
/// ended the parent gets their memory back. With room for all, the output
/// is native's.
#[test]
fn memory_limit_is_shared_by_the_run() {
    for libc in ["glibc", "musl"] {
        let prog = guest(&format!("forkmem.{libc}"));
        check(
            &Case::new(&prog)
                .args(["5", "16"])
                .limit(Duration::from_secs(60)),
        );
        let vm = Case::new(&prog)
            .args(["5", "16"])
            .flags(["--memory", "48"])
            .limit(Duration::from_secs(60))
            .run_forkvm();
        assert_eq!(vm.status, 0, "{}", vm.describe());
        let out = vm.stdout_str();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 7, "{}", vm.describe());
        // Each child either got its chunk or ENOMEM; those that got it come first.
        let mut ok = 0;
        for (i, line) in lines[..5].iter().enumerate() {
            if *line == format!("child {i}: ok") {
                assert_eq!(ok, i, "an ok after an ENOMEM: {}", vm.describe());
                ok += 1;
            } else {
                assert!(
                    *line == format!("child {i}: ENOMEM") || *line == format!("fork {i}: ENOMEM"),
                    "{}",
                    vm.describe()
                );
            }
        }
        assert!((1..5).contains(&ok), "{}", vm.describe());
        assert!(
            lines[5].starts_with(&format!("reaped {ok} with the chunk,")),
            "{}",
            vm.describe()
        );
        assert_eq!(lines[6], "parent afterwards: ok", "{}", vm.describe());
    }
}

/// A program with a 150 MiB heap starts others (posix_spawn, vfork + execve,
/// clone(CLONE_VFORK) + execve, vfork + _exit) under --memory 256: a vfork
/// child borrows its copy of the parent's memory until its execve or exit
/// instead of being charged for it (charged, 150 + 150 did not fit). Then,
/// heap freed, a plain fork. The output is native's.
#[test]
fn spawning_from_a_large_heap_fits_the_memory_limit() {
    for libc in ["glibc", "musl"] {
        let prog = guest(&format!("bigspawn.{libc}"));
        let (_, vm) = check(
            &Case::new(&prog)
                .args(["150"])
                .flags([
                    "--memory",
                    "256",
                    "--cwd",
                    &out_dir(),
                    "--allow-read",
                    &out_dir(),
                ])
                .limit(Duration::from_secs(60)),
        );
        assert!(
            vm.stdout_str().contains("posix_spawn: exited 7\n"),
            "{}",
            vm.describe()
        );
    }
}

/// What a vfork child borrows does not let it exceed --memory: what it maps
/// is charged (ENOMEM), it pays for its copy before it forks (ENOMEM), and
/// the copies lent at once are bounded by the limit (a second vfork child
/// while the first waits is charged: ENOMEM). Once the first has exited,
/// spawning works again.
#[test]
fn a_vfork_child_cannot_exceed_the_memory_limit() {
    for libc in ["glibc", "musl"] {
        let prog = guest(&format!("bigspawn.{libc}"));
        let vm = Case::new(&prog)
            .args(["150", "hostile", "150"])
            .flags([
                "--memory",
                "256",
                "--cwd",
                &out_dir(),
                "--allow-read",
                &out_dir(),
            ])
            .limit(Duration::from_secs(60))
            .run_forkvm();
        assert_eq!(vm.status, 0, "{}", vm.describe());
        assert_eq!(
            vm.stdout_str(),
            "vfork child mapping more (12: ENOMEM): exited 12\n\
             vfork child forking (12: ENOMEM): exited 12\n\
             posix_spawn while a vfork child waits: ENOMEM\n\
             waiting vfork child: exited 0\n\
             posix_spawn: exited 9\n",
            "{}",
            vm.describe()
        );
    }
}

/// A served request's vfork children store into its memory too: glibc's
/// posix_spawn of a missing program fails with ENOENT (it returned 0: its
/// child's errno never reached the request) and a vfork child's store is
/// seen, request after request (each a view of the master's snapshot). A
/// request whose vfork child never execs times out (504) like any that
/// does not answer, and the next one works. A request that waits for the
/// child it forked is answered once the child exits (its wait4 looked like
/// a server waiting without answering: 502).
#[test]
fn serve_request_vfork_children_store_into_its_memory() {
    use common::http::{free_port, get, Server};
    for libc in ["glibc", "musl"] {
        let prog = guest(&format!("fork_server.{libc}"));
        let port = free_port();
        let mut cmd = std::process::Command::new(common::forkvm_bin());
        cmd.args(["serve", "--concurrency", "1", "--request-timeout", "2"])
            .arg(&prog)
            .arg(port.to_string());
        let server = Server::start(cmd, port, "spawn-server");
        for path in ["/spawn", "/hang", "/wait", "/spawn", "/wait"] {
            let r = get(port, path);
            if path == "/hang" {
                assert_eq!(r.status, 504, "--- forkvm output:\n{}", server.output());
                continue;
            }
            if path == "/wait" {
                assert_eq!(
                    (r.status, r.text().as_str()),
                    (200, "waited 7\n"),
                    "--- forkvm output:\n{}",
                    server.output()
                );
                continue;
            }
            assert_eq!(
                (r.status, r.text().as_str()),
                (200, "spawn 2, vfork store 42\n"),
                "--- forkvm output:\n{}",
                server.output()
            );
        }
    }
}

/// Names of forkvm's threads (`/proc/PID/task/*/comm`).
fn thread_names(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect()
}

/// Child processes' threads (one per child VM: `forkvm-pid-N`).
fn child_threads(pid: u32) -> usize {
    thread_names(pid)
        .iter()
        .filter(|n| n.starts_with("forkvm-pid"))
        .count()
}

/// In `forkvm serve`, a request's handler may fork: the child (which would
/// sleep for a minute) dies with the request's reset, so no child thread
/// is left once the requests are done, and the VMs children ran in are
/// reused rather than piling up.
#[test]
fn serve_request_children_end_with_the_reset() {
    use common::http::{free_port, get, Server};
    let prog = guest("fork_server.musl");
    let port = free_port();
    let admin = free_port();
    let mut cmd = std::process::Command::new(common::forkvm_bin());
    cmd.args(["serve", "--concurrency", "1", "--request-timeout", "20"])
        .arg(format!("--admin=127.0.0.1:{admin}"))
        .arg(&prog)
        .arg(port.to_string());
    let server = Server::start(cmd, port, "fork-server");
    let pid = server.child.id();
    let ctx = || format!("--- forkvm output:\n{}", server.output());
    assert_eq!(child_threads(pid), 0, "{}", ctx());
    // The host threads a VM keeps (KVM's own workers), after some forks and after many.
    let vm_threads = || {
        thread_names(pid)
            .iter()
            .filter(|n| n.starts_with("kvm"))
            .count()
    };
    // Resets the server has finished (its metrics).
    let resets = || {
        get(admin, "/.forkvm/metrics")
            .text()
            .lines()
            .find(|l| l.starts_with("forkvm_resets_total"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0) as usize
    };
    // A reset runs after its answer is sent: wait until the last one is
    // done (it ended the children), then until their threads are gone. A
    // thread only takes its name once it runs, so a count of 0 before the
    // reset could be a child not yet named.
    let settle = |requests: usize| {
        let t = std::time::Instant::now();
        while resets() < requests && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(resets(), requests, "resets after answers\n{}", ctx());
        while child_threads(pid) > 0 && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
        child_threads(pid)
    };
    for _ in 0..3 {
        let r = get(port, "/");
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "forked\n"),
            "{}",
            ctx()
        );
    }
    assert_eq!(settle(3), 0, "children outlived their requests\n{}", ctx());
    let after_few = vm_threads();
    for _ in 0..12 {
        let r = get(port, "/");
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "forked\n"),
            "{}",
            ctx()
        );
    }
    assert_eq!(settle(15), 0, "children outlived their requests\n{}", ctx());
    // KVM ends a VM's worker threads after the VM is dropped, not at once:
    // give a loaded machine time before calling it a pile-up.
    let t = std::time::Instant::now();
    while vm_threads() > after_few && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(vm_threads() <= after_few, "VMs piled up\n{}", ctx());
}

/// Arguments and environment strings are bytes, not text: ones that are not
/// UTF-8 pass unchanged from forkvm's command line and through execve.
#[test]
fn arguments_that_are_not_utf8_pass_unchanged() {
    use std::os::unix::ffi::OsStringExt;
    for libc in ["glibc", "musl"] {
        let prog = guest(&format!("args_env.{libc}"));
        check(&Case::new(&prog).args([
            std::ffi::OsString::from_vec(b"caf\xe9".to_vec()),
            std::ffi::OsString::from_vec(b"\xff\xfe".to_vec()),
        ]));
        if !installed(BUSYBOX) {
            continue;
        }
        // busybox's printf makes the bytes; env(1) and exec hand them on.
        let script = format!(
            r#"exec $0 env -i "A=$(printf '\377x')" {} "$(printf 'caf\351')" ok"#,
            prog.display()
        );
        check(&busybox_sh(&script).flags([std::ffi::OsStr::new("--allow-read"), prog.as_os_str()]));
    }
}

/// Named FIFOs: non-blocking opens (ENXIO for a writer alone, EOF and no
/// hang-up for a reader alone), O_RDWR, blocking opens that wait for their
/// partner in another process, and more data than a pipe holds, both ways
/// between a parent and its child (open() of a FIFO was EACCES).
#[test]
fn named_fifos_between_processes() {
    glibc_and_musl("fifos");
}

/// The shell's use of FIFOs: `mkfifo p; producer > p & consumer < p`, in
/// busybox sh and in bash.
#[test]
fn shells_pass_data_through_a_fifo() {
    let script = r#"
d=$(mktemp -d -p /dev/shm) && cd "$d" || exit 9
mkfifo p
seq 1 5000 > p &
wc -l < p
wait $!; echo "producer: $?"
exec 3<> p
echo through rw >&3
read line <&3; echo "$line"
exec 3>&-
(cat p | tr a-z A-Z) & echo upper > p; wait
cd / && rm -r "$d"
"#;
    if installed(BUSYBOX) {
        let mut busybox = String::new();
        for c in ["mktemp", "mkfifo", "seq", "wc", "cat", "tr", "rm"] {
            busybox.push_str(&format!("{c}() {{ {BUSYBOX} {c} \"$@\"; }}\n"));
        }
        busybox.push_str(script);
        check(&busybox_sh(&busybox));
    }
    if installed("/bin/bash") {
        check(
            &Case::new("/bin/bash")
                .args(["-c", script])
                .flags(["--allow-read", "/bin", "--allow-read", "/usr/bin"])
                .limit(Duration::from_secs(60)),
        );
    }
}

/// Stop signals stop a process until SIGCONT: wait4/waitid report the stop
/// and the continue, SIGCHLD carries CLD_STOPPED/CLD_CONTINUED (none with
/// SA_NOCLDSTOP), SIGKILL ends a stopped child, SIGTSTP stops by default
/// and not with a handler (all were ignored: a child went on running and a
/// WUNTRACED wait hung).
#[test]
fn stop_signals_stop_until_continued() {
    glibc_and_musl("stop_cont");
    if !installed(BUSYBOX) {
        return;
    }
    let script = r#"
$0 sh -c 'while :; do $0 sleep 0.01; done' $0 & job=$!
kill -STOP $job; echo "stopped: $?"
kill -CONT $job; echo "continued: $?"
kill $job; wait $job; echo "ended: $?"
"#;
    check(&busybox_sh(script));
}

/// An orphan goes to init, or to the nearest subreaper, which reaps it; a
/// child with PR_SET_PDEATHSIG gets its signal when its parent ends; prctl's
/// per-process settings read back what was set. (Orphans were adopted by the
/// first process, whose wait() then waited for them, getppid() went on
/// naming the dead parent, and prctl knew only the thread name.)
#[test]
fn orphans_subreapers_and_prctl() {
    glibc_and_musl("orphans");
}

/// Lowered resource limits hold: RLIMIT_NOFILE bounds new descriptors
/// (open, dup2, F_DUPFD, poll's count) and RLIMIT_CPU sends SIGXCPU, then
/// SIGKILL (setrlimit was accepted and nothing changed).
#[test]
fn lowered_resource_limits_are_enforced() {
    glibc_and_musl("rlimits");
}

/// A signal from another process taken as a call starts, which that very
/// call blocks (sigprocmask), stays pending until it is unblocked (it was
/// dropped: a sigsuspend waiting for it never woke, and a busybox shell's
/// `wait` hung now and then).
#[test]
fn a_signal_blocked_by_the_call_it_arrived_in_stays_pending() {
    glibc_and_musl("mask_race");
}

/// pidfds: pidfd_open of itself and of children, poll and epoll readiness
/// (readable once the child ended, hung up once reaped), waitid(P_PIDFD)
/// blocking, WNOHANG and non-blocking (EAGAIN), pidfd_send_signal to a
/// running, ended and reaped child, with a siginfo (SI_QUEUE reaches the
/// handler, a claimed SI_USER is EPERM), pidfd_getfd, and the errors
/// (they were ENOSYS).
#[test]
fn pidfds_follow_children_as_on_linux() {
    glibc_and_musl("pidfd");
}

/// python's asyncio with its PidfdChildWatcher (the default from 3.12):
/// each child is a pidfd in the event loop's epoll, reaped when it turns
/// readable; a captured output and status, and a child ended by a signal
/// sent through Popen.send_signal (pidfd_open was ENOSYS).
#[test]
fn python_asyncio_waits_for_children_through_pidfds() {
    if !installed("/usr/bin/python3") || !installed(BUSYBOX) {
        return;
    }
    let script = r#"
import asyncio, os, signal
async def main():
    p = await asyncio.create_subprocess_exec(
        "/usr/bin/busybox", "sh", "-c", "echo $((6 * 7)); exit 3",
        stdout=asyncio.subprocess.PIPE)
    out, _ = await p.communicate()
    print(out, p.returncode)
    p = await asyncio.create_subprocess_exec("/usr/bin/busybox", "sleep", "30")
    p.send_signal(signal.SIGTERM)
    print(await p.wait())
asyncio.set_child_watcher(asyncio.PidfdChildWatcher())
asyncio.run(main())
"#;
    let mut flags: Vec<String> = LIBS.iter().map(|s| s.to_string()).collect();
    flags.extend(["--allow-read".into(), BUSYBOX.into()]);
    check(
        &Case::new("/usr/bin/python3")
            .args(["-S", "-W", "ignore", "-c", script])
            .flags(flags)
            .limit(Duration::from_secs(60)),
    );
}

/// The first process is as run from a shell, the leader of its group but
/// not of a session: setpgid(0, 0) succeeds before and after it forks (it
/// was EPERM, so perl's setpgrp failed), setsid is EPERM, and a child's
/// setsid makes a session whose leader cannot change group.
#[test]
fn first_process_leads_its_group_not_a_session() {
    glibc_and_musl("process_group");
}

/// A waited-for child's CPU time (with its own waited-for child's) shows in
/// wait4's rusage, getrusage(RUSAGE_CHILDREN) and times' tms_cutime (all
/// were 0: GNU time printed 0.00 for any command).
#[test]
fn waited_for_children_cpu_time_is_reported() {
    glibc_and_musl("child_rusage");
}
