//! The exit path of a system call: what the run loop does when the guest
//! traps into the host with a call (hypercalls included), and how the
//! program resumes after it.

use super::*;

/// wait4(2) and waitid(2): waits a SIGCHLD may announce the end of.
const WAIT4: u64 = 61;
const WAITID: u64 = 247;

impl Machine {
    /// Serves one system call; `Some` when the program is done.
    pub(super) fn syscall(&mut self, ret: SyscallReturn) -> Result<Option<Outcome>, MachineError> {
        let mut regs = self.vcpu.regs();
        self.trap_rsp = match ret {
            SyscallReturn::Sysret => regs.rsp,
            SyscallReturn::Iret(frame_addr) => {
                Frame::read(&self.mem, frame_addr)
                    .map_err(|f| MachineError::Internal(f.to_string()))?
                    .rsp
            }
        };
        if regs.rax == abi::hypercall::AWAIT_ANSWER {
            // The guest stopped waiting for a poller that had its call.
            let awaited = match &self.exitless {
                Some(x) => x.take_awaited(&mut self.mem),
                // Without a poller nothing was posted: ENOSYS.
                None => Ok(exitless::Awaited::Call(u64::MAX)),
            }
            .map_err(|f| MachineError::Internal(f.to_string()))?;
            match awaited {
                exitless::Awaited::Answer(v) => return self.answer(&regs, ret, v),
                exitless::Awaited::Call(nr) => {
                    // Declined: made here as the cancel path would, whatever
                    // the number (the guest's call map is its own to write:
                    // rt_sigreturn, from a program that posts every call).
                    regs.rax = nr;
                    self.vcpu.set_rax(nr);
                }
            }
        }
        self.trap_nr = regs.rax;
        *self.exits_by_call.entry(regs.rax).or_default() += 1;
        if let Some(x) = &self.exitless {
            x.exit_call(regs.rax);
        }
        match (regs.rax, self.mode) {
            (abi::hypercall::READY, Mode::UntilReady) => {
                self.ready_handler = regs.rdi;
                return Ok(Some(Outcome::Ready));
            }
            (abi::hypercall::RESPOND, Mode::Call) => {
                let r = self.take_guest_response(&regs);
                if r.is_ok() && self.respond_ends_call {
                    // The answer is all the caller wants; skip the way back (one exit less).
                    self.response = r.ok();
                    return Ok(Some(Outcome::Returned(0)));
                }
                let v = match r {
                    Ok(resp) => {
                        self.response = Some(resp);
                        0
                    }
                    Err(e) => (-(e.0 as i64)) as u64,
                };
                return self.answer(&regs, ret, v);
            }
            (abi::hypercall::CALL_RETURN, Mode::Call) => {
                return Ok(Some(Outcome::Returned(regs.rdi)))
            }
            _ => {}
        }
        if regs.rax == RT_SIGRETURN {
            let initial = self.vcpu.initial_xsave_area();
            match linux::signal::sigreturn(&mut self.proc, &self.mem, self.trap_rsp, initial) {
                // KVM may still refuse the (sanitised) state: a bad frame all the same.
                Ok((user, fpu)) if self.vcpu.set_xsave_area(&fpu).is_ok() => {
                    // A signal the handler had blocked may be due now.
                    if let Some(status) = self.proc.exit_status {
                        return Ok(Some(Outcome::Exited(status)));
                    }
                    if let Some(done) = self.run_pending_handler(&user)? {
                        return Ok(done);
                    }
                    self.resume_user(&user)?;
                    return Ok(None);
                }
                // A bad frame kills the process, as on Linux.
                _ => return Ok(Some(Outcome::Exited(128 + 11))),
            }
        }
        let args = [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9];
        let mut result = linux::dispatch(&mut self.proc, &mut self.mem, regs.rax, &args);
        let mut restart = false;
        if self.syscall_path.in_guest() {
            // Before the ready point (a run, a master's start) at once.
            linux::time::after_host_answer(
                &mut self.proc,
                &mut self.mem,
                regs.rax,
                self.ready.is_none(),
            )
            .map_err(|f| MachineError::Internal(f.to_string()))?;
        }
        linux::signal::fire_timer(&mut self.proc);
        if matches!(self.proc.sched, Some(Sched::Retry(_)))
            && self.proc.pending_signal.is_some()
            && matches!(regs.rax, WAIT4 | WAITID)
        {
            // The SIGCHLD that came is often the news of the very child
            // waited for, which exited after the call looked: one more look
            // before EINTR, as Linux's wait finds the zombie its wake-up
            // announces (the handler runs after the call returns it). The
            // wait returned EINTR now and then, its status unread.
            let pending = self.proc.pending_signal.take();
            self.proc.sched = None;
            let again =
                linux::dispatch_leaving_signals(&mut self.proc, &mut self.mem, regs.rax, &args);
            if !matches!(self.proc.sched, Some(Sched::Retry(_))) {
                result = again;
            }
            self.proc.pending_signal = pending;
        }
        if matches!(self.proc.sched, Some(Sched::Retry(_))) && self.proc.pending_signal.is_some() {
            // A signal arrived while the thread waits: the wait ends with EINTR
            // and the handler runs, as on Linux.
            self.proc.sched = None;
            self.proc.waiting = None;
            linux::signal::end_wait_mask(&mut self.proc);
            self.proc.shared_futex = None;
            linux::child::set_asleep(&self.proc, false);
            // A FIFO open waiting for its partner closes the end it opened.
            linux::fs::interrupted_open(&mut self.proc);
            // A blocking write that sent some bytes returns their count.
            result = match linux::io::interrupted_write(&mut self.proc) {
                Some(sent) => sent,
                None => {
                    let sig = self.proc.pending_signal.map_or(0, |i| i.signo);
                    restart = linux::signal::restarts(&self.proc, sig, regs.rax);
                    (-(linux::Errno::EINTR.0 as i64)) as u64
                }
            };
        }
        if let Some(status) = self.proc.exit_status {
            // An attached gdb sees a kill by signal first (crate::debug).
            if let Some(outcome) = self.debug_signal_exit(&regs, self.trap_rsp, status)? {
                return Ok(Some(outcome));
            }
            return Ok(Some(Outcome::Exited(status)));
        }
        if let Some(outcome) = self.net_stop(&regs)? {
            return Ok(Some(outcome));
        }
        // The program's registers as the call returns to it; for a call
        // restarted after its handler (SA_RESTART), as it made it: its
        // number in RAX, at its `syscall` instruction (two bytes).
        let ctx = kvm_bindings::kvm_regs {
            rax: if restart { regs.rax } else { result },
            rip: if restart {
                regs.rcx.wrapping_sub(2)
            } else {
                regs.rcx
            },
            rflags: regs.r11,
            rsp: self.trap_rsp,
            ..regs
        };
        if let Some(req) = self.proc.sched.take() {
            if self.schedule(req, ctx)? {
                return Ok(None);
            }
        }
        if let Some(done) = self.run_pending_handler(&ctx)? {
            return Ok(done);
        }
        self.answer(&regs, ret, result)
    }

    /// Runs the handler of the signal the process sent itself, if one is
    /// due, on the program's context `ctx`: `Some` when the run goes on in
    /// the handler (`Some(None)`) or ends because its frame could not be
    /// written (`Some(Some(..))`); `None` when there was none to run.
    fn run_pending_handler(
        &mut self,
        ctx: &kvm_bindings::kvm_regs,
    ) -> Result<Option<Option<Outcome>>, MachineError> {
        let Some(info) = self.proc.pending_signal.take() else {
            return Ok(None);
        };
        let Some(action) = linux::signal::handler_for(&self.proc, info.signo) else {
            // The call itself blocked the signal (sigprocmask) or changed
            // its action after it was taken at the call's start: sent
            // again, it waits for the unblocking (it was lost, and a
            // shell's sigsuspend for SIGCHLD never woke) or takes its
            // action now.
            let _ = linux::signal::send(&mut self.proc, info);
            return Ok(self.proc.exit_status.map(|s| Some(Outcome::Exited(s))));
        };
        let fpu = self.vcpu.xsave_area()?;
        match self.deliver_signal(ctx, fpu, info, action, 0, 0)? {
            Some(user) => {
                self.resume_user(&user)?;
                Ok(Some(None))
            }
            None => Ok(Some(Some(Outcome::Exited(128 + 11)))),
        }
    }

    /// Returns `value` to the program from the call it trapped with.
    fn answer(
        &mut self,
        regs: &kvm_bindings::kvm_regs,
        ret: SyscallReturn,
        value: u64,
    ) -> Result<Option<Outcome>, MachineError> {
        self.vcpu.set_rax(value);
        if let SyscallReturn::Iret(frame_addr) = ret {
            self.return_through_frame(regs, frame_addr)?;
        }
        Ok(None)
    }

    /// Turns the #BP/#GP frame into the syscall's return: RIP←RCX, RFLAGS←R11.
    /// (The program's RSP was read from this frame when the trap was decoded: `trap_rsp`.)
    pub(super) fn return_through_frame(
        &mut self,
        regs: &kvm_bindings::kvm_regs,
        frame_addr: u64,
    ) -> Result<(), MachineError> {
        Frame::user(regs.rcx, self.trap_rsp, regs.r11)
            .write(&mut self.mem, frame_addr)
            .map_err(|f| MachineError::Internal(f.to_string()))
    }
}
