//! Isolation and failure handling: files outside --allow-read, hostile syscall arguments,
//! memory exhaustion, timeouts, guest crashes and invalid executables.

mod common;

use common::{assert_mentions, guest, guests_out, scratch_dir, Case, Run};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

// ---------------------------------------------------------------------------------------
// Files outside the --allow-read roots
// ---------------------------------------------------------------------------------------

/// tmp/allowed/{inside.txt, link_in -> inside.txt, link_out -> ../secret.txt}, tmp/secret.txt.
fn make_refusal_tree(name: &str) -> (PathBuf, PathBuf) {
    let tmp = scratch_dir(name);
    let allowed = tmp.join("allowed");
    std::fs::create_dir_all(&allowed).expect("mkdir");
    std::fs::write(allowed.join("inside.txt"), b"inside\n").expect("write");
    std::fs::write(tmp.join("secret.txt"), b"secret\n").expect("write");
    std::os::unix::fs::symlink("inside.txt", allowed.join("link_in")).expect("symlink");
    std::os::unix::fs::symlink("../secret.txt", allowed.join("link_out")).expect("symlink");
    (tmp, allowed)
}

fn refused_file(prog: &str) {
    let (tmp, allowed) = make_refusal_tree(prog);
    let p = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let allowed_paths = [
        p(&allowed.join("inside.txt")),
        "inside.txt".to_string(), // relative to --cwd
        p(&allowed.join("link_in")),
    ];
    let mut refused_paths = vec![
        p(&tmp.join("secret.txt")),
        format!("{}/../secret.txt", p(&allowed)),
        "../secret.txt".to_string(),
        p(&allowed.join("link_out")), // a symlink inside the root pointing outside it
        p(&common::repo_root().join("Cargo.toml")),
    ];
    // (Not /etc/passwd: the guest has its own.)
    if Path::new("/etc/hostname").exists() {
        refused_paths.push("/etc/hostname".to_string());
    }
    let args: Vec<&String> = allowed_paths.iter().chain(refused_paths.iter()).collect();
    let case = Case::new(guest(prog))
        .args(args.iter().map(|s| s.as_str()))
        .flags(["--allow-read", &p(&allowed), "--cwd", &p(&allowed)]);

    // Natively everything opens: this checks the fixture.
    let native = case.run_native();
    assert_eq!(native.status, 0, "{}", native.describe());
    for a in &args {
        assert!(
            native.stdout_str().contains(&format!("{a}: opened")),
            "native run should open {a}\n{}",
            native.describe()
        );
    }

    let vm = case.run_forkvm();
    assert_eq!(vm.status, 0, "{}", vm.describe());
    let out = vm.stdout_str();
    let mut problems = Vec::new();
    for a in &allowed_paths {
        for want in [format!("{a}: opened"), format!("{a}: stat ok")] {
            if !out.contains(&want) {
                problems.push(format!("expected `{want}` (inside the allowed root)"));
            }
        }
    }
    for a in &refused_paths {
        for want in [format!("{a}: open failed"), format!("{a}: stat failed")] {
            if !out.contains(&want) {
                problems.push(format!(
                    "expected `{want}` (outside every --allow-read root)"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "forkvm let the guest see the wrong files:\n- {}\n{}",
        problems.join("\n- "),
        vm.describe()
    );
}

#[test]
fn refused_file_glibc() {
    refused_file("refused_file.glibc");
}

#[test]
fn refused_file_musl() {
    refused_file("refused_file.musl");
}

#[test]
fn no_allow_read_means_no_files() {
    let (_tmp, allowed) = make_refusal_tree("no_allow_read");
    let file = allowed.join("inside.txt");
    let vm = Case::new(guest("read_file.musl"))
        .args([file.as_os_str()])
        .run_forkvm();
    assert_eq!(vm.status, 1, "{}", vm.describe());
    assert!(
        vm.stdout_str().starts_with("open "),
        "the open must fail\n{}",
        vm.describe()
    );
}

#[test]
fn allow_read_paths_with_dotdot() {
    // A root given with `..` components, and guest paths with `..` that stay inside the root:
    // both must work as they do natively.
    let (tmp, allowed) = make_refusal_tree("allow_read_paths_with_dotdot");
    std::fs::create_dir_all(allowed.join("sub")).expect("mkdir");
    let root = tmp.join("allowed/sub/..");
    let inside = format!("{}/sub/../inside.txt", allowed.display());
    let case = Case::new(guest("read_file.glibc"))
        .args([inside.as_str()])
        .flags([OsString::from("--allow-read"), root.into_os_string()]);
    common::check(&case);
}

// ---------------------------------------------------------------------------------------
// Hostile syscall arguments
// ---------------------------------------------------------------------------------------

/// "label: result" lines of the hostile program, in order.
fn hostile_lines(run: &Run) -> Vec<(String, String)> {
    run.stdout_str()
        .lines()
        .filter_map(|l| {
            l.rsplit_once(": ")
                .map(|(a, b)| (a.to_string(), b.to_string()))
        })
        .collect()
}

/// Errnos that must match exactly; for everything else only "error or not" must match.
const EXACT_ERRNOS: &[&str] = &["-EFAULT", "-EBADF"];

/// Runs one section of the hostile program natively and under forkvm; returns a
/// description of every difference.
fn hostile_section(prog: &str, section: &str) -> Result<(), String> {
    let dir = guests_out();
    let file = guest("hello.glibc");
    let dir_s: OsString = dir.clone().into();
    let case = Case::new(guest(prog))
        .args([dir.as_os_str(), file.as_os_str(), section.as_ref()])
        .flags([OsString::from("--allow-read"), dir_s]);
    let native = case.run_native();
    assert_eq!(native.status, 0, "{}", native.describe());
    assert!(
        native.stdout_str().ends_with("survived\n"),
        "{}",
        native.describe()
    );

    let vm = case.run_forkvm();
    let native_lines = hostile_lines(&native);
    let vm_lines = hostile_lines(&vm);
    let vm_map: HashMap<&str, &str> = vm_lines
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let mut problems = Vec::new();
    let mut missing = Vec::new();
    for (label, want) in &native_lines {
        let Some(&got) = vm_map.get(label.as_str()) else {
            missing.push(label.as_str());
            continue;
        };
        let want_err = want.starts_with("-E");
        let got_err = got.starts_with("-E");
        if want_err != got_err || (EXACT_ERRNOS.contains(&want.as_str()) && got != want) {
            problems.push(format!("{label}: native {want}, forkvm {got}"));
        }
    }
    if let Some(first) = missing.first() {
        problems.push(format!(
            "{} line(s) missing from forkvm's output, the first being `{first}` \
             (did the guest crash, or was its code overwritten?)",
            missing.len()
        ));
    }
    if vm.status != 0 {
        problems.push(format!("exit status {} (native 0)", vm.status));
    }
    if !vm.stdout_str().ends_with("survived\n") {
        problems.push("output does not end with `survived`".into());
    }
    let stray = vm
        .stdout_str()
        .lines()
        .filter(|l| !l.contains(": ") && *l != "survived")
        .count();
    if stray > 0 {
        problems.push(format!(
            "{stray} unexpected output line(s) (guest memory leaked to stdout?)"
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    const SHOWN: usize = 60;
    let more = problems.len().saturating_sub(SHOWN);
    Err(format!(
        "{prog} {section}: {} difference(s) from native Linux:\n- {}{}\n{}",
        problems.len(),
        problems[..problems.len().min(SHOWN)].join("\n- "),
        if more > 0 {
            format!("\n- ... and {more} more")
        } else {
            String::new()
        },
        vm.describe()
    ))
}

/// One section of the hostile program, glibc and musl builds.
fn hostile(section: &str) {
    let errors: Vec<String> = ["hostile.glibc", "hostile.musl"]
        .iter()
        .filter_map(|p| hostile_section(p, section).err())
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

/// Unmapped memory, guest-kernel structures, the kernel half, non-canonical and wrapping
/// addresses as output buffers.
#[test]
fn hostile_bad_writes() {
    hostile("bad-writes");
}

/// The program's own .text and .rodata as output buffers: read-only, so EFAULT.
#[test]
fn hostile_readonly_writes() {
    hostile("readonly-writes");
}

/// Bad addresses as input buffers, paths, iovecs and structs.
#[test]
fn hostile_bad_reads() {
    hostile("bad-reads");
}

/// Zero and huge lengths and counts.
#[test]
fn hostile_lengths() {
    hostile("lengths");
}

/// Invalid flags, clocks, signals, syscall numbers.
#[test]
fn hostile_values() {
    hostile("values");
}

/// Bad and wrong-kind file descriptors.
#[test]
fn hostile_fds() {
    hostile("fds");
}

// ---------------------------------------------------------------------------------------
// Memory limit, timeout, crashes
// ---------------------------------------------------------------------------------------

fn memory_bomb(prog: &str) {
    let case = Case::new(guest(prog))
        .flags(["--memory", "64"])
        .native_address_space_limit(64 << 20);
    let native = case.run_native();
    assert_eq!(native.status, 0, "{}", native.describe());
    assert!(
        native.stdout_str().starts_with("got ENOMEM"),
        "{}",
        native.describe()
    );
    let vm = case.run_forkvm();
    assert_eq!(vm.status, 0, "{}", vm.describe());
    assert!(
        vm.stdout_str().starts_with("got ENOMEM"),
        "the guest should see malloc fail within --memory 64\n{}",
        vm.describe()
    );
}

#[test]
fn memory_bomb_glibc() {
    memory_bomb("memory_bomb.glibc");
}

#[test]
fn memory_bomb_musl() {
    memory_bomb("memory_bomb.musl");
}

#[test]
fn infinite_loop_times_out() {
    let vm = Case::new(guest("infinite_loop.glibc"))
        .flags(["--timeout", "1"])
        .limit(Duration::from_secs(30))
        .run_forkvm();
    assert_eq!(vm.status, 124, "{}", vm.describe());
    assert_mentions(&vm, &vm.stderr, &["timeout", "timed out"], "stderr");
}

fn null_write(prog: &str) {
    let case = Case::new(guest(prog));
    let native = case.run_native();
    assert_eq!(native.status, 139, "{}", native.describe());
    let vm = case.run_forkvm();
    assert_eq!(
        vm.status,
        139,
        "a guest SIGSEGV must exit 128+11\n{}",
        vm.describe()
    );
    assert_eq!(
        vm.stdout,
        native.stdout,
        "stdout written before the crash must arrive\n{}",
        vm.describe()
    );
    let err = vm.stderr_str();
    assert!(
        err.contains("forkvm: guest killed by SIGSEGV"),
        "{}",
        vm.describe()
    );
    // The crash report shows the faulting instruction: a store, `mov...`.
    assert!(
        err.lines().any(|l| l.to_ascii_lowercase().contains("mov")),
        "expected a disassembly line with the faulting mov\n{}",
        vm.describe()
    );
}

#[test]
fn null_write_glibc() {
    null_write("null_write.glibc");
}

#[test]
fn null_write_musl() {
    null_write("null_write.musl");
}

// ---------------------------------------------------------------------------------------
// Invalid executables
// ---------------------------------------------------------------------------------------

/// Runs `forkvm run PROGRAM`, which must fail cleanly: a non-zero exit code (not a signal,
/// not a guest-style 128+ status), and stderr naming the cause (one of `keywords`).
fn assert_rejected(prog: &Path, keywords: &[&str]) -> Run {
    let vm = Case::new(prog).limit(Duration::from_secs(30)).run_forkvm();
    assert!(
        vm.status != 0 && vm.status != 124 && vm.status < 128,
        "forkvm should refuse {} with an error exit code (not 0, 124 or 128+n)\n{}",
        prog.display(),
        vm.describe()
    );
    assert!(vm.stdout.is_empty(), "{}", vm.describe());
    assert_mentions(&vm, &vm.stderr, keywords, "stderr");
    vm
}

fn hello_bytes() -> Vec<u8> {
    std::fs::read(guest("hello.glibc")).expect("read hello.glibc")
}

#[test]
fn bad_elf_truncated() {
    let dir = scratch_dir("bad_elf_truncated");
    let p = dir.join("truncated");
    std::fs::write(&p, &hello_bytes()[..100]).expect("write");
    assert_rejected(&p, &["truncated", "elf", "too short", "too small"]);
}

#[test]
fn bad_elf_text_file() {
    let dir = scratch_dir("bad_elf_text_file");
    let p = dir.join("script.sh");
    // (A `#!` script runs its interpreter: see first_run.rs.)
    std::fs::write(&p, b"echo this is not an ELF file\n").expect("write");
    assert_rejected(&p, &["elf", "magic"]);
}

#[test]
fn bad_elf_aarch64() {
    let dir = scratch_dir("bad_elf_aarch64");
    let p = dir.join("aarch64");
    let mut b = hello_bytes();
    b[18..20].copy_from_slice(&183u16.to_le_bytes()); // e_machine = EM_AARCH64
    std::fs::write(&p, b).expect("write");
    assert_rejected(
        &p,
        &["aarch64", "machine", "x86-64", "x86_64", "architecture"],
    );
}

#[test]
fn bad_elf_empty_file() {
    let dir = scratch_dir("bad_elf_empty_file");
    let p = dir.join("empty");
    std::fs::write(&p, b"").expect("write");
    assert_rejected(&p, &["elf", "empty", "truncated", "too short", "too small"]);
}

#[test]
fn bad_elf_missing_file() {
    let dir = scratch_dir("bad_elf_missing_file");
    assert_rejected(
        &dir.join("does-not-exist"),
        &["no such file", "not found", "does-not-exist"],
    );
}

#[test]
fn bad_elf_directory() {
    let dir = scratch_dir("bad_elf_directory");
    assert_rejected(&dir, &["directory", "elf", "not a file", "regular"]);
}

/// A dynamically linked host program (coreutils), if there is one.
fn dynamic_program(name: &str) -> Option<PathBuf> {
    [format!("/bin/{name}"), format!("/usr/bin/{name}")]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

#[test]
fn dynamic_program_runs_with_its_libraries() {
    let Some(echo) = dynamic_program("echo") else {
        eprintln!("skipped: no /bin/echo on this machine");
        return;
    };
    common::check(
        &Case::new(echo)
            .args(["hello", "from a dynamic", "program"])
            .flags(["--allow-read", "/"]),
    );
}

#[test]
fn dynamic_program_without_its_libraries_fails_cleanly() {
    // The interpreter cannot open libc outside the --allow-read roots: an error exit and a
    // message, like ld.so's "error while loading shared libraries".
    let Some(t) = dynamic_program("true") else {
        eprintln!("skipped: no /bin/true on this machine");
        return;
    };
    // The system library roots are readable by default: opt out.
    let vm = Case::new(&t)
        .flags(["--no-default-allow"])
        .limit(Duration::from_secs(30))
        .run_forkvm();
    assert!(vm.status != 0 && vm.status < 128, "{}", vm.describe());
    assert_mentions(
        &vm,
        &vm.stderr,
        &["shared", "libc", "interp", "dynamic"],
        "stderr",
    );
}

/// Name resolution and user lookup work without the host's /etc: the guest
/// sees its own hosts (localhost), passwd and group (its uid has a name),
/// never the host's users; `--allow-read` of the real file shows that one.
/// (localhost did not resolve in Go, node or glibc programs.)
#[test]
fn the_guest_has_its_own_hosts_passwd_and_group() {
    const GETENT: &str = "/usr/bin/getent";
    if !Path::new(GETENT).exists() {
        return;
    }
    let getent = |args: &[&str], flags: &[&str]| {
        let vm = Case::new(GETENT)
            .args(args.iter().copied())
            .flags(flags.iter().copied())
            .run_forkvm();
        assert_eq!(vm.status, 0, "{}", vm.describe());
        vm.stdout_str().to_string()
    };
    assert!(getent(&["hosts", "localhost"], &[]).contains("localhost"));
    assert_eq!(
        getent(&["passwd", "1000"], &[]),
        "user:x:1000:1000:forkvm guest:/:/bin/sh\n"
    );
    assert_eq!(getent(&["group", "1000"], &[]), "user:x:1000:\n");
    // The guest's own host name (uname -n) resolves, to a loopback address,
    // as it does on a Debian system (Python's testHostnameRes skipped).
    let name = Case::new("/bin/uname").args(["-n"]).run_forkvm();
    let name = name.stdout_str().trim().to_string();
    assert!(!name.is_empty());
    let own = getent(&["hosts", &name], &[]);
    assert!(own.starts_with("127.") && own.contains(&name), "{own}");
    // The whole passwd is the guest's three users, none of the host's.
    let all = getent(&["passwd"], &[]);
    assert_eq!(all.lines().count(), 3, "{all}");
    let host = std::fs::read_to_string("/etc/passwd").expect("the host's passwd");
    let root = host.lines().next().expect("a first line");
    assert_eq!(
        getent(&["passwd", "0"], &["--allow-read", "/etc/passwd"]).trim_end(),
        root
    );
}
