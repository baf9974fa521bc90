//! The command line itself: --version, help, flags that must not change guest output.

mod common;

use common::{assert_mentions, forkvm, guest, Case};

#[test]
fn version() {
    let r = forkvm(&["--version"]);
    assert_eq!(r.status, 0, "{}", r.describe());
    let out = r.stdout_str();
    assert!(out.contains("forkvm"), "{}", r.describe());
    assert!(out.contains(env!("CARGO_PKG_VERSION")), "{}", r.describe());
}

#[test]
fn help_subcommand() {
    let r = forkvm(&["help"]);
    assert_eq!(r.status, 0, "{}", r.describe());
    assert!(r.stdout_str().contains("run"), "{}", r.describe());
}

#[test]
fn run_help_lists_flags() {
    let r = forkvm(&["run", "--help"]);
    assert_eq!(r.status, 0, "{}", r.describe());
    let out = r.stdout_str();
    for flag in [
        "--allow-read",
        "--env",
        "--cwd",
        "--timeout",
        "--memory",
        "--trace-syscalls",
    ] {
        assert!(
            out.contains(flag),
            "`run --help` should list {flag}\n{}",
            r.describe()
        );
    }
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let hello = guest("hello.musl");
    let r = forkvm(&["run", "--no-such-flag", hello.to_str().expect("utf-8 path")]);
    assert!(r.status != 0 && r.status < 128, "{}", r.describe());
    assert!(r.stdout.is_empty(), "{}", r.describe());
    assert_mentions(&r, &r.stderr, &["--no-such-flag"], "stderr");
}

#[test]
fn a_write_root_must_be_a_directory() {
    // A file, or nothing, given as a write root would leave every write
    // refused (EACCES) with no word of why: a clear error at start instead.
    let hello = guest("hello.musl");
    let hello = hello.to_str().expect("utf-8 path");
    for (flag, root, why) in [
        ("--allow-write", hello, "not a directory"),
        (
            "--allow-write",
            "/nonexistent-forkvm-dir",
            "no such directory",
        ),
    ] {
        let r = forkvm(&["run", flag, root, hello]);
        assert!(r.status != 0 && r.status < 128, "{}", r.describe());
        assert!(r.stdout.is_empty(), "{}", r.describe());
        assert_mentions(&r, &r.stderr, &[flag, root, why], "stderr");
        assert_eq!(r.stderr_str().matches(why).count(), 1, "{}", r.describe());
    }
    let r = forkvm(&["serve", "--persist", hello, hello]);
    assert!(r.status != 0 && r.status < 128, "{}", r.describe());
    assert_mentions(&r, &r.stderr, &["--persist", "not a directory"], "stderr");
}

#[test]
fn run_without_program_is_a_usage_error() {
    let r = forkvm(&["run"]);
    assert!(r.status != 0 && r.status < 128, "{}", r.describe());
}

#[test]
fn program_args_that_look_like_flags_reach_the_guest() {
    // No `--` here: everything after PROGRAM belongs to the guest.
    let prog = guest("args_env.musl");
    let r = forkvm(&[
        "run",
        prog.to_str().expect("utf-8 path"),
        "-v",
        "--timeout",
        "x",
    ]);
    assert_eq!(r.status, 3, "{}", r.describe());
    let out = r.stdout_str();
    assert!(
        out.contains("argv[1]=\"-v\"") && out.contains("argv[2]=\"--timeout\""),
        "{}",
        r.describe()
    );
}

#[test]
fn verbose_keeps_guest_stdout() {
    let case = Case::new(guest("hello.musl"));
    let native = case.run_native();
    let vm = Case::new(guest("hello.musl")).flags(["-v"]).run_forkvm();
    assert_eq!(vm.status, 0, "{}", vm.describe());
    assert_eq!(vm.stdout, native.stdout, "{}", vm.describe());
}

#[test]
fn trace_syscalls_keeps_guest_stdout() {
    let native = Case::new(guest("hello.glibc")).run_native();
    let vm = Case::new(guest("hello.glibc"))
        .flags(["--trace-syscalls"])
        .run_forkvm();
    assert_eq!(vm.status, 0, "{}", vm.describe());
    assert_eq!(vm.stdout, native.stdout, "{}", vm.describe());
    assert_mentions(&vm, &vm.stderr, &["write"], "the syscall trace on stderr");
}

/// A call that waits is traced once as waiting and once with its result,
/// never as the 0 of each look at it (which read as end of file).
#[test]
fn trace_shows_a_waiting_read_once_then_its_result() {
    for libc in ["glibc", "musl"] {
        let vm = Case::new(guest(&format!("trace_wait.{libc}")))
            .flags(["--trace-syscalls"])
            .run_forkvm();
        assert_eq!(vm.status, 0, "{}", vm.describe());
        assert_eq!(vm.stdout_str(), "read 1 byte: x\n", "{}", vm.describe());
        let trace = vm.stderr_str();
        let reads: Vec<&str> = trace
            .lines()
            .filter(|l| l.starts_with("[forkvm] read(") && l.contains(", 1) = "))
            .collect();
        assert_eq!(reads.len(), 2, "one wait, one result:\n{}", vm.describe());
        assert!(reads[0].ends_with("= ? (waits)"), "{}", vm.describe());
        assert!(reads[1].ends_with("\"x\", 1) = 1"), "{}", vm.describe());
    }
}

#[test]
fn exit_status_is_passed_through() {
    let prog = guest("args_env.glibc");
    let r = forkvm(&[
        "run",
        "--",
        prog.to_str().expect("utf-8 path"),
        "1",
        "2",
        "3",
    ]);
    assert_eq!(r.status, 3, "{}", r.describe());
}

#[test]
fn bench_json_has_every_row_and_is_strict_json() {
    let run = common::forkvm(&["bench", "--iterations", "10", "--json"]);
    assert_eq!(run.status, 0, "{}", run.describe());
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).expect("valid JSON");
    assert!(v["machine"]["platform"].is_string());
    let rows = v["rows"].as_array().expect("rows");
    for name in [
        "construct",
        "vmcall_master",
        "fork",
        "vmcall_fork",
        "reset_1",
        "reset_16",
        "reset_256",
        "reset_vmcall",
        "memory_per_fork_kib",
    ] {
        let row = rows
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("row {name}"));
        for key in ["median_us", "p99_us", "floor_name", "floor_us", "ratio"] {
            assert!(row.get(key).is_some(), "{name} lacks {key}");
        }
        assert!(row["median_us"].as_f64().is_some_and(|m| m > 0.0), "{name}");
    }
}
