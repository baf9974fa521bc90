//! A GDB remote stub for the program in a VM (`forkvm run --gdb ADDR`),
//! built on the `gdbstub` crate (protocol) and `gdbstub_arch` (x86-64).
//!
//! How a stop works: whenever gdb is in control, the vCPU is *parked* at the
//! guest kernel's initial `iretq` ([`guest_kernel::IRET_ENTRY`]) with the
//! program's RIP/RSP/RFLAGS in the frame at
//! [`guest_kernel::INITIAL_FRAME_ADDR`] and its other registers in the vCPU,
//! so reading, writing and resuming are the same whatever stopped it.
//!
//! Mechanism (the same on PVM and hardware KVM): software breakpoints are
//! `int3` bytes the host writes into guest memory (past the program's page
//! rights); the #BP exception goes through the guest IDT and exits to the
//! host, which tells it from the PVM syscall stub's `int3` by its address.
//! Single-step sets RFLAGS.TF in the frame; the #DB exception after one
//! instruction also comes through the guest IDT. `KVM_SET_GUEST_DEBUG` is not
//! used: PVM accepts it but never produces debug exits.

mod regs;
mod target;

use target::{dr7_of, initial_auxv};

use crate::abi;
use crate::crash::CrashInfo;
use crate::guest_kernel::{self, Frame};
use crate::hypervisor::Deadline;
use crate::machine::{Machine, MachineError, Outcome};
use gdbstub::common::{Signal, Tid};
use gdbstub::stub::state_machine::GdbStubStateMachine;
use gdbstub::stub::{DisconnectReason, GdbStub, MultiThreadStopReason};
use gdbstub::target::ext::auxv::{Auxv, AuxvOps};
use gdbstub::target::ext::base::multithread::{
    MultiThreadBase, MultiThreadResume, MultiThreadResumeOps, MultiThreadSchedulerLocking,
    MultiThreadSchedulerLockingOps, MultiThreadSingleStep, MultiThreadSingleStepOps,
};
use gdbstub::target::ext::base::BaseOps;
use gdbstub::target::ext::breakpoints::{
    Breakpoints, BreakpointsOps, HwWatchpoint, HwWatchpointOps, SwBreakpoint, SwBreakpointOps,
    WatchKind,
};
use gdbstub::target::{Target, TargetError, TargetResult};
use std::collections::{BTreeMap, VecDeque};
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use regs::ForkvmX86_64;

/// The byte of `int3`.
const INT3: u8 = 0xcc;
/// FS base must stay below this (canonical user addresses).
const USER_ADDRESS_END: u64 = 0x0000_8000_0000_0000;
/// MXCSR bits that may be set.
const MXCSR_VALID: u32 = 0xffff;
/// The bytes of `syscall`.
const SYSCALL: [u8; 2] = [0x0f, 0x05];
/// RFLAGS.TF: trap after the next instruction.
const TF: u64 = 1 << 8;
/// At most this many software breakpoints at once (each costs a map entry).
const MAX_BREAKPOINTS: usize = 4096;
/// How often a running program is checked for a Ctrl-C from gdb.
const INTERRUPT_POLL: Duration = Duration::from_millis(50);
/// The tick when gdb is known to wait for a stop.
const URGENT_POLL: Duration = Duration::from_millis(1);
/// Bytes read from the connection at a time.
const READ_CHUNK: usize = 4096;

type Stub = GdbStubStateMachine<'static, Machine, TcpStream>;

/// The debugging session of one machine.
pub struct Debugger {
    /// The protocol state; taken out while it drives the machine.
    stub: Option<Stub>,
    /// Bytes received and not yet fed to the stub.
    pending: VecDeque<u8>,
    /// Breakpoints planted: address → the original byte.
    breakpoints: BTreeMap<u64, u8>,
    /// The next resume single-steps the current thread.
    step: bool,
    /// A step over a `syscall` instruction: the `int3` planted after it
    /// (address, original byte). TF cannot do it: `syscall` masks TF, and
    /// `sysret`/`iretq` restore it only to trap one instruction later.
    step_over: Option<(u64, u8)>,
    /// The program's auxiliary vector as the kernel gave it (gdb finds a
    /// PIE's load address and ld.so's libraries from AT_ENTRY/AT_PHDR/AT_BASE).
    auxv: Vec<u8>,
    /// The signal that ended the program, when one did (see `debug_signal_exit`).
    killed_by: Option<u8>,
    /// Kicks the vCPU out periodically so a Ctrl-C from gdb is seen while
    /// the program runs (dropped with the session). None while the host
    /// serves a system call: the kick would cut a host sleep short (EINTR).
    poll: Option<Deadline>,
    /// `forkvm serve --gdb`: where this VM waits for gdb when it stops on
    /// its own (an `int3` of the program, a fatal fault) with none attached.
    waiter: Option<Arc<GdbWaiter>>,
    /// A session was attached since [`Machine::take_debugged`] last asked.
    debugged: bool,
    /// A session ended in the current call: its time limit starts afresh.
    rearm: bool,
    /// Hardware watchpoints in DR0-DR3: (address, length, kind).
    watches: [Option<(u64, u64, WatchKind)>; 4],
}

/// Where the VMs of `forkvm serve --gdb` wait for gdb: one listener shared
/// by every worker; one worker at a time waits on it (the others that stop
/// meanwhile queue for it).
#[derive(Debug)]
pub struct GdbWaiter {
    listener: TcpListener,
    addr: std::net::SocketAddr,
    turn: Mutex<()>,
}

impl GdbWaiter {
    /// Listens on `addr` (`127.0.0.1:0`: a free port; see [`GdbWaiter::addr`]).
    pub fn bind(addr: &str) -> std::io::Result<Arc<Self>> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        Ok(Arc::new(Self {
            listener,
            addr,
            turn: Mutex::new(()),
        }))
    }

    /// The address gdb connects to.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Waits for gdb's connection (blocking this VM's thread only).
    fn accept(&self, what: &str) -> Option<TcpStream> {
        let _turn = self.turn.lock().ok()?;
        eprintln!(
            "forkvm: {what}; waiting for gdb on {} (target remote {})",
            self.addr, self.addr
        );
        loop {
            match self.listener.accept() {
                Ok((conn, _)) => return Some(conn),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("--gdb: accept failed: {e}");
                    return None;
                }
            }
        }
    }
}

impl std::fmt::Debug for Debugger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Debugger")
            .field("breakpoints", &self.breakpoints.len())
            .field("step", &self.step)
            .finish()
    }
}

impl Debugger {
    fn new(waiter: Option<Arc<GdbWaiter>>) -> Self {
        Self {
            stub: None,
            pending: VecDeque::new(),
            breakpoints: BTreeMap::new(),
            step: false,
            step_over: None,
            auxv: Vec::new(),
            killed_by: None,
            poll: None,
            waiter,
            debugged: false,
            rearm: false,
            watches: [None; 4],
        }
    }
}

/// What gdb decided at a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Run on (continue or step).
    Run,
    /// gdb detached (or the connection broke): run on without a debugger.
    Detached,
    /// gdb killed the program.
    Killed,
}

/// The status a run killed from gdb ends with (as SIGKILL).
pub const KILLED_STATUS: i32 = 128 + 9;

fn internal(e: impl std::fmt::Display) -> MachineError {
    MachineError::Internal(e.to_string())
}

fn tid_of(t: u64) -> Option<Tid> {
    usize::try_from(t).ok().and_then(Tid::new)
}

impl Machine {
    /// Attaches gdb over `conn` and stops before the program's first
    /// instruction until gdb resumes it (it must not have run yet).
    pub fn attach_gdb(&mut self, conn: TcpStream) -> Result<Resume, MachineError> {
        // Packets are small and latency matters (one round trip per command).
        conn.set_nodelay(true).map_err(internal)?;
        // Before the first entry the SYNC_REGS copy is empty: fill it from
        // KVM, so a stop reads the registers `reset` set (parked at the `iretq`).
        let regs = self.vcpu.get_regs_ioctl()?;
        self.vcpu.set_regs(&regs);
        let auxv = self.parked().map(|r| initial_auxv(&self.mem, r.rsp))?;
        let stub = GdbStub::new(conn)
            .run_state_machine(self)
            .map_err(internal)?;
        self.debugger = Some(Box::new(Debugger::new(None)));
        if let Some(d) = self.debugger.as_mut() {
            d.stub = Some(stub);
            d.auxv = auxv;
            d.debugged = true;
            d.poll = Some(Deadline::tick(INTERRUPT_POLL));
        }
        self.debug_session(None)
    }

    /// `forkvm serve --gdb`: from now on, when the program stops on its own
    /// (an `int3`, e.g. `forkvm_breakpoint()`, or a fault that would kill it),
    /// this VM waits for gdb on `waiter` and reports the stop to it.
    pub fn set_gdb_waiter(&mut self, waiter: Arc<GdbWaiter>) {
        self.debugger = Some(Box::new(Debugger::new(Some(waiter))));
    }

    /// Whether gdb was attached since the last time this was asked (the
    /// VM then needs a reset: gdb may have changed anything).
    pub fn take_debugged(&mut self) -> bool {
        let attached = self.gdb_attached();
        self.debugger.as_mut().is_some_and(|d| {
            d.rearm = false;
            std::mem::take(&mut d.debugged) || attached
        })
    }

    /// Whether gdb is attached now.
    pub fn gdb_attached(&self) -> bool {
        self.debugger.as_ref().is_some_and(|d| d.stub.is_some())
    }

    /// Whether the current call's time limit must start afresh: gdb is
    /// attached (a stop in gdb does not count against it), or was in this
    /// call. Asked when the limit expired.
    pub(crate) fn debug_holds_deadline(&mut self) -> bool {
        let attached = self.gdb_attached();
        self.debugger
            .as_mut()
            .is_some_and(|d| std::mem::take(&mut d.rearm) || attached)
    }

    /// After the VM's memory was reset to its snapshot (which took out the
    /// `int3`s gdb planted): plants them again, so gdb's breakpoints stay
    /// set across the resets of the VM it debugs. The original bytes are
    /// read afresh (the snapshot's).
    pub fn debug_after_reset(&mut self) -> Result<(), MachineError> {
        let Some(d) = self.debugger.as_mut() else {
            return Ok(());
        };
        d.step_over = None;
        d.step = false;
        let addrs: Vec<u64> = d.breakpoints.keys().copied().collect();
        for addr in addrs {
            let Some(&byte) = self.mem.read(addr, 1).ok().and_then(|b| b.first()) else {
                continue;
            };
            self.mem.kernel_write(addr, &[INT3]).map_err(internal)?;
            if let Some(b) = self
                .debugger
                .as_mut()
                .and_then(|d| d.breakpoints.get_mut(&addr))
            {
                *b = byte;
            }
        }
        Ok(())
    }

    /// `forkvm serve --gdb`: the program stopped on its own (`what`) with
    /// no gdb attached: waits for gdb's connection and attaches it. False
    /// when there is nowhere to wait (not serving with --gdb) or it failed.
    fn attach_waiting(&mut self, what: &str) -> bool {
        if self.gdb_attached() {
            return true;
        }
        let Some(waiter) = self.debugger.as_ref().and_then(|d| d.waiter.clone()) else {
            return false;
        };
        let Some(conn) = waiter.accept(what) else {
            return false;
        };
        if conn.set_nodelay(true).is_err() {
            return false;
        }
        let Ok(stub) = GdbStub::new(conn).run_state_machine(self) else {
            return false;
        };
        if let Some(d) = self.debugger.as_mut() {
            d.stub = Some(stub);
            d.debugged = true;
            d.poll = Some(Deadline::tick(INTERRUPT_POLL));
        }
        true
    }

    /// Whether an exception with `vector` and `frame` belongs to the debugger
    /// (a planted breakpoint, or the trap of a single step).
    pub(crate) fn debug_claims(&self, vector: u8, frame: &Frame) -> bool {
        let Some(d) = self.debugger.as_ref() else {
            return false;
        };
        let attached = d.stub.is_some();
        frame.from_user()
            && match vector {
                // The program's own int3 stops it for gdb when serving with --gdb.
                abi::vector::BREAKPOINT if d.waiter.is_some() => true,
                abi::vector::BREAKPOINT => {
                    let at = frame.rip.wrapping_sub(1);
                    d.breakpoints.contains_key(&at) || d.step_over.is_some_and(|(a, _)| a == at)
                }
                abi::vector::DEBUG => attached,
                _ => false,
            }
    }

    /// Handles an exception claimed by [`Machine::debug_claims`]: reports the
    /// stop to gdb and waits for it. `Some` when the run must end (kill).
    pub(crate) fn debug_trap(
        &mut self,
        vector: u8,
        frame: Frame,
    ) -> Result<Option<Outcome>, MachineError> {
        let mut user = self.vcpu.regs();
        user.rip = frame.rip;
        user.rsp = frame.rsp;
        user.rflags = frame.rflags & !TF;
        let tid = tid_of(self.proc.tid);
        let at = frame.rip.wrapping_sub(1);
        let planted = self.debugger.as_ref().is_some_and(|d| {
            d.breakpoints.contains_key(&at) || d.step_over.is_some_and(|(a, _)| a == at)
        });
        if vector == abi::vector::BREAKPOINT && !planted {
            // The program's own int3 (forkvm serve --gdb): a SIGTRAP stop
            // after it, as under gdb natively; continuing runs on past it.
            self.park(&user)?;
            if !self.attach_waiting(&format!("the request stopped at an int3 at {:#x}", at)) {
                return Ok(None);
            }
            let reason = match tid {
                Some(tid) => MultiThreadStopReason::SignalWithThread {
                    tid,
                    signal: Signal::SIGTRAP,
                },
                None => MultiThreadStopReason::Signal(Signal::SIGTRAP),
            };
            return match self.debug_session(Some(reason))? {
                Resume::Killed => Ok(Some(Outcome::Exited(KILLED_STATUS))),
                Resume::Run | Resume::Detached => Ok(None),
            };
        }
        let stepping = self.debugger.as_ref().is_some_and(|d| d.step);
        let over = self
            .debugger
            .as_ref()
            .and_then(|d| d.step_over)
            .is_some_and(|(a, _)| a == frame.rip.wrapping_sub(1));
        let reason = if vector == abi::vector::BREAKPOINT && over {
            // The step over a syscall is done (the int3 goes in debug_session).
            user.rip = frame.rip.wrapping_sub(1);
            Some(MultiThreadStopReason::DoneStep)
        } else if vector == abi::vector::BREAKPOINT {
            user.rip = frame.rip.wrapping_sub(1);
            tid.map(MultiThreadStopReason::SwBreak)
        } else if let (Some((addr, kind)), Some(tid)) = (self.watch_hit(), tid) {
            // A data breakpoint: a trap after the access.
            Some(MultiThreadStopReason::Watch { tid, kind, addr })
        } else if stepping {
            Some(MultiThreadStopReason::DoneStep)
        } else {
            // A trap flag left over (e.g. a thread preempted mid-step): drop it.
            None
        };
        self.park(&user)?;
        let Some(reason) = reason else {
            return Ok(None);
        };
        match self.debug_session(Some(reason))? {
            Resume::Killed => Ok(Some(Outcome::Exited(KILLED_STATUS))),
            Resume::Run | Resume::Detached => Ok(None),
        }
    }

    /// Stops (`true`) or restarts the Ctrl-C poll tick around a system call
    /// the host serves, so a host sleep or wait is not cut short by it.
    /// Restarted with a short period while gdb's bytes wait for a stop in
    /// program code.
    pub(crate) fn debug_quiet(&mut self, quiet: bool) {
        let Some(d) = self.debugger.as_mut().filter(|d| d.stub.is_some()) else {
            return;
        };
        if quiet {
            d.poll = None;
            return;
        }
        let urgent = !d.pending.is_empty();
        d.poll = Some(Deadline::tick(if urgent {
            URGENT_POLL
        } else {
            INTERRUPT_POLL
        }));
    }

    /// On a kick while the program runs: if gdb sent something (Ctrl-C),
    /// stop and serve it, once the vCPU is in program code (else next kick).
    /// `Some` when the run must end (kill).
    pub(crate) fn debug_poll(&mut self) -> Result<Option<Outcome>, MachineError> {
        if !self.gdb_waits()? {
            return Ok(None);
        }
        let regs = self.vcpu.regs();
        if regs.rip < abi::USER_BASE || self.vcpu.event_in_flight()? {
            return Ok(None);
        }
        // The vCPU is in program code: its registers are the program's.
        self.interrupted()
    }

    /// After the host served a system call: restarts the poll tick, and if
    /// gdb sent something (Ctrl-C), stops right here, the program standing
    /// after its `syscall` (RIP←RCX, RFLAGS←R11, its stack at `user_rsp`).
    /// `Some` when the run must end (kill).
    pub(crate) fn debug_after_syscall(
        &mut self,
        user_rsp: u64,
    ) -> Result<Option<Outcome>, MachineError> {
        if !self.gdb_attached() {
            return Ok(None);
        }
        self.debug_quiet(false);
        // A thread that just blocked is put aside and none runs yet: stop
        // later, in a thread that runs (the poll tick).
        let me = self.proc.tid;
        if self.proc.threads.others.iter().any(|t| t.tid == me) || !self.gdb_waits()? {
            return Ok(None);
        }
        let regs = self.vcpu.regs();
        if regs.rip != guest_kernel::IRET_ENTRY {
            // Not already parked (by a thread switch or a signal handler).
            self.park(&kvm_bindings::kvm_regs {
                rip: regs.rcx,
                rflags: regs.r11,
                rsp: user_rsp,
                ..regs
            })?;
        }
        self.interrupted()
    }

    /// Whether gdb sent bytes not served yet (read without blocking into
    /// `pending`). A closed connection ends the session (the program runs on).
    fn gdb_waits(&mut self) -> Result<bool, MachineError> {
        let Some(d) = self.debugger.as_mut() else {
            return Ok(false);
        };
        if !d.pending.is_empty() {
            return Ok(true);
        }
        let Some(GdbStubStateMachine::Running(s)) = d.stub.as_mut() else {
            return Ok(false);
        };
        let conn = s.borrow_conn();
        let mut buf = [0u8; READ_CHUNK];
        let got = conn
            .set_nonblocking(true)
            .and_then(|()| conn.read(&mut buf));
        conn.set_nonblocking(false).map_err(internal)?;
        match got {
            Ok(0) => {
                self.end_session(Resume::Detached)?;
                Ok(false)
            }
            Ok(n) => {
                d.pending.extend(buf.get(..n).unwrap_or(&[]));
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// Serves what gdb sent while the program ran (the program is stopped
    /// where [`Machine::parked`] finds it).
    fn interrupted(&mut self) -> Result<Option<Outcome>, MachineError> {
        let how = self.debug_session(None)?;
        if let Some(d) = self.debugger.as_mut() {
            d.poll = Some(Deadline::tick(INTERRUPT_POLL));
        }
        match how {
            Resume::Killed => Ok(Some(Outcome::Exited(KILLED_STATUS))),
            Resume::Run | Resume::Detached => Ok(None),
        }
    }

    /// A fault is about to end the program: report it to gdb as a stop with
    /// its signal first, so gdb can look at where it happened.
    pub(crate) fn debug_fatal(
        &mut self,
        user: &kvm_bindings::kvm_regs,
        info: &CrashInfo,
    ) -> Result<(), MachineError> {
        let what = format!("the request crashed ({})", info.signal_name);
        if !self.attach_waiting(&what) {
            return Ok(());
        }
        self.park(user)?;
        let reason = match tid_of(self.proc.tid) {
            Some(tid) => MultiThreadStopReason::SignalWithThread {
                tid,
                signal: Signal(u8::try_from(info.signal).unwrap_or(11)),
            },
            None => MultiThreadStopReason::Signal(Signal::SIGSEGV),
        };
        self.debug_session(Some(reason))?;
        Ok(())
    }

    /// A syscall ended the program with `status`: if that was a signal the
    /// program sent itself (kill, tkill, tgkill with a default action that
    /// terminates, as abort() does), report it to gdb as a stop first, at the
    /// syscall, then end the run as killed by it.
    pub(crate) fn debug_signal_exit(
        &mut self,
        regs: &kvm_bindings::kvm_regs,
        user_rsp: u64,
        status: i32,
    ) -> Result<Option<Outcome>, MachineError> {
        const KILL_CALLS: [u64; 3] = [62, 200, 234]; // kill, tkill, tgkill
        if !self.gdb_attached() || !KILL_CALLS.contains(&regs.rax) {
            return Ok(None);
        }
        let Some(sig) = status.checked_sub(128).and_then(|s| u8::try_from(s).ok()) else {
            return Ok(None);
        };
        if sig == 0 || sig > 64 {
            return Ok(None);
        }
        // The program stands after its `syscall` (RIP←RCX, RFLAGS←R11).
        let user = kvm_bindings::kvm_regs {
            rip: regs.rcx,
            rflags: regs.r11,
            rsp: user_rsp,
            ..*regs
        };
        self.park(&user)?;
        let reason = match self.current_tid() {
            Some(tid) => MultiThreadStopReason::SignalWithThread {
                tid,
                signal: Signal(sig),
            },
            None => MultiThreadStopReason::Signal(Signal(sig)),
        };
        if self.debug_session(Some(reason))? == Resume::Killed {
            return Ok(Some(Outcome::Exited(KILLED_STATUS)));
        }
        if let Some(d) = self.debugger.as_mut() {
            d.killed_by = Some(sig);
        }
        Ok(None)
    }

    /// Tells gdb how the run ended and ends the session.
    pub fn gdb_finish(&mut self, outcome: &Outcome) {
        let Some(mut d) = self.debugger.take() else {
            return;
        };
        let reason = match outcome {
            Outcome::Exited(_) if d.killed_by.is_some() => {
                MultiThreadStopReason::Terminated(Signal(d.killed_by.unwrap_or(9)))
            }
            Outcome::Exited(code) => MultiThreadStopReason::Exited((*code & 0xff) as u8),
            Outcome::Crashed(info) => {
                MultiThreadStopReason::Terminated(Signal(u8::try_from(info.signal).unwrap_or(9)))
            }
            _ => MultiThreadStopReason::Terminated(Signal::SIGKILL),
        };
        if let Some(GdbStubStateMachine::Running(s)) = d.stub.take() {
            // The session is over either way; a failure to tell gdb changes nothing.
            let _ = s.report_stop(self, reason);
        }
    }

    /// Puts the vCPU where a stop keeps it: at the guest kernel's `iretq`
    /// into `user` (see the module documentation).
    fn park(&mut self, user: &kvm_bindings::kvm_regs) -> Result<(), MachineError> {
        Frame::user(user.rip, user.rsp, user.rflags)
            .write(&mut self.mem, guest_kernel::INITIAL_FRAME_ADDR)
            .map_err(internal)?;
        self.vcpu.set_regs(&kvm_bindings::kvm_regs {
            rip: guest_kernel::IRET_ENTRY,
            rsp: guest_kernel::INITIAL_FRAME_ADDR,
            rflags: 0x2,
            ..*user
        });
        Ok(())
    }

    /// The stopped program's registers: from the frame when parked at the
    /// `iretq`, else the vCPU's own.
    fn parked(&self) -> Result<kvm_bindings::kvm_regs, MachineError> {
        let regs = self.vcpu.regs();
        if regs.rip != guest_kernel::IRET_ENTRY {
            // Stopped in program code (Ctrl-C): the vCPU holds the program's registers.
            return Ok(regs);
        }
        let frame = Frame::read(&self.mem, guest_kernel::INITIAL_FRAME_ADDR).map_err(internal)?;
        Ok(kvm_bindings::kvm_regs {
            rip: frame.rip,
            rsp: frame.rsp,
            rflags: frame.rflags,
            ..regs
        })
    }

    /// Replaces the stopped program's registers, where [`Machine::parked`] found them.
    fn set_parked(&mut self, user: &kvm_bindings::kvm_regs) -> Result<(), MachineError> {
        if self.vcpu.regs().rip == guest_kernel::IRET_ENTRY {
            return self.park(user);
        }
        let rflags = Frame::user(0, 0, user.rflags).rflags;
        self.vcpu
            .set_regs(&kvm_bindings::kvm_regs { rflags, ..*user });
        Ok(())
    }

    /// Reports `reason` (if any) and serves gdb until it resumes, detaches or kills.
    fn debug_session(
        &mut self,
        reason: Option<MultiThreadStopReason<u64>>,
    ) -> Result<Resume, MachineError> {
        self.clear_step_over()?;
        let Some(stub) = self.debugger.as_mut().and_then(|d| d.stub.take()) else {
            return Ok(Resume::Detached);
        };
        let mut state = match (stub, reason) {
            (GdbStubStateMachine::Running(s), Some(r)) => s.report_stop(self, r),
            (s, _) => Ok(s),
        };
        loop {
            let next = match state {
                Ok(GdbStubStateMachine::Idle(mut s)) => match self.next_byte(s.borrow_conn()) {
                    Some(b) => s.incoming_data(self, b),
                    None => return self.end_session(Resume::Detached),
                },
                Ok(GdbStubStateMachine::Running(s)) => {
                    // Bytes gdb sent while the program runs (Ctrl-C) are
                    // served now; else the program runs on.
                    match self.debugger.as_mut().and_then(|d| d.pending.pop_front()) {
                        Some(b) => s.incoming_data(self, b),
                        None => {
                            if let Some(d) = self.debugger.as_mut() {
                                d.stub = Some(GdbStubStateMachine::Running(s));
                            }
                            return Ok(Resume::Run);
                        }
                    }
                }
                Ok(GdbStubStateMachine::CtrlCInterrupt(s)) => {
                    let reason = match self.current_tid() {
                        Some(tid) => MultiThreadStopReason::SignalWithThread {
                            tid,
                            signal: Signal::SIGINT,
                        },
                        None => MultiThreadStopReason::Signal(Signal::SIGINT),
                    };
                    s.interrupt_handled(self, Some(reason))
                }
                Ok(GdbStubStateMachine::Disconnected(s)) => {
                    let how = match s.get_reason() {
                        DisconnectReason::Kill => Resume::Killed,
                        _ => Resume::Detached,
                    };
                    return self.end_session(how);
                }
                Err(e) => {
                    tracing::warn!("gdb session ended: {e}");
                    return self.end_session(Resume::Detached);
                }
            };
            state = next;
        }
    }

    /// The next byte from gdb (`None`: the connection is gone).
    fn next_byte(&mut self, conn: &mut TcpStream) -> Option<u8> {
        let d = self.debugger.as_mut()?;
        if let Some(b) = d.pending.pop_front() {
            return Some(b);
        }
        let mut buf = [0u8; READ_CHUNK];
        loop {
            match conn.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => {
                    d.pending.extend(buf.get(..n)?);
                    return d.pending.pop_front();
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            }
        }
    }

    /// Takes out the `int3` of a step over a syscall, if one is planted.
    fn clear_step_over(&mut self) -> Result<(), MachineError> {
        if let Some((addr, byte)) = self.debugger.as_mut().and_then(|d| d.step_over.take()) {
            self.mem.kernel_write(addr, &[byte]).map_err(internal)?;
        }
        Ok(())
    }

    /// Plants the `int3` that ends a step over the `syscall` at `rip`;
    /// false if `rip` is not at a `syscall` (or the byte after it cannot be patched).
    fn plant_step_over(&mut self, rip: u64) -> bool {
        if self.debugger.is_none() {
            return false;
        }
        if self.mem.read(rip, 2).ok() != Some(&SYSCALL[..]) {
            return false;
        }
        let after = rip.wrapping_add(2);
        let Some(&byte) = self.mem.read(after, 1).ok().and_then(|b| b.first()) else {
            return false;
        };
        if self.mem.kernel_write(after, &[INT3]).is_err() {
            return false;
        }
        if let Some(d) = self.debugger.as_mut() {
            d.step_over = Some((after, byte));
        }
        true
    }

    /// Removes every trace of the debugger from the program (breakpoints, trap flag).
    fn end_session(&mut self, how: Resume) -> Result<Resume, MachineError> {
        self.clear_step_over()?;
        if let Some(mut d) = self.debugger.take() {
            if d.waiter.is_some() {
                // Serving with --gdb: the VM waits for gdb again at its next stop.
                let mut next = Debugger::new(d.waiter.clone());
                next.debugged = true;
                next.rearm = true;
                self.debugger = Some(Box::new(next));
            }
            for (addr, byte) in std::mem::take(&mut d.breakpoints) {
                self.mem.kernel_write(addr, &[byte]).map_err(internal)?;
            }
            if d.watches.iter().any(Option::is_some) {
                let mut regs = self.vcpu.debug_regs()?;
                regs.dr7 = dr7_of(&[None; 4]);
                regs.dr6 = 0xffff_0ff0;
                self.vcpu.set_debug_regs(&regs)?;
            }
            if let Some(s) = d.stub.take() {
                let mut conn = match s {
                    GdbStubStateMachine::Idle(mut s) => Some(s.borrow_conn().try_clone()),
                    GdbStubStateMachine::Running(mut s) => Some(s.borrow_conn().try_clone()),
                    GdbStubStateMachine::CtrlCInterrupt(mut s) => Some(s.borrow_conn().try_clone()),
                    GdbStubStateMachine::Disconnected(mut s) => Some(s.borrow_conn().try_clone()),
                };
                if let Some(Ok(c)) = conn.take() {
                    let _ = c.shutdown(std::net::Shutdown::Both);
                }
            }
        }
        let mut user = self.parked()?;
        user.rflags &= !TF;
        self.set_parked(&user)?;
        Ok(how)
    }

    fn current_tid(&self) -> Option<Tid> {
        tid_of(self.proc.tid)
    }
}

#[cfg(test)]
mod tests {
    use super::target::MAX_AUXV_ENTRIES;
    use super::*;
    use crate::memory::GuestMemory;

    /// Writes 64-bit words at `at`.
    fn put(mem: &mut GuestMemory, at: u64, words: &[u64]) {
        for (i, w) in words.iter().enumerate() {
            mem.write_u64(at + 8 * i as u64, *w).unwrap();
        }
    }

    #[test]
    fn auxv_is_copied_off_the_initial_stack() {
        let mut mem = GuestMemory::new(4 << 20).unwrap();
        let rsp = 0x30_0000;
        // argc=2, argv[2] + NULL, one env + NULL, AT_ENTRY, AT_PAGESZ, AT_NULL.
        put(
            &mut mem,
            rsp,
            &[2, 0x1000, 0x1010, 0, 0x1020, 0, 9, 0x40_1000, 6, 4096, 0, 0],
        );
        let auxv = initial_auxv(&mem, rsp);
        assert_eq!(auxv.len(), 6 * 8);
        let words: Vec<u64> = auxv
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(words, [9, 0x40_1000, 6, 4096, 0, 0]);
    }

    #[test]
    fn a_hostile_stack_gives_no_auxv() {
        let mut mem = GuestMemory::new(4 << 20).unwrap();
        let size = mem.size();
        // argc pointing far past memory, a stack running off the end, no AT_NULL.
        put(&mut mem, 0x30_0000, &[u64::MAX / 4]);
        assert!(initial_auxv(&mem, 0x30_0000).is_empty());
        for rsp in [size - 8, size, u64::MAX - 7] {
            assert!(initial_auxv(&mem, rsp).is_empty());
        }
        // More entries than any kernel passes, never terminated.
        let mut words = vec![0u64, 0, 0];
        words.extend(vec![7u64; 2 * MAX_AUXV_ENTRIES as usize + 2]);
        put(&mut mem, 0x20_0000, &words);
        assert!(initial_auxv(&mem, 0x20_0000).is_empty());
    }

    #[test]
    fn dr7_enables_each_slot_with_its_kind_and_length() {
        assert_eq!(dr7_of(&[None; 4]), 0x400);
        // Slot 0: write, 4 bytes (R/W 01, LEN 11) → 0xd0000 | L0.
        let w = [Some((0x1000, 4, WatchKind::Write)), None, None, None];
        assert_eq!(dr7_of(&w), 0x400 | 1 | (0b1101 << 16));
        // Slot 2: read (as read/write), 8 bytes (R/W 11, LEN 10); slot 3: 1 byte write.
        let w = [
            None,
            None,
            Some((0x2000, 8, WatchKind::Read)),
            Some((0x3001, 1, WatchKind::Write)),
        ];
        assert_eq!(
            dr7_of(&w),
            0x400 | (1 << 4) | (1 << 6) | (0b1011 << 24) | (0b0001 << 28)
        );
    }
}
