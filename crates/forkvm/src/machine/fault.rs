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
    /// [`crate::hypervisor::Exit::HostFault`]). KVM does not say where:
    /// the faulting instruction is decoded to find out. When the access
    /// was to a page of a mapped file past the file's end, the program
    /// gets SIGBUS there as on Linux; when the program's rights refuse it
    /// (the host mapping carries them, see `memory::host_prot`), SIGSEGV
    /// with SEGV_ACCERR (SEGV_MAPERR where nothing is mapped) at the first
    /// refused byte; anything else stays the error it was.
    pub(super) fn host_fault(&mut self) -> Result<Option<Outcome>, MachineError> {
        let unexplained = || {
            MachineError::Kvm(crate::hypervisor::KvmError::Ioctl {
                what: "RUN",
                source: kvm_ioctls::Error::new(libc::EFAULT),
            })
        };
        let past = self.mem.past_end_of_file();
        if past.is_empty() && !self.mem.enforces_rights() {
            return Err(unexplained());
        }
        let regs = self.vcpu.regs();
        if in_getrandom_fill(regs.rip) {
            // getrandom's in-guest fill writing there: EFAULT, as on Linux.
            self.vcpu.enter_kernel_mode()?;
            self.getrandom_fault(regs.rsp)?;
            return Ok(None);
        }
        let sregs = self.vcpu.sregs()?;
        // The program's code, or user-mode code of forkvm's that runs as
        // part of it (the vDSO, the syscall dispatcher on PVM): a fault in
        // the guest kernel proper is not the program's.
        if regs.rip < abi::USER_BASE && sregs.cs.selector & 3 != 3 {
            return Err(unexplained());
        }
        let bases = (sregs.fs.base, sregs.gs.base);
        let accesses = accesses(&self.mem, &regs, bases);
        let frame = Frame::user(regs.rip, regs.rsp, regs.rflags);
        if let Some(addr) = accesses.iter().find_map(|a| a.hit(&past)) {
            // Taken in user mode on PVM: resuming goes through the kernel's iretq.
            self.vcpu.enter_kernel_mode()?;
            let info = CrashInfo::past_end_of_file(addr, regs);
            // BUS_ADRERR; the context's error code says a user-mode page fault.
            return self.signal_or_crash(info, 2, addr, abi::vector::PAGE_FAULT, 0x4, frame);
        }
        let Some((addr, write, mapped)) = denied(&self.mem, &accesses) else {
            return Err(unexplained());
        };
        self.vcpu.enter_kernel_mode()?;
        let fetch = addr == regs.rip && accesses.first().is_some_and(|a| a.fetch);
        // A user-mode page fault's error code: present (ACCERR), write, fetch.
        let error_code =
            0x4 | u64::from(mapped) | if write { 0x2 } else { 0 } | if fetch { 0x10 } else { 0 };
        let info = CrashInfo::from_exception(abi::vector::PAGE_FAULT, error_code, addr, regs);
        // SEGV_ACCERR where the program mapped the page, SEGV_MAPERR where not.
        let code = if mapped { 2 } else { 1 };
        self.signal_or_crash(info, code, addr, abi::vector::PAGE_FAULT, error_code, frame)
    }
}

/// One memory access of a faulting instruction.
#[derive(Debug, Clone, Copy)]
struct Access {
    at: u64,
    len: u64,
    /// The instruction fetch (at RIP).
    fetch: bool,
    /// A stack push the instruction makes (call, push), not an operand.
    push: bool,
}

impl Access {
    /// The first address of this access in one of `ranges`.
    fn hit(&self, ranges: &[(u64, u64)]) -> Option<u64> {
        let to = self.at.saturating_add(self.len.max(1));
        ranges
            .iter()
            .find(|&&(s, e)| s < to && self.at < e)
            .map(|&(s, _)| self.at.max(s))
    }
}

/// The access of `accesses` that the program's rights do not allow, as
/// (first address refused, whether it was a write, whether the program
/// mapped that page): an access where nothing may be read first (the
/// fetch at RIP, then the operands), then one where nothing may be
/// written. An instruction that faulted where its operands may be read
/// wrote, so a read-only operand is taken for the write.
fn denied(mem: &crate::memory::GuestMemory, accesses: &[Access]) -> Option<(u64, bool, bool)> {
    let page = abi::PAGE_SIZE;
    let first_without = |a: &Access, write: bool| -> Option<(u64, bool)> {
        let end = a.at.saturating_add(a.len.max(1));
        // Below user memory (forkvm's vDSO, dispatcher, data page) the
        // host protects nothing.
        let mut at = a.at.max(abi::USER_BASE);
        while at < end {
            match mem.user_rights_at(at) {
                None => return Some((at, false)),
                Some(r) if !r.read || (write && !r.write) => return Some((at, true)),
                _ => {}
            }
            at = (at & !(page - 1)).saturating_add(page);
        }
        None
    };
    for write in [false, true] {
        for a in accesses.iter().filter(|a| !(write && a.fetch)) {
            if let Some((at, mapped)) = first_without(a, write) {
                return Some((at, write || a.push, mapped));
            }
        }
    }
    None
}

/// The memory accesses of the instruction at `regs.rip`: its fetch, its
/// memory operands, and the push of a call or push. `bases` are FS's and
/// GS's.
fn accesses(
    mem: &crate::memory::GuestMemory,
    regs: &kvm_bindings::kvm_regs,
    bases: (u64, u64),
) -> Vec<Access> {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind, Register};
    let mut out = vec![Access {
        at: regs.rip,
        len: 1,
        fetch: true,
        push: false,
    }];
    if regs.rip >= abi::USER_BASE && !mem.allows(regs.rip, 1, false) {
        return out; // the fetch itself was refused
    }
    let len = mem.size().saturating_sub(regs.rip).min(15);
    let Ok(bytes) = mem.kernel_read(regs.rip, len) else {
        return out;
    };
    let ins = Decoder::with_ip(64, bytes, regs.rip, DecoderOptions::NONE).decode();
    if ins.is_invalid() {
        return out;
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
    out.extend(
        (0..ins.op_count())
            .filter(|&op| {
                // Memory operands only (others have an "address" of 0).
                matches!(
                    ins.op_kind(op),
                    OpKind::Memory
                        | OpKind::MemorySegSI
                        | OpKind::MemorySegESI
                        | OpKind::MemorySegRSI
                        | OpKind::MemorySegDI
                        | OpKind::MemorySegEDI
                        | OpKind::MemorySegRDI
                        | OpKind::MemoryESDI
                        | OpKind::MemoryESEDI
                        | OpKind::MemoryESRDI
                )
            })
            .filter_map(|op| ins.try_virtual_address(op, 0, value))
            .map(|at| Access {
                at,
                len: size,
                fetch: false,
                push: false,
            }),
    );
    if matches!(
        ins.mnemonic(),
        Mnemonic::Call | Mnemonic::Push | Mnemonic::Pushfq | Mnemonic::Enter
    ) {
        out.push(Access {
            at: regs.rsp.wrapping_sub(8),
            len: 8,
            fetch: false,
            push: true,
        });
    }
    out
}

/// Whether `rip` is in getrandom's in-guest fill loop.
pub(super) fn in_getrandom_fill(rip: u64) -> bool {
    (abi::entry::GETRANDOM_FILL..abi::entry::GETRANDOM_FILL + abi::entry::GETRANDOM_FILL_SIZE)
        .contains(&rip)
}
