//! Calls into the guest: its ready point, arguments staged in its memory,
//! the call entry, and the answers a serving guest gives.

use super::{Machine, MachineError, Mode, Outcome};
use crate::crash::CrashInfo;
use crate::guest_kernel::{self, Frame};
use std::time::Duration;

/// Where a program counts as initialised, ready to become a master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadyAt {
    /// It makes the guest API's "ready" call (`forkvm_ready()`).
    Call,
    /// It reaches this symbol (e.g. `exit`, i.e. `main` returned).
    Symbol(String),
}

/// An argument of a call into the guest.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// Passed in a register as is.
    Int(u64),
    /// Copied into guest memory; the function receives a pointer.
    Bytes(&'a [u8]),
    /// Copied into guest memory with a terminating NUL; the function receives a pointer.
    Str(&'a str),
}

/// Why a call into the guest failed. The machine is poisoned until reset.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No such symbol in the program.
    #[error("no symbol {0:?} in the program")]
    NoSymbol(String),
    /// The machine has no ready point yet, or a previous call failed.
    #[error("the machine cannot take calls: {0}")]
    NotCallable(&'static str),
    /// More than six arguments, or buffers too large for the stack.
    #[error("bad arguments: {0}")]
    BadArguments(&'static str),
    /// The guest faulted during the call.
    #[error("the guest crashed in the call: {} ({})", .0.signal_name, .0.description)]
    Crashed(Box<CrashInfo>),
    /// The call exceeded its time limit.
    #[error("the call timed out after {0:?}")]
    TimedOut(Duration),
    /// The guest exited instead of returning.
    #[error("the guest exited with status {0} during the call")]
    Exited(i32),
    /// The VM itself failed.
    #[error(transparent)]
    Machine(#[from] MachineError),
}

/// The program's state at its ready point, which calls start from.
#[derive(Debug, Clone, Copy)]
pub struct ReadyPoint {
    /// Stack pointer at the ready point; calls run below it.
    pub rsp: u64,
    /// FS base (TLS) at the ready point.
    pub fs_base: u64,
    /// The request handler the program registered with its ready call (0: none).
    pub handler: u64,
    /// The program is a network server that waited for its first
    /// connection here (see [`Machine::run_until_idle`]).
    pub server: bool,
}

/// What a guest answered with the respond hypercall during a call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// `Name: value` lines separated by `\n`.
    pub headers: Vec<u8>,
    /// The body.
    pub body: Vec<u8>,
    /// The status line's reason phrase as a server program wrote it (empty:
    /// the standard one for `status`).
    pub reason: Vec<u8>,
}

/// Largest response body a guest may hand back.
pub const MAX_RESPONSE: u64 = 256 << 20;

/// Copies `b` (then a NUL if `nul`) 16-byte aligned below `*sp` and at
/// least 64 KiB above `stack_floor`, moves `*sp` to it and returns its
/// address: how call arguments and staged request parts enter guest memory
/// (public for the fuzz targets).
#[doc(hidden)]
pub fn push_bytes(
    mem: &mut crate::memory::GuestMemory,
    sp: &mut u64,
    stack_floor: u64,
    b: &[u8],
    nul: bool,
) -> Result<u64, CallError> {
    let len = b.len() as u64 + u64::from(nul);
    let addr = sp
        .checked_sub(len)
        .map(|a| a & !15)
        .filter(|a| stack_floor.checked_add(64 * 1024).is_some_and(|f| *a > f))
        .ok_or(CallError::BadArguments(
            "buffers do not fit on the guest stack",
        ))?;
    let dst = mem
        .slice_mut(addr, len)
        .map_err(|_| CallError::BadArguments("buffer outside guest memory"))?;
    dst[..b.len()].copy_from_slice(b);
    if nul {
        dst[b.len()] = 0;
    }
    *sp = addr;
    Ok(addr)
}

impl Machine {
    /// Calls the exported function `name` with `args`; returns its result.
    pub fn vmcall(&mut self, name: &str, args: &[Arg<'_>]) -> Result<u64, CallError> {
        self.vmcall_with_timeout(name, args, self.timeout)
    }

    /// Like [`Machine::vmcall`] with its own time limit.
    pub fn vmcall_with_timeout(
        &mut self,
        name: &str,
        args: &[Arg<'_>],
        timeout: Duration,
    ) -> Result<u64, CallError> {
        let addr = self
            .symbols
            .address_of(name)
            .ok_or_else(|| CallError::NoSymbol(name.to_string()))?;
        self.vmcall_addr(addr, args, timeout)
    }

    /// Calls the function at guest address `func` with `args`.
    pub fn vmcall_addr(
        &mut self,
        func: u64,
        args: &[Arg<'_>],
        timeout: Duration,
    ) -> Result<u64, CallError> {
        if self.poisoned {
            return Err(CallError::NotCallable(
                "a previous call failed; reset first",
            ));
        }
        let ready = self.ready.ok_or(CallError::NotCallable(
            "the program has not reached its ready point",
        ))?;
        if args.len() > 6 {
            return Err(CallError::BadArguments("at most six arguments"));
        }
        // Byte arguments go below the ready point's stack (past the red zone)
        // and below anything staged for this call.
        let mut sp = self
            .stage_sp
            .take()
            .unwrap_or(ready.rsp.saturating_sub(128) & !15);
        self.response = None;
        let mut values = [0u64; 6];
        for (slot, arg) in values.iter_mut().zip(args) {
            *slot = match *arg {
                Arg::Int(v) => v,
                Arg::Bytes(b) => self.push_bytes(&mut sp, b, false)?,
                Arg::Str(s) => self.push_bytes(&mut sp, s.as_bytes(), true)?,
            };
        }
        let internal =
            |f: crate::memory::Fault| CallError::Machine(MachineError::Internal(f.to_string()));
        Frame::user(guest_kernel::CALL_ENTRY, sp & !15, 0)
            .write(&mut self.mem, guest_kernel::INITIAL_FRAME_ADDR)
            .map_err(internal)?;
        // Always: the last call may have moved FS or GS behind the host's back
        // (a segment load), and the next request must not inherit that.
        self.vcpu
            .set_segment_bases(ready.fs_base)
            .map_err(MachineError::from)?;
        self.vcpu_fs_base = ready.fs_base;
        self.proc.fs_base = ready.fs_base;
        self.vcpu.set_regs(&kvm_bindings::kvm_regs {
            rdi: values[0],
            rsi: values[1],
            rdx: values[2],
            rcx: values[3],
            r8: values[4],
            r9: values[5],
            r11: func,
            rip: guest_kernel::IRET_ENTRY,
            rsp: guest_kernel::INITIAL_FRAME_ADDR,
            rflags: 0x2,
            ..Default::default()
        });
        self.mode = Mode::Call;
        let outcome = self.run_for(timeout);
        self.mode = Mode::Program;
        match outcome {
            Ok(Outcome::Returned(v)) => Ok(v),
            other => {
                self.poisoned = true;
                match other? {
                    Outcome::Crashed(c) => Err(CallError::Crashed(c)),
                    Outcome::TimedOut(t) => Err(CallError::TimedOut(t)),
                    Outcome::Exited(s) => Err(CallError::Exited(s)),
                    _ => Err(CallError::NotCallable("the guest said ready during a call")),
                }
            }
        }
    }

    pub(super) fn push_bytes(
        &mut self,
        sp: &mut u64,
        b: &[u8],
        nul: bool,
    ) -> Result<u64, CallError> {
        let stack_floor = self.mem.size() - self.proc.mm.stack_size(self.mem.size());
        push_bytes(&mut self.mem, sp, stack_floor, b, nul)
    }

    /// Address of a symbol in the program.
    pub fn symbol(&self, name: &str) -> Option<u64> {
        self.symbols.address_of(name)
    }

    /// Whether a failed call left the machine unusable until reset.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// The ready point, once reached.
    pub fn ready_point(&self) -> Option<ReadyPoint> {
        self.ready
    }

    /// Copies the guest's answer (respond hypercall) out of guest memory.
    pub(super) fn take_guest_response(
        &self,
        regs: &kvm_bindings::kvm_regs,
    ) -> Result<Response, crate::linux::Errno> {
        use crate::linux::Errno;
        let status = u16::try_from(regs.rdi)
            .ok()
            .filter(|s| (100..=999).contains(s))
            .ok_or(Errno::EINVAL)?;
        if regs.rdx > 64 << 10 || regs.r8 > MAX_RESPONSE {
            return Err(Errno::E2BIG);
        }
        let headers = self.mem.read(regs.rsi, regs.rdx)?.to_vec();
        let body = self.mem.read(regs.r10, regs.r8)?.to_vec();
        Ok(Response {
            status,
            headers,
            body,
            reason: Vec::new(),
        })
    }

    /// Copies `bytes` below the call stack for the next call; returns their guest address.
    /// Staged bytes live until that call ends.
    pub fn stage(&mut self, bytes: &[u8]) -> Result<u64, CallError> {
        let ready = self.ready.ok_or(CallError::NotCallable(
            "the program has not reached its ready point",
        ))?;
        let mut sp = self.stage_sp.unwrap_or(ready.rsp.saturating_sub(128) & !15);
        let addr = self.push_bytes(&mut sp, bytes, false)?;
        self.stage_sp = Some(sp);
        Ok(addr)
    }

    /// Whether a successful respond hypercall ends the call right away
    /// (right for VMs that are reset after every call: nothing after the
    /// answer could be observed anyway). Default: the guest continues.
    pub fn set_respond_ends_call(&mut self, on: bool) {
        self.respond_ends_call = on;
    }

    /// See [`Self::set_respond_ends_call`].
    pub fn respond_ends_call(&self) -> bool {
        self.respond_ends_call
    }

    /// The answer the guest gave during the last call, if any.
    pub fn take_response(&mut self) -> Option<Response> {
        self.response.take()
    }

    /// Calls the handler the program registered at its ready point with `arg`.
    pub fn call_handler(&mut self, arg: u64, timeout: Duration) -> Result<u64, CallError> {
        let handler =
            self.ready
                .map(|r| r.handler)
                .filter(|h| *h != 0)
                .ok_or(CallError::NotCallable(
                    "the program registered no handler when it said ready",
                ))?;
        self.vmcall_addr(handler, &[Arg::Int(arg)], timeout)
    }
}

/// fcntl and flock: the calls that wait for a file lock (F_SETLKW, flock).
const SYS_FCNTL: u64 = 72;
const SYS_FLOCK: u64 = 73;

impl Machine {
    /// After a syscall: in [`Mode::UntilReady`], a program that listens on a
    /// virtual TCP socket and now waits for a connection (every thread
    /// blocked) has reached its ready point; in [`Mode::UntilIdle`], any wait
    /// with every thread blocked ends the run, unless another process of the
    /// run lives (it may end the wait). The waiting thread is parked
    /// before its `syscall` instruction, to make the call again when the run
    /// resumes ([`Machine::run_until_idle`]).
    pub(super) fn net_stop(
        &mut self,
        regs: &kvm_bindings::kvm_regs,
    ) -> Result<Option<Outcome>, MachineError> {
        use crate::linux::thread::{Sched, Wait};
        if !matches!(self.mode, Mode::UntilReady | Mode::UntilIdle)
            || !matches!(self.proc.sched, Some(Sched::Retry(_)))
            || self.proc.pending_signal.is_some()
            || self
                .proc
                .threads
                .others
                .iter()
                .any(|t| t.wait == Wait::Runnable)
            || crate::linux::host_socket::awaiting(&self.proc)
        {
            return Ok(None);
        }
        // A wait another process of the run can end (a request's handler in
        // wait4 for the child it started, or reading its pipe) is not idle:
        // the run goes on, within the request's time limit. It was taken
        // for a server waiting without answering (502).
        if self.mode == Mode::UntilIdle && crate::linux::child::others_alive(&self.proc) {
            return Ok(None);
        }
        // So is a wait for a file lock: its holder is another VM (a request
        // served at the same time, in a fork of the same master: php's
        // opcache lock file), whose release wakes nothing here; the lock is
        // asked for again, within the request's time limit.
        let lock_wait = |nr: u64| nr == SYS_FCNTL || nr == SYS_FLOCK;
        if self.mode == Mode::UntilIdle
            && (lock_wait(self.trap_nr)
                || self
                    .proc
                    .threads
                    .others
                    .iter()
                    .any(|t| matches!(t.wait, Wait::Retry(_)) && lock_wait(t.regs.rax)))
        {
            return Ok(None);
        }
        let args = [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9];
        if self.mode == Mode::UntilReady
            && !crate::linux::inet::waits_for_connection(&self.proc, &self.mem, self.trap_nr, &args)
        {
            return Ok(None);
        }
        self.proc.sched = None;
        let again = kvm_bindings::kvm_regs {
            rip: regs.rcx.wrapping_sub(2),
            rax: self.trap_nr,
            rflags: regs.r11,
            rsp: self.trap_rsp,
            ..*regs
        };
        let me = self.save_current(again, Wait::Runnable)?;
        self.proc.threads.others.push_front(me);
        Ok(Some(if self.mode == Mode::UntilReady {
            self.net_ready = true;
            Outcome::Ready
        } else {
            Outcome::Idle
        }))
    }

    /// The address a server program listens on (its first listening virtual socket).
    pub fn listening_addr(&self) -> Option<std::net::SocketAddr> {
        crate::linux::inet::listening_addr(&self.proc)
    }

    /// Every address a server program listens on.
    pub fn listening_addrs(&self) -> Vec<std::net::SocketAddr> {
        crate::linux::inet::listening_addrs(&self.proc)
    }

    /// Pushes a connection onto the listener bound to `port` (the first if none is).
    pub fn connect_on(
        &mut self,
        peer: std::net::SocketAddr,
        port: Option<u16>,
    ) -> Result<crate::linux::inet::HostConn, CallError> {
        crate::linux::inet::connect_to_listener_on(&self.proc, peer, port)
            .map_err(|_| CallError::NotCallable("the program listens on no socket"))
    }

    /// Lets the program connect to these addresses (`--allow-connect`): its
    /// connections to them are real host TCP connections.
    pub fn set_allow_connect(&mut self, addrs: Vec<std::net::SocketAddr>) {
        self.proc.outbound = crate::linux::host_socket::Outbound::new(addrs);
    }

    /// Host names the program resolves to these addresses through its own
    /// /etc/hosts (`--allow-connect`'s names; the guest has no DNS).
    pub fn set_connect_names(&mut self, names: Vec<(String, std::net::IpAddr)>) {
        self.proc.outbound.set_names(names);
    }

    /// Pushes a new connection from `peer` onto the server's listening socket.
    pub fn connect(
        &mut self,
        peer: std::net::SocketAddr,
    ) -> Result<crate::linux::inet::HostConn, CallError> {
        crate::linux::inet::connect_to_listener(&self.proc, peer)
            .map_err(|_| CallError::NotCallable("the program listens on no socket"))
    }

    /// Runs a server program (ready point reached waiting for a connection)
    /// until every thread is blocked again ([`Outcome::Idle`]): the program
    /// has done all it can with what the host pushed. A crash, exit or
    /// timeout poisons the machine until reset.
    pub fn run_until_idle(&mut self, timeout: Duration) -> Result<Outcome, CallError> {
        self.run_until_idle_or(timeout, &mut || false)
    }

    /// [`Self::run_until_idle`], or until `answered` says the host has what
    /// it waits for (asked between exits, e.g. a whole HTTP response on the
    /// connection): [`Outcome::Stopped`], with the program stopped wherever
    /// it was. For VMs reset after every request, whose work after the
    /// answer could not be observed anyway (timers the master armed, a
    /// garbage collection, closing the connection). Poisons the machine
    /// until reset, as any run that does not end idle.
    pub fn run_until_answered(
        &mut self,
        timeout: Duration,
        answered: &mut dyn FnMut() -> bool,
    ) -> Result<Outcome, CallError> {
        self.output_watched = true;
        let r = self.run_until_idle_or(timeout, answered);
        self.output_watched = false;
        r
    }

    fn run_until_idle_or(
        &mut self,
        timeout: Duration,
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<Outcome, CallError> {
        if self.poisoned {
            return Err(CallError::NotCallable(
                "a previous call failed; reset first",
            ));
        }
        if !self.ready.is_some_and(|r| r.server) {
            return Err(CallError::NotCallable(
                "the program is not a server waiting for connections",
            ));
        }
        self.resume_parked()?;
        self.mode = Mode::UntilIdle;
        let outcome = self.run_for_or(timeout, stop);
        self.mode = Mode::Program;
        match outcome {
            Ok(Outcome::Idle) => Ok(Outcome::Idle),
            other => {
                self.poisoned = true;
                Ok(other?)
            }
        }
    }

    /// The earliest moment a parked server (after [`Outcome::Idle`]) does
    /// something by itself: a thread's timed wait ends (a poll or futex
    /// timeout, a sleep) or a timer fires. `None` when it waits for input only.
    pub fn next_wakeup(&self) -> Option<std::time::Instant> {
        use crate::linux::thread::Wait;
        let waits = self
            .proc
            .threads
            .others
            .iter()
            .filter_map(|t| match t.wait {
                Wait::Futex { deadline, .. } => deadline,
                Wait::Sleep { until, .. } => Some(until),
                // A retried call's own deadline (its `until` is only the next look).
                Wait::Retry(_) | Wait::Runnable => t.waiting.flatten(),
                // Its child may exec or end any moment: look again soon.
                Wait::Vfork => Some(std::time::Instant::now() + super::vfork::RECHECK),
            });
        waits.chain(self.proc.next_timer_due()).min()
    }

    /// Puts the first parked thread that can run on the vCPU (all threads
    /// are parked when a server run stops), or lets the run loop wait for one.
    fn resume_parked(&mut self) -> Result<(), MachineError> {
        // Threads waiting in a retried call look again first: what they saw
        // last may be stale (another thread, or the host, made it ready since).
        for t in self.proc.threads.others.iter_mut() {
            if matches!(t.wait, crate::linux::thread::Wait::Retry(_)) {
                t.wait = crate::linux::thread::Wait::Runnable;
            }
        }
        let Some(t) = self.proc.threads.take_next(std::time::Instant::now(), None) else {
            self.stalled = true;
            return Ok(());
        };
        self.vcpu.set_xsave_area(&t.fpu)?;
        self.vcpu.set_segment_bases(t.fs_base)?;
        self.vcpu_fs_base = t.fs_base;
        self.proc.fs_base = t.fs_base;
        self.adopt(&t)?;
        let regs = self.with_pending_signal(&t)?;
        self.resume_user(&regs)?;
        self.stalled = false;
        Ok(())
    }
}
