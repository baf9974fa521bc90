//! `forkvm bench`: each figure beside a floor measured in the same run, as a
//! ratio. Medians and p99 over many iterations; the machine is shared and
//! noisy, so compare ratios, not absolute numbers.

use anyhow::Context;
use forkvm::builtin;
use forkvm::floors;
use forkvm::hypervisor::Hypervisor;
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

/// Per-syscall cost: (run of N getppid calls - run of 0) / N, per sample.
fn syscall_cost(samples: usize) -> anyhow::Result<Vec<Duration>> {
    const N: u32 = 200;
    let loop_n = builtin::syscall_loop(N)?;
    let loop_0 = builtin::syscall_loop(0)?;
    let run = |img: &[u8]| -> anyhow::Result<Duration> {
        let mut m = Machine::new(img, "/loop", config())?;
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
        v.push(full.saturating_sub(empty) / N);
    }
    Ok(v)
}

/// Runs the benchmark and prints the table (or JSON).
pub fn main(args: BenchArgs) -> anyhow::Result<()> {
    let n = args.iterations.max(10);
    let hv = Hypervisor::get()?;
    let (hello_path, hello) = hello_program(&args)?;
    let hello_name = hello_path.display().to_string();

    // Floors.
    let ioctl = stats(floors::vcpu_ioctl(n)?);
    let exit = stats(floors::exit_round_trip(n)?);
    let trap = stats(floors::user_trap_round_trip(n)?);
    let native_sys = stats(floors::native_syscall(n));
    let create = stats(floors::vm_create(n)?);

    // Figures.
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
    let syscall = stats(syscall_cost((n / 10).max(10))?);

    let spawns = (n / 3).max(10);
    let me = std::env::current_exe()?;
    let forkvm_run = stats(spawn_times(spawns, || {
        let mut c = Command::new(&me);
        c.arg("run").arg(&hello_path);
        c
    })?);
    let native_run = stats(spawn_times(spawns, || Command::new(&hello_path))?);

    let rows = vec![
        Row {
            name: "construct",
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
            what: "host-handled syscall (getppid)".into(),
            s: syscall,
            floor_name: "user_trap",
            floor: trap.median,
        },
        Row {
            name: "run_wall",
            what: "`forkvm run hello` wall time".into(),
            s: forkvm_run,
            floor_name: "native_run",
            floor: native_run.median,
        },
    ];
    let floor_rows = [
        ("vcpu_ioctl", "vCPU ioctl (KVM_GET_REGS)", &ioctl),
        ("exit", "bare KVM exit round trip (CPL0 out)", &exit),
        (
            "user_trap",
            "cheapest ring-3-to-host round trip (int3 -> IDT -> out -> iretq)",
            &trap,
        ),
        ("native_syscall", "native syscall (getppid)", &native_sys),
        (
            "vm_create",
            "VM create + setup (KVM_CREATE_VM, slot, vCPU, CPUID, regs)",
            &create,
        ),
        ("native_run", "native `./hello` wall time", &native_run),
    ];

    if args.json {
        let mut out = String::from("{\"machine\": {");
        out.push_str(&format!(
            "\"platform\": \"{}\", \"kernel\": \"{}\", \"cpus\": {}, \"iterations\": {}, \"hello\": \"{}\"",
            hv.platform,
            kernel_release(),
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            n,
            json_escape(&hello_name)
        ));
        out.push_str("}, \"floors\": [");
        let f: Vec<String> = floor_rows
            .iter()
            .map(|(name, _, s)| {
                format!(
                    "{{\"name\": \"{name}\", \"median_us\": {:.3}, \"p99_us\": {:.3}}}",
                    s.median, s.p99
                )
            })
            .collect();
        out.push_str(&f.join(", "));
        out.push_str("], \"rows\": [");
        let r: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"name\": \"{}\", \"median_us\": {:.3}, \"p99_us\": {:.3}, \"floor_name\": \"{}\", \"floor_us\": {:.3}, \"ratio\": {:.3}}}",
                    r.name, r.s.median, r.s.p99, r.floor_name, r.floor, r.s.median / r.floor
                )
            })
            .collect();
        out.push_str(&r.join(", "));
        out.push_str("]}");
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
        println!("  {what:<66} {:>10.2} µs  [{:.2}]", s.median, s.p99);
    }
    println!("\nfigures:");
    println!(
        "  {:<44} {:>11} {:>11}   {:<16} {:>10} {:>7}",
        "", "median", "p99", "floor", "floor", "ratio"
    );
    for r in &rows {
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

fn json_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
