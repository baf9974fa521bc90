//! System calls answered inside the VM (`--syscalls fast`, the default) must
//! answer exactly what the host answers (`--syscalls exit`), per thread, and a
//! program that scribbles over the dispatcher's page hurts only itself.

mod common;

use common::{forkvm, guest, run_cmd, Run};
use std::process::Command;
use std::time::Duration;

fn run_with(path: &str, prog: &str, args: &[&str]) -> Run {
    let exe = guest(prog);
    let mut a = vec!["run", "--syscalls", path, "--"];
    let exe = exe.to_str().expect("utf-8 path").to_string();
    a.push(&exe);
    a.extend_from_slice(args);
    forkvm(&a)
}

#[test]
fn identity_and_tids_match_the_exit_path() {
    for prog in ["fast_identity.glibc", "fast_identity.musl"] {
        let fast = run_with("fast", prog, &[]);
        let exit = run_with("exit", prog, &[]);
        assert_eq!(fast.status, 0, "{}", fast.describe());
        assert_eq!(fast.stdout_str(), exit.stdout_str(), "{}", fast.describe());
        let out = fast.stdout_str();
        assert!(
            out.starts_with("pid 2 ppid 1 uid 1000 euid 1000 gid 1000 egid 1000\n"),
            "{out}"
        );
        assert!(
            out.contains("main tid is pid: yes, lone sched_yield: 0"),
            "{out}"
        );
        assert!(out.contains("tids distinct: yes"), "{out}");
        assert_eq!(
            out.matches("its signal reached it: yes").count(),
            3,
            "{out}"
        );
        // Everything but the ids is what Linux itself prints.
        let native = run_cmd(Command::new(guest(prog)), b"", Duration::from_secs(30));
        let tail = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert_eq!(tail(&out), tail(&native.stdout_str()));
    }
}

#[test]
fn scribbling_over_the_dispatcher_page_hurts_only_the_program() {
    let fast = run_with("fast", "fast_identity.glibc", &["scribble"]);
    assert_eq!(fast.status, 0, "{}", fast.describe());
    assert_eq!(
        fast.stdout_str(),
        "getpid before 2, after scribbling changed\n",
        "the guest's own answers are wrong, and it goes on"
    );
    let exit = run_with("exit", "fast_identity.glibc", &["scribble"]);
    assert_eq!(
        exit.stdout_str(),
        "getpid before 2, after scribbling unchanged\n"
    );
}

#[test]
fn trace_shows_every_call_even_those_the_fast_path_would_answer() {
    let exe = guest("fast_identity.glibc");
    let r = forkvm(&[
        "run",
        "--trace-syscalls",
        "--",
        exe.to_str().expect("utf-8"),
    ]);
    assert_eq!(r.status, 0, "{}", r.describe());
    assert!(r.stderr_str().contains("getpid"), "{}", r.describe());
    assert!(r.stderr_str().contains("gettid"), "{}", r.describe());
}

/// clock_gettime & co. through forkvm's vDSO: present on the fast path (absent
/// on the exit path), never backwards across more than one piece of the time
/// function, realtime clocks in agreement with each other and with the host.
#[test]
fn vdso_time_is_monotonic_and_agrees_with_the_host() {
    for prog in ["vdso_clock.glibc", "vdso_clock.musl"] {
        let native = run_cmd(Command::new(guest(prog)), b"", Duration::from_secs(60));
        for (path, vdso) in [("fast", "present"), ("exit", "absent")] {
            let r = run_with(path, prog, &["2000"]);
            assert_eq!(r.status, 0, "{}", r.describe());
            let out = r.stdout_str();
            assert!(out.starts_with(&format!("vdso {vdso}\n")), "{out}");
            // Everything after the first line is what Linux prints too.
            let tail = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
            assert_eq!(tail(&out), tail(&native.stdout_str()), "{}", r.describe());
            let guest_s: i64 = r
                .stderr_str()
                .trim()
                .strip_prefix("realtime ")
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("no realtime line: {}", r.describe()));
            let host_s = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_secs() as i64;
            assert!(
                (host_s - guest_s).abs() <= 5,
                "guest realtime {guest_s}, host {host_s}"
            );
        }
    }
}

/// getrandom answered in the guest (RDRAND in the dispatcher) gives what the
/// host's answer and Linux give: lengths, errors for bad flags and buffers
/// (a fault in the in-guest fill is EFAULT, not a crash), bytes past the end
/// untouched.
#[test]
fn getrandom_in_guest_matches_host_and_native() {
    for prog in ["getrandom_edges.glibc", "getrandom_edges.musl"] {
        let exe = guest(prog);
        let native = run_cmd(Command::new(&exe), b"", Duration::from_secs(30));
        let fast = run_with("fast", prog, &[]);
        let exit = run_with("exit", prog, &[]);
        assert_eq!(native.status, 0, "{}", native.describe());
        assert_eq!(fast.status, 0, "{}", fast.describe());
        assert_eq!(
            fast.stdout_str(),
            native.stdout_str(),
            "{}",
            fast.describe()
        );
        assert_eq!(
            exit.stdout_str(),
            native.stdout_str(),
            "{}",
            exit.describe()
        );
        let out = fast.stdout_str();
        assert!(!out.contains(": no"), "{out}");
        assert!(out.contains("far address -> -14"), "{out}");
    }
}

/// Memory the program never mapped, far from what it did, has no memory
/// slot: reading it is SIGSEGV as on Linux (it used to read zeros).
#[test]
fn reading_never_mapped_memory_is_sigsegv() {
    let exe = guest("wild_read.musl");
    let native = run_cmd(Command::new(&exe), b"", Duration::from_secs(30));
    let vm = run_with("fast", "wild_read.musl", &[]);
    assert_eq!(native.status, 139, "{}", native.describe());
    assert_eq!(vm.status, 139, "{}", vm.describe());
    assert!(!vm.stdout_str().contains("read 0"), "{}", vm.describe());
    assert!(
        vm.stderr_str().contains("SIGSEGV") && vm.stderr_str().contains("0x6000000"),
        "{}",
        vm.describe()
    );
    // The program's handler runs and the program goes on, as natively.
    let native = run_cmd(
        {
            let mut c = Command::new(&exe);
            c.arg("catch");
            c
        },
        b"",
        Duration::from_secs(30),
    );
    let vm = run_with("fast", "wild_read.musl", &["catch"]);
    assert_eq!(vm.status, 0, "{}", vm.describe());
    assert_eq!(vm.stdout_str(), native.stdout_str(), "{}", vm.describe());
}

/// Runs exitless_files on a real file and directory with `path`, with the
/// forkvm debug log on (it counts the calls the poller answered).
fn exitless_files(path: &str, prog: &str, scribble: bool) -> Run {
    run_cmd(
        exitless_files_cmd(path, prog, scribble),
        b"",
        Duration::from_secs(120),
    )
}

/// exitless_files natively, on the same file and directory.
fn exitless_files_native(prog: &str) -> Run {
    let mut native = Command::new(guest(prog));
    native
        .arg(common::forkvm_bin())
        .arg("/usr/lib")
        .current_dir("/");
    let native = run_cmd(native, b"", Duration::from_secs(120));
    assert_eq!(native.status, 0, "{}", native.describe());
    assert!(native.stdout_str().contains("wrong answers: 0"));
    native
}

/// The command [`exitless_files`] runs.
fn exitless_files_cmd(path: &str, prog: &str, scribble: bool) -> Command {
    let exe = guest(prog);
    let mut cmd = Command::new(common::forkvm_bin());
    cmd.args(["run", "--syscalls", path, "--allow-read"])
        .arg(common::forkvm_bin())
        .arg("--")
        .arg(&exe)
        .arg(common::forkvm_bin())
        .arg("/usr/lib")
        .args(scribble.then_some("scribble"))
        .env("FORKVM_LOG", "forkvm=debug");
    if !scribble {
        // Guests wait for the poller however busy the machine is (no backing
        // off; the scribbling program sets its own budget, and may claim a
        // poller is awake when none is).
        cmd.env("FORKVM_POLLER_SPIN_US", "0");
    }
    cmd
}

/// A count the debug log gives as "N<what>" (e.g. " host calls answered
/// without an exit"), 0 if it gives none.
fn logged_count(r: &Run, what: &str) -> u64 {
    r.stderr_str()
        .lines()
        .find_map(|l| {
            let before = l.split_once(what)?.0;
            before.rsplit(' ').next()?.parse().ok()
        })
        .unwrap_or(0)
}

/// `r`, run with `--syscalls path`, succeeded and printed what the native run did.
fn succeeds_as_native(path: &str, r: &Run, native: &Run) {
    assert_eq!(r.status, 0, "{path}: {}", r.describe());
    assert_eq!(
        r.stdout_str(),
        native.stdout_str(),
        "{path}: {}",
        r.describe()
    );
}

/// How many host calls the poller answered, from the debug log.
fn answered_without_exit(r: &Run) -> u64 {
    logged_count(r, " host calls answered without an exit")
}

/// File calls answered by the host poller (exitless) give what Linux gives,
/// with two threads and a signal handler making calls while others wait on
/// the poller: every answer is checked against the file's contents.
#[test]
fn exitless_file_calls_match_native_under_signals_and_threads() {
    for prog in ["exitless_files.glibc", "exitless_files.musl"] {
        let native = exitless_files_native(prog);
        for path in ["fast", "guest", "exit"] {
            let r = exitless_files(path, prog, false);
            succeeds_as_native(path, &r, &native);
            let answered = answered_without_exit(&r);
            if path != "fast" {
                assert_eq!(answered, 0, "{path} must not use the poller");
            } else if std::path::Path::new("/sys/module/kvm_pvm").exists() {
                // Every round makes 6 calls the poller may answer; it sleeps
                // only after 200 µs without one, and the guest then exits.
                assert!(answered > 100, "the poller answered {answered} calls");
            }
        }
    }
}

/// A poller that claims a call and then loses its core (a test hook makes it
/// wait 300 µs before serving each call) does not keep the guest spinning: the
/// guest leaves through the exit after its budget for an answer, the host finishes
/// the call once the poller is done with it, and every answer is still right.
#[test]
fn a_guest_stops_waiting_for_a_poller_that_lost_its_core() {
    let prog = "exitless_files.musl";
    let native = exitless_files_native(prog);
    // Posted calls are always claimed, however busy the machine (the
    // command waits however long for a poller, which never sleeps), and
    // their answers waited for 50 µs.
    let mut cmd = exitless_files_cmd("fast", prog, false);
    cmd.env("FORKVM_POLLER_ANSWER_US", "50")
        .env("FORKVM_POLLER_DELAY_US", "300");
    let r = run_cmd(cmd, b"", Duration::from_secs(120));
    succeeds_as_native("fast", &r, &native);
    if std::path::Path::new("/sys/module/kvm_pvm").exists() {
        let awaited = logged_count(&r, " calls finished by an exit after their guest");
        assert!(awaited > 100, "{awaited} calls finished by an exit");
    }
}

/// Accesses the run loop did for memory a served call mapped before its
/// chunk had a memory slot, from the debug log.
fn late_slot_accesses(r: &Run) -> u64 {
    logged_count(r, " accesses before a late memory slot")
}

/// Memory calls answered by the host poller (mmap, munmap, mremap,
/// mprotect, madvise, brk) give what Linux gives, and the memory they map
/// works at once, even in a chunk of guest RAM whose memory slot is added
/// only at the next entry (loads, 16-byte loads and stores right after the
/// call), with two threads and a signal handler mapping too.
#[test]
fn exitless_memory_calls_match_native_and_their_memory_works_at_once() {
    let file = common::forkvm_bin();
    for prog in ["exitless_memory.glibc", "exitless_memory.musl"] {
        let mut native = Command::new(guest(prog));
        native.arg(&file);
        let native = run_cmd(native, b"", Duration::from_secs(120));
        assert_eq!(native.status, 0, "{}", native.describe());
        assert!(native.stdout_str().contains("wrong answers: 0"));
        for path in ["fast", "guest", "exit"] {
            let mut cmd = Command::new(common::forkvm_bin());
            cmd.args(["run", "--syscalls", path, "--allow-read"])
                .arg(&file)
                .arg("--")
                .arg(guest(prog))
                .arg(&file)
                .env("FORKVM_LOG", "forkvm=debug")
                .env("FORKVM_POLLER_SPIN_US", "0");
            let r = run_cmd(cmd, b"", Duration::from_secs(120));
            succeeds_as_native(path, &r, &native);
            let (answered, late) = (answered_without_exit(&r), late_slot_accesses(&r));
            if path != "fast" {
                assert_eq!(answered, 0, "{path} must not use the poller");
            } else if std::path::Path::new("/sys/module/kvm_pvm").exists() {
                assert!(answered > 100, "the poller answered {answered} calls");
                // 24 fresh 6 MiB mappings, touched at once, in 4 MiB chunks.
                assert!(late > 0, "no access came before its chunk's slot");
            }
        }
    }
}

/// A program that tampers with the call slot (posts every call, a tiny spin
/// budget, a call posted by hand with a bad buffer, a stale answer) still
/// gets right answers to its real calls, and the host carries on.
#[test]
fn scribbling_over_the_call_slot_hurts_only_the_program() {
    let fast = exitless_files("fast", "exitless_files.glibc", true);
    let exit = exitless_files("exit", "exitless_files.glibc", true);
    assert_eq!(fast.status, 0, "{}", fast.describe());
    assert_eq!(exit.status, 0, "{}", exit.describe());
    assert_eq!(fast.stdout_str(), exit.stdout_str());
    let out = fast.stdout_str();
    assert!(out.contains("mmap with every call posted: ok"), "{out}");
    assert!(out.contains("hand-posted call: settled"), "{out}");
    assert!(out.contains("wrong answers: 0"), "{out}");
}

/// A write to a stream socket whose peer is gone raises SIGPIPE before the
/// call returns, also when the poller takes the call: it declines a send
/// that fails with EPIPE, and the exit makes it again and raises the signal
/// (a handler counts it; then the default action kills the program).
#[test]
fn sigpipe_is_raised_by_a_send_the_poller_took() {
    for prog in ["unix_sockets.glibc", "unix_sockets.musl"] {
        let native = run_cmd(Command::new(guest(prog)), b"", Duration::from_secs(60));
        assert_eq!(native.status, 128 + 13, "{}", native.describe());
        let mut cmd = Command::new(common::forkvm_bin());
        cmd.args(["run", "--syscalls", "fast", "--"])
            .arg(guest(prog))
            .env("FORKVM_LOG", "forkvm=debug")
            .env("FORKVM_POLLER_SPIN_US", "0");
        let r = run_cmd(cmd, b"", Duration::from_secs(60));
        assert_eq!(r.status, native.status, "{}", r.describe());
        assert_eq!(r.stdout_str(), native.stdout_str(), "{}", r.describe());
        if std::path::Path::new("/sys/module/kvm_pvm").exists() {
            assert!(answered_without_exit(&r) > 0, "{}", r.describe());
        }
    }
}
