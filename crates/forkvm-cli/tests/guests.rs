//! Differential tests: each guest program run natively and under `forkvm run` must give the
//! same stdout, stderr and exit status. Guests are built by tests/guests/build.sh.

mod common;

use common::{check, differential, glibc_and_musl_in_a_dir, guest, scratch_dir, Case};
use std::path::Path;

#[test]
fn hello_glibc() {
    differential("hello.glibc", &[], &[]);
}

#[test]
fn hello_musl() {
    differential("hello.musl", &[], &[]);
}

#[test]
fn hello_cpp() {
    differential("hello_cpp.glibc", &[], &[]);
}

#[test]
fn hello_rs() {
    differential("hello_rs", &["one", "two words"], &["--env", "GREETING=hi"]);
}

#[test]
fn hello_rs_empty_env() {
    let (_, vm) = differential("hello_rs", &[], &[]);
    assert!(vm.stdout_str().contains("env: []"), "{}", vm.describe());
}

const TRICKY_ARGS: &[&str] = &["", "with space", "ünïcödé ✓", "--looks-like-a-flag", "a=b"];

const ENV_FLAGS: &[&str] = &[
    "--env",
    "FOO=bar",
    "--env",
    "EMPTY=",
    "--env",
    "SPACES=a b  c",
    "--env",
    "EQUALS=x=y=z",
];

#[test]
fn args_env_glibc() {
    // More than three arguments: the program exits with status 3.
    let (_, vm) = differential("args_env.glibc", TRICKY_ARGS, ENV_FLAGS);
    assert_eq!(vm.status, 3, "{}", vm.describe());
}

#[test]
fn args_env_musl() {
    differential("args_env.musl", TRICKY_ARGS, ENV_FLAGS);
}

#[test]
fn args_env_nothing() {
    // No --env: the guest environment must be empty even though this process has one.
    let (_, vm) = differential("args_env.musl", &[], &[]);
    let out = vm.stdout_str();
    assert!(out.contains("envc=0"), "{}", vm.describe());
    assert!(out.contains("cwd=\"/\""), "{}", vm.describe());
}

#[test]
fn args_env_cwd() {
    let dir = scratch_dir("args_env_cwd");
    let dir = dir.to_str().expect("utf-8 path");
    differential(
        "args_env.glibc",
        &["x"],
        &["--allow-read", dir, "--cwd", dir, "--env", "A=1"],
    );
}

/// Deterministic pseudo-random bytes.
fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .collect()
}

/// A directory with a few files of different sizes and a subdirectory.
fn make_data_dir(name: &str) -> std::path::PathBuf {
    let dir = scratch_dir(name).join("data");
    std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
    std::fs::write(dir.join("small.txt"), b"hello, file\n").expect("write");
    std::fs::write(dir.join("empty"), b"").expect("write");
    std::fs::write(dir.join("big.bin"), pseudo_random(3 * 1024 * 1024 + 17, 7)).expect("write");
    std::fs::write(dir.join("sub/inner.txt"), b"inner\n").expect("write");
    dir
}

fn read_file_case(prog: &str, dir: &Path, file: &str) {
    let path = dir.join(file);
    check(
        &Case::new(guest(prog))
            .args([path.as_os_str()])
            .flags([std::ffi::OsStr::new("--allow-read"), dir.as_os_str()]),
    );
}

#[test]
fn read_file_glibc() {
    let dir = make_data_dir("read_file_glibc");
    read_file_case("read_file.glibc", &dir, "big.bin");
    read_file_case("read_file.glibc", &dir, "small.txt");
    read_file_case("read_file.glibc", &dir, "empty");
}

#[test]
fn read_file_musl() {
    let dir = make_data_dir("read_file_musl");
    read_file_case("read_file.musl", &dir, "big.bin");
    read_file_case("read_file.musl", &dir, "sub/inner.txt");
}

#[test]
fn read_file_repo_file() {
    // A real file from the repository, with --allow-read on its directory.
    let dir = common::repo_root().join("tests/guests");
    read_file_case("read_file.glibc", &dir, "hello.c");
}

#[test]
fn cat_stdin_glibc() {
    let mut input = b"first line of stdin\n".to_vec();
    input.extend(pseudo_random(300_000, 3));
    check(&Case::new(guest("cat_stdin.glibc")).stdin(input));
}

#[test]
fn cat_stdin_musl_empty() {
    check(&Case::new(guest("cat_stdin.musl")));
}

#[test]
fn malloc_big_glibc() {
    differential("malloc_big.glibc", &[], &[]);
}

#[test]
fn malloc_big_musl() {
    differential("malloc_big.musl", &[], &[]);
}

#[test]
fn sort_glibc() {
    differential("sort.glibc", &[], &[]);
}

#[test]
fn sort_musl() {
    differential("sort.musl", &[], &[]);
}

#[test]
fn sort_cpp() {
    differential("sort_cpp.glibc", &[], &[]);
}

#[test]
fn floats_glibc() {
    differential("floats.glibc", &[], &[]);
}

#[test]
fn floats_musl() {
    differential("floats.musl", &[], &[]);
}

#[test]
fn time_random_glibc() {
    let (_, vm) = differential("time_random.glibc", &[], &[]);
    assert!(!vm.stdout_str().contains(": no"), "{}", vm.describe());
}

#[test]
fn time_random_musl() {
    differential("time_random.musl", &[], &[]);
}

#[test]
fn exceptions_cpp() {
    differential("exceptions_cpp.glibc", &[], &[]);
}

/// Rust's panic message names the thread id ("thread 'main' (1234) panicked"), which
/// differs between runs; drop it.
fn strip_thread_id(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("' (") {
        let (head, tail) = rest.split_at(i + 1); // keep the quote
        out.push_str(head);
        let after = &tail[2..]; // skip " ("
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with(')') {
            rest = &after[digits + 1..];
        } else {
            rest = tail;
            out.push_str(&rest[..1]);
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn strip_thread_id_works() {
    assert_eq!(
        strip_thread_id("thread 'main' (6621) panicked at x.rs:1:2:\nmsg 'a' (b)\n"),
        "thread 'main' panicked at x.rs:1:2:\nmsg 'a' (b)\n"
    );
}

#[test]
fn panic_rs() {
    let (native, vm) = check(
        &Case::new(guest("panic_rs"))
            .args(["arg"])
            .normalize(strip_thread_id),
    );
    assert_eq!(native.status, 101, "{}", native.describe());
    assert!(
        vm.stderr_str().contains("forkvm test panic: 1 items"),
        "{}",
        vm.describe()
    );
}

#[test]
fn cat_files_and_errors() {
    let dir = make_data_dir("cat_files_and_errors");
    let files: Vec<std::path::PathBuf> = ["small.txt", "big.bin", "empty", "missing", "sub"]
        .iter()
        .map(|f| dir.join(f))
        .collect();
    let (_, vm) = check(
        &Case::new(guest("cat.musl"))
            .args(files.iter().map(|p| p.as_os_str()))
            .flags([std::ffi::OsStr::new("--allow-read"), dir.as_os_str()]),
    );
    assert_eq!(vm.status, 1, "{}", vm.describe());
}

#[test]
fn cat_stdin_to_stdout() {
    check(&Case::new(guest("cat.glibc")).stdin(pseudo_random(1 << 20, 11)));
}

/// MADV_DONTNEED over a range of several adjacent mappings drops every page
/// (it dropped none: rustc's jemalloc purged merged extents, reused them as
/// zeroed memory and LLVM crashed or looped on the garbage), and a range with
/// a hole is ENOMEM after the mapped pages are dropped.
#[test]
fn madvise_spans_several_mappings() {
    glibc_and_musl_in_a_dir("madvise_ranges");
}

/// MADV_WIPEONFORK zeroes the range in forked children, not in the parent
/// (it was accepted and ignored: the child got the parent's bytes, so a
/// generator keeping its state there, as AWS-LC and BoringSSL do, drew the
/// same numbers in both), KEEPONFORK undoes it, shared memory is EINVAL.
#[test]
fn wipe_on_fork_zeroes_the_childs_copy() {
    differential("wipe_on_fork.glibc", &[], &[]);
    differential("wipe_on_fork.musl", &[], &[]);
}

/// Signal-driven I/O settings read back as on Linux: FIOASYNC and O_ASYNC,
/// F_SETOWN/F_SETOWN_EX owners (ESRCH for nobody), F_SETSIG. They were
/// ENOTTY and EINVAL, and nginx's master gave up its worker over them.
#[test]
fn signal_driven_io_settings_read_back() {
    differential("signal_io.glibc", &[], &[]);
    differential("signal_io.musl", &[], &[]);
}
