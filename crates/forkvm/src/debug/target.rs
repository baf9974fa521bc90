//! What gdb can do to a stopped machine: the `gdbstub` target of
//! [`Machine`] (registers, memory, threads, resuming and stepping, software
//! breakpoints and, where the platform has them, hardware watchpoints).

use super::*;

impl Target for Machine {
    type Arch = ForkvmX86_64;
    type Error = String;

    fn base_ops(&mut self) -> BaseOps<'_, Self::Arch, Self::Error> {
        BaseOps::MultiThread(self)
    }

    fn support_breakpoints(&mut self) -> Option<BreakpointsOps<'_, Self>> {
        Some(self)
    }

    fn support_auxv(&mut self) -> Option<AuxvOps<'_, Self>> {
        Some(self)
    }
}

impl Auxv for Machine {
    fn get_auxv(&self, offset: u64, length: usize, buf: &mut [u8]) -> TargetResult<usize, Self> {
        let auxv = self.debugger.as_ref().map_or(&[][..], |d| &d.auxv[..]);
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(auxv.len());
        let n = length.min(buf.len()).min(auxv.len() - start);
        buf[..n].copy_from_slice(&auxv[start..start + n]);
        Ok(n)
    }
}

/// Most auxv entries copied (Linux passes about 20).
pub(super) const MAX_AUXV_ENTRIES: u64 = 64;

/// The auxiliary vector on the initial stack at `rsp` (argc, argv, NULL,
/// envp, NULL, then (key, value) pairs up to AT_NULL), with its AT_NULL;
/// empty if the stack does not look like one.
pub(super) fn initial_auxv(mem: &crate::memory::GuestMemory, rsp: u64) -> Vec<u8> {
    let walk = || -> Option<Vec<u8>> {
        let argc = mem.read_u64(rsp).ok()?;
        let mut p = rsp.checked_add(argc.checked_add(2)?.checked_mul(8)?)?;
        while mem.read_u64(p).ok()? != 0 {
            p = p.checked_add(8)?;
        }
        p = p.checked_add(8)?;
        let start = p;
        for _ in 0..MAX_AUXV_ENTRIES {
            let key = mem.read_u64(p).ok()?;
            p = p.checked_add(16)?;
            if key == 0 {
                return Some(mem.read(start, p - start).ok()?.to_vec());
            }
        }
        None
    };
    walk().unwrap_or_default()
}

impl MultiThreadBase for Machine {
    fn read_registers(&mut self, out: &mut regs::Regs, tid: Tid) -> TargetResult<(), Self> {
        if Some(tid) == self.current_tid() {
            let user = self
                .parked()
                .map_err(|e| TargetError::Fatal(e.to_string()))?;
            let fpu = self
                .vcpu
                .xsave_area()
                .map_err(|e| TargetError::Fatal(e.to_string()))?;
            *out = regs::to_gdb(&user, self.proc.fs_base, &fpu);
            return Ok(());
        }
        let t = self
            .proc
            .threads
            .others
            .iter()
            .find(|t| tid_of(t.tid) == Some(tid))
            .ok_or(TargetError::Errno(3))?; // ESRCH
        *out = regs::to_gdb(&t.regs, t.fs_base, &t.fpu);
        Ok(())
    }

    fn write_registers(&mut self, new: &regs::Regs, tid: Tid) -> TargetResult<(), Self> {
        // What KVM would refuse later is refused now (as arch_prctl and
        // sigreturn refuse it): a non-canonical FS base, reserved MXCSR bits.
        if new.fs_base >= USER_ADDRESS_END || new.core.mxcsr > MXCSR_VALID {
            return Err(TargetError::Errno(22)); // EINVAL
        }
        if Some(tid) == self.current_tid() {
            let mut user = self
                .parked()
                .map_err(|e| TargetError::Fatal(e.to_string()))?;
            regs::from_gdb(new, &mut user);
            self.set_parked(&user)
                .map_err(|e| TargetError::Fatal(e.to_string()))?;
            let fpu = self
                .vcpu
                .xsave_area()
                .map_err(|e| TargetError::Fatal(e.to_string()))?;
            if let Some(changed) = regs::fpu_from_gdb(new, &fpu) {
                // KVM refuses invalid state (e.g. reserved MXCSR bits): an error to gdb.
                self.vcpu
                    .set_xsave_area(&changed)
                    .map_err(|_| TargetError::Errno(22))?;
            }
            if new.fs_base != self.proc.fs_base {
                self.proc.fs_base = new.fs_base;
                self.proc.pending_fs_base = Some(new.fs_base);
            }
            return Ok(());
        }
        let t = self
            .proc
            .threads
            .others
            .iter_mut()
            .find(|t| tid_of(t.tid) == Some(tid))
            .ok_or(TargetError::Errno(3))?;
        regs::from_gdb(new, &mut t.regs);
        t.regs.rflags = Frame::user(0, 0, t.regs.rflags).rflags;
        if let Some(changed) = regs::fpu_from_gdb(new, &t.fpu) {
            t.fpu = changed;
        }
        t.fs_base = new.fs_base;
        Ok(())
    }

    fn read_addrs(&mut self, start: u64, data: &mut [u8], _tid: Tid) -> TargetResult<usize, Self> {
        // Page by page, as far as the program could read itself.
        let mut done = 0usize;
        while done < data.len() {
            let Some(addr) = start.checked_add(done as u64) else {
                break;
            };
            let in_page = (abi::PAGE_SIZE - addr % abi::PAGE_SIZE) as usize;
            let n = in_page.min(data.len() - done);
            let Ok(bytes) = self.mem.read(addr, n as u64) else {
                break;
            };
            let Some(dst) = data.get_mut(done..done + n) else {
                break;
            };
            dst.copy_from_slice(bytes);
            done += n;
        }
        if done == 0 && !data.is_empty() {
            return Err(TargetError::Errno(14)); // EFAULT
        }
        // gdb sees the program's bytes, not the int3s planted for it (as
        // gdbserver hides its breakpoints); else it takes them for the
        // program's own ("permanent") breakpoints.
        if let (Some(d), Some(end)) = (self.debugger.as_ref(), start.checked_add(done as u64)) {
            let planted = d.breakpoints.range(start..end).map(|(a, b)| (*a, *b));
            for (addr, byte) in planted.chain(d.step_over.filter(|(a, _)| (start..end).contains(a)))
            {
                if let Some(slot) = data.get_mut((addr - start) as usize) {
                    *slot = byte;
                }
            }
        }
        Ok(done)
    }

    fn write_addrs(&mut self, start: u64, data: &[u8], _tid: Tid) -> TargetResult<(), Self> {
        // Anything the program can read, gdb may write (code included, as ptrace allows).
        if self.mem.read(start, data.len() as u64).is_err() {
            return Err(TargetError::Errno(14));
        }
        self.mem
            .kernel_write(start, data)
            .map_err(|_| TargetError::Errno(14))?;
        // A write over a planted int3 changes the byte it stands for; the int3 stays.
        let end = start.saturating_add(data.len() as u64);
        if let Some(d) = self.debugger.as_mut() {
            let planted: Vec<u64> = d
                .breakpoints
                .range(start..end)
                .map(|(a, _)| *a)
                .chain(
                    d.step_over
                        .map(|(a, _)| a)
                        .filter(|a| (start..end).contains(a)),
                )
                .collect();
            for addr in planted {
                let Some(&byte) = data.get((addr - start) as usize) else {
                    continue;
                };
                if let Some(b) = d.breakpoints.get_mut(&addr) {
                    *b = byte;
                }
                if let Some((a, b)) = d.step_over.as_mut() {
                    if *a == addr {
                        *b = byte;
                    }
                }
                self.mem
                    .kernel_write(addr, &[INT3])
                    .map_err(|_| TargetError::Errno(14))?;
            }
        }
        Ok(())
    }

    fn list_active_threads(&mut self, found: &mut dyn FnMut(Tid)) -> Result<(), Self::Error> {
        if let Some(t) = self.current_tid() {
            found(t);
        }
        for t in &self.proc.threads.others {
            if let Some(t) = tid_of(t.tid) {
                found(t);
            }
        }
        Ok(())
    }

    fn support_resume(&mut self) -> Option<MultiThreadResumeOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadResume for Machine {
    fn resume(&mut self) -> Result<(), Self::Error> {
        let step = self.debugger.as_ref().is_some_and(|d| d.step);
        let mut user = self.parked().map_err(|e| e.to_string())?;
        if step && self.plant_step_over(user.rip) {
            user.rflags &= !TF;
        } else if step {
            user.rflags |= TF;
        } else {
            user.rflags &= !TF;
        }
        self.set_parked(&user).map_err(|e| e.to_string())
    }

    fn clear_resume_actions(&mut self) -> Result<(), Self::Error> {
        if let Some(d) = self.debugger.as_mut() {
            d.step = false;
        }
        Ok(())
    }

    fn set_resume_action_continue(
        &mut self,
        _tid: Tid,
        _signal: Option<Signal>,
    ) -> Result<(), Self::Error> {
        Ok(())
    }

    fn support_single_step(&mut self) -> Option<MultiThreadSingleStepOps<'_, Self>> {
        Some(self)
    }

    fn support_scheduler_locking(&mut self) -> Option<MultiThreadSchedulerLockingOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadSchedulerLocking for Machine {
    fn set_resume_action_scheduler_lock(&mut self) -> Result<(), Self::Error> {
        // gdb resumes only the threads it named: a step then runs just the
        // current thread, which the vCPU runs next anyway (a preemption tick
        // may still let others run; their trap flag is clear).
        Ok(())
    }
}

impl MultiThreadSingleStep for Machine {
    fn set_resume_action_step(
        &mut self,
        tid: Tid,
        _signal: Option<Signal>,
    ) -> Result<(), Self::Error> {
        // Only the running thread can be stepped: the vCPU runs it next.
        if Some(tid) == self.current_tid() {
            if let Some(d) = self.debugger.as_mut() {
                d.step = true;
            }
        }
        Ok(())
    }
}

impl Breakpoints for Machine {
    fn support_sw_breakpoint(&mut self) -> Option<SwBreakpointOps<'_, Self>> {
        Some(self)
    }

    fn support_hw_watchpoint(&mut self) -> Option<HwWatchpointOps<'_, Self>> {
        // PVM loads neither the guest's DR7 (KVM_SET_DEBUGREGS) nor one set
        // through KVM_SET_GUEST_DEBUG: a watched access raises no #DB and no
        // debug exit. Not offered there (gdb then watches in software, by
        // single steps); the machine itself decides, not FORKVM_PLATFORM.
        hardware_watchpoints().then_some(self)
    }
}

/// Whether this machine's KVM runs guests on VMX/SVM, where the guest's
/// debug registers are live (probed once).
fn hardware_watchpoints() -> bool {
    static HARDWARE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HARDWARE.get_or_init(|| {
        crate::hypervisor::Platform::probe() == crate::hypervisor::Platform::Hardware
    })
}

/// DR7 with the four slots of `watches` (local enable, R/W and LEN fields;
/// bit 10 reads as one). x86 cannot watch reads alone: a read watchpoint
/// is a read/write one (gdb tells them apart by the value, as on Linux).
pub(super) fn dr7_of(watches: &[Option<(u64, u64, WatchKind)>; 4]) -> u64 {
    let mut dr7 = 1 << 10;
    for (i, w) in watches.iter().enumerate() {
        let Some((_, len, kind)) = w else { continue };
        let rw = match kind {
            WatchKind::Write => 0b01,
            WatchKind::Read | WatchKind::ReadWrite => 0b11,
        };
        let len_bits = match len {
            1 => 0b00,
            2 => 0b01,
            8 => 0b10,
            _ => 0b11,
        };
        dr7 |= 1 << (2 * i);
        dr7 |= (rw | (len_bits << 2)) << (16 + 4 * i);
    }
    dr7
}

impl Machine {
    /// Loads the debugger's watchpoints into the guest's debug registers
    /// (DR6 cleared: its hit bits are sticky).
    fn load_watches(&mut self) -> Result<(), MachineError> {
        let watches = self.debugger.as_ref().map_or([None; 4], |d| d.watches);
        let mut regs = self.vcpu.debug_regs()?;
        for (slot, w) in regs.db.iter_mut().zip(watches.iter()) {
            *slot = w.map_or(0, |(a, _, _)| a);
        }
        regs.dr6 = 0xffff_0ff0;
        regs.dr7 = dr7_of(&watches);
        self.vcpu.set_debug_regs(&regs)?;
        Ok(())
    }

    /// The watchpoint a #DB reports hit (DR6.B0-B3), if any; clears DR6.
    pub(super) fn watch_hit(&mut self) -> Option<(u64, WatchKind)> {
        let watches = self.debugger.as_ref()?.watches;
        if watches.iter().all(Option::is_none) {
            return None;
        }
        let mut regs = self.vcpu.debug_regs().ok()?;
        let hit = (0..4).find(|i| regs.dr6 & (1 << i) != 0);
        regs.dr6 = 0xffff_0ff0;
        let _ = self.vcpu.set_debug_regs(&regs);
        let (addr, _, kind) = watches.get(hit?).copied().flatten()?;
        Some((addr, kind))
    }
}

impl HwWatchpoint for Machine {
    fn add_hw_watchpoint(
        &mut self,
        addr: u64,
        len: u64,
        kind: WatchKind,
    ) -> TargetResult<bool, Self> {
        // A slot watches 1, 2, 4 or 8 bytes aligned to their size, in user memory.
        if !matches!(len, 1 | 2 | 4 | 8) || !addr.is_multiple_of(len) || addr >= USER_ADDRESS_END {
            return Ok(false);
        }
        let Some(d) = self.debugger.as_mut() else {
            return Ok(false);
        };
        let Some(slot) = d.watches.iter_mut().find(|w| w.is_none()) else {
            return Ok(false);
        };
        *slot = Some((addr, len, kind));
        if self.load_watches().is_err() {
            if let Some(d) = self.debugger.as_mut() {
                if let Some(w) = d
                    .watches
                    .iter_mut()
                    .find(|w| **w == Some((addr, len, kind)))
                {
                    *w = None;
                }
            }
            return Ok(false);
        }
        Ok(true)
    }

    fn remove_hw_watchpoint(
        &mut self,
        addr: u64,
        len: u64,
        kind: WatchKind,
    ) -> TargetResult<bool, Self> {
        let Some(d) = self.debugger.as_mut() else {
            return Ok(false);
        };
        let Some(w) = d
            .watches
            .iter_mut()
            .find(|w| **w == Some((addr, len, kind)))
        else {
            return Ok(false);
        };
        *w = None;
        self.load_watches()
            .map_err(|e| TargetError::Fatal(e.to_string()))?;
        Ok(true)
    }
}

impl SwBreakpoint for Machine {
    fn add_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        let Some(d) = self.debugger.as_mut() else {
            return Ok(false);
        };
        if d.breakpoints.contains_key(&addr) {
            return Ok(true);
        }
        if d.breakpoints.len() >= MAX_BREAKPOINTS {
            return Ok(false);
        }
        let Some(&original) = self.mem.read(addr, 1).ok().and_then(|b| b.first()) else {
            return Ok(false);
        };
        if self.mem.kernel_write(addr, &[INT3]).is_err() {
            return Ok(false);
        }
        d.breakpoints.insert(addr, original);
        Ok(true)
    }

    fn remove_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        let Some(original) = self
            .debugger
            .as_mut()
            .and_then(|d| d.breakpoints.remove(&addr))
        else {
            return Ok(false);
        };
        self.mem
            .kernel_write(addr, &[original])
            .map_err(|e| TargetError::Fatal(e.to_string()))?;
        Ok(true)
    }
}
