//! The `forkvm` command: run a program in a VM, print the syscall table,
//! and benchmark the machine.

mod bench;
mod launch;
mod logging;
mod seccomp;
mod serve;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use forkvm::machine::{Config, Machine, Outcome};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Run unmodified static Linux x86-64 programs inside tiny KVM virtual machines.
#[derive(Parser)]
#[command(name = "forkvm", version, about, disable_help_subcommand = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run PROGRAM in a fresh VM; exits with the program's status.
    Run(RunArgs),
    /// Serve HTTP: every request runs in its own VM forked from PROGRAM's master.
    Serve(serve::ServeArgs),
    /// Measure VM construction, start-up, syscalls and whole runs against floors.
    Bench(bench::BenchArgs),
    /// Print the syscall compatibility table (Markdown), as in docs/syscalls.md.
    Syscalls,
    /// Print the C guest API header (guest/include/forkvm.h).
    GuestHeader,
    /// Print help.
    Help,
}

#[derive(Args)]
struct RunArgs {
    /// Let the guest read files and directories under PATH (repeatable).
    /// System library directories are readable by default (see --no-default-allow).
    #[arg(long = "allow-read", value_name = "PATH")]
    allow_read: Vec<PathBuf>,
    /// Do not let the guest read the system library directories (/lib, /lib64, /usr/lib,
    /// /usr/lib64, /usr/local/lib, /usr/share/zoneinfo, /etc/ld.so.cache, /etc/localtime)
    /// by default; the program file itself stays readable.
    #[arg(long)]
    no_default_allow: bool,
    /// Let the guest also create, write, rename and delete files under DIR (repeatable).
    #[arg(long = "allow-write", value_name = "DIR")]
    allow_write: Vec<PathBuf>,
    /// Set an environment variable in the guest (repeatable; the guest environment is otherwise empty).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
    env: Vec<String>,
    /// The guest's working directory.
    #[arg(long, value_name = "DIR", default_value = "/")]
    cwd: String,
    /// Wall-clock limit in seconds; on expiry the guest is stopped and forkvm exits 124.
    /// Default: no limit.
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Guest memory limit in MiB, one for all processes of the run; beyond it brk/mmap/fork fail
    /// with ENOMEM (a vfork or posix_spawn child is not charged for its parent's memory before
    /// its exec).
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    memory: u64,
    /// Guest address space in MiB when larger than --memory (reservations
    /// with PROT_NONE do not count against the limit). Default: --memory for
    /// static programs, 1024 for static Go programs, 32768 for dynamically
    /// linked ones (cgo too).
    #[arg(long, value_name = "MIB")]
    address_space: Option<u64>,
    /// Log what forkvm does (to stderr): unknown syscalls, calls refused by policy,
    /// paths denied as outside the allow-list (each once).
    #[arg(short, long)]
    verbose: bool,
    /// Do not confine forkvm itself with its host seccomp allow-list (for debugging only).
    #[arg(long)]
    no_seccomp: bool,
    /// Print one line per syscall, as strace does: name, decoded arguments, result.
    #[arg(long)]
    trace_syscalls: bool,
    /// Let the guest open TCP connections to HOST:PORT (repeatable; HOST is resolved
    /// once at start, IPv4 and IPv6). Every other address is refused (ECONNREFUSED).
    #[arg(long = "allow-connect", value_name = "HOST:PORT")]
    allow_connect: Vec<String>,
    /// How system calls are answered: `fast` answers guest-local calls (getpid, gettid,
    /// identity, a lone sched_yield, getrandom) inside the VM and, on PVM, posts simple file
    /// calls to a host poller without a VM exit; `guest` is `fast` without the poller; `exit`
    /// sends every call to the host through an exit
    #[arg(long, value_name = "fast|guest|exit", default_value = "fast")]
    syscalls: forkvm::hypervisor::SyscallPath,
    /// Most processes the run may have alive at once (the program included):
    /// fork beyond it fails with EAGAIN.
    #[arg(long, value_name = "N", default_value_t = forkvm::linux::child::DEFAULT_MAX_PROCESSES as u64,
          value_parser = clap::value_parser!(u64).range(1..=forkvm::linux::child::MAX_PROCESSES_LIMIT as u64))]
    max_processes: u64,
    /// Stop before the program's first instruction and wait for gdb's
    /// `target remote ADDR` (e.g. 127.0.0.1:1234; port 0 picks one, printed on stderr).
    #[arg(long, value_name = "ADDR")]
    gdb: Option<String>,
    /// The x86-64 Linux program to run (looked up in PATH when it has no '/'; a
    /// `#!` script runs its interpreter), then its arguments (passed as they are,
    /// even when they look like forkvm options).
    #[arg(
        value_name = "PROGRAM [ARGS]...",
        required = true,
        num_args = 1..,
        trailing_var_arg = true
    )]
    command: Vec<OsString>,
}

pub(crate) fn parse_env(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((k, _)) if !k.is_empty() => Ok(s.to_string()),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

fn run(args: RunArgs) -> anyhow::Result<u8> {
    let timeout = match args.timeout {
        None => Duration::MAX,
        Some(t) if t > 0.0 && t.is_finite() => {
            Duration::try_from_secs_f64(t).context("--timeout is out of range")?
        }
        Some(_) => anyhow::bail!("--timeout must be a positive number of seconds"),
    };
    let memory = args
        .memory
        .checked_mul(1 << 20)
        .context("--memory is out of range")?;
    let launch = launch::resolve(&args.command, &launch::search_path(&args.env))?;
    let program = launch.program.to_string_lossy().into_owned();
    let address_space = match args.address_space {
        Some(m) => Some(
            m.checked_mul(1 << 20)
                .context("--address-space is out of range")?,
        ),
        None => None,
    };
    launch::check_write_dirs(&args.allow_write, "--allow-write")?;
    let mut allow_read = args.allow_read;
    if !args.no_default_allow {
        allow_read.extend(launch::default_allow_read());
    }
    allow_read.extend(launch.files.iter().cloned());
    let config = Config {
        memory,
        address_space,
        timeout,
        argv: launch.argv,
        env: args.env.into_iter().map(OsString::from).collect(),
        cwd: args.cwd,
        allow_read,
        allow_write: args.allow_write,
        trace_syscalls: args.trace_syscalls,
        syscalls: args.syscalls,
    };
    let allow_connect = launch::resolve_connect(&args.allow_connect)?;
    let mut machine =
        Machine::from_file(&program, config).with_context(|| format!("cannot start {program}"))?;
    let outbound = !allow_connect.addrs.is_empty();
    machine.set_allow_connect(allow_connect.addrs);
    machine.set_connect_names(allow_connect.names);
    machine.set_max_processes(usize::try_from(args.max_processes).unwrap_or(usize::MAX));
    let outcome = match args.gdb.as_deref() {
        None => {
            seccomp::confine(seccomp::Mode::Run, args.no_seccomp, outbound)?;
            machine.run().context("the VM failed")?
        }
        // The stub needs the network calls `run`'s allow-list leaves out, and a
        // debugging session is the developer's own: no host seccomp under gdb.
        Some(addr) => {
            tracing::info!("--gdb: host seccomp is off while a debugger may attach");
            run_under_gdb(&mut machine, addr)?
        }
    };
    match &outcome {
        Outcome::Exited(code) => tracing::debug!(code, "guest exited"),
        Outcome::Ready | Outcome::Returned(_) | Outcome::Idle | Outcome::Stopped => {}
        Outcome::Crashed(info) => eprint!("{}", machine.crash_report_with_source(info)),
        Outcome::TimedOut(t) => eprintln!(
            "forkvm: timeout: {} did not finish within --timeout {} s and was stopped at {}",
            program,
            t.as_secs_f64(),
            machine.where_stopped()
        ),
    }
    if let (Outcome::TimedOut(_), Some(addr)) = (&outcome, machine.listening_addr()) {
        eprintln!(
            "forkvm: hint: {program} listens on {addr} (a virtual socket: nothing connects under `run`); serve it with `forkvm serve`"
        );
    }
    if outcome.status() != 0 && !args.verbose {
        hints(&machine.refused_paths(), machine.mmap_enomem());
    }
    Ok(outcome.status() as u8)
}

/// Waits for gdb on `addr`, then runs the program under it.
fn run_under_gdb(machine: &mut Machine, addr: &str) -> anyhow::Result<Outcome> {
    let listener = std::net::TcpListener::bind(addr)
        .with_context(|| format!("--gdb: cannot listen on {addr}"))?;
    let local = listener.local_addr().context("--gdb: no local address")?;
    eprintln!("forkvm: waiting for gdb on {local} (target remote {local})");
    let (conn, _) = listener.accept().context("--gdb: accept failed")?;
    drop(listener);
    let outcome = match machine.attach_gdb(conn).context("the VM failed")? {
        forkvm::debug::Resume::Killed => Outcome::Exited(forkvm::debug::KILLED_STATUS),
        _ => machine.run().context("the VM failed")?,
    };
    machine.gdb_finish(&outcome);
    Ok(outcome)
}

/// After a failed run: what the guest was refused that may explain it.
fn hints(refused: &[String], mmap_enomem: Option<u64>) {
    if !refused.is_empty() {
        eprintln!(
            "forkvm: hint: the program was refused {} (outside the allow-list); \
             allow what it needs with --allow-read PATH (-v lists every refusal)",
            refused.join(", ")
        );
    }
    // A length beyond x86-64's user address space (a program probing
    // mmap's errors, as Go's runtime tests do) is no advice to give.
    if let Some(len) = mmap_enomem.filter(|&l| l <= 1 << 47) {
        eprintln!(
            "forkvm: hint: an mmap of {} MiB failed for lack of guest memory or address space; \
             try a larger --memory MIB or --address-space MIB",
            len.div_ceil(1 << 20)
        );
    }
}

/// The error and its causes, each said once.
fn describe(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let _log_guard = logging::init(
        match &cli.command {
            Command::Run(a) if a.verbose => "forkvm=debug,info",
            Command::Serve(a) if !a.quiet() => "info",
            _ => "warn",
        },
        matches!(cli.command, Command::Serve(_)),
    );
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Bench(args) => bench::main(args).map(|_| 0),
        Command::Serve(args) => serve::main(args).map(|_| 0),
        Command::Syscalls => {
            print!("{}", forkvm::linux::table::render_markdown());
            Ok(0)
        }
        Command::GuestHeader => {
            print!("{}", forkvm::guest_api::c_header());
            Ok(0)
        }
        Command::Help => {
            use clap::CommandFactory;
            let _ = Cli::command().print_long_help();
            Ok(0)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("forkvm: error: {}", describe(&e));
            ExitCode::from(125)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_each_cause_once() {
        let io = std::io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(io).context("cannot read /missing");
        assert_eq!(
            describe(&e),
            "cannot read /missing: No such file or directory (os error 2)"
        );
        // A cause already spelled out by its context is not repeated.
        let inner = anyhow::anyhow!("not an ELF file");
        let e = inner.context("cannot start /x: not an ELF file");
        assert_eq!(describe(&e), "cannot start /x: not an ELF file");
    }
}
