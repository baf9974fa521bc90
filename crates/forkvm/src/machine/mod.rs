//! A machine: one program in one VM. Load an ELF, build the guest kernel,
//! page tables and initial stack, then run it to completion, serving its
//! system calls on the host.

mod build;
mod call;
mod children;
pub(crate) mod exitless;
mod fault;
mod handoff;
mod syscall;
mod threads;
mod vfork;

#[doc(hidden)]
pub use call::push_bytes;
pub use call::{Arg, CallError, ReadyAt, ReadyPoint, Response, MAX_RESPONSE};
use fault::in_getrandom_fill;
use threads::PREEMPT_TICK;

use crate::abi;
use crate::crash::{self, CrashInfo};
use crate::guest_kernel::{self, Frame, SyscallReturn, Trap};
use crate::hypervisor::{Deadline, Exit, KvmError, SyscallPath, Vcpu};
use crate::linux::thread::Sched;
use crate::linux::{self, Process};
use crate::loader::{LoadError, Symbols};
use crate::memory::{page_tables, GuestMemory, MapError};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to run a program.
#[derive(Debug, Clone)]
pub struct Config {
    /// The program's memory limit in bytes: what it may map accessible.
    pub memory: u64,
    /// Guest address space (RAM) in bytes, if larger than `memory`: room for
    /// reservations (PROT_NONE mappings) that do not count against the limit.
    /// Default: `memory`, or at least 1 GiB for Go programs, whose runtime
    /// reserves 512 MiB up front, and 8 GiB for dynamically linked programs
    /// (language runtimes such as V8 reserve large regions; reservations
    /// cost nothing until touched).
    pub address_space: Option<u64>,
    /// Wall-clock limit for the whole run.
    pub timeout: Duration,
    /// argv, including argv[0]: any bytes but NUL, as on Linux.
    pub argv: Vec<OsString>,
    /// The environment, `KEY=VALUE` (any bytes but NUL).
    pub env: Vec<OsString>,
    /// Guest working directory.
    pub cwd: String,
    /// Host paths the guest may read.
    pub allow_read: Vec<PathBuf>,
    /// Host directories the guest may also write in (create, write, rename, delete).
    pub allow_write: Vec<PathBuf>,
    /// Print every syscall (every call then exits to the host, so all are seen).
    pub trace_syscalls: bool,
    /// Whether guest-local calls are answered inside the VM (`--syscalls`).
    pub syscalls: SyscallPath,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            memory: 256 << 20,
            address_space: None,
            timeout: Duration::from_secs(10),
            argv: Vec::new(),
            env: Vec::new(),
            cwd: "/".into(),
            allow_read: Vec::new(),
            allow_write: Vec::new(),
            trace_syscalls: false,
            syscalls: SyscallPath::default(),
        }
    }
}

/// Why a machine could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    /// The program file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The path given.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The ELF file was rejected.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// KVM refused something.
    #[error(transparent)]
    Kvm(#[from] KvmError),
    /// Guest memory could not be reserved.
    #[error(transparent)]
    Map(#[from] MapError),
    /// The memory limit is unusable.
    #[error("--memory {0} MiB is out of range (8 .. {max} MiB)", max = abi::MAX_GUEST_MEMORY >> 20)]
    MemoryLimit(u64),
    /// The page tables did not fit.
    #[error(transparent)]
    PageTables(#[from] page_tables::PageTableError),
    /// The guest kernel could not be built.
    #[error(transparent)]
    Kernel(#[from] guest_kernel::KernelError),
    /// The guest kernel misbehaved (a forkvm bug, or a hypervisor we do not support).
    #[error("guest kernel failure: {0}")]
    Internal(String),
}

/// How a run ended.
#[derive(Debug)]
pub enum Outcome {
    /// exit/exit_group with this status.
    Exited(i32),
    /// Killed by a fault, like a signal.
    Crashed(Box<CrashInfo>),
    /// The wall-clock limit passed.
    TimedOut(Duration),
    /// The program reached its ready point (see [`ReadyAt`]).
    Ready,
    /// A host-initiated call returned this value.
    Returned(u64),
    /// A server program waits on the network: every thread is blocked
    /// (see [`Machine::run_until_idle`]).
    Idle,
    /// The caller's condition held between two exits and the run was
    /// stopped there (see [`Machine::run_until_answered`]): the machine must
    /// be reset before it runs again.
    Stopped,
}

impl Outcome {
    /// The shell-style exit status: the code, 128+signal, or 124 for a timeout.
    pub fn status(&self) -> i32 {
        match self {
            Outcome::Exited(c) => *c & 0xff,
            Outcome::Crashed(c) => 128 + c.signal,
            Outcome::TimedOut(_) => 124,
            Outcome::Ready | Outcome::Returned(_) | Outcome::Idle | Outcome::Stopped => 0,
        }
    }
}

/// A program loaded into its own VM.
pub struct Machine {
    // Drop order: the VM goes before the memory it maps.
    pub(crate) vcpu: Vcpu,
    /// Whether guest-local calls are answered inside the VM.
    pub(crate) syscall_path: SyscallPath,
    pub(crate) mem: GuestMemory,
    pub(crate) proc: Process,
    pub(crate) symbols: Arc<Symbols>,
    pub(crate) timeout: Duration,
    /// Set once the program reached its ready point.
    pub(crate) ready: Option<ReadyPoint>,
    /// A master's configuration, for its forks' child processes.
    pub(crate) serve_config: Option<Config>,
    /// A master's process ids when it is not its run's first process (the
    /// worker of a pre-fork server, see [`handoff`]).
    pub(crate) serve_ids: Option<linux::child::Ids>,
    /// While a master starts: where a child process that reaches a ready
    /// point leaves its machine (see [`handoff`]).
    handoff: Option<Arc<handoff::Handoff>>,
    /// A master's start-up processes, until it is frozen (see [`handoff`]).
    startup: Option<Box<handoff::Startup>>,
    /// Every guest thread is blocked; the run loop waits before entering the guest.
    stalled: bool,
    /// A call failed (fault, timeout, exit); calls are refused until reset.
    pub(crate) poisoned: bool,
    /// The FS base the vCPU holds now.
    pub(crate) vcpu_fs_base: u64,
    /// Where the 16 AT_RANDOM bytes are (reseeded on reset).
    pub(crate) at_random: Option<u64>,
    /// A breakpoint the host planted: (address, original byte).
    breakpoint: Option<(u64, u8)>,
    /// What the current run waits for.
    mode: Mode,
    /// The vCPU last left the guest at an I/O exit, i.e. in guest-kernel
    /// mode with the return to the program set up by the host: a run that
    /// stopped there needs no system registers put back before the next.
    pub(crate) in_kernel: bool,
    /// The host looks for the program's answer between exits
    /// ([`Machine::run_until_answered`]): sends to it must exit.
    output_watched: bool,
    /// The program's stack pointer at the last trap.
    trap_rsp: u64,
    /// The syscall number of the last syscall trap.
    trap_nr: u64,
    /// Handler registered with the ready call.
    ready_handler: u64,
    /// Bytes staged below the call stack for the next call (lowest address so far).
    stage_sp: Option<u64>,
    /// The answer of the current call, if the guest gave one.
    response: Option<Response>,
    /// The respond hypercall ends the call at once (the VM is reset afterwards anyway).
    respond_ends_call: bool,
    /// The gdb session, when one is attached (see [`crate::debug`]).
    pub(crate) debugger: Option<Box<crate::debug::Debugger>>,
    /// The ready point was a server waiting for its first connection.
    net_ready: bool,
    /// System calls served through an exit, by number (for `-v`'s summary
    /// of where a run left the VM).
    exits_by_call: std::collections::BTreeMap<u64, u64>,
    /// Host calls posted by the guest and answered without an exit (PVM
    /// with `--syscalls fast`; see [`exitless`]).
    pub(crate) exitless: Option<exitless::Exitless>,
    /// A vfork child's way to hand its memory to its waiting parent when it
    /// execs or ends (see [`vfork`]).
    vfork_parent: Option<vfork::ToParent>,
    /// Threads waiting for their vfork child to exec or end.
    vfork_waits: Vec<vfork::Waiting>,
    /// The VM of the program this one replaced (exec), for the pool once
    /// this process ends: emptying it is not on the new program's way.
    retired: Option<crate::hypervisor::pool::Slot>,
}

/// What a run waits for; forkvm's own hypercalls mean something only in their mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Run to exit; "ready" is a no-op.
    Program,
    /// Stop at the ready point.
    UntilReady,
    /// Stop when the call returns.
    Call,
    /// Stop when every thread is blocked (a server waits on the network).
    UntilIdle,
}

impl Machine {
    /// Runs the program until it exits, crashes or times out.
    pub fn run(&mut self) -> Result<Outcome, MachineError> {
        self.mode = Mode::Program;
        let outcome = self.run_for(self.timeout);
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!("system calls that exited: {}", self.exit_summary());
        }
        if let Some(x) = &self.exitless {
            tracing::debug!(
                "{} host calls answered without an exit, {} accesses before a late memory slot, \
                 {} calls finished by an exit after their guest stopped waiting",
                x.served(),
                x.late_slots(),
                x.awaited()
            );
        }
        // Its threads no longer wait for vfork children, which may end
        // (with the run) without a parent to take their stores.
        self.forget_vforks();
        // The first process's end is the run's: its children end too.
        self.proc
            .family
            .as_ref()
            .map(linux::child::Family::run_over);
        outcome
    }

    /// The calls that exited most, with counts: `"mmap 12, read 3 (15 in all)"`.
    pub fn exit_summary(&self) -> String {
        let mut v: Vec<(u64, u64)> = self.exits_by_call.iter().map(|(&n, &c)| (n, c)).collect();
        v.sort_by_key(|&(n, c)| (std::cmp::Reverse(c), n));
        let total: u64 = v.iter().map(|&(_, c)| c).sum();
        let mut s: Vec<String> = v
            .iter()
            .take(12)
            .map(|&(n, c)| format!("{} {c}", linux::names::name(n).unwrap_or("hypercall")))
            .collect();
        if v.len() > 12 {
            s.push("...".into());
        }
        format!("{} ({total} in all)", s.join(", "))
    }

    /// [`Self::exit_summary`], and counts afresh (a fork's next request).
    pub fn take_exit_summary(&mut self) -> String {
        let s = self.exit_summary();
        self.exits_by_call.clear();
        s
    }

    /// Runs until the program is initialised ([`Outcome::Ready`]), or ends otherwise.
    pub fn run_until_ready(&mut self, at: &ReadyAt) -> Result<Outcome, MachineError> {
        // Its processes may fork while it starts (a pre-fork server's
        // arbiter, a daemon): the first of them to reach a ready point
        // becomes the master (see `handoff`). Not with a breakpoint, which
        // the children's copies would hit.
        let handoff = match at {
            ReadyAt::Call if self.proc.family.is_some() => {
                Some(Arc::new(handoff::Handoff::default()))
            }
            _ => None,
        };
        self.handoff = handoff.clone();
        if handoff.is_none() {
            self.serve_config = self.proc.family.take().map(|f| f.tree.config.clone());
        }
        if let ReadyAt::Symbol(name) = at {
            let addr = self
                .symbols
                .address_of(name)
                .ok_or_else(|| MachineError::Internal(format!("no symbol {name:?} to stop at")))?;
            let original = *self
                .mem
                .read(addr, 1)
                .map_err(|f| MachineError::Internal(f.to_string()))?
                .first()
                .unwrap_or(&0);
            // The host patches code the program cannot write: past the user checks.
            self.mem
                .kernel_write(addr, &[0xcc])
                .map_err(|f| MachineError::Internal(f.to_string()))?;
            self.breakpoint = Some((addr, original));
        }
        let outcome =
            self.run_in_ready_mode(&mut || handoff.as_ref().is_some_and(|h| h.has_arrived()))?;
        if let Some((addr, byte)) = self.breakpoint.take() {
            self.mem
                .kernel_write(addr, &[byte])
                .map_err(|f| MachineError::Internal(f.to_string()))?;
        }
        self.handoff = None;
        let outcome = match &handoff {
            Some(h) if !matches!(outcome, Outcome::Ready) => self.take_handed_over(h, outcome),
            _ => {
                if matches!(outcome, Outcome::Ready) {
                    self.mark_ready()?;
                }
                outcome
            }
        };
        // A master makes no child processes (they would outlive it): those
        // it made while starting end once it is frozen (see `handoff`);
        // each fork of it gets a tree of its own per request
        // (`Fork::reset`), made with this configuration.
        if let Some(f) = self.proc.family.take() {
            self.serve_config = Some(f.tree.config.clone());
            if matches!(outcome, Outcome::Ready) && linux::child::others_alive_in(&f) {
                tracing::warn!(
                    "the program waits for connections while processes it started live on: \
                     they end once it is frozen, and each request is served by it alone (a \
                     server that hands connections to its workers, such as node's cluster \
                     module by default, cannot work so; NODE_CLUSTER_SCHED_POLICY=none lets \
                     node's workers accept)"
                );
            }
            self.startup = Some(handoff::Startup::new(f, None));
        }
        Ok(outcome)
    }

    /// Runs in [`Mode::UntilReady`] until the program is ready or ends, or
    /// `stop` says so (asked before every entry).
    fn run_in_ready_mode(
        &mut self,
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<Outcome, MachineError> {
        self.mode = Mode::UntilReady;
        let outcome = self.run_for_or(self.timeout, stop);
        self.mode = Mode::Program;
        outcome
    }

    /// Records the ready point: the stack for calls and the FPU state every call starts from.
    fn mark_ready(&mut self) -> Result<(), MachineError> {
        let rsp = self.trap_rsp;
        let xsave = self.vcpu.xsave()?;
        self.mem
            .kernel_write(abi::XSAVE_AREA_ADDR, &xsave)
            .map_err(|f| MachineError::Internal(f.to_string()))?;
        self.ready = Some(ReadyPoint {
            rsp,
            fs_base: self.proc.fs_base,
            handler: self.ready_handler,
            server: self.net_ready,
        });
        self.vcpu_fs_base = self.proc.fs_base;
        Ok(())
    }

    /// Runs until the program exits, crashes, times out, is ready or returns from a call.
    pub fn run_for(&mut self, timeout: Duration) -> Result<Outcome, MachineError> {
        self.run_for_or(timeout, &mut || false)
    }

    /// [`Self::run_for`], stopping with [`Outcome::Stopped`] as soon as
    /// `stop` says so; it is asked before every entry into the guest.
    pub(crate) fn run_for_or(
        &mut self,
        timeout: Duration,
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<Outcome, MachineError> {
        let mut deadline = Deadline::arm(timeout);
        let mut ticker: Option<Deadline> = None;
        // A kick when the interval timer (setitimer/alarm) is due.
        let mut alarm: Option<(Instant, Deadline)> = None;
        loop {
            if deadline.expired() {
                if self.debug_holds_deadline() {
                    // Time stopped in gdb does not count (crate::debug).
                    deadline = Deadline::arm(timeout);
                    continue;
                }
                return Ok(Outcome::TimedOut(timeout));
            }
            if stop() {
                return Ok(Outcome::Stopped);
            }
            let due = self.proc.next_timer_due();
            if alarm.as_ref().map(|(at, _)| *at) != due {
                alarm = due.map(|at| {
                    (
                        at,
                        Deadline::arm(at.saturating_duration_since(Instant::now())),
                    )
                });
            }
            if self.stalled {
                // Every thread is blocked: wait for the first timeout (or the watchdog).
                self.stalled = !self.switch_thread()?;
                continue;
            }
            match (self.proc.threads.others.is_empty(), ticker.is_some()) {
                (false, false) => ticker = Some(Deadline::tick(PREEMPT_TICK)),
                (true, true) => ticker = None,
                _ => {}
            }
            if let Some(base) = self.proc.pending_fs_base.take() {
                self.vcpu.set_fs_base(base)?;
                self.vcpu_fs_base = base;
            }
            if self.syscall_path.in_guest() {
                self.sync_fast_page()?;
            }
            self.vcpu.sync_slots(&self.mem)?;
            // The program's memory rights, if the host lifted them.
            self.mem.reprotect();
            let exit = match &self.exitless {
                Some(x) => x.lend(&mut self.proc, &mut self.mem, self.output_watched, || {
                    self.vcpu.run()
                }),
                None => self.vcpu.run(),
            }?;
            self.in_kernel = matches!(exit, Exit::Io(_));

            match exit {
                Exit::Io(port) => {
                    let trap = guest_kernel::decode(port, &self.mem)
                        .map_err(|f| MachineError::Internal(f.to_string()))?;
                    match trap {
                        Trap::Syscall(ret) => {
                            self.debug_quiet(true); // no gdb poll kicks in host calls (crate::debug)
                            if let Some(outcome) = self.syscall(ret)? {
                                return Ok(outcome);
                            }
                            if let Some(outcome) = self.debug_after_syscall(self.trap_rsp)? {
                                return Ok(outcome);
                            }
                        }
                        Trap::Exception {
                            vector: abi::vector::BREAKPOINT,
                            frame,
                            ..
                        } if self.breakpoint.is_some_and(|(a, _)| a + 1 == frame.rip) => {
                            self.trap_rsp = frame.rsp;
                            return Ok(Outcome::Ready);
                        }
                        Trap::Exception { frame, .. } if in_getrandom_fill(frame.rip) => {
                            self.getrandom_fault(frame.rsp)?;
                        }
                        Trap::Exception { vector, frame, .. }
                            if self.debug_claims(vector, &frame) =>
                        {
                            // A gdb breakpoint or single step (crate::debug).
                            if let Some(outcome) = self.debug_trap(vector, frame)? {
                                return Ok(outcome);
                            }
                        }
                        Trap::Exception {
                            vector,
                            error_code,
                            frame,
                        } => {
                            if let Some(outcome) = self.fault(vector, error_code, frame)? {
                                return Ok(outcome);
                            }
                        }
                        Trap::FastReturn(frame_addr) => {
                            // Answered in the guest; only the return is ours to finish.
                            let regs = self.vcpu.regs();
                            self.trap_rsp = Frame::read(&self.mem, frame_addr)
                                .map_err(|f| MachineError::Internal(f.to_string()))?
                                .rsp;
                            self.return_through_frame(&regs, frame_addr)?;
                        }
                        Trap::Unknown(p) => {
                            return Err(MachineError::Internal(format!("exit on port {p:#x}")))
                        }
                    }
                }
                Exit::Interrupted => {
                    if self.exitless.is_some() {
                        // Stopped in the spin loop: finish the posted call's guest side first.
                        exitless::Exitless::settle(&mut self.vcpu, &mut self.mem)
                            .map_err(|f| MachineError::Internal(f.to_string()))?;
                    }
                    if self.debugger.is_some() {
                        // A Ctrl-C from gdb (crate::debug).
                        if let Some(outcome) = self.debug_poll()? {
                            return Ok(outcome);
                        }
                    }
                    if !deadline.expired() {
                        // A kill from another process (linux::child).
                        linux::child::take_signals(&mut self.proc);
                        self.deliver_timer()?;
                        if let Some(status) = self.proc.exit_status {
                            return Ok(Outcome::Exited(status));
                        }
                        self.preempt()?;
                    }
                }
                Exit::Mmio {
                    addr,
                    write,
                    len,
                    data,
                } if self.mem.in_used_chunk(addr) && self.mem.allows(addr, len as u64, write) => {
                    // Memory a poller mapped while the vCPU ran, in a chunk
                    // without its slot yet: done here as the slot would
                    // (the guest's page tables allowed it); the slot is
                    // added before the next entry, which completes the
                    // instruction (or asks for its next piece).
                    if let Some(x) = &self.exitless {
                        x.late_slot();
                    }
                    if write {
                        self.mem
                            .kernel_write(addr, &data[..len])
                            .map_err(|f| MachineError::Internal(f.to_string()))?;
                    } else {
                        let bytes = self
                            .mem
                            .kernel_read(addr, len as u64)
                            .map_err(|f| MachineError::Internal(f.to_string()))?
                            .to_vec();
                        self.vcpu.answer_mmio_read(&bytes);
                    }
                }
                Exit::Mmio { addr, write, .. } => {
                    // An access to memory the program never mapped (no slot there).
                    let regs = self.vcpu.regs();
                    self.vcpu.finish_mmio()?;
                    // Taken in user mode on PVM: resuming goes through the kernel's iretq.
                    self.vcpu.enter_kernel_mode()?;
                    if in_getrandom_fill(regs.rip) {
                        self.getrandom_fault(regs.rsp)?;
                        continue;
                    }
                    let frame = Frame::user(regs.rip, regs.rsp, regs.rflags);
                    // #PF error code: user mode, a write when it was one,
                    // and present (SEGV_ACCERR) where the program mapped
                    // the page without the right it needed.
                    let mapped = self.mem.user_rights_at(addr).is_some();
                    let code = 0x4 | u64::from(mapped) | if write { 0x2 } else { 0 };
                    if let Some(outcome) =
                        self.fault_at(abi::vector::PAGE_FAULT, code, addr, frame)?
                    {
                        return Ok(outcome);
                    }
                }
                Exit::EmulationFailure if self.vcpu.slots_missing(&self.mem) => {
                    // An instruction KVM cannot emulate (glibc's vector
                    // string functions) touched memory a poller mapped while
                    // the vCPU ran, before its chunk had a memory slot: the
                    // slot is added before the next entry, which runs the
                    // instruction again (KVM did not complete it).
                    if let Some(x) = &self.exitless {
                        x.late_slot();
                    }
                }
                Exit::EmulationFailure => {
                    return Err(MachineError::Internal(
                        "internal error (emulation failure)".into(),
                    ))
                }
                Exit::HostFault => {
                    if let Some(outcome) = self.host_fault()? {
                        return Ok(outcome);
                    }
                }
                Exit::Shutdown => {
                    return Err(MachineError::Internal("the guest triple-faulted".into()))
                }
                Exit::Other(what) => return Err(MachineError::Internal(what.into())),
            }
        }
    }

    /// Refreshes what the in-guest dispatcher answers that changes while the
    /// program runs: the running thread and whether it is alone. Written only
    /// when different, so a fork's copy-on-write page stays shared (and out
    /// of the pages a reset restores) in the common case.
    fn sync_fast_page(&mut self) -> Result<(), MachineError> {
        let alone = u64::from(self.proc.threads.others.is_empty());
        for (off, v) in [(abi::fast::TID, self.proc.tid), (abi::fast::ALONE, alone)] {
            let addr = abi::FAST_DATA_ADDR + off;
            let now = self
                .mem
                .kernel_read_u64(addr)
                .map_err(|f| MachineError::Internal(f.to_string()))?;
            if now != v {
                self.mem
                    .kernel_write_u64(addr, v)
                    .map_err(|f| MachineError::Internal(f.to_string()))?;
            }
        }
        Ok(())
    }

    /// Continues the program in user mode with `user`'s registers, through
    /// the guest kernel's `iretq` (valid whatever kernel path we exited from).
    fn resume_user(&mut self, user: &kvm_bindings::kvm_regs) -> Result<(), MachineError> {
        Frame::user(user.rip, user.rsp, user.rflags)
            .write(&mut self.mem, guest_kernel::INITIAL_FRAME_ADDR)
            .map_err(|f| MachineError::Internal(f.to_string()))?;
        self.vcpu.set_regs(&kvm_bindings::kvm_regs {
            rip: guest_kernel::IRET_ENTRY,
            rsp: guest_kernel::INITIAL_FRAME_ADDR,
            rflags: 0x2,
            ..*user
        });
        Ok(())
    }

    /// Where the program was when the run stopped, e.g. `0x401a2c (main+0x1c)`,
    /// for timeout messages.
    pub fn where_stopped(&self) -> String {
        let rip = self.vcpu.regs().rip;
        match self.symbols.lookup(rip) {
            Some((name, off)) => format!("{rip:#x} ({name}+{off:#x})"),
            None => format!("{rip:#x}"),
        }
    }

    /// A human-readable report for a crash outcome.
    pub fn crash_report(&self, info: &CrashInfo) -> String {
        crash::render(info, &self.mem, Some(&self.symbols))
    }

    /// What the run noted: paths denied as outside the allow-list, a failed mmap (for hints).
    pub fn notes(&self) -> &linux::trace::Notes {
        &self.proc.notes
    }

    /// Existing host paths the run's processes were refused as outside the
    /// allow-list: this one's first, then those of its ended children (the
    /// first few of each, for a failed run's hint).
    pub fn refused_paths(&self) -> Vec<String> {
        let mut all = self.proc.notes.denied.clone();
        if let Some(f) = &self.proc.family {
            for path in f.tree.refused() {
                if !all.contains(&path) {
                    all.push(path);
                }
            }
        }
        all
    }

    /// The size of the first mmap one of the run's processes was refused for
    /// lack of guest memory or address space: this one's, or else one of its
    /// ended children's (for a failed run's hint).
    pub fn mmap_enomem(&self) -> Option<u64> {
        self.proc
            .notes
            .mmap_enomem
            .or_else(|| self.proc.family.as_ref().and_then(|f| f.tree.mmap_enomem()))
    }

    /// Guest memory (for tests and embedding).
    pub fn memory(&self) -> &GuestMemory {
        &self.mem
    }
}

/// rt_sigreturn(2): served by the run loop because it replaces the registers.
const RT_SIGRETURN: u64 = 15;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin;

    fn config() -> Config {
        Config {
            memory: 16 << 20,
            argv: vec!["prog".into()],
            ..Config::default()
        }
    }

    #[test]
    fn syscalls_round_trip_and_exit() {
        let img = builtin::syscall_loop(100).unwrap();
        let mut m = Machine::new(&img, "/prog", config()).unwrap();
        assert_eq!(m.run().unwrap().status(), 0);
    }

    #[test]
    fn file_calls_are_answered_on_every_path() {
        let img = builtin::file_call_loop(300, "/dev/null", 1, 1, 1).unwrap();
        for syscalls in [SyscallPath::Fast, SyscallPath::Guest, SyscallPath::Exit] {
            let cfg = Config {
                syscalls,
                allow_read: vec!["/dev/null".into()],
                ..config()
            };
            let mut m = Machine::new(&img, "/prog", cfg).unwrap();
            assert_eq!(m.run().unwrap().status(), 0, "{syscalls}");
        }
    }

    /// exec builds its program in a pooled VM another program ran in: the
    /// pool's VM is taken, and the program runs there as in a new one.
    #[test]
    fn a_program_is_built_in_a_pooled_vm() {
        use crate::hypervisor::pool::{Slot, VmPool};
        let img = builtin::syscall_loop(100).unwrap();
        let dir = std::env::temp_dir().join(format!("forkvm-pooled-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("prog");
        std::fs::write(&path, &img).unwrap();
        let pool = VmPool::default();
        let mut first = Machine::new(&img, "/prog", config()).unwrap();
        assert_eq!(first.run().unwrap().status(), 0);
        let size = first.mem.size();
        let Machine { vcpu, mut mem, .. } = first;
        mem.empty_keeping_pages().unwrap();
        pool.give(Slot { vcpu, mem });
        for _ in 0..2 {
            let path = path.to_str().unwrap();
            let mut m = Machine::from_file_in(path, config(), Some(&pool)).unwrap();
            assert_eq!(pool.idle(size), 0, "the pooled VM was taken");
            assert_eq!(m.run().unwrap().status(), 0);
            let Machine { vcpu, mut mem, .. } = m;
            mem.empty_all().unwrap();
            pool.give(Slot { vcpu, mem });
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn timeout_stops_a_spinning_guest() {
        let img = builtin::spin().unwrap();
        let cfg = Config {
            timeout: Duration::from_millis(200),
            ..config()
        };
        let mut m = Machine::new(&img, "/prog", cfg).unwrap();
        assert!(matches!(m.run().unwrap(), Outcome::TimedOut(_)));
    }
}
