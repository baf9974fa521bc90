//! The host side of child processes (see `linux::child`, `linux::exec`):
//! a fork is a new VM over a copy of the caller's memory, run on its own
//! host thread; an exec builds the new program with the loader, in a VM
//! from the pool when there is one (`VmPool::take_renewed`), and moves the
//! surviving process state into it.
//!
//! Copying a running parent: the child's memory is anonymous memory holding
//! a copy of every page the parent has populated (`GuestMemory::copy_from`),
//! so the parent's own mapping is untouched and a child can fork in turn. A
//! vfork child sharing its parent's memory gets a view of a snapshot of it
//! instead, whose stores go back to the parent (see `machine::vfork`).
//! A finished child's VM returns to the pool, emptied, for the next fork.
//! docs/design.md has the measured cost.

use super::{Machine, MachineError, Outcome};
use crate::abi;
use crate::hypervisor::pool::{Slot, VmPool};
use crate::hypervisor::Hypervisor;
use crate::linux::child::{exit_status, killed_status, Family, ForkReq};
use crate::linux::exec::ExecReq;
use crate::linux::fdtable::FdTable;
use crate::linux::Errno;
use crate::memory::{GuestMemory, VforkBase};
use std::time::{Duration, Instant};

/// How often a child process's vCPU is interrupted to take signals.
const CHILD_TICK: Duration = Duration::from_millis(10);

/// A syscall's result register for errno `e`.
fn neg(e: Errno) -> u64 {
    (-(e.0 as i64)) as u64
}

impl Machine {
    /// Writes the pid and parent pid the in-guest dispatcher answers.
    fn write_ids(&mut self, pid: u64, ppid: u64) -> Result<(), MachineError> {
        for (off, v) in [(abi::fast::PID, pid), (abi::fast::PPID, ppid)] {
            self.mem
                .kernel_write_u64(abi::FAST_DATA_ADDR + off, v)
                .map_err(|f| MachineError::Internal(f.to_string()))?;
        }
        Ok(())
    }

    /// Limits the processes of this run alive at once (the program itself
    /// included; 1 refuses every fork with EAGAIN).
    pub fn set_max_processes(&mut self, n: usize) {
        if let Some(f) = &self.proc.family {
            f.tree.set_max(n);
        }
    }

    /// Carries out fork: `ctx` is the parent's user context with the child's
    /// pid as the result. Returns whether the registers were replaced (the
    /// fork failed and the parent gets an errno instead).
    pub(super) fn fork_child(
        &mut self,
        req: Box<ForkReq>,
        ctx: kvm_bindings::kvm_regs,
    ) -> Result<bool, MachineError> {
        let started = Instant::now();
        // No child after all: the parent's fork fails with EAGAIN (ENOMEM
        // when the child's memory does not fit the run's limit).
        let fail = |m: &mut Self, why: String, errno: Errno| -> Result<bool, MachineError> {
            tracing::debug!("fork: {why}");
            req.family.abandon();
            m.resume_user(&kvm_bindings::kvm_regs {
                rax: neg(errno),
                ..ctx
            })?;
            Ok(true)
        };
        let (mut child, base) = match self.make_child(&req, ctx) {
            Ok(c) => c,
            Err(e) => {
                let errno = match &e {
                    MachineError::Map(m) if m.is_out_of_memory() => Errno::ENOMEM,
                    MachineError::MemoryLimit(_) => Errno::ENOMEM,
                    _ => Errno::EAGAIN,
                };
                return fail(self, format!("cannot make the child's VM: {e}"), errno);
            }
        };
        let family = req.family.clone();
        let pid = family.pid;
        // The caller of vfork waits for the child (and its stores).
        let from_child = req.vfork.then(|| {
            let (to_parent, from_child) = super::vfork::link(pid, base);
            child.vfork_parent = Some(to_parent);
            from_child
        });
        let spawned = std::thread::Builder::new()
            .name(format!("forkvm-pid-{pid}"))
            .spawn(move || run_child(child, family));
        if let Err(e) = spawned {
            return fail(
                self,
                format!("cannot start the child's thread: {e}"),
                Errno::EAGAIN,
            );
        }
        tracing::trace!("fork: child {pid} made in {:?}", started.elapsed());
        match from_child {
            Some(from_child) => self.wait_for_vfork(from_child, ctx),
            None => Ok(false),
        }
    }

    /// The child's machine: a VM over a copy of this one's memory, in the
    /// caller's state with 0 as the syscall's result; and, for a vfork
    /// child sharing the caller's memory, what that copy starts as.
    fn make_child(
        &mut self,
        req: &ForkReq,
        ctx: kvm_bindings::kvm_regs,
    ) -> Result<(Machine, Option<VforkBase>), MachineError> {
        let hv = Hypervisor::get()?;
        // From the first fork on, every process of the run counts against
        // one memory limit; the copy below charges the child's share (or,
        // for a vfork child, borrows it until its execve or exit). Only
        // memory paid for is copied again: a vfork child that forks pays
        // for its own copy first.
        self.mem.share_budget();
        if !self.mem.repay_loan() {
            return Err(MachineError::MemoryLimit(self.mem.commit_limit() >> 20));
        }
        // Every child borrows its copy while the run's loans fit (else it is
        // charged): a vfork child until its execve or exit, and a fork child
        // too, since fork is mostly followed by execve (libuv's spawn, perl's
        // and bash's) and on Linux costs no memory until pages are written;
        // charged in full, node under the default limit could not spawn.
        let borrow = true;
        // A VM a finished child left (its memory already empty), or a new one.
        // A vfork child sharing the caller's memory gets a view of a
        // snapshot of it, whose written pages the caller's take of its
        // stores finds cheaply.
        let copy = |mem: &mut GuestMemory, src: &GuestMemory| match req.shares_memory {
            true => mem.vfork_copy_from(src).map(Some),
            false => mem.copy_from(src, borrow).map(|()| None),
        };
        let pool = VmPool::global();
        let taken = match req.shares_memory {
            true => pool.take(self.mem.size()),
            false => pool.take_for_copy(self.mem.size()),
        };
        let (mut slot, base) = match taken {
            Some(mut slot) => {
                let base = copy(&mut slot.mem, &self.mem)?;
                (slot, base)
            }
            None => {
                let mut mem = GuestMemory::new(self.mem.size())?;
                let base = copy(&mut mem, &self.mem)?;
                (Slot::create(mem, abi::PAGE_TABLES_ADDR)?, base)
            }
        };
        slot.vcpu.set_syscall_path(hv, self.syscall_path)?;
        // The process state: a copy, except open files, which are shared
        // (the same open file descriptions, as fork(2) makes).
        // (and /tmp, which is the parent's too: `PrivateTmp::share`).
        let files = std::mem::replace(&mut self.proc.fds, FdTable::with_stdio());
        let tmp = std::mem::take(&mut self.proc.tmp);
        let copy = self.proc.fork_copy();
        self.proc.fds = files;
        self.proc.tmp = tmp;
        let mut proc =
            copy.map_err(|e| MachineError::Internal(format!("copying the process: {}", e.name())))?;
        proc.fds = self.proc.fds.share_copy();
        proc.tmp = self.proc.tmp.share();
        let pid = req.family.pid;
        proc.family = Some(req.family.clone());
        proc.tid = pid;
        proc.shm.set_pid(pid);
        proc.threads.others.clear();
        proc.clear_child_tid = req.clear_tid;
        proc.sigqueue = Default::default();
        let fs_base = req.tls.unwrap_or(self.proc.fs_base);
        proc.fs_base = fs_base;
        proc.pending_fs_base = Some(fs_base);
        let ready = super::ReadyPoint {
            rsp: 0,
            fs_base,
            handler: 0,
            server: false,
        };
        let mut child = Machine::from_parts(
            slot.vcpu,
            slot.mem,
            proc,
            self.symbols.clone(),
            self.timeout,
            ready,
            self.at_random,
            self.syscall_path,
        );
        child.ready = None;
        // A starting master's children look for a ready point of their own.
        child.handoff = self.handoff.clone();
        if !req.shares_memory {
            crate::linux::mem::wipe_after_fork(&child.proc, &mut child.mem);
        }
        req.family.publish(&child.proc, &child.mem);
        // A child starts with its parent's vector and FPU state.
        child.vcpu.set_xsave_area(&self.vcpu.xsave_area()?)?;
        child.write_ids(pid, crate::linux::child::pid_of(&self.proc))?;
        if let Some(at) = req.set_tid {
            let _ = child.mem.write_u32(at, pid as u32);
        }
        child.resume_user(&kvm_bindings::kvm_regs {
            rax: 0,
            rsp: if req.stack != 0 { req.stack } else { ctx.rsp },
            ..ctx
        })?;
        Ok((child, base))
    }

    /// Carries out execve: the new program replaces this one in place.
    /// Returns true: the registers are the new program's, or the caller's
    /// with an errno when it could not be built.
    pub(super) fn exec_program(
        &mut self,
        req: ExecReq,
        ctx: kvm_bindings::kvm_regs,
    ) -> Result<bool, MachineError> {
        // A `forkvm serve` request itself cannot become another program
        // (its children can).
        let family = self.proc.family.clone().filter(|_| self.ready.is_none());
        let Some(family) = family else {
            self.resume_user(&kvm_bindings::kvm_regs {
                rax: neg(Errno::ENOSYS),
                ..ctx
            })?;
            return Ok(true);
        };
        let ExecReq {
            program,
            guest,
            argv,
            env,
            name,
        } = req;
        let mut config = family.tree.config.clone();
        config.argv = argv;
        config.env = env;
        config.cwd = String::from_utf8_lossy(&self.proc.cwd).into_owned();
        config.timeout = family.tree.remaining();
        let mut new = match Machine::from_file_in(&program, config, Some(VmPool::global())) {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!("execve {program}: {e}");
                let errno = match e {
                    MachineError::Map(_) | MachineError::MemoryLimit(_) => Errno::ENOMEM,
                    MachineError::Read { .. } => Errno::EACCES,
                    _ => Errno::ENOEXEC,
                };
                self.resume_user(&kvm_bindings::kvm_regs {
                    rax: neg(errno),
                    ..ctx
                })?;
                return Ok(true);
            }
        };
        // The new program's memory counts against the run's limit in place
        // of the old one's.
        if !new.mem.take_budget_of(&mut self.mem) {
            tracing::debug!("execve {program}: over the run's memory limit");
            self.resume_user(&kvm_bindings::kvm_regs {
                rax: neg(Errno::ENOMEM),
                ..ctx
            })?;
            return Ok(true);
        }
        // What survives exec: the process's identity, open files without
        // FD_CLOEXEC, cwd (already in the config), the private /tmp,
        // ignored signals (handlers go back to the default), the mask.
        let old = &mut self.proc;
        old.fds.close_on_exec();
        std::mem::swap(&mut new.proc.fds, &mut old.fds);
        std::mem::swap(&mut new.proc.tmp, &mut old.tmp);
        std::mem::swap(&mut new.proc.notes, &mut old.notes);
        // The cwd as bytes (the config's is text).
        new.proc.cwd = old.cwd.clone();
        new.proc.family = old.family.take();
        new.proc.comm = crate::linux::comm_of(&name);
        new.proc.exe_path = String::from_utf8_lossy(&guest).into_owned();
        new.proc.mm.labels.rename(program.as_bytes(), &guest);
        family.publish(&new.proc, &new.mem);
        new.proc.tid = family.pid;
        new.proc.sigmask = old.sigmask;
        new.proc.sigqueue = std::mem::take(&mut old.sigqueue);
        new.proc.sigqueue.exec_by(old.tid, family.pid);
        new.proc.itimer = old.itimer;
        new.proc.nice = old.nice;
        new.proc.prctl = old.prctl.after_exec();
        new.proc.rlimits = old.rlimits;
        // The run's outbound policy (`--allow-connect`) is not the program's.
        new.proc.outbound = old.outbound.clone();
        new.proc.xcpu_sent = old.xcpu_sent;
        for (n, o) in new.proc.sigactions.iter_mut().zip(old.sigactions.iter()) {
            if o.handler == 1 {
                n.handler = 1; // SIG_IGN
            }
        }
        new.write_ids(family.pid, family.ppid())?;
        new.mode = self.mode;
        new.handoff = self.handoff.take();
        new.debugger = self.debugger.take();
        let to_parent = self.vfork_parent.take();
        let old = std::mem::replace(self, new);
        // A vfork child's parent goes on once the new program replaced the
        // old one, with the old one's stores. The old program's VM goes to
        // the pool when this process ends (its pages kept for the next
        // fork's copy where it can): a shell forks and execs again and
        // again, and emptying it now would delay the new program.
        let Machine {
            vcpu, mem, retired, ..
        } = old;
        if let Some(Slot { vcpu, mem }) = retired {
            recycle(vcpu, mem);
        }
        let mem = match to_parent {
            Some(to_parent) => to_parent.hand_over(mem),
            None => Some(mem),
        };
        self.retired = mem.map(|mem| Slot { vcpu, mem });
        Ok(true)
    }
}

/// Gives a finished process's VM back to the pool for the next fork. Its
/// memory keeps its pages, which the next fork's copy overwrites instead of
/// having the host allocate new ones (for a few VMs at most; the rest are
/// emptied).
fn recycle(mut vcpu: crate::hypervisor::Vcpu, mut mem: GuestMemory) {
    let pool = VmPool::global();
    let emptied = match pool.may_keep_pages(mem.size()) {
        true => mem.empty_keeping_pages(),
        false => mem.empty_all(),
    };
    if vcpu.restore_kernel_mode().is_ok() && emptied.is_ok() {
        pool.give(Slot { vcpu, mem });
    }
}

/// A child process's host thread: runs it to its end, then records its
/// status for the parent. Its VM and open files go before the parent can
/// see the status, so a pipe's reader sees EOF no later than the exit.
fn run_child(mut m: Machine, family: Family) {
    // A little past the run's deadline: the first process times out first
    // and the run ends with its status (124), not with a child's.
    m.timeout = family
        .tree
        .remaining()
        .saturating_add(Duration::from_secs(1));
    // A child that computes without system calls still looks at the
    // signals sent to it (a kill, the run's end) this often.
    let _tick = crate::hypervisor::Deadline::tick(CHILD_TICK);
    let outcome = match m.handoff.clone() {
        Some(handoff) => match m.run_to_ready_point() {
            Ok(Outcome::Ready) => match handoff.offer(m) {
                // It is the master now; this thread's work is done.
                Ok(()) => return,
                // Another process got there first: this one ends.
                Err(back) => {
                    m = *back;
                    Ok(Outcome::TimedOut(Duration::ZERO))
                }
            },
            other => other,
        },
        None => m.run(),
    };
    let status = match outcome {
        Ok(Outcome::Exited(code)) => match m.proc.killed_by {
            Some(sig) => killed_status(sig),
            None => exit_status(code),
        },
        Ok(Outcome::Crashed(info)) => {
            tracing::debug!("process {} crashed: {}", family.pid, m.crash_report(&info));
            killed_status(info.signal)
        }
        Ok(Outcome::TimedOut(_)) => killed_status(9),
        Ok(_) => exit_status(0),
        Err(e) => {
            tracing::warn!("process {}: the VM failed: {e}", family.pid);
            killed_status(9)
        }
    };
    family.tree.note_refused(&m.proc.notes);
    family.record_cpu(crate::linux::time::cpu_time().saturating_add(m.proc.children_cpu));
    // The VM goes back to the pool, emptied, for the next fork. The process
    // state (open files: pipe ends, file locks) goes first, before the
    // parent can see the status, as on Linux: a parent that waited for its
    // child found the child's locks still held.
    let to_parent = m.vfork_parent.take();
    let Machine {
        vcpu,
        mem,
        proc,
        retired,
        ..
    } = m;
    drop(proc);
    match to_parent {
        // A vfork child's parent goes on once it took the stores, and finds
        // the status there already: glibc's posix_spawn reaps a child whose
        // exec failed at once (a wait that found it still running looked
        // idle to `forkvm serve`).
        Some(to_parent) => {
            family.exited(status);
            if let Some(mem) = to_parent.hand_over(mem) {
                recycle(vcpu, mem);
            }
        }
        None => {
            recycle(vcpu, mem);
            family.exited(status);
        }
    }
    // The VM of the program it exec'd from, after the parent may go on.
    if let Some(Slot { vcpu, mem }) = retired {
        recycle(vcpu, mem);
    }
}
