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
        self.signal_or_crash(info, code, addr, vector, error_code, frame)
    }

    /// Runs the program's handler for `info`'s signal (with `code` and
    /// `addr` in its siginfo, `vector` and `error_code` in its context) if
    /// it has one, else ends it with `info` as the crash report.
    fn signal_or_crash(
        &mut self,
        info: CrashInfo,
        code: i32,
        addr: u64,
        vector: u8,
        error_code: u64,
        frame: Frame,
    ) -> Result<Option<Outcome>, MachineError> {
        let regs = info.regs;
        if frame.from_user() && self.mode != Mode::Call {
            if let Some(action) = linux::signal::handler_for(&self.proc, info.signal) {
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

    /// KVM could not get the host page behind a guest access (see
    /// [`crate::hypervisor::Exit::HostFault`]). When the access was to a
    /// page of a mapped file past the file's end, the program gets SIGBUS
    /// there as on Linux (KVM does not say where: the faulting instruction
    /// is decoded to find out); anything else stays the error it was.
    pub(super) fn host_fault(&mut self) -> Result<Option<Outcome>, MachineError> {
        let unexplained = || {
            MachineError::Kvm(crate::hypervisor::KvmError::Ioctl {
                what: "RUN",
                source: kvm_ioctls::Error::new(libc::EFAULT),
            })
        };
        let past = self.mem.past_end_of_file();
        if past.is_empty() {
            return Err(unexplained());
        }
        let regs = self.vcpu.regs();
        if in_getrandom_fill(regs.rip) {
            // getrandom's in-guest fill writing there: EFAULT, as on Linux.
            self.vcpu.enter_kernel_mode()?;
            self.getrandom_fault(regs.rsp)?;
            return Ok(None);
        }
        if regs.rip < abi::USER_BASE {
            return Err(unexplained());
        }
        let sregs = self.vcpu.sregs()?;
        let bases = (sregs.fs.base, sregs.gs.base);
        let Some(addr) = access_past_end(&self.mem, &regs, bases, &past) else {
            return Err(unexplained());
        };
        // Taken in user mode on PVM: resuming goes through the kernel's iretq.
        self.vcpu.enter_kernel_mode()?;
        let frame = Frame::user(regs.rip, regs.rsp, regs.rflags);
        let info = CrashInfo::past_end_of_file(addr, regs);
        // BUS_ADRERR; the context's error code says a user-mode page fault.
        self.signal_or_crash(info, 2, addr, abi::vector::PAGE_FAULT, 0x4, frame)
    }
}

/// The address in `past` (pages of mapped files past their end) that the
/// instruction at `regs.rip` accesses: the first byte of one of its memory
/// operands there, or the instruction itself. `bases` are FS's and GS's.
fn access_past_end(
    mem: &crate::memory::GuestMemory,
    regs: &kvm_bindings::kvm_regs,
    bases: (u64, u64),
    past: &[(u64, u64)],
) -> Option<u64> {
    use iced_x86::{Decoder, DecoderOptions, Register};
    let hit = |from: u64, len: u64| {
        let to = from.saturating_add(len.max(1));
        past.iter()
            .find(|&&(s, e)| s < to && from < e)
            .map(|&(s, _)| from.max(s))
    };
    if let Some(at) = hit(regs.rip, 1) {
        return Some(at); // running code from there
    }
    let len = mem.size().saturating_sub(regs.rip).min(15);
    let bytes = mem.kernel_read(regs.rip, len).ok()?;
    let ins = Decoder::with_ip(64, bytes, regs.rip, DecoderOptions::NONE).decode();
    if ins.is_invalid() {
        return None;
    }
    let gprs = [
        (Register::RAX, Register::EAX, regs.rax),
        (Register::RCX, Register::ECX, regs.rcx),
        (Register::RDX, Register::EDX, regs.rdx),
        (Register::RBX, Register::EBX, regs.rbx),
        (Register::RSP, Register::ESP, regs.rsp),
        (Register::RBP, Register::EBP, regs.rbp),
        (Register::RSI, Register::ESI, regs.rsi),
        (Register::RDI, Register::EDI, regs.rdi),
        (Register::R8, Register::R8D, regs.r8),
        (Register::R9, Register::R9D, regs.r9),
        (Register::R10, Register::R10D, regs.r10),
        (Register::R11, Register::R11D, regs.r11),
        (Register::R12, Register::R12D, regs.r12),
        (Register::R13, Register::R13D, regs.r13),
        (Register::R14, Register::R14D, regs.r14),
        (Register::R15, Register::R15D, regs.r15),
        (Register::RIP, Register::EIP, regs.rip),
    ];
    // Base and index registers (64-bit, or 32-bit with an address-size
    // prefix) and segment bases; a vector index (gathers) is not worked out.
    let value = |r: Register, _: usize, _: usize| -> Option<u64> {
        match r {
            Register::FS => return Some(bases.0),
            Register::GS => return Some(bases.1),
            Register::ES | Register::CS | Register::SS | Register::DS => return Some(0),
            _ => {}
        }
        gprs.iter().find_map(|&(r64, r32, v)| {
            if r == r64 {
                Some(v)
            } else if r == r32 {
                Some(v & 0xffff_ffff)
            } else {
                None
            }
        })
    };
    let size = ins.memory_size().size() as u64;
    (0..ins.op_count())
        .filter_map(|op| ins.try_virtual_address(op, 0, value))
        .find_map(|at| hit(at, size))
}

/// Whether `rip` is in getrandom's in-guest fill loop.
pub(super) fn in_getrandom_fill(rip: u64) -> bool {
    (abi::entry::GETRANDOM_FILL..abi::entry::GETRANDOM_FILL + abi::entry::GETRANDOM_FILL_SIZE)
        .contains(&rip)
}
