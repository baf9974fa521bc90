//! `forkvm bench`: each figure beside a floor measured in the same run, as a
//! ratio. Medians and p99 over many iterations; the machine is shared and
//! noisy, so compare ratios, not absolute numbers.

use anyhow::Context;
use forkvm::builtin;
use forkvm::floors;
use forkvm::hypervisor::{Hypervisor, SyscallPath};
use forkvm::machine::{Config, Machine, Outcome};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Options of `forkvm bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Iterations for each in-process figure (process spawns use a third).
    #[arg(long, default_value_t = 300)]
    pub iterations: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The hello-world program to measure (default: tests/guests/out/hello.musl if built, else the built-in one).
    #[arg(long)]
    pub hello: Option<PathBuf>,
}

#[derive(Clone)]
struct Stats {
    median: f64,
    p99: f64,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    if v.is_empty() {
        return Stats {
            median: f64::NAN,
            p99: f64::NAN,
        };
    }
    let p99 = ((v.len() * 99).div_ceil(100)).saturating_sub(1);
    Stats {
        median: us(v[v.len() / 2]),
        p99: us(v[p99.min(v.len() - 1)]),
    }
}

struct Row {
    name: &'static str,
    what: String,
    s: Stats,
    floor_name: &'static str,
    floor: f64,
}

fn hello_program(args: &BenchArgs) -> anyhow::Result<(PathBuf, Vec<u8>)> {
    let candidates = [
        args.hello.clone(),
        Some(PathBuf::from("tests/guests/out/hello.musl")),
    ];
    for c in candidates.into_iter().flatten() {
        if c.exists() {
            let bytes = std::fs::read(&c).with_context(|| format!("reading {}", c.display()))?;
            return Ok((c, bytes));
        }
    }
    let bytes = builtin::hello()?;
    let path = std::env::temp_dir().join(format!("forkvm-bench-hello-{}", std::process::id()));
    std::fs::write(&path, &bytes)?;
    let mut perm = std::fs::metadata(&path)?.permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&path, perm)?;
    Ok((path, bytes))
}

fn config() -> Config {
    Config {
        memory: 64 << 20,
        argv: vec!["hello".into()],
        ..Config::default()
    }
}

fn spawn_times(n: usize, mut cmd: impl FnMut() -> Command) -> anyhow::Result<Vec<Duration>> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let st = cmd()
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("spawning")?;
        v.push(t.elapsed());
        anyhow::ensure!(st.success(), "benchmark process failed: {st}");
    }
    Ok(v)
}

/// Debian's python3, for the start-up rows.
const PYTHON: &str = "/usr/bin/python3";

/// The shell and the program its loop runs, for the child-process row.
const SHELL: &str = "/bin/sh";
const TRUE: &str = "/bin/true";
/// A shell running a program 20 times: a fork, an exec and a wait each.
const SHELL_LOOP: &str =
    "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do /bin/true; done";

/// Wall times of host program `prog` with `args` under `forkvm run`
/// (with `flags`) and natively (None when `prog` is not installed).
fn host_program_rows(
    me: &std::path::Path,
    n: usize,
    flags: &[&str],
    prog: &str,
    args: &[&str],
) -> anyhow::Result<Option<(Stats, Stats)>> {
    if !std::path::Path::new(prog).exists() {
        return Ok(None);
    }
    let vm = stats(spawn_times(n, || {
        let mut c = Command::new(me);
        c.arg("run").args(flags).arg("--").arg(prog).args(args);
        c
    })?);
    let native = stats(spawn_times(n, || {
        let mut c = Command::new(prog);
        c.args(args);
        c
    })?);
    Ok(Some((vm, native)))
}

/// The heap of `guest_fork_heap`'s parent: large enough that copying it is
/// most of the fork.
const FORK_HEAP_MIB: u32 = 32;

/// The guest's own measure of fork + _exit + waitpid, one mean of 20 rounds
/// per `forkvm run tests/guests/out/forkloop.musl 20 HEAP` (None when not
/// built); with `native`, the same program run as a host process instead.
/// `heap_mib`: memory the parent fills first, which each fork must give the
/// child.
fn guest_fork_rows(
    me: &std::path::Path,
    samples: usize,
    heap_mib: u32,
    native: bool,
) -> anyhow::Result<Option<Stats>> {
    let heap = heap_mib.to_string();
    guest_program_rows(
        me,
        samples,
        "forkloop",
        &["20", &heap],
        "fork+exit+wait ",
        native,
    )
}

/// One figure a guest program prints itself (`PREFIX<µs> ...` on stdout),
/// per `forkvm run tests/guests/out/NAME.musl ARGS` (or, with `native`, a
/// host run of the same program); None when it was not built.
fn guest_program_rows(
    me: &std::path::Path,
    samples: usize,
    name: &str,
    args: &[&str],
    prefix: &str,
    native: bool,
) -> anyhow::Result<Option<Stats>> {
    let prog = PathBuf::from(format!("tests/guests/out/{name}.musl"));
    if !prog.exists() {
        return Ok(None);
    }
    let mut v = Vec::with_capacity(samples);
    for _ in 0..samples {
        let mut cmd = if native {
            Command::new(&prog)
        } else {
            let mut c = Command::new(me);
            c.arg("run").arg(&prog);
            c
        };
        let out = cmd
            .args(args)
            .stderr(Stdio::null())
            .output()
            .with_context(|| format!("spawning {name}"))?;
        anyhow::ensure!(out.status.success(), "{name} failed: {}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        let us = text
            .strip_prefix(prefix)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|t| t.parse::<f64>().ok())
            .with_context(|| format!("{name} said {text:?}"))?;
        v.push(Duration::from_secs_f64(us / 1e6));
    }
    Ok(Some(stats(v)))
}

/// Per-syscall cost: (run of N getppid calls - run of 0) / N, per sample,
/// with the calls answered by `path` (the host, or the in-guest dispatcher).
fn syscall_cost(samples: usize, path: SyscallPath, n: u32) -> anyhow::Result<Vec<Duration>> {
    loop_cost(samples, path, n, |k| Ok(builtin::syscall_loop(k)?))
}

/// Per-iteration cost of a built-in loop program: (run of `n` - run of 0) / n.
fn loop_cost(
    samples: usize,
    path: SyscallPath,
    n: u32,
    program: impl Fn(u32) -> anyhow::Result<Vec<u8>>,
) -> anyhow::Result<Vec<Duration>> {
    loop_cost_with(samples, path, n, &[], program)
}

/// [`loop_cost`] for a program that reads the files under `allow_read`.
fn loop_cost_with(
    samples: usize,
    path: SyscallPath,
    n: u32,
    allow_read: &[std::path::PathBuf],
    program: impl Fn(u32) -> anyhow::Result<Vec<u8>>,
) -> anyhow::Result<Vec<Duration>> {
    let loop_n = program(n)?;
    let loop_0 = program(0)?;
    let run = |img: &[u8]| -> anyhow::Result<Duration> {
        let cfg = Config {
            syscalls: path,
            allow_read: allow_read.to_vec(),
            ..config()
        };
        let mut m = Machine::new(img, "/loop", cfg)?;
        let t = Instant::now();
        let o = m.run()?;
        let d = t.elapsed();
        anyhow::ensure!(
            matches!(o, Outcome::Exited(0)),
            "syscall loop failed: {o:?}"
        );
        Ok(d)
    };
    let mut v = Vec::with_capacity(samples);
    for _ in 0..samples {
        let full = run(&loop_n)?;
        let empty = run(&loop_0)?;
        v.push(full.saturating_sub(empty) / n);
    }
    Ok(v)
}

/// Runs the benchmark and prints the table (or JSON).
pub fn main(args: BenchArgs) -> anyhow::Result<()> {
    let n = args.iterations.max(10);
    // Before anything grows this process: fork() cost follows its mappings.
    let native_fork = stats(
        (0..(n / 3).max(10))
            .map(|_| host_fork())
            .collect::<anyhow::Result<_>>()?,
    );
    let hv = Hypervisor::get()?;
    let (hello_path, hello) = hello_program(&args)?;
    let hello_name = hello_path.display().to_string();

    // Floors.
    let ioctl = stats(floors::vcpu_ioctl(n)?);
    let exit = stats(floors::exit_round_trip(n)?);
    let trap = stats(floors::user_trap_round_trip(n)?);
    let native_sys = stats(floors::native_syscall(n));
    let create = stats(floors::vm_create(n)?);

    // Figures. The guest's stdout is the host's: silence it while hello runs in-process.
    let quiet = Silence::stdout()?;
    let mut construct = Vec::with_capacity(n);
    let mut init = Vec::with_capacity(n);
    let mut both = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let mut m = Machine::new(&hello, "/hello", config())?;
        let built = t.elapsed();
        let t2 = Instant::now();
        let outcome = m.run()?;
        let ran = t2.elapsed();
        anyhow::ensure!(
            matches!(outcome, Outcome::Exited(0)),
            "{hello_name} did not exit 0: {outcome:?}"
        );
        construct.push(built);
        init.push(ran);
        both.push(built + ran);
    }
    drop(quiet);
    let syscall = stats(syscall_cost((n / 10).max(10), SyscallPath::Exit, 200)?);
    let syscall_fast = stats(syscall_cost((n / 10).max(10), SyscallPath::Fast, 20_000)?);
    let vdso_clock = stats(loop_cost(
        (n / 10).max(10),
        SyscallPath::Fast,
        200_000,
        |k| Ok(builtin::vdso_clock_loop(k)?),
    )?);
    let native_clock = stats(floors::native_clock_gettime(n));
    let getrandom = |path, k| {
        loop_cost((n / 10).max(10), path, k, |k| {
            Ok(builtin::getrandom_loop(k)?)
        })
    };
    let getrandom_fast = stats(getrandom(SyscallPath::Fast, 20_000)?);
    let getrandom_exit = stats(getrandom(SyscallPath::Exit, 200)?);
    let native_getrandom = stats(floors::native_getrandom(n));
    let lstar_floor = stats(floors::guest_syscall_round_trip((n / 10).max(10))?);
    // Host-answered file calls: posted to the poller (fast, PVM) or by an exit.
    let file_calls = |path, k, file: &std::path::Path, flags, nr, len| {
        let name = file.display().to_string();
        loop_cost_with((n / 10).max(10), path, k, &[file.to_path_buf()], |k| {
            Ok(builtin::file_call_loop(k, &name, flags, nr, len)?)
        })
    };
    let null = std::path::Path::new("/dev/null");
    let null_write_fast = stats(file_calls(SyscallPath::Fast, 2_000, null, 1, 1, 1)?);
    let null_write_exit = stats(file_calls(SyscallPath::Exit, 200, null, 1, 1, 1)?);
    let native_null_write = stats(floors::native_null_write(n)?);
    // The guest starts in /: the file by its absolute path.
    let file = std::fs::canonicalize(&hello_path)?;
    let pread_fast = stats(file_calls(SyscallPath::Fast, 2_000, &file, 0, 17, 64)?);
    let pread_exit = stats(file_calls(SyscallPath::Exit, 200, &file, 0, 17, 64)?);
    let native_pread = stats(floors::native_pread(n, &file)?);
    // A path lookup as a program's imports make them: a file in an allowed
    // directory, by its absolute path.
    let stat_calls = |path, k| {
        let dir = file.parent().unwrap_or(&file).to_path_buf();
        let name = file.display().to_string();
        loop_cost_with((n / 10).max(10), path, k, &[dir], |k| {
            Ok(builtin::stat_loop(k, &name)?)
        })
    };
    let stat_fast = stats(stat_calls(SyscallPath::Fast, 2_000)?);
    let stat_exit = stats(stat_calls(SyscallPath::Exit, 200)?);
    let native_stat = stats(floors::native_stat(n, &file)?);

    let life = lifecycle(n, &args, exit.median, create.median)?;

    let spawns = (n / 3).max(10);
    let me = std::env::current_exe()?;
    let forkvm_run = stats(spawn_times(spawns, || {
        let mut c = Command::new(&me);
        c.arg("run").arg(&hello_path);
        c
    })?);
    let native_run = stats(spawn_times(spawns, || Command::new(&hello_path))?);
    // A real interpreter's start-up, where file system calls and page
    // faults dominate (issue 9's `python3 -c pass`), when Debian's is here.
    let python = host_program_rows(&me, (n / 10).max(5), &[], PYTHON, &["-c", "pass"])?;
    // Child processes as a shell script makes them: fork, exec, wait.
    let shell = host_program_rows(
        &me,
        (n / 20).max(3),
        &["--allow-read", TRUE],
        SHELL,
        &["-c", SHELL_LOOP],
    )?;

    let mut fork_heap_native = None;
    let mut pipe_native = None;
    let mut rows = vec![
        Row {
            name: "vm_construct",
            what: format!("VM construct (create VM, load {})", short(&hello_path)),
            s: stats(construct),
            floor_name: "vm_create",
            floor: create.median,
        },
        Row {
            name: "init",
            what: "init: run hello to exit".into(),
            s: stats(init),
            floor_name: "user_trap",
            floor: trap.median,
        },
        Row {
            name: "construct_init",
            what: "construct + init".into(),
            s: stats(both),
            floor_name: "vm_create",
            floor: create.median,
        },
        Row {
            name: "syscall",
            what: "host-handled syscall (getppid, --syscalls exit)".into(),
            s: syscall,
            floor_name: "user_trap",
            floor: trap.median,
        },
        Row {
            name: "vdso_clock_gettime",
            what: "clock_gettime(CLOCK_MONOTONIC) through forkvm's vDSO".into(),
            s: vdso_clock,
            floor_name: "native_clock_gettime",
            floor: native_clock.median,
        },
        Row {
            name: "syscall_in_guest",
            what: "in-guest syscall (getppid, --syscalls fast)".into(),
            s: syscall_fast.clone(),
            floor_name: "native_syscall",
            floor: native_sys.median,
        },
        Row {
            name: "syscall_in_guest_vs_lstar",
            what: "in-guest syscall, against the bare syscall-to-LSTAR trip".into(),
            s: syscall_fast,
            floor_name: "guest_syscall",
            floor: lstar_floor.median,
        },
        Row {
            name: "getrandom_in_guest",
            what: "getrandom(16 B) answered in the guest (RDRAND)".into(),
            s: getrandom_fast,
            floor_name: "native_getrandom",
            floor: native_getrandom.median,
        },
        Row {
            name: "getrandom_exit",
            what: "getrandom(16 B) answered by the host (--syscalls exit)".into(),
            s: getrandom_exit,
            floor_name: "native_getrandom",
            floor: native_getrandom.median,
        },
        Row {
            name: "null_write_exitless",
            what: "write(/dev/null, 1 B) posted to the host poller (--syscalls fast)".into(),
            s: null_write_fast,
            floor_name: "native_null_write",
            floor: native_null_write.median,
        },
        Row {
            name: "null_write_exit",
            what: "write(/dev/null, 1 B) answered through an exit (--syscalls exit)".into(),
            s: null_write_exit,
            floor_name: "native_null_write",
            floor: native_null_write.median,
        },
        Row {
            name: "pread_exitless",
            what: "pread(64 B of a file) posted to the host poller (--syscalls fast)".into(),
            s: pread_fast,
            floor_name: "native_pread",
            floor: native_pread.median,
        },
        Row {
            name: "pread_exit",
            what: "pread(64 B of a file) answered through an exit (--syscalls exit)".into(),
            s: pread_exit,
            floor_name: "native_pread",
            floor: native_pread.median,
        },
        Row {
            name: "stat_exitless",
            what:
                "stat(a file in an allowed directory) posted to the host poller (--syscalls fast)"
                    .into(),
            s: stat_fast,
            floor_name: "native_stat",
            floor: native_stat.median,
        },
        Row {
            name: "stat_exit",
            what: "stat(a file in an allowed directory) answered through an exit (--syscalls exit)"
                .into(),
            s: stat_exit,
            floor_name: "native_stat",
            floor: native_stat.median,
        },
        Row {
            name: "run_wall",
            what: "`forkvm run hello` wall time".into(),
            s: forkvm_run,
            floor_name: "native_run",
            floor: native_run.median,
        },
    ];
    rows.extend(life.rows);
    if let Some((vm, native)) = &python {
        rows.push(Row {
            name: "python_pass_wall",
            what: format!("`forkvm run {PYTHON} -c pass` wall time"),
            s: vm.clone(),
            floor_name: "native_python",
            floor: native.median,
        });
    }
    if let Some((vm, native)) = &shell {
        rows.push(Row {
            name: "shell_loop_wall",
            what: format!("`forkvm run {SHELL} -c` running {TRUE} 20 times (fork, exec, wait)"),
            s: vm.clone(),
            floor_name: "native_shell_loop",
            floor: native.median,
        });
    }
    if let Some(s) = guest_fork_rows(&me, (n / 10).max(5), 0, false)? {
        rows.push(Row {
            name: "guest_fork_wait",
            what: "fork + _exit + waitpid inside `forkvm run` (forkloop.musl)".into(),
            s,
            floor_name: "native_fork",
            floor: native_fork.median,
        });
    }
    let heap_samples = (n / 20).max(3);
    if let (Some(s), Some(native)) = (
        guest_fork_rows(&me, heap_samples, FORK_HEAP_MIB, false)?,
        guest_fork_rows(&me, heap_samples, FORK_HEAP_MIB, true)?,
    ) {
        rows.push(Row {
            name: "guest_fork_heap",
            what: format!(
                "fork + _exit + waitpid of a parent with a {FORK_HEAP_MIB} MiB heap (forkloop.musl 20 {FORK_HEAP_MIB})"
            ),
            s,
            floor_name: "native_fork_heap",
            floor: native.median,
        });
        fork_heap_native = Some(native);
    }
    let pipe_samples = (n / 20).max(3);
    let pingpong = |native| {
        guest_program_rows(
            &me,
            pipe_samples,
            "pipe_pingpong",
            &["200"],
            "pipe round trip ",
            native,
        )
    };
    if let (Some(s), Some(native)) = (pingpong(false)?, pingpong(true)?) {
        rows.push(Row {
            name: "guest_pipe_round_trip",
            what:
                "one byte there and back between two processes over pipes (pipe_pingpong.musl 200)"
                    .into(),
            s,
            floor_name: "native_pipe_round_trip",
            floor: native.median,
        });
        pipe_native = Some(native);
    }
    let mut floor_rows = vec![
        ("vcpu_ioctl", "vCPU ioctl (KVM_GET_REGS)", &ioctl),
        ("exit", "bare KVM exit round trip (CPL0 out)", &exit),
        (
            "user_trap",
            "cheapest ring-3-to-host round trip (int3 -> IDT -> out -> iretq)",
            &trap,
        ),
        ("native_syscall", "native syscall (getppid)", &native_sys),
        (
            "guest_syscall",
            "guest `syscall` to an LSTAR stub that returns at once (no exit)",
            &lstar_floor,
        ),
        (
            "native_clock_gettime",
            "native clock_gettime(CLOCK_MONOTONIC) (the host's vDSO)",
            &native_clock,
        ),
        (
            "vm_create",
            "VM create + setup (KVM_CREATE_VM, slot, vCPU, CPUID, regs)",
            &create,
        ),
        ("native_run", "native `./hello` wall time", &native_run),
        (
            "native_getrandom",
            "native getrandom(16 B)",
            &native_getrandom,
        ),
        (
            "native_null_write",
            "native write(/dev/null, 1 B)",
            &native_null_write,
        ),
        (
            "native_pread",
            "native pread(64 B of a file)",
            &native_pread,
        ),
        ("native_stat", "native stat(a file)", &native_stat),
        (
            "native_call",
            "native function call (same no-op, on the host)",
            &life.native_call,
        ),
        (
            "native_fork",
            "fork()+exit+wait of a host process",
            &native_fork,
        ),
    ];
    if let Some(native) = &fork_heap_native {
        floor_rows.push((
            "native_fork_heap",
            "forkloop.musl with the same heap, run natively",
            native,
        ));
    }
    if let Some(native) = &pipe_native {
        floor_rows.push((
            "native_pipe_round_trip",
            "pipe_pingpong.musl run natively",
            native,
        ));
    }
    if let Some((_, native)) = &python {
        floor_rows.push((
            "native_python",
            "native `python3 -c pass` wall time",
            native,
        ));
    }
    if let Some((_, native)) = &shell {
        floor_rows.push((
            "native_shell_loop",
            "the same shell loop, run natively",
            native,
        ));
    }

    if args.json {
        // Figures that have no floor (memory per fork) carry null there.
        let num = |v: f64| v.is_finite().then_some((v * 1000.0).round() / 1000.0);
        let out = serde_json::json!({
            "machine": {
                "platform": hv.platform.to_string(),
                "kernel": kernel_release(),
                "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
                "iterations": n,
                "hello": hello_name,
            },
            "floors": floor_rows.iter().map(|(name, _, s)| serde_json::json!({
                "name": name,
                "median_us": num(s.median),
                "p99_us": num(s.p99),
            })).collect::<Vec<_>>(),
            "rows": rows.iter().map(|r| serde_json::json!({
                "name": r.name,
                "median_us": num(r.s.median),
                "p99_us": num(r.s.p99),
                "floor_name": r.floor_name,
                "floor_us": num(r.floor),
                "ratio": num(r.s.median / r.floor),
            })).collect::<Vec<_>>(),
        });
        println!("{out}");
        return Ok(());
    }

    println!(
        "forkvm bench: platform {}, kernel {}, {} iterations (medians; p99 in brackets)\n",
        hv.platform,
        kernel_release(),
        n
    );
    println!("floors (measured now):");
    for (_, what, s) in &floor_rows {
        println!("  {what:<66} {:>10.3} µs  [{:.3}]", s.median, s.p99);
    }
    println!("\nfigures:");
    println!(
        "  {:<44} {:>11} {:>11}   {:<16} {:>10} {:>7}",
        "", "median", "p99", "floor", "floor", "ratio"
    );
    for r in &rows {
        if r.floor_name == "-" {
            println!("  {:<44} {:>8.0} KiB", r.what, r.s.median);
            continue;
        }
        println!(
            "  {:<44} {:>8.2} µs {:>8.2} µs   {:<16} {:>7.2} µs {:>6.2}x",
            r.what,
            r.s.median,
            r.s.p99,
            r.floor_name,
            r.floor,
            r.s.median / r.floor
        );
    }
    Ok(())
}

fn short(p: &Path) -> String {
    p.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

struct Lifecycle {
    rows: Vec<Row>,
    native_call: Stats,
}

/// Points the process's stdout at /dev/null until dropped.
struct Silence {
    saved: std::os::fd::OwnedFd,
}

impl Silence {
    fn stdout() -> anyhow::Result<Self> {
        use std::os::fd::{AsRawFd, FromRawFd};
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
        // SAFETY: dup of fd 1, which is open for the whole process.
        let saved = unsafe { libc::dup(1) };
        anyhow::ensure!(saved >= 0, "dup(1) failed");
        // SAFETY: `saved` is a fresh fd we own from here on.
        let saved = unsafe { std::os::fd::OwnedFd::from_raw_fd(saved) };
        // SAFETY: replaces fd 1 with /dev/null; both fds are valid.
        anyhow::ensure!(
            unsafe { libc::dup2(null.as_raw_fd(), 1) } == 1,
            "dup2 failed"
        );
        Ok(Self { saved })
    }
}

impl Drop for Silence {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: restores the saved stdout onto fd 1.
        unsafe { libc::dup2(self.saved.as_raw_fd(), 1) };
    }
}

/// A guest program for the lifecycle rows: image, name, and the addresses
/// of `noop` and `write_pages` when it has no symbol table.
struct Callee {
    image: Vec<u8>,
    name: String,
    addrs: Option<(u64, u64)>,
}

/// A guest with `noop` and `write_pages(n)`: the musl API demo if built, else the built-in one.
fn callee() -> anyhow::Result<Callee> {
    let built = PathBuf::from("tests/guests/out/api_demo.musl");
    if built.exists() {
        return Ok(Callee {
            image: std::fs::read(&built)?,
            name: built.display().to_string(),
            addrs: None,
        });
    }
    let c = builtin::callee()?;
    Ok(Callee {
        image: c.image,
        name: "built-in callee".into(),
        addrs: Some((c.noop, c.write_pages)),
    })
}

fn lifecycle(
    n: usize,
    args: &BenchArgs,
    exit_floor: f64,
    create_floor: f64,
) -> anyhow::Result<Lifecycle> {
    use forkvm::machine::{Arg, ReadyAt};
    use forkvm::master::Master;
    let _ = args;
    let Callee { image, name, addrs } = callee()?;
    let timeout = Duration::from_secs(10);
    let cfg = || Config {
        memory: 64 << 20,
        argv: vec!["callee".into()],
        ..Config::default()
    };

    // construct: load + run to the ready point.
    let mut construct = Vec::with_capacity(n);
    let mut last = None;
    for _ in 0..n {
        let t = Instant::now();
        let mut m = Machine::new(&image, "/callee", cfg())?;
        let o = m.run_until_ready(&ReadyAt::Call)?;
        construct.push(t.elapsed());
        anyhow::ensure!(
            matches!(o, Outcome::Ready),
            "{name} did not become ready: {o:?}"
        );
        last = Some(m);
    }
    let mut m = last.context("no machine")?;
    let (noop, write_pages) = match addrs {
        Some(a) => a,
        None => (
            m.symbol("noop").context("noop")?,
            m.symbol("write_pages").context("write_pages")?,
        ),
    };
    let mut vm_master = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        m.vmcall_addr(noop, &[], timeout)?;
        vm_master.push(t.elapsed());
    }
    let master = Master::from_machine(m)?;
    master.prewarm(2)?;

    let mut fork = Vec::with_capacity(n);
    let mut vm_fork = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let mut f = master.fork()?;
        fork.push(t.elapsed());
        let t = Instant::now();
        f.vmcall_addr(noop, &[], timeout)?;
        vm_fork.push(t.elapsed());
    }

    let mut f = master.fork()?;
    let mut resets = Vec::new();
    for pages in [1u64, 16, 256] {
        for _ in 0..3 {
            f.vmcall_addr(write_pages, &[Arg::Int(pages)], timeout)?;
            f.reset()?;
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            f.vmcall_addr(write_pages, &[Arg::Int(pages)], timeout)?;
            let t = Instant::now();
            f.reset()?;
            v.push(t.elapsed());
        }
        resets.push((pages, stats(v), memcpy_us(pages, n)));
    }
    let mut reset_call = Vec::with_capacity(n);
    for _ in 0..n {
        f.vmcall_addr(write_pages, &[Arg::Int(1)], timeout)?;
        let t = Instant::now();
        f.reset()?;
        f.vmcall_addr(noop, &[], timeout)?;
        reset_call.push(t.elapsed());
    }
    drop(f);

    let per_fork = memory_per_fork(&master, 1000, write_pages)?;

    let mut rows = vec![
        Row {
            name: "construct",
            what: format!(
                "construct master (load + init) of {}",
                short(Path::new(&name))
            ),
            s: stats(construct),
            floor_name: "vm_create",
            floor: create_floor,
        },
        Row {
            name: "vmcall_master",
            what: "vmcall (no-op) on the master copy".into(),
            s: stats(vm_master),
            floor_name: "exit",
            floor: exit_floor,
        },
        Row {
            name: "fork",
            what: "fork (from the pool)".into(),
            s: stats(fork),
            floor_name: "vm_create",
            floor: create_floor,
        },
        Row {
            name: "vmcall_fork",
            what: "vmcall (no-op) in a fresh fork".into(),
            s: stats(vm_fork),
            floor_name: "exit",
            floor: exit_floor,
        },
    ];
    for (pages, s, memcpy) in resets {
        rows.push(Row {
            name: match pages {
                1 => "reset_1",
                16 => "reset_16",
                _ => "reset_256",
            },
            what: format!("reset after a call that wrote {pages} page(s)"),
            s,
            floor_name: "exit+memcpy",
            floor: exit_floor + memcpy,
        });
    }
    rows.push(Row {
        name: "reset_vmcall",
        what: "reset + vmcall (per-request cost, 1 page)".into(),
        s: stats(reset_call),
        floor_name: "exit",
        floor: exit_floor,
    });
    rows.push(Row {
        name: "memory_per_fork_kib",
        what: "1,000 live forks: memory per fork (RSS + kernel)".into(),
        s: Stats {
            median: per_fork,
            p99: per_fork,
        },
        floor_name: "-",
        floor: f64::NAN,
    });

    let native_call = stats(
        (0..n)
            .map(|_| {
                let f: fn() -> u64 = native_noop;
                let f = std::hint::black_box(f);
                let t = Instant::now();
                for _ in 0..1000 {
                    std::hint::black_box(f());
                }
                t.elapsed() / 1000
            })
            .collect(),
    );
    Ok(Lifecycle { rows, native_call })
}

#[inline(never)]
fn native_noop() -> u64 {
    0
}

fn host_fork() -> anyhow::Result<Duration> {
    let t = Instant::now();
    // SAFETY: the child only calls the async-signal-safe _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: leaving the child at once, without running any Rust code.
        unsafe { libc::_exit(0) };
    }
    anyhow::ensure!(pid > 0, "fork failed");
    let mut status = 0;
    // SAFETY: waiting for the child just created.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    Ok(t.elapsed())
}

/// Median time to copy `pages` pages, in µs.
fn memcpy_us(pages: u64, n: usize) -> f64 {
    let len = (pages * 4096) as usize;
    let src = vec![1u8; len];
    let mut dst = vec![0u8; len];
    let v: Vec<Duration> = (0..n.min(200))
        .map(|_| {
            let t = Instant::now();
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&dst);
            t.elapsed()
        })
        .collect();
    stats(v).median
}

fn meminfo_kib(keys: &[&str]) -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            keys.contains(&k)
                .then(|| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4)
}

/// KiB of host memory (RSS + kernel slab/page tables/stacks) per live fork.
fn memory_per_fork(
    master: &forkvm::master::Master,
    count: usize,
    write_pages: u64,
) -> anyhow::Result<f64> {
    use forkvm::machine::Arg;
    let kernel = ["Slab", "KernelStack", "PageTables", "SecPageTables"];
    let (rss0, k0) = (rss_kib(), meminfo_kib(&kernel));
    let mut forks = Vec::with_capacity(count);
    for _ in 0..count {
        let mut f = master.fork()?;
        f.vmcall_addr(write_pages, &[Arg::Int(1)], Duration::from_secs(10))?;
        forks.push(f);
    }
    let (rss1, k1) = (rss_kib(), meminfo_kib(&kernel));
    drop(forks);
    Ok((rss1.saturating_sub(rss0) + k1.saturating_sub(k0)) as f64 / count as f64)
}
