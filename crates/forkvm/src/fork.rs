//! A fork: a VM that starts in exactly the master's state, takes calls, and
//! is reset to the master's state after each use. Its memory is a private
//! copy-on-write view of the master's snapshot, so no fork can change what
//! another fork or the master sees.

use crate::abi;
use crate::hypervisor::pool::{Slot, VmPool};
use crate::hypervisor::Hypervisor;
use crate::machine::{Arg, CallError, Machine, MachineError};
use crate::master::Image;
use crate::memory::{GuestMemory, ResetStats};
use std::sync::Arc;
use std::time::Duration;

/// A copy-on-write fork of a [`crate::master::Master`].
pub struct Fork {
    machine: Option<Machine>,
    image: Arc<Image>,
}

impl Fork {
    pub(crate) fn new(image: Arc<Image>) -> Result<Self, MachineError> {
        let snap = &image.snapshot;
        let mut slot = match VmPool::global().take(snap.size()) {
            Some(mut slot) => {
                slot.mem.remap(snap)?;
                slot
            }
            None => Slot::create(GuestMemory::fork_of(snap)?, abi::PAGE_TABLES_ADDR)?,
        };
        slot.vcpu
            .set_syscall_path(Hypervisor::get()?, image.syscall_path)?;
        let process = image
            .process
            .fork_copy()
            .map_err(|e| MachineError::Internal(format!("copying open files: {}", e.name())))?;
        let machine = Machine::from_parts(
            slot.vcpu,
            slot.mem,
            process,
            image.symbols.clone(),
            image.timeout,
            image.ready,
            image.at_random,
            image.syscall_path,
        );
        let mut fork = Self {
            machine: Some(machine),
            image,
        };
        fork.new_tree();
        fork.reseed();
        Ok(fork)
    }

    fn machine(&mut self) -> Result<&mut Machine, CallError> {
        self.machine.as_mut().ok_or(CallError::NotCallable(
            "the fork's VM was lost in a failed reset",
        ))
    }

    /// Calls the exported function `name`.
    pub fn vmcall(&mut self, name: &str, args: &[Arg<'_>]) -> Result<u64, CallError> {
        self.machine()?.vmcall(name, args)
    }

    /// Calls `name` with its own time limit.
    pub fn vmcall_with_timeout(
        &mut self,
        name: &str,
        args: &[Arg<'_>],
        timeout: Duration,
    ) -> Result<u64, CallError> {
        self.machine()?.vmcall_with_timeout(name, args, timeout)
    }

    /// Calls the function at `addr` (see [`crate::master::Master::symbol`]).
    pub fn vmcall_addr(
        &mut self,
        addr: u64,
        args: &[Arg<'_>],
        timeout: Duration,
    ) -> Result<u64, CallError> {
        self.machine()?.vmcall_addr(addr, args, timeout)
    }

    /// Copies bytes into the fork for the next call (see [`Machine::stage`]).
    pub fn stage(&mut self, bytes: &[u8]) -> Result<u64, CallError> {
        self.machine()?.stage(bytes)
    }

    /// Calls the handler the program registered when it said ready.
    pub fn call_handler(&mut self, arg: u64, timeout: Duration) -> Result<u64, CallError> {
        self.machine()?.call_handler(arg, timeout)
    }

    /// See [`Machine::set_respond_ends_call`].
    pub fn set_respond_ends_call(&mut self, on: bool) {
        if let Some(m) = self.machine.as_mut() {
            m.set_respond_ends_call(on);
        }
    }

    /// `forkvm serve --gdb`: a call that stops on its own (an `int3`, a
    /// crash) waits for gdb on `waiter` (see [`crate::debug`]).
    pub fn set_gdb_waiter(&mut self, waiter: Arc<crate::debug::GdbWaiter>) {
        if let Some(m) = self.machine.as_mut() {
            m.set_gdb_waiter(waiter);
        }
    }

    /// Whether gdb was attached since last asked (then reset the fork).
    pub fn take_debugged(&mut self) -> bool {
        self.machine.as_mut().is_some_and(Machine::take_debugged)
    }

    /// The answer the guest gave in the last call.
    pub fn take_response(&mut self) -> Option<crate::machine::Response> {
        self.machine.as_mut().and_then(Machine::take_response)
    }

    /// A human-readable report of a crash in a call.
    pub fn crash_report(&self, info: &crate::crash::CrashInfo) -> String {
        match &self.machine {
            Some(m) => m.crash_report(info),
            None => format!("{} ({})", info.signal_name, info.description),
        }
    }

    /// Guest memory, to read what a call returned a pointer to.
    pub fn memory(&self) -> Option<&GuestMemory> {
        self.machine.as_ref().map(|m| &m.mem)
    }

    /// Whether a failed call left the fork unusable until reset.
    pub fn is_poisoned(&self) -> bool {
        self.machine.as_ref().is_none_or(|m| m.poisoned)
    }

    /// Whether the master is a network server (ready point: waiting for a connection).
    pub fn is_server(&self) -> bool {
        self.image.ready.server
    }

    /// Pushes a new connection onto a server's listening socket (see [`Machine::connect`]).
    pub fn connect(
        &mut self,
        peer: std::net::SocketAddr,
    ) -> Result<crate::linux::inet::HostConn, CallError> {
        self.machine()?.connect(peer)
    }

    /// The same, onto the listener bound to `port` (see [`Machine::connect_on`]).
    pub fn connect_on(
        &mut self,
        peer: std::net::SocketAddr,
        port: Option<u16>,
    ) -> Result<crate::linux::inet::HostConn, CallError> {
        self.machine()?.connect_on(peer, port)
    }

    /// Runs a server until it waits again (see [`Machine::run_until_idle`]).
    pub fn run_until_idle(
        &mut self,
        timeout: Duration,
    ) -> Result<crate::machine::Outcome, CallError> {
        self.machine()?.run_until_idle(timeout)
    }

    /// See [`crate::machine::Machine::run_until_answered`].
    pub fn run_until_answered(
        &mut self,
        timeout: Duration,
        answered: &mut dyn FnMut() -> bool,
    ) -> Result<crate::machine::Outcome, CallError> {
        self.machine()?.run_until_answered(timeout, answered)
    }

    /// See [`crate::machine::Machine::next_wakeup`].
    pub fn next_wakeup(&self) -> Option<std::time::Instant> {
        self.machine.as_ref().and_then(|m| m.next_wakeup())
    }

    /// Whether the fork is reset after every request (see
    /// [`Self::set_respond_ends_call`]).
    pub fn respond_ends_call(&self) -> bool {
        self.machine.as_ref().is_some_and(|m| m.respond_ends_call())
    }

    /// Returns the fork to the master's state: memory, registers, FPU state,
    /// open files, signal dispositions, cwd, brk, and a fresh random seed.
    /// Its private /tmp and its copy of the `--allow-write` roots (see
    /// `linux::fs::overlay`) go with the old process state it replaces.
    pub fn reset(&mut self) -> Result<ResetStats, MachineError> {
        let image = self.image.clone();
        let m = self
            .machine
            .as_mut()
            .ok_or_else(|| MachineError::Internal("the fork's VM was lost".into()))?;
        // The last use's child processes end first (they hold its pipes);
        // a tree no process was ever added to is kept for the next use. A
        // vfork child's stores no longer have anywhere to go.
        m.forget_vforks();
        let kept = end_children(&mut m.proc);
        let stats = m
            .mem
            .reset()
            .map_err(|e| MachineError::Internal(format!("resetting memory: {e}")))?;
        let exits = m.take_exit_summary();
        tracing::debug!(
            "reset: {} pages copied back, {} dropped; calls that exited: {exits}",
            stats.copied,
            stats.dropped
        );
        // gdb's breakpoints stay set across resets (crate::debug).
        m.debug_after_reset()?;
        m.proc = image
            .process
            .fork_copy()
            .map_err(|e| MachineError::Internal(format!("copying open files: {}", e.name())))?;
        if m.poisoned && !m.in_kernel {
            // The vCPU may have stopped anywhere (a timeout in user mode).
            // A run stopped at an exit (a whole answer, `--ephemeral`) is in
            // guest-kernel mode already; the next entry sets every general
            // register and the FS and GS bases (one ioctl less a request).
            m.vcpu.restore_kernel_mode()?;
            // The system registers carry an FS base too: reload it on the next call.
            m.vcpu_fs_base = u64::MAX;
        }
        m.poisoned = false;
        m.ready = Some(image.ready);
        m.proc.family = kept;
        self.new_tree();
        self.reseed();
        Ok(stats)
    }

    /// Gives the next use a process tree of its own (unless it has one
    /// still untouched).
    fn new_tree(&mut self) {
        let Some(m) = self.machine.as_mut() else {
            return;
        };
        if m.proc.family.is_some() {
            return;
        }
        // No deadline of its own: the children end with the use at the latest.
        m.proc.family = self.image.config.clone().map(|mut c| {
            c.timeout = Duration::MAX;
            let ids = self.image.ids.unwrap_or(crate::linux::child::Ids::FIRST);
            let family = crate::linux::child::Tree::root_as(c, ids);
            family.publish(&m.proc, &m.mem);
            family
        });
    }

    /// Fresh AT_RANDOM bytes, so two uses never see the same seed.
    fn reseed(&mut self) {
        let (Some(addr), true) = (self.image.at_random, self.image.reseed) else {
            return;
        };
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_ok() {
            if let Some(m) = self.machine.as_mut() {
                let _ = m.mem.write(addr, &bytes);
            }
        }
    }
}

/// How long a reset waits for a request's child processes to end (they
/// notice within a tick, ~10 ms, unless their host is overloaded).
const CHILDREN_END_WAIT: Duration = Duration::from_secs(5);

/// Ends the child processes of `proc`'s tree, if it has any; returns the
/// tree instead when no process was ever added to it (nothing to end).
fn end_children(proc: &mut crate::linux::Process) -> Option<crate::linux::child::Family> {
    let f = proc.family.take()?;
    if f.untouched() {
        return Some(f);
    }
    if !f.end_tree(CHILDREN_END_WAIT) {
        tracing::warn!("a request's child processes did not end within {CHILDREN_END_WAIT:?}");
    }
    None
}

impl Drop for Fork {
    fn drop(&mut self) {
        if let Some(m) = self.machine.as_mut() {
            m.forget_vforks();
            let _ = end_children(&mut m.proc);
        }
        if let Some(m) = self.machine.take() {
            let Machine {
                mut vcpu,
                mem,
                poisoned,
                ..
            } = m;
            if poisoned && vcpu.restore_kernel_mode().is_err() {
                return;
            }
            VmPool::global().give(Slot { vcpu, mem });
        }
    }
}
