//! Many guest threads on the one vCPU: saving and adopting thread
//! contexts, the scheduling requests of syscalls, preemption, and signals
//! that land outside a syscall (another thread's tgkill, SIGALRM).

use super::{Machine, MachineError};
use crate::abi;
use crate::linux::{
    self,
    thread::{Sched, ThreadCtx, Wait},
};
use std::time::{Duration, Instant};

/// How often guest threads are preempted when more than one can run.
pub(super) const PREEMPT_TICK: Duration = Duration::from_millis(10);

impl Machine {
    /// The running thread's state, to be put aside: general registers from
    /// `regs`, the extended (vector/FPU) state from the vCPU.
    pub(super) fn save_current(
        &self,
        regs: kvm_bindings::kvm_regs,
        wait: Wait,
    ) -> Result<ThreadCtx, MachineError> {
        Ok(ThreadCtx {
            tid: self.proc.tid,
            regs,
            fs_base: self.proc.fs_base,
            clear_child_tid: self.proc.clear_child_tid,
            sigmask: self.proc.sigmask,
            altstack: self.proc.altstack,
            pending_signal: None,
            wait,
            waiting: self.proc.waiting,
            wait_mask: self.proc.wait_mask,
            shared_futex: self.proc.shared_futex.clone(),
            looked: self.proc.progress,
            fpu: self.vcpu.xsave_area()?,
        })
    }

    /// Makes `t` the running thread: its extended state is loaded into the
    /// vCPU here, its general registers by the caller.
    pub(super) fn adopt(&mut self, t: &ThreadCtx) -> Result<(), MachineError> {
        // The vCPU holds the state of the thread that ran last: reload only
        // when another thread comes (a lone thread's yield or retry costs nothing).
        if t.tid != self.proc.tid {
            self.vcpu.set_xsave_area(&t.fpu)?;
            let others = &self.proc.threads.others;
            let live = |tid: u64| tid == t.tid || others.iter().any(|o| o.tid == tid);
            self.proc
                .thread_cpu
                .switch(self.proc.tid, linux::time::cpu_time(), live);
        }
        if let Wait::Sleep { until, rem } = t.wait {
            // A sleep a signal cut short (`Threads::take_next`): the time left.
            if rem != 0 {
                linux::time::write_time_left(&mut self.mem, rem, until);
            }
        }
        self.proc.tid = t.tid;
        self.proc.waiting = t.waiting;
        self.proc.wait_mask = t.wait_mask;
        self.proc.shared_futex = t.shared_futex.clone();
        self.proc.clear_child_tid = t.clear_child_tid;
        self.proc.sigmask = t.sigmask;
        self.proc.altstack = t.altstack;
        if t.fs_base != self.proc.fs_base || self.vcpu_fs_base != t.fs_base {
            self.proc.fs_base = t.fs_base;
            self.proc.pending_fs_base = Some(t.fs_base);
        }
        Ok(())
    }

    /// Carries out what a syscall asked of the scheduler; `ctx` is the
    /// caller's user context with the syscall's result. Returns whether the
    /// registers were replaced (another thread now runs, or none can).
    pub(super) fn schedule(
        &mut self,
        req: Sched,
        ctx: kvm_bindings::kvm_regs,
    ) -> Result<bool, MachineError> {
        match req {
            Sched::Spawn {
                tid,
                stack,
                tls,
                clear_tid,
            } => {
                let child = ThreadCtx {
                    tid,
                    regs: kvm_bindings::kvm_regs {
                        rax: 0,
                        rsp: if stack != 0 { stack } else { ctx.rsp },
                        ..ctx
                    },
                    fs_base: tls.unwrap_or(self.proc.fs_base),
                    clear_child_tid: clear_tid,
                    sigmask: self.proc.sigmask,
                    // A new thread has no alternate signal stack: its
                    // creator's is in use by the creator (Linux clears it
                    // for CLONE_VM without CLONE_VFORK).
                    altstack: linux::signal::NO_ALTSTACK,
                    pending_signal: None,
                    wait: Wait::Runnable,
                    waiting: None,
                    wait_mask: None,
                    shared_futex: None,
                    looked: self.proc.progress,
                    // A new thread starts with a copy of its creator's state, as on Linux.
                    fpu: self.vcpu.xsave_area()?,
                };
                self.proc.threads.others.push_back(child);
                Ok(false)
            }
            Sched::Yield => {
                let me = self.save_current(ctx, Wait::Runnable)?;
                self.proc.threads.others.push_back(me);
                self.stalled = !self.switch_thread()?;
                Ok(true)
            }
            Sched::Block(wait) => {
                let me = self.save_current(ctx, wait)?;
                self.proc.threads.others.push_back(me);
                self.stalled = !self.switch_thread_after_block()?;
                Ok(true)
            }
            Sched::Exit => {
                self.stalled = !self.switch_thread_after_block()?;
                Ok(true)
            }
            Sched::Fork(req) => self.fork_child(req, ctx),
            Sched::Exec(req) => self.exec_program(*req, ctx),
            Sched::Retry(until) => {
                // Put the thread back before its `syscall` instruction (2 bytes),
                // with the syscall number, so it asks again when it next runs.
                let again = kvm_bindings::kvm_regs {
                    rip: ctx.rip.wrapping_sub(2),
                    rax: self.trap_nr,
                    ..ctx
                };
                let me = self.save_current(again, Wait::Retry(until))?;
                self.proc.threads.others.push_back(me);
                self.stalled = !self.switch_thread()?;
                Ok(true)
            }
        }
    }

    /// Runs the next runnable thread (through the guest kernel's iretq).
    /// If none can run, sleeps until the first one times out and returns
    /// false (the caller retries; the watchdog interrupts the sleep).
    pub(super) fn switch_thread(&mut self) -> Result<bool, MachineError> {
        self.switch_thread_with(None)
    }

    /// [`Self::switch_thread`] when the running thread blocked (a futex
    /// wait, a sleep) or exited: a thread retrying a call whose last look
    /// is older than the process's progress may run at once (a tokio worker
    /// that woke another's epoll through an eventfd and then waits). Not
    /// when the running thread itself retries a call, nor on a preemption
    /// tick: in a fork, node's other threads would then run the timers its
    /// master armed (V8's delayed tasks) before the response is written
    /// (the aged hello request went from 2.4 to ~9 ms when they did).
    pub(super) fn switch_thread_after_block(&mut self) -> Result<bool, MachineError> {
        self.switch_thread_with(Some(self.proc.progress))
    }

    fn switch_thread_with(&mut self, progress: Option<u64>) -> Result<bool, MachineError> {
        self.look_at_vforks();
        if let Some(t) = self.proc.threads.take_next(Instant::now(), progress) {
            self.adopt(&t)?;
            let regs = self.with_pending_signal(&t)?;
            self.resume_user(&regs)?;
            return Ok(true);
        }
        let wait = self
            .proc
            .threads
            .next_deadline()
            .map_or(Duration::from_millis(10), |d| {
                d.saturating_duration_since(Instant::now())
            })
            .min(Duration::from_millis(10));
        if self.vforks_pending() {
            // A thread waits for its vfork child: for that, mostly.
            self.look_at_vforks_waiting(wait);
            return Ok(false);
        }
        // Host sockets a waiting call waits for can end the sleep early.
        if linux::host_socket::sleep(&mut self.proc, wait) {
            for t in self.proc.threads.others.iter_mut() {
                if matches!(t.wait, Wait::Retry(_)) {
                    t.wait = Wait::Runnable;
                }
            }
        }
        Ok(false)
    }

    /// On a preemption tick: if the guest was in user mode and another
    /// thread can run, switch to it (registers only, no guest kernel).
    pub(super) fn preempt(&mut self) -> Result<(), MachineError> {
        self.look_at_vforks();
        if self.proc.threads.others.is_empty()
            || !self.proc.threads.any_runnable(Instant::now(), None)
        {
            return Ok(());
        }
        let regs = self.vcpu.regs();
        // Only plain program code: not the guest kernel, not the syscall
        // stubs, and not while an exception is being delivered (its frame
        // would land in the next thread's context).
        if regs.rip < abi::USER_BASE || self.vcpu.event_in_flight()? {
            return Ok(()); // next tick
        }
        let me = self.save_current(regs, Wait::Runnable)?;
        let Some(next) = self.proc.threads.take_next(Instant::now(), None) else {
            return Ok(());
        };
        self.proc.threads.others.push_back(me);
        self.adopt(&next)?;
        let regs = self.with_pending_signal(&next)?;
        self.vcpu.set_regs(&regs);
        Ok(())
    }

    /// The interval timer is due while the guest runs: SIGALRM now, if the
    /// vCPU stopped in program code (else at the next syscall).
    pub(super) fn deliver_timer(&mut self) -> Result<(), MachineError> {
        if !linux::signal::fire_timer(&mut self.proc) {
            return Ok(());
        }
        let Some(info) = self.proc.pending_signal else {
            return Ok(());
        };
        // A thread waiting in a syscall (about to make it again) gets the
        // signal there, so the wait ends with EINTR rather than the signal
        // slipping in before it.
        if self.proc.waiting.is_some() {
            return Ok(());
        }
        let regs = self.vcpu.regs();
        if regs.rip < abi::USER_BASE || self.vcpu.event_in_flight()? {
            return Ok(());
        }
        self.proc.pending_signal = None;
        if let Some(action) = linux::signal::handler_for(&self.proc, info.signo) {
            let fpu = self.vcpu.xsave_area()?;
            if let Some(user) = self.deliver_signal(&regs, fpu, info, action, 0, 0)? {
                self.vcpu.set_regs(&user);
            }
        }
        Ok(())
    }

    /// Enters the handler `action` for `info`: pushes the frame holding the
    /// interrupted context (`regs`, and `fpu`, its extended state) and loads
    /// the initial extended state for the handler, as Linux does. Returns the
    /// handler's registers, or None if the frame could not be written (the
    /// caller decides what that means).
    pub(super) fn deliver_signal(
        &mut self,
        regs: &kvm_bindings::kvm_regs,
        fpu: crate::hypervisor::XsaveArea,
        info: linux::signal::SigInfo,
        action: linux::SigAction,
        trapno: u64,
        err: u64,
    ) -> Result<Option<kvm_bindings::kvm_regs>, MachineError> {
        match linux::signal::deliver(
            &mut self.proc,
            &mut self.mem,
            regs,
            &fpu,
            info,
            action,
            trapno,
            err,
        ) {
            Ok(user) => {
                self.vcpu.set_xsave_area(&self.vcpu.initial_xsave_area())?;
                Ok(Some(user))
            }
            Err(_) => Ok(None),
        }
    }

    /// The registers a thread resumes with: its own, or its signal handler's
    /// if another thread sent it a signal (tgkill) meanwhile. A thread
    /// waiting in a call it makes again (a blocking read, write, accept or
    /// poll) makes it with the signal pending, so the call ends as on
    /// Linux: EINTR, the count a write had sent, or a restart
    /// (`SA_RESTART`), and then the handler runs. Run at once, the handler
    /// returned into the call, which went on waiting: a python thread's
    /// `pthread_kill` never ended another's blocked send (test_socketserver).
    pub(super) fn with_pending_signal(
        &mut self,
        t: &ThreadCtx,
    ) -> Result<kvm_bindings::kvm_regs, MachineError> {
        let Some(info) = t.pending_signal else {
            return Ok(t.regs);
        };
        if t.waiting.is_some() {
            // `adopt` made its wait the process's; the call sees the signal.
            self.proc.pending_signal = Some(info);
            return Ok(t.regs);
        }
        let Some(action) = linux::signal::handler_for(&self.proc, info.signo) else {
            return Ok(t.regs);
        };
        // `adopt` loaded the thread's state; the frame keeps it.
        Ok(self
            .deliver_signal(&t.regs, t.fpu.clone(), info, action, 0, 0)?
            .unwrap_or(t.regs))
    }
}
