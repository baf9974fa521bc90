//! Faults the run loop turns into signals, crash reports or answers: guest
//! exceptions, accesses where no memory slot is (MMIO exits), and a bad
//! buffer given to getrandom's in-guest fill.

use super::{Machine, MachineError, Mode, Outcome};
use crate::abi;
use crate::crash::CrashInfo;
use crate::guest_kernel::Frame;
use crate::linux;

impl Machine {
    /// getrandom's in-guest fill faulted on the program's buffer: the call
    /// fails with EFAULT, as the host's getrandom would. `rsp` is the fill's
    /// stack: its return address, the caller's RDI and RSI, then the
    /// dispatcher's red-zone skip. Whatever the guest put there only
    /// becomes its own registers.
    pub(super) fn getrandom_fault(&mut self, rsp: u64) -> Result<(), MachineError> {
        let mut user = self.vcpu.regs();
        let (rdi, rsi) = match (
            self.mem.kernel_read_u64(rsp.wrapping_add(8)),
            self.mem.kernel_read_u64(rsp.wrapping_add(16)),
        ) {
            (Ok(rdi), Ok(rsi)) => (rdi, rsi),
            // A stack the host cannot read: the program is past saving.
            _ => (0, 0),
        };
        user.rdi = rdi;
        user.rsi = rsi;
        user.rax = (-(linux::Errno::EFAULT.0 as i64)) as u64;
        user.rsp = rsp.wrapping_add(24 + abi::entry::RED_ZONE_SKIP);
        user.rip = user.rcx;
        user.rflags = user.r11;
        self.resume_user(&user)
    }

    /// A guest exception: run the program's handler for the signal, or end it with a crash report.
    pub(super) fn fault(
        &mut self,
        vector: u8,
        error_code: u64,
        frame: Frame,
    ) -> Result<Option<Outcome>, MachineError> {
        let cr2 = if vector == abi::vector::PAGE_FAULT {
            self.vcpu.sregs()?.cr2
        } else {
            0
        };
        self.fault_at(vector, error_code, cr2, frame)
    }

    /// As [`Self::fault`], with the faulting address given.
    pub(super) fn fault_at(
        &mut self,
        vector: u8,
        error_code: u64,
        cr2: u64,
        frame: Frame,
    ) -> Result<Option<Outcome>, MachineError> {
        let mut regs = self.vcpu.regs();
        // The registers are the guest kernel's view; the program's RIP/RSP/RFLAGS are in the frame.
        regs.rip = frame.rip;
        regs.rsp = frame.rsp;
        regs.rflags = frame.rflags;
        let mut info = CrashInfo::from_exception(vector, error_code, cr2, regs);
        if !frame.from_user() {
            // Not the program's doing: forkvm's own guest kernel trapped.
            // Say so, with what the next look at it needs.
            let vcpu = self.vcpu.regs();
            tracing::error!(
                "exception {vector} (error code {error_code:#x}) in forkvm's guest kernel: \
                 frame {frame:x?}; vCPU at rip {:#x} rsp {:#x}",
                vcpu.rip,
                vcpu.rsp
            );
            info.description
                .push_str(" in forkvm's guest kernel, not in the program (a forkvm bug)");
        }
        if frame.from_user() && self.mode != Mode::Call {
            if let Some(action) = linux::signal::handler_for(&self.proc, info.signal) {
                let code = match (vector, info.signal) {
                    (abi::vector::PAGE_FAULT, _) if error_code & 1 != 0 => 2, // SEGV_ACCERR
                    (_, 7) => 2,                                              // BUS_ADRERR
                    (_, 4) => 2,                                              // ILL_ILLOPN
                    _ => 1, // SEGV_MAPERR, FPE_INTDIV, TRAP_BRKPT
                };
                let addr = if vector == abi::vector::PAGE_FAULT {
                    cr2
                } else {
                    frame.rip
                };
                let sig = linux::signal::SigInfo::fault(info.signal, code, addr);
                let fpu = self.vcpu.xsave_area()?;
                if let Some(user) =
                    self.deliver_signal(&regs, fpu, sig, action, u64::from(vector), error_code)?
                {
                    self.resume_user(&user)?;
                    return Ok(None);
                }
            }
        }
        // An attached gdb sees the fault before the crash report (crate::debug).
        self.debug_fatal(&regs, &info)?;
        Ok(Some(Outcome::Crashed(Box::new(info))))
    }
}

/// Whether `rip` is in getrandom's in-guest fill loop.
pub(super) fn in_getrandom_fill(rip: u64) -> bool {
    (abi::entry::GETRANDOM_FILL..abi::entry::GETRANDOM_FILL + abi::entry::GETRANDOM_FILL_SIZE)
        .contains(&rip)
}
