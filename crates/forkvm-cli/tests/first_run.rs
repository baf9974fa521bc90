//! What a new user meets: `forkvm run python3` (PATH lookup), `#!` scripts, dynamic
//! programs with the default read-only library roots, node with no flags, `-v` naming
//! policy refusals once, `--trace-syscalls` decoded like strace, no default timeout, and
//! errors that say their cause once.

mod common;

use common::{
    assert_mentions, check, forkvm, forkvm_bin, guest, installed, run_cmd, scratch_dir, Case, Run,
};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const GUEST_PATH: &str = "PATH=/usr/bin:/bin";

/// `forkvm run ARGS...` with forkvm's own environment set to `env`.
fn forkvm_with_env(env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(args).env_clear().envs(env.iter().copied());
    run_cmd(cmd, b"", common::WATCHDOG)
}

fn count(haystack: &[u8], needle: &str) -> usize {
    String::from_utf8_lossy(haystack).matches(needle).count()
}

fn write_script(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write script");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    p.to_str().expect("utf-8 path").to_string()
}

#[test]
fn python3_is_found_in_the_guest_path() {
    if !installed("/usr/bin/python3") {
        return;
    }
    // Differential: natively `env -i PATH=/usr/bin:/bin python3 ...`.
    check(
        &Case::new("python3")
            .args(["-c", "import sys; print(sys.argv, 6 * 7)"])
            .flags(["--env", GUEST_PATH]),
    );
}

#[test]
fn python3_is_found_in_the_host_path_without_a_guest_path() {
    if !installed("/usr/bin/python3") {
        return;
    }
    let r = forkvm_with_env(
        &[("PATH", "/nonexistent:/usr/bin:/bin")],
        &["run", "python3", "-c", "print(6 * 7)"],
    );
    assert_eq!(r.status, 0, "{}", r.describe());
    assert_eq!(r.stdout_str(), "42\n", "{}", r.describe());
    let r = forkvm_with_env(&[("PATH", "/nonexistent")], &["run", "python3"]);
    assert_eq!(r.status, 125, "{}", r.describe());
    assert_mentions(&r, &r.stderr, &["not found in PATH"], "stderr");
}

#[test]
fn a_python_script_runs_as_typed() {
    if !installed("/usr/bin/python3") {
        return;
    }
    // The example, with no flags at all: the system library roots are readable.
    let r = forkvm(&["run", "/usr/bin/python3", "-c", "print(1)"]);
    assert_eq!(r.status, 0, "{}", r.describe());
    assert_eq!(r.stdout_str(), "1\n", "{}", r.describe());
}

#[test]
fn shell_script_runs_its_interpreter() {
    if !installed("/bin/sh") {
        return;
    }
    let dir = scratch_dir("shell_script_runs_its_interpreter");
    let script = write_script(
        &dir,
        "greet.sh",
        "#!/bin/sh\necho \"$# args: [$1] [$2]\"\necho to stderr >&2\nexit 3\n",
    );
    let (_, vm) = check(&Case::new(&script).args(["a b", "c"]));
    assert_eq!(vm.status, 3, "{}", vm.describe());
    assert_eq!(vm.stdout_str(), "2 args: [a b] [c]\n", "{}", vm.describe());
}

#[test]
fn env_python_script_runs_python_from_the_path() {
    if !installed("/usr/bin/python3") || !installed("/usr/bin/env") {
        return;
    }
    let dir = scratch_dir("env_python_script_runs_python_from_the_path");
    let script = write_script(
        &dir,
        "hello.py",
        "#!/usr/bin/env python3\nimport sys\nprint('hello', sys.argv[1:], sys.argv[0].endswith('hello.py'))\n",
    );
    let (_, vm) = check(
        &Case::new(&script)
            .args(["x", "-y"])
            .flags(["--env", GUEST_PATH]),
    );
    assert_eq!(
        vm.stdout_str(),
        "hello ['x', '-y'] True\n",
        "{}",
        vm.describe()
    );
}

#[test]
fn node_runs_with_no_flags() {
    if !installed("/usr/bin/node") {
        return;
    }
    let (_, vm) = check(&Case::new("/usr/bin/node").args([
        "-e",
        "console.log([1, 2, 3].map(x => x * 2).join(','), typeof WebAssembly)",
    ]));
    assert_eq!(vm.stdout_str(), "2,4,6 object\n", "{}", vm.describe());
}

/// node with a narrow allow-list: its realpath() of the script walks up through
/// directories that are only ancestors of the allowed root (they were ENOENT).
#[test]
fn node_runs_a_script_under_a_narrow_allow_list() {
    if !installed("/usr/bin/node") {
        return;
    }
    let dir = scratch_dir("node-narrow");
    let script = dir.join("app.js");
    std::fs::write(
        &script,
        "const fs = require('fs');\n\
         console.log(require('path').basename(fs.realpathSync(__filename)));\n\
         console.log(fs.readFileSync(__dirname + '/data.txt', 'utf8').trim());\n",
    )
    .expect("write script");
    std::fs::write(dir.join("data.txt"), "forty-two\n").expect("write data");
    let d = dir.to_str().expect("utf-8 path");
    let (_, vm) = check(
        &Case::new("/usr/bin/node")
            .args([script.to_str().expect("utf-8 path")])
            .flags(["--allow-read", d]),
    );
    assert_eq!(vm.stdout_str(), "app.js\nforty-two\n", "{}", vm.describe());
}

#[test]
fn too_little_address_space_names_the_flag() {
    if !installed("/usr/bin/node") {
        return;
    }
    let r = forkvm(&[
        "run",
        "--address-space",
        "256",
        "/usr/bin/node",
        "-e",
        "console.log(1)",
    ]);
    assert_ne!(r.status, 0, "{}", r.describe());
    assert_mentions(&r, &r.stderr, &["--address-space"], "stderr");
}

#[test]
fn default_allow_list_is_read_only_and_narrow() {
    if !installed("/bin/cat") {
        return;
    }
    let dir = scratch_dir("default_allow_list_is_read_only_and_narrow");
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "secret\n").expect("write");
    let secret = secret.to_str().expect("utf-8 path");
    // Libraries load; a file outside the defaults stays invisible, and the failure
    // ends with a hint naming the path and the flag.
    let r = forkvm(&["run", "/bin/cat", secret]);
    assert_eq!(r.status, 1, "{}", r.describe());
    assert!(r.stdout.is_empty(), "{}", r.describe());
    assert_mentions(&r, &r.stderr, &["No such file"], "stderr");
    assert_mentions(&r, &r.stderr, &[secret], "the hint");
    assert_mentions(&r, &r.stderr, &["--allow-read"], "the hint");
    // Readable by default: the loader cache. Not writable.
    let r = forkvm(&["run", "/bin/cat", "/etc/ld.so.cache"]);
    assert_eq!(r.status, 0, "{}", r.describe());
    assert_eq!(
        r.stdout,
        std::fs::read("/etc/ld.so.cache").expect("read the loader cache")
    );
    if installed("/bin/cp") {
        let r = forkvm(&["run", "/bin/cp", "/etc/ld.so.cache", "/usr/lib/forkvm-test"]);
        assert_ne!(r.status, 0, "{}", r.describe());
        assert!(!Path::new("/usr/lib/forkvm-test").exists());
    }
}

#[test]
fn no_default_allow_gives_a_hint_when_ld_so_fails() {
    if !installed("/bin/true") {
        return;
    }
    let r = forkvm(&["run", "--no-default-allow", "/bin/true"]);
    assert_eq!(r.status, 127, "{}", r.describe());
    assert_mentions(
        &r,
        &r.stderr,
        &["error while loading shared libraries"],
        "stderr",
    );
    assert_mentions(&r, &r.stderr, &["hint"], "stderr");
    assert_mentions(&r, &r.stderr, &["--allow-read"], "stderr");
    assert_mentions(&r, &r.stderr, &["libc.so.6", "ld.so.cache"], "stderr");
}

#[test]
fn verbose_names_policy_refusals_once() {
    if !installed("/usr/bin/python3") {
        return;
    }
    // A file in a directory the guest can see (a default read-only root) but not write:
    // in a directory outside every root the answer is ENOENT, the directory being invisible.
    let outside = "/usr/lib/forkvm-first-run-refused.txt";
    let code = format!(
        "import os, socket\n\
         for _ in range(2):\n\
         \x20   try: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)\n\
         \x20   except OSError as e: print('socket', e.errno)\n\
         \x20   try: os.fork()\n\
         \x20   except OSError as e: print('fork', e.errno)\n\
         \x20   try: open('{outside}', 'w')\n\
         \x20   except OSError as e: print('write', e.errno)\n\
         \x20   try: open('/etc/shadow')\n\
         \x20   except OSError as e: print('read', e.errno)\n"
    );
    // --max-processes 1: fork is refused (EAGAIN), as a policy refusal.
    let r = forkvm(&[
        "run",
        "-v",
        "--max-processes",
        "1",
        "/usr/bin/python3",
        "-c",
        &code,
    ]);
    assert_eq!(r.status, 0, "{}", r.describe());
    assert_eq!(count(&r.stdout, "socket "), 2, "{}", r.describe());
    for note in [
        "refused by policy: socket",
        "of a new process",
        &format!("{outside}: writes are allowed only under --allow-write"),
        "denied: /etc/shadow is outside the allow-list",
    ] {
        assert_eq!(count(&r.stderr, note), 1, "`{note}` once\n{}", r.describe());
    }
    // Without -v: silent (the program succeeded).
    let r = forkvm(&[
        "run",
        "--max-processes",
        "1",
        "/usr/bin/python3",
        "-c",
        &code,
    ]);
    assert_eq!(r.status, 0, "{}", r.describe());
    assert!(r.stderr.is_empty(), "{}", r.describe());
}

#[test]
fn trace_decodes_paths_flags_and_errnos() {
    if !installed("/bin/cat") {
        return;
    }
    let r = forkvm(&["run", "--trace-syscalls", "/bin/cat", "/no/such/file"]);
    assert_eq!(r.status, 1, "{}", r.describe());
    for line in [
        "openat(AT_FDCWD, \"/etc/ld.so.cache\", O_RDONLY|O_CLOEXEC, 0) = 3",
        "openat(AT_FDCWD, \"/no/such/file\", O_RDONLY, 0) = -1 ENOENT (No such file or directory)",
        "PROT_READ|PROT_EXEC, MAP_PRIVATE|MAP_FIXED|MAP_DENYWRITE, 3,",
        "read(3, \"\\x7fELF\\x02\\x01\\x01",
        "write(2, \"/bin/cat: \", 10) = 10",
        "exit_group(1)",
    ] {
        assert_mentions(&r, &r.stderr, &[line], "the trace");
    }
}

#[test]
fn no_default_timeout_and_a_loud_one_when_given() {
    let r = forkvm(&["run", "--help"]);
    assert_eq!(r.status, 0, "{}", r.describe());
    assert_mentions(&r, &r.stdout, &["Default: no limit"], "run --help");
    let vm = Case::new(guest("infinite_loop.glibc"))
        .flags(["--timeout", "1"])
        .limit(Duration::from_secs(60))
        .run_forkvm();
    assert_eq!(vm.status, 124, "{}", vm.describe());
    assert_mentions(&vm, &vm.stderr, &["--timeout 1"], "stderr");
}

#[test]
fn errors_name_their_cause_once() {
    let dir = scratch_dir("errors_name_their_cause_once");
    let missing = dir.join("missing");
    let r = forkvm(&["run", missing.to_str().expect("utf-8 path")]);
    assert_eq!(r.status, 125, "{}", r.describe());
    assert_eq!(
        count(&r.stderr, "No such file or directory"),
        1,
        "{}",
        r.describe()
    );
    let text = dir.join("notes.txt");
    std::fs::write(&text, "just text\n").expect("write");
    let text = text.to_str().expect("utf-8 path");
    let r = forkvm(&["run", text]);
    assert_eq!(r.status, 125, "{}", r.describe());
    assert_eq!(count(&r.stderr, "not an ELF file"), 1, "{}", r.describe());
    assert_mentions(&r, &r.stderr, &[text], "stderr");
    let r = forkvm(&["run", "--some-unknown-flag", text]);
    assert_eq!(r.status, 2, "{}", r.describe());
    assert_mentions(&r, &r.stderr, &["--some-unknown-flag"], "stderr");
}

#[test]
fn a_file_in_the_hosts_tmp_under_allow_read_root_gets_a_hint() {
    // `--allow-read /` leaves the guest its own /tmp: a file the user left
    // in the host's is not there, and the failure says how to map it.
    let file = Path::new("/tmp").join(format!("forkvm-hint-{}.txt", std::process::id()));
    std::fs::write(&file, "the host's\n").expect("write");
    let path = file.to_str().expect("utf-8");
    let r = forkvm(&["run", "--allow-read", "/", "/bin/cat", path]);
    assert_eq!(r.status, 1, "{}", r.describe());
    assert_mentions(&r, &r.stderr, &["No such file"], "stderr");
    assert_mentions(&r, &r.stderr, &[path], "the hint");
    assert_mentions(&r, &r.stderr, &["--allow-read"], "the hint");
    // As the hint says: naming it maps it.
    let r = forkvm(&[
        "run",
        "--allow-read",
        "/",
        "--allow-read",
        path,
        "/bin/cat",
        path,
    ]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(r.status, 0, "{}", r.describe());
    assert_eq!(r.stdout, b"the host's\n");
}
