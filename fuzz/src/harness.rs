//! The fuzz harnesses: each takes the fuzzer's bytes and drives one input
//! an attacker controls through forkvm's real code, without /dev/kvm.
//! A panic anywhere is a bug in forkvm. This file depends on forkvm, libc
//! and std only, so crates/forkvm/tests/fuzz_regressions.rs includes it to
//! replay the seed corpus and every crash found.

#![allow(dead_code)]

use forkvm::abi;
use forkvm::linux::{self, Policy, Process};
use forkvm::loader::{self, StackParams};
use forkvm::memory::{page_tables, AddressSpace, GuestMemory, Rights};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Reads the fuzzer's bytes front to back; past the end every read gives 0.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.u8();
        }
        u64::from_le_bytes(b)
    }
    /// A length-prefixed (u16) byte string, cut at the end of the input.
    pub fn bytes(&mut self) -> &'a [u8] {
        let n = usize::from(self.u16()).min(self.data.len());
        let (b, rest) = self.data.split_at(n);
        self.data = rest;
        b
    }
}

// ---------------------------------------------------------------------------
// Target 1: the ELF loader.

/// Guest memory the loader target loads into (its images must fit).
const LOADER_MEMORY: u64 = 64 << 20;

/// Parses `data` as an ELF program and, when it parses, does what
/// `Machine::new` does with it short of creating the VM: symbols, regions,
/// loading into guest memory, page tables, the initial stack, and for a PIE
/// a second parse at another base as for an interpreter.
pub fn loader(data: &[u8]) {
    // The same bytes one byte off 8-alignment must parse the same way.
    let mut shifted = Vec::with_capacity(data.len() + 1);
    shifted.push(0);
    shifted.extend_from_slice(data);
    assert_eq!(
        loader::parse(&shifted[1..])
            .ok()
            .map(|i| (i.entry(), i.image_end())),
        loader::parse(data).ok().map(|i| (i.entry(), i.image_end())),
        "the loader's answer depends on the alignment of its input"
    );
    let image = match loader::parse(data) {
        Ok(image) => image,
        Err(e) => {
            if tracing() {
                eprintln!("parse: {e}");
            }
            return;
        }
    };
    let symbols = image.symbols();
    let _ = symbols.address_of("main");
    let _ = symbols.lookup(image.entry());
    let _ = (
        image.interp(),
        image.span(),
        image.is_pie(),
        image.image_end(),
    );
    let mut regions = image.regions();
    let Ok(mut mem) = GuestMemory::new(LOADER_MEMORY) else {
        return;
    };
    if forkvm::guest_kernel::install(&mut mem).is_err() {
        return;
    }
    let program = match image.load(data, &mut mem) {
        Ok(p) => p,
        Err(e) => {
            if tracing() {
                eprintln!("load: {e}");
            }
            return;
        }
    };
    if tracing() {
        eprintln!(
            "loaded: entry {:#x}, end {:#x}",
            program.entry, program.image_end
        );
    }
    let stack_top = LOADER_MEMORY;
    let stack_bottom = stack_top - (1 << 20);
    regions.push(page_tables::Region {
        start: stack_bottom,
        end: stack_top,
        perm: page_tables::Perm {
            write: true,
            exec: false,
        },
    });
    let mut mm = AddressSpace::new(program.image_end, stack_bottom);
    mm.reserve_stack_guard(abi::PAGE_SIZE);
    // Overlapping the stack is refused, not a panic.
    let _ = page_tables::build_guarded(&mut mem, &regions, mm.mmap_top..stack_bottom);
    mem.track_mappings();
    mem.map_user(
        stack_bottom,
        stack_top,
        Rights {
            read: true,
            write: true,
        },
    );
    let argv = vec![std::ffi::OsString::from("prog"), "x".into()];
    let envp = vec![std::ffi::OsString::from("A=b")];
    let _ = loader::build_stack(
        &mut mem,
        stack_top,
        &program,
        &StackParams {
            argv: &argv,
            envp: &envp,
            execfn: b"prog",
            random: [7; 16],
            hwcap: 0,
            hwcap2: 0,
            platform: "x86_64",
            interp_base: 0,
            vdso: 0,
            minsigstksz: 2048,
        },
    );
    // As an interpreter: relocated into the mmap area.
    if image.is_pie() && image.interp().is_none() {
        if let Some(base) = mm.alloc(image.span()) {
            if let Ok(again) = loader::parse_at(data, base) {
                let _ = again.load(data, &mut mem);
                let _ = again.symbols();
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Target 2: the syscall layer.

/// Guest memory of the syscall target.
const SYS_MEMORY: u64 = 16 << 20;
/// A read-write scratch area the pointer arguments point into.
const SCRATCH: u64 = abi::USER_BASE;
const SCRATCH_LEN: u64 = 64 << 10;
/// A read-only page of zeros right after it (zero timeouts, for one).
const ZEROS: u64 = SCRATCH + SCRATCH_LEN;
/// Calls per input, at most.
const MAX_CALLS: usize = 24;

/// Host directories of one fuzzing process: the guest's allowed root and a
/// sibling it must never reach.
pub struct Sandbox {
    pub base: PathBuf,
    pub root: PathBuf,
    pub outside: PathBuf,
    /// Guest strings the path arguments choose from (NUL-terminated).
    strings: Vec<Vec<u8>>,
}

const SENTINEL: &[u8] = b"the guest must not change this\n";

impl Sandbox {
    /// Creates `base/root` (allowed to read and write) and `base/outside`.
    pub fn new() -> std::io::Result<Self> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = std::env::temp_dir().join(format!("forkvm-fuzz-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root)?;
        std::fs::create_dir_all(&outside)?;
        std::fs::write(outside.join("sentinel"), SENTINEL)?;
        // Canonical: the policy compares resolved paths.
        let base = std::fs::canonicalize(&base)?;
        let root = base.join("root");
        let outside = base.join("outside");
        let mut strings: Vec<Vec<u8>> = [
            "a",
            "d",
            "d/b",
            ".",
            "..",
            "../outside/sentinel",
            "../outside/new",
            "/tmp/t",
            "/dev/shm/s",
            "/proc/self/maps",
            "/proc/self/fd/3",
            "/proc/self/exe",
            "/dev/null",
            "/dev/zero",
            "/dev/urandom",
            "/etc/passwd",
            "/",
            "",
            "a/../../outside",
            "user.x",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        for p in [
            root.clone(),
            root.join("a"),
            root.join("d/b"),
            outside.join("sentinel"),
        ] {
            strings.push(p.as_os_str().as_encoded_bytes().to_vec());
        }
        // Synthetic files of the guest's own (after the sandbox's paths,
        // whose indices the seeds use).
        for s in [
            "/proc/sys/kernel/random/uuid",
            "/proc/sys/net/core/somaxconn",
            "/proc/net/if_inet6",
            "/proc/sys",
            "/proc/version",
            "/dev/ptmx",
            "/dev/pts/0",
            "/dev/pts",
        ] {
            strings.push(s.as_bytes().to_vec());
        }
        for s in &mut strings {
            s.push(0);
        }
        Ok(Self {
            base,
            root,
            outside,
            strings,
        })
    }

    /// Empties the guest's root for the next input.
    pub fn clean(&self) {
        let _ = std::fs::remove_dir_all(&self.root);
        let _ = std::fs::create_dir_all(&self.root);
    }

    /// Panics unless the only things the guest touched are under `root`.
    pub fn check_confined(&self) {
        let names = |d: &Path| -> BTreeSet<String> {
            std::fs::read_dir(d)
                .map(|r| {
                    r.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        let want: BTreeSet<String> = ["outside", "root"].iter().map(|s| s.to_string()).collect();
        assert_eq!(names(&self.base), want, "the guest changed {:?}", self.base);
        let want: BTreeSet<String> = ["sentinel".to_string()].into();
        assert_eq!(
            names(&self.outside),
            want,
            "the guest wrote outside its root"
        );
        let meta = std::fs::symlink_metadata(self.outside.join("sentinel"));
        assert!(
            meta.is_ok_and(|m| m.is_file()),
            "the guest replaced the sentinel"
        );
        assert_eq!(
            std::fs::read(self.outside.join("sentinel")).ok().as_deref(),
            Some(SENTINEL),
            "the guest changed a file outside its root"
        );
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Syscalls the target never makes: they wait for a signal that cannot come.
const NEVER: &[u64] = &[
    34,  // pause
    130, // rt_sigsuspend
    43,  // accept
    288, // accept4
];

/// A no-op SIGALRM handler without SA_RESTART: a host call that blocks is
/// cut short (EINTR) by the per-call alarm, as the watchdog's kick does.
fn install_alarm() {
    extern "C" fn on_alarm(_: libc::c_int) {}
    // SAFETY: a plain sigaction with a handler that does nothing
    // (async-signal-safe); the struct is zeroed and then filled in.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_alarm as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
    }
}

/// Arms (ms > 0) or disarms (0) a one-shot SIGALRM.
fn alarm_ms(ms: i64) {
    let t = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval {
            tv_sec: 0,
            tv_usec: (ms * 1000) as libc::suseconds_t,
        },
    };
    // SAFETY: setitimer with a valid itimerval; the old value is not wanted.
    unsafe {
        libc::setitimer(libc::ITIMER_REAL, &t, std::ptr::null_mut());
    }
}

/// The syscall numbers forkvm implements (from its table), and a few it does not.
fn numbers() -> &'static [u64] {
    static NRS: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    NRS.get_or_init(|| {
        (0..600)
            .filter(|nr| linux::table::lookup(*nr).is_some() && !NEVER.contains(nr))
            .collect()
    })
}

/// One decoded argument.
#[derive(Debug, Clone, Copy)]
pub enum Arg {
    /// This value.
    Val(u64),
    /// The previous call's result plus this.
    Last(u64),
}

/// One decoded call.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub nr: u64,
    pub args: [Arg; 6],
}

/// One decoded step: a call, or bytes stored into the scratch area first
/// (so an input can build a msghdr, an iovec, a sockaddr or a netlink
/// request for the calls after it to point at).
#[derive(Debug, Clone)]
pub enum Step {
    Call(Call),
    Store { offset: u64, bytes: Vec<u8> },
}

/// Selector byte of a [`Step::Store`]: u16 offset into the scratch area,
/// then a u16-length-prefixed byte string.
pub const STORE: u8 = 0xf7;

/// Decodes the calls of an input: a selector byte picks a syscall (mostly
/// implemented ones), then each argument has a kind byte: small integer,
/// pointer into the scratch area, path string, wild 64-bit value, an earlier
/// call's result, a size, or a small negative number.
pub fn decode_calls(data: &[u8], string_at: &[u64]) -> Vec<Step> {
    let nrs = numbers();
    let mut input = Input::new(data);
    let mut calls = Vec::new();
    while !input.is_empty() && calls.len() < MAX_CALLS {
        let sel = input.u8();
        if sel == STORE {
            let offset = u64::from(input.u16()) % SCRATCH_LEN;
            let bytes = input.bytes();
            let room = (SCRATCH_LEN - offset) as usize;
            calls.push(Step::Store {
                offset,
                bytes: bytes[..bytes.len().min(room)].to_vec(),
            });
            continue;
        }
        let nr = if sel < 0xf8 {
            nrs[usize::from(sel) % nrs.len()]
        } else {
            u64::from(input.u16()) % 600
        };
        if NEVER.contains(&nr) {
            continue;
        }
        let mut args = [Arg::Val(0); 6];
        for a in &mut args {
            let kind = input.u8();
            *a = match kind % 8 {
                0 | 1 => Arg::Val(u64::from(input.u8())),
                2 => Arg::Val(SCRATCH + u64::from(input.u16()) % SCRATCH_LEN),
                3 => Arg::Val(
                    string_at
                        .get(usize::from(input.u8()) % string_at.len().max(1))
                        .copied()
                        .unwrap_or(0),
                ),
                4 => Arg::Val(input.u64()),
                5 => Arg::Last(u64::from(kind >> 3)),
                6 => Arg::Val(u64::from(input.u16())),
                _ => Arg::Val((-i64::from(input.u8())) as u64),
            };
        }
        // Timeouts become zero so the host never waits on purpose.
        let z = Arg::Val(ZEROS);
        match nr {
            7 => args[2] = Arg::Val(0),                   // poll
            23 | 270 => args[4] = z,                      // select, pselect6
            271 => args[2] = z,                           // ppoll
            232 | 281 => args[3] = Arg::Val(0),           // epoll_wait, epoll_pwait
            441 => args[3] = z,                           // epoll_pwait2
            35 => args[0] = z,                            // nanosleep
            230 => (args[1], args[2]) = (Arg::Val(0), z), // clock_nanosleep
            202 => args[3] = z,                           // futex
            _ => {}
        }
        calls.push(Step::Call(Call { nr, args }));
    }
    calls
}

/// Whether FORKVM_FUZZ_TRACE is set: print each call (to replay an input).
fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("FORKVM_FUZZ_TRACE").is_some())
}

/// Runs the decoded calls of `data` through `linux::dispatch` against a
/// fresh process whose policy allows reading and writing `sandbox.root`.
pub fn syscalls(data: &[u8], sandbox: &Sandbox) {
    syscall_results(data, sandbox);
}

/// The same, returning each call's number and result (so a test can check
/// that a seed reaches the code it was written for).
pub fn syscall_results(data: &[u8], sandbox: &Sandbox) -> Vec<(u64, i64)> {
    let mut results = Vec::new();
    static ALARM: std::sync::Once = std::sync::Once::new();
    ALARM.call_once(install_alarm);
    sandbox.clean();
    let policy = Policy {
        allow_read: vec![sandbox.root.clone()],
        allow_write: vec![sandbox.root.clone()],
        trace_syscalls: false,
    };
    let mm = AddressSpace::new(0x40_0000, SYS_MEMORY - (1 << 20));
    let root = sandbox.root.to_string_lossy().into_owned();
    let mut p = Process::new(policy, mm, root, "/prog".into());
    // A run's first process, as `forkvm run` makes it (its process tree
    // also holds the run's ptys). The run's deadline is short: a process
    // that stops itself (kill(0, SIGTTOU)) waits for SIGCONT until then.
    let config = forkvm::machine::Config {
        timeout: std::time::Duration::from_millis(100),
        ..Default::default()
    };
    p.family = Some(linux::child::Tree::root(config));
    let Ok(mut mem) = GuestMemory::new(SYS_MEMORY) else {
        return results;
    };
    mem.track_mappings();
    let rw = Rights {
        read: true,
        write: true,
    };
    mem.map_user(SCRATCH, SCRATCH + SCRATCH_LEN, rw);
    mem.map_user(
        ZEROS,
        ZEROS + abi::PAGE_SIZE,
        Rights {
            read: true,
            write: false,
        },
    );
    // The path strings at the end of the scratch area.
    let mut string_at = Vec::new();
    let mut at = SCRATCH + SCRATCH_LEN - 0x2000;
    for s in &sandbox.strings {
        if mem.write(at, s).is_ok() {
            string_at.push(at);
        }
        at += (s.len() as u64 + 15) & !15;
    }
    // No host stdin/stdout/stderr for the guest (the fuzzer owns them).
    for fd in 0..3 {
        linux::dispatch(&mut p, &mut mem, 3, &[fd, 0, 0, 0, 0, 0]);
    }
    let mut last = 3u64;
    for step in decode_calls(data, &string_at) {
        let c = match step {
            Step::Call(c) => c,
            Step::Store { offset, bytes } => {
                // Inside the scratch mapping by construction (decode_calls).
                let _ = mem.write(SCRATCH + offset, &bytes);
                continue;
            }
        };
        // An earlier result (an fd, mostly) where the decoder asked for one.
        let args = c.args.map(|a| match a {
            Arg::Val(v) => v,
            Arg::Last(d) => last.wrapping_add(d),
        });
        alarm_ms(50);
        last = linux::dispatch(&mut p, &mut mem, c.nr, &args);
        alarm_ms(0);
        results.push((c.nr, last as i64));
        if tracing() {
            let name = linux::names::name(c.nr).unwrap_or("?");
            eprintln!("{name}({:#x?}) = {}", args, last as i64);
        }
        if p.exit_status.is_some() {
            break;
        }
    }
    drop(p);
    sandbox.check_confined();
    results
}

// ---------------------------------------------------------------------------
// Target 3: request staging for `forkvm serve`.

/// Guest memory of the staging target.
const STAGE_MEMORY: u64 = 16 << 20;

/// Stages a request as `forkvm serve` does for every request (method, path,
/// query, headers, body, then the `abi::Request` pointing at them, each with
/// `machine::push_bytes` below the ready point's stack), then checks every
/// part reads back intact, inside the stack, without overlapping another.
pub fn staging(data: &[u8]) {
    let mut input = Input::new(data);
    // Where the ready point left the stack, and how big the stack is.
    let ready_rsp = STAGE_MEMORY - u64::from(input.u16()) * 8;
    let stack_size = ((u64::from(input.u8()) + 1) * 16) << 10;
    let stack_floor = STAGE_MEMORY - stack_size.min(STAGE_MEMORY - abi::USER_BASE);
    let parts = [
        input.bytes(),
        input.bytes(),
        input.bytes(),
        input.bytes(),
        input.bytes(),
    ];
    let Ok(mut mem) = GuestMemory::new(STAGE_MEMORY) else {
        return;
    };
    mem.track_mappings();
    mem.map_user(
        stack_floor,
        STAGE_MEMORY,
        Rights {
            read: true,
            write: true,
        },
    );
    let mut sp = ready_rsp.saturating_sub(128) & !15;
    let mut staged = Vec::new();
    for part in parts {
        match forkvm::machine::push_bytes(&mut mem, &mut sp, stack_floor, part, false) {
            Ok(addr) => staged.push((addr, part)),
            Err(_) => return, // answered 500 by serve: fine
        }
    }
    let req = abi::Request {
        method: staged[0].0,
        method_len: staged[0].1.len() as u64,
        path: staged[1].0,
        path_len: staged[1].1.len() as u64,
        query: staged[2].0,
        query_len: staged[2].1.len() as u64,
        headers: staged[3].0,
        headers_len: staged[3].1.len() as u64,
        body: staged[4].0,
        body_len: staged[4].1.len() as u64,
    };
    let bytes = req.to_bytes();
    let Ok(req_addr) = forkvm::machine::push_bytes(&mut mem, &mut sp, stack_floor, &bytes, false)
    else {
        return;
    };
    staged.push((req_addr, &bytes[..]));
    let mut prev_end = ready_rsp;
    for (addr, part) in staged.iter() {
        let end = addr + part.len() as u64;
        assert!(
            *addr > stack_floor + (64 << 10),
            "staged below the stack's reserve"
        );
        assert!(end <= prev_end, "a staged part overlaps the one above it");
        assert!(addr.is_multiple_of(16), "staged part not 16-byte aligned");
        assert_eq!(mem.read(*addr, part.len() as u64).ok(), Some(*part));
        prev_end = *addr;
    }
    assert!(sp <= prev_end && sp.is_multiple_of(16));
}

// ---------------------------------------------------------------------------
// Target 4: the GDB remote stub (needs /dev/kvm: the stub's target is the
// machine itself, registers in its vCPU).

/// The program debugged: 4.8 KB, `counter++` then exit(0), with a symbol table.
const GDB_PROGRAM: &[u8] = include_bytes!("../corpus/loader/nostdlib_symtab");

/// Frames the input as gdb packets (each `\n`-terminated chunk becomes
/// `$chunk#checksum`; a chunk starting with 0x03 is sent raw, as Ctrl-C),
/// sends them to the stub of a fresh machine over a loopback connection,
/// then lets the program run under it to the end.
pub fn gdb(data: &[u8]) {
    use std::io::{Read, Write};
    let mut wire = Vec::new();
    for chunk in data.split(|&b| b == b'\n') {
        if chunk.first() == Some(&3) {
            wire.extend_from_slice(chunk);
            continue;
        }
        let sum = chunk.iter().fold(0u8, |s, &b| s.wrapping_add(b));
        wire.push(b'$');
        wire.extend_from_slice(chunk);
        wire.extend_from_slice(format!("#{sum:02x}").as_bytes());
    }
    let config = forkvm::machine::Config {
        memory: 16 << 20,
        timeout: std::time::Duration::from_millis(300),
        argv: vec!["prog".into()],
        ..Default::default()
    };
    let mut m = match forkvm::machine::Machine::new(GDB_PROGRAM, "/prog", config) {
        Ok(m) => m,
        Err(e) => {
            if tracing() {
                eprintln!("no machine: {e}");
            }
            return;
        }
    };
    let Ok(listener) = std::net::TcpListener::bind("127.0.0.1:0") else {
        return;
    };
    let Ok(addr) = listener.local_addr() else {
        return;
    };
    let Ok(mut client) = std::net::TcpStream::connect(addr) else {
        return;
    };
    let Ok((conn, _)) = listener.accept() else {
        return;
    };
    let _ = client.write_all(&wire);
    let _ = client.shutdown(std::net::Shutdown::Write);
    // Drains the stub's answers so it never blocks on a full socket.
    let drain = std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = client.read_to_end(&mut sink);
        sink
    });
    let outcome = match m.attach_gdb(conn) {
        Ok(forkvm::debug::Resume::Killed) => {
            forkvm::machine::Outcome::Exited(forkvm::debug::KILLED_STATUS)
        }
        Ok(_) => match m.run() {
            Ok(o) => o,
            Err(e) => {
                if tracing() {
                    eprintln!("run failed: {e}");
                }
                return;
            }
        },
        Err(e) => {
            if tracing() {
                eprintln!("attach failed: {e}");
            }
            return;
        }
    };
    m.gdb_finish(&outcome);
    drop(m);
    let answers = drain.join().unwrap_or_default();
    if tracing() {
        eprintln!("{}\n{outcome:?}", String::from_utf8_lossy(&answers));
    }
}
