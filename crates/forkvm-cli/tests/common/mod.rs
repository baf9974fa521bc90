//! Shared helpers for forkvm's integration tests.
//!
//! The guest programs live in `tests/guests/` and are built into `tests/guests/out/` by
//! `tests/guests/build.sh`, which [`guest`] runs once per test binary (it is quick when
//! everything is up to date). [`differential`] runs a program natively and under
//! `forkvm run` and asserts identical stdout, stderr and exit status.

#![allow(dead_code)]

pub mod http;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{mpsc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// The --allow-read roots a dynamically linked Debian program needs.
pub const LIBS: &[&str] = &[
    "--allow-read",
    "/lib",
    "--allow-read",
    "/usr/lib",
    "--allow-read",
    "/lib64",
    "--allow-read",
    "/etc/ld.so.cache",
];

/// Whether a host program a test needs is installed (else the test is skipped, loudly;
/// scripts/test.sh installs what the suite uses).
pub fn installed(path: &str) -> bool {
    let ok = Path::new(path).exists();
    if !ok {
        eprintln!("skipped: {path} is not installed (scripts/test.sh installs it)");
    }
    ok
}

/// How long any single process may run before the test gives up on it.
pub const WATCHDOG: Duration = Duration::from_secs(120);

/// The repository root (canonical: no `..`, no symlinks).
pub fn repo_root() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    p.canonicalize()
        .unwrap_or_else(|e| panic!("cannot resolve {}: {e}", p.display()))
}

/// `tests/guests/out`.
pub fn guests_out() -> PathBuf {
    repo_root().join("tests/guests/out")
}

/// The `forkvm` binary under test.
pub fn forkvm_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_forkvm"))
}

/// Runs `tests/guests/build.sh` once per test process; panics with its output on failure.
fn build_guests() {
    run_build_script("tests/guests/build.sh");
}

/// Runs a build script of the repository (relative path) once per test
/// process; panics with its output on failure.
pub fn run_build_script(rel: &str) {
    static BUILT: OnceLock<
        std::sync::Mutex<std::collections::HashMap<String, Result<(), String>>>,
    > = OnceLock::new();
    let map = BUILT.get_or_init(Default::default);
    let mut done = map.lock().unwrap_or_else(|e| e.into_inner());
    let result = done.entry(rel.to_string()).or_insert_with(|| {
        let script = repo_root().join(rel);
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} failed ({}); run it by hand to see why:\n{}{}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    });
    if let Err(e) = result {
        panic!("{rel} failed: {e}");
    }
}

/// Path of a built guest program, e.g. `guest("hello.musl")`; builds the guests first.
pub fn guest(name: &str) -> PathBuf {
    build_guests();
    let p = guests_out().join(name);
    assert!(
        p.is_file(),
        "guest program {} is missing; run tests/guests/build.sh",
        p.display()
    );
    p
}

/// A fresh, empty scratch directory for one test (under Cargo's per-target tmp dir).
pub fn scratch_dir(test_name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("forkvm-tests")
        .join(format!("{test_name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir.canonicalize()
        .unwrap_or_else(|e| panic!("cannot resolve {}: {e}", dir.display()))
}

/// The outcome of one process run.
#[derive(Debug, Clone)]
pub struct Run {
    /// Exit status the way a shell reports it: the exit code, or 128 + signal number.
    pub status: i32,
    /// The signal that killed the process, if any.
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub elapsed: Duration,
    /// A printable form of the command line, for messages.
    pub command: String,
}

impl Run {
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// A multi-line description of the run, for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "command: {}\nstatus: {}{}\nelapsed: {:?}\n--- stdout ({} bytes):\n{}\n--- stderr ({} bytes):\n{}\n---",
            self.command,
            self.status,
            match self.signal {
                Some(s) => format!(" (killed by signal {s})"),
                None => String::new(),
            },
            self.elapsed,
            self.stdout.len(),
            clip(&self.stdout),
            self.stderr.len(),
            clip(&self.stderr),
        )
    }
}

/// Lossy text of at most a few KiB, for messages.
fn clip(bytes: &[u8]) -> String {
    const MAX: usize = 6000;
    let s = String::from_utf8_lossy(bytes);
    if s.len() <= MAX {
        s.into_owned()
    } else {
        let mut end = MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}\n[... {} more bytes]", &s[..end], s.len() - end)
    }
}

fn shell_status(st: ExitStatus) -> (i32, Option<i32>) {
    match (st.code(), st.signal()) {
        (Some(c), _) => (c, None),
        (None, Some(s)) => (128 + s, Some(s)),
        (None, None) => (-1, None),
    }
}

fn describe_command(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'') {
            let _ = write!(s, " '{}'", a.replace('\'', "'\\''"));
        } else {
            let _ = write!(s, " {a}");
        }
    }
    s
}

/// Spawns a thread that reads `r` to the end and sends the bytes on a channel.
fn collect(mut r: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        let _ = tx.send(v);
    });
    rx
}

/// Runs `cmd` with `stdin` as its input, collecting stdout/stderr. The process gets its own
/// process group; if it runs longer than `limit` the whole group is killed and the test
/// panics.
pub fn run_cmd(mut cmd: Command, stdin: &[u8], limit: Duration) -> Run {
    let command = describe_command(&cmd);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"));

    let mut child_in = child.stdin.take().expect("stdin is piped");
    let input = stdin.to_vec();
    // Errors (EPIPE when the program does not read its input) are fine.
    thread::spawn(move || {
        let _ = child_in.write_all(&input);
    });
    let out_rx = collect(child.stdout.take().expect("stdout is piped"));
    let err_rx = collect(child.stderr.take().expect("stderr is piped"));

    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => panic!("waiting for `{command}`: {e}"),
        }
        if start.elapsed() > limit {
            timed_out = true;
            kill_group(&child);
            break child.wait().expect("wait after kill");
        }
        thread::sleep(Duration::from_millis(5));
    };
    let elapsed = start.elapsed();
    // Output normally ends with the process; something left behind holding the pipes
    // (a leaked child process) must not hang the test.
    let grace = Duration::from_secs(10);
    let mut leaked = false;
    let mut take = |rx: mpsc::Receiver<Vec<u8>>| {
        rx.recv_timeout(grace).unwrap_or_else(|_| {
            leaked = true;
            Vec::new()
        })
    };
    let stdout = take(out_rx);
    let stderr = take(err_rx);
    if leaked {
        kill_group(&child);
    }
    let (status, signal) = shell_status(status);
    let run = Run {
        status,
        signal,
        stdout,
        stderr,
        elapsed,
        command,
    };
    if timed_out {
        panic!(
            "the test gave up on a process after {limit:?} and killed it\n{}",
            run.describe()
        );
    }
    if leaked {
        panic!(
            "stdout/stderr stayed open {grace:?} after the process exited (a leftover child process?)\n{}",
            run.describe()
        );
    }
    run
}

/// SIGKILL to the child's process group (it is the group leader, see [`run_cmd`]).
fn kill_group(child: &std::process::Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory is involved.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

/// What to run, natively and/or under forkvm.
#[derive(Debug, Clone)]
pub struct Case {
    pub prog: PathBuf,
    pub args: Vec<OsString>,
    /// Flags for `forkvm run` (before PROGRAM). `--env K=V` and `--cwd DIR` are also
    /// applied to the native run.
    pub flags: Vec<OsString>,
    pub stdin: Vec<u8>,
    /// Native only: an address-space limit (RLIMIT_AS) in bytes, standing in for `--memory`.
    pub native_address_space_limit: Option<u64>,
    /// Applied to stdout and stderr of both runs before comparing.
    pub normalize: Option<fn(&str) -> String>,
    pub limit: Duration,
}

impl Case {
    pub fn new(prog: impl Into<PathBuf>) -> Self {
        Case {
            prog: prog.into(),
            args: Vec::new(),
            flags: Vec::new(),
            stdin: Vec::new(),
            native_address_space_limit: None,
            normalize: None,
            limit: WATCHDOG,
        }
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn flags<I, S>(mut self, flags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.flags.extend(flags.into_iter().map(Into::into));
        self
    }

    pub fn stdin(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.stdin = data.into();
        self
    }

    pub fn native_address_space_limit(mut self, bytes: u64) -> Self {
        self.native_address_space_limit = Some(bytes);
        self
    }

    pub fn normalize(mut self, f: fn(&str) -> String) -> Self {
        self.normalize = Some(f);
        self
    }

    pub fn limit(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }

    /// `--env` values and `--cwd` from the forkvm flags.
    fn native_env_and_cwd(&self) -> (Vec<(OsString, OsString)>, PathBuf) {
        let mut env = Vec::new();
        let mut cwd = PathBuf::from("/");
        let mut it = self.flags.iter();
        while let Some(f) = it.next() {
            let f_str = f.to_string_lossy();
            let (name, inline) = match f_str.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(OsString::from(v))),
                _ => (f_str.to_string(), None),
            };
            let takes_value = matches!(
                name.as_str(),
                "--env" | "--cwd" | "--allow-read" | "--timeout" | "--memory"
            );
            let value = if takes_value {
                inline.or_else(|| it.next().cloned())
            } else {
                None
            };
            match (name.as_str(), value) {
                ("--env", Some(v)) => {
                    let v = v.to_string_lossy().into_owned();
                    let (k, val) = v.split_once('=').unwrap_or((v.as_str(), ""));
                    env.push((OsString::from(k), OsString::from(val)));
                }
                ("--cwd", Some(v)) => cwd = PathBuf::from(v),
                _ => {}
            }
        }
        (env, cwd)
    }

    /// Runs the program natively: empty environment except the `--env` values, cwd `/`
    /// unless `--cwd`, no core dumps.
    pub fn run_native(&self) -> Run {
        let (env, cwd) = self.native_env_and_cwd();
        let mut cmd = if env.is_empty() {
            Command::new(&self.prog)
        } else {
            // std's Command sorts the environment; env(1) keeps the --env order, as forkvm must.
            let mut c = Command::new("env");
            c.arg("-i");
            for (k, v) in &env {
                let mut kv = k.clone();
                kv.push("=");
                kv.push(v);
                c.arg(kv);
            }
            c.arg(&self.prog);
            c
        };
        cmd.args(&self.args).env_clear().current_dir(cwd);
        let as_limit = self.native_address_space_limit;
        // SAFETY: the closure runs in the forked child before exec and only calls
        // setrlimit(2) and signal(2), which are async-signal-safe; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                let no_core = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::setrlimit(libc::RLIMIT_CORE, &no_core) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // forkvm's guest starts with every signal at its default; a
                // test run from a shell's background job inherits SIGINT
                // and SIGQUIT ignored (exec keeps only ignored ones).
                for sig in 1..32 {
                    if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                        libc::signal(sig, libc::SIG_DFL);
                    }
                }
                if let Some(bytes) = as_limit {
                    let lim = libc::rlimit {
                        rlim_cur: bytes,
                        rlim_max: bytes,
                    };
                    if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        run_cmd(cmd, &self.stdin, self.limit)
    }

    /// Runs `forkvm run [flags] -- PROGRAM [ARGS...]`. Panics if forkvm itself was killed
    /// by a signal: the host process must always exit normally.
    pub fn run_forkvm(&self) -> Run {
        let mut cmd = Command::new(forkvm_bin());
        cmd.arg("run")
            .args(&self.flags)
            .arg("--")
            .arg(&self.prog)
            .args(&self.args)
            // Host-side logging would land on stderr and spoil the comparison.
            .env_remove("RUST_LOG");
        let run = run_cmd(cmd, &self.stdin, self.limit);
        assert_host_exited_normally(&run);
        run
    }
}

/// Asserts that the forkvm host process exited (rather than being killed by a signal).
pub fn assert_host_exited_normally(run: &Run) {
    if let Some(sig) = run.signal {
        panic!(
            "the forkvm host process itself was killed by signal {sig}; it must always exit normally\n{}",
            run.describe()
        );
    }
}

/// Runs `forkvm` with arbitrary arguments (not `run ... --`).
pub fn forkvm(args: &[&str]) -> Run {
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(args).env_remove("RUST_LOG");
    let run = run_cmd(cmd, b"", WATCHDOG);
    assert_host_exited_normally(&run);
    run
}

/// Where two byte strings first differ, as "line N: native `..` / forkvm `..`".
fn first_difference(a: &[u8], b: &[u8]) -> String {
    let a = String::from_utf8_lossy(a);
    let b = String::from_utf8_lossy(b);
    let mut la = a.split_inclusive('\n');
    let mut lb = b.split_inclusive('\n');
    let mut n = 1;
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => n += 1,
            (None, None) => return "no difference".into(),
            (x, y) => {
                return format!(
                    "first difference at line {n}:\n  native: {:?}\n  forkvm: {:?}",
                    x.unwrap_or("<end of output>"),
                    y.unwrap_or("<end of output>")
                )
            }
        }
    }
}

/// Panics with both sides unless stdout, stderr and status are identical.
pub fn assert_same(case: &Case, native: &Run, vm: &Run) {
    let norm = |b: &[u8]| -> Vec<u8> {
        match case.normalize {
            Some(f) => f(&String::from_utf8_lossy(b)).into_bytes(),
            None => b.to_vec(),
        }
    };
    let (n_out, v_out) = (norm(&native.stdout), norm(&vm.stdout));
    let (n_err, v_err) = (norm(&native.stderr), norm(&vm.stderr));
    let mut problems = Vec::new();
    if native.status != vm.status {
        problems.push(format!(
            "exit status differs: native {}, forkvm {}",
            native.status, vm.status
        ));
    }
    if n_out != v_out {
        problems.push(format!(
            "stdout differs; {}",
            first_difference(&n_out, &v_out)
        ));
    }
    if n_err != v_err {
        problems.push(format!(
            "stderr differs; {}",
            first_difference(&n_err, &v_err)
        ));
    }
    if !problems.is_empty() {
        panic!(
            "native and forkvm runs differ:\n- {}\n\n=== native ===\n{}\n\n=== forkvm ===\n{}",
            problems.join("\n- "),
            native.describe(),
            vm.describe()
        );
    }
}

/// Runs `case` natively and under forkvm and asserts identical results; returns both runs.
pub fn check(case: &Case) -> (Run, Run) {
    let native = case.run_native();
    let vm = case.run_forkvm();
    assert_same(case, &native, &vm);
    (native, vm)
}

/// Runs guest `name`, built with glibc and with musl, natively and in
/// forkvm, and compares the runs.
pub fn glibc_and_musl(name: &str) {
    for libc in ["glibc", "musl"] {
        check(&Case::new(guest(&format!("{name}.{libc}"))));
    }
}

/// As [`glibc_and_musl`] for a guest that works in the writable directory
/// it is given as its argument (a fresh one for each run).
pub fn glibc_and_musl_in_a_dir(name: &str) {
    for libc in ["glibc", "musl"] {
        let dir = scratch_dir(&format!("{name}-{libc}"));
        let d = dir.to_str().expect("utf-8 path");
        check(
            &Case::new(guest(&format!("{name}.{libc}")))
                .args([d])
                .flags(["--allow-write", d]),
        );
    }
}

/// `differential("hello.musl", &[], &[])`: the guest program `prog` (a name in
/// tests/guests/out) natively vs `forkvm run [flags] prog args`.
pub fn differential(prog: &str, args: &[&str], flags: &[&str]) -> (Run, Run) {
    check(
        &Case::new(guest(prog))
            .args(args.iter().copied())
            .flags(flags.iter().copied()),
    )
}

/// Asserts that `haystack` contains one of `needles`, ignoring ASCII case.
pub fn assert_mentions(run: &Run, haystack: &[u8], needles: &[&str], what: &str) {
    let h = String::from_utf8_lossy(haystack).to_ascii_lowercase();
    if !needles.iter().any(|n| h.contains(&n.to_ascii_lowercase())) {
        panic!(
            "expected {what} to mention one of {needles:?}\n{}",
            run.describe()
        );
    }
}
