//! The guest kernel: a GDT, an IDT whose every entry is three instructions,
//! a TSS with one interrupt stack, and two syscall stubs. It is assembled at
//! build time with `iced-x86` from the constants in [`crate::abi`]
//! (`assemble.rs`, run by build.rs), so the host and the guest cannot
//! disagree about a port or an address, and no program pays for assembling.
//!
//! On PVM, CPL0 code is interpreted (~0.5 µs per instruction), so each path
//! through the guest kernel is at most three instructions; all real work is
//! done by the host, which reads and writes the exception frame directly.
//!
//! | code | where | what |
//! | --- | --- | --- |
//! | vector `v` entry | `KERNEL_CODE_ADDR + 16*v` | `out %al, $(0x80+v)`; [`add $8, %rsp`]; `iretq` |
//! | initial entry | [`IRET_ENTRY`] | `iretq` into the program (frame written by the host) |
//! | PVM syscall stub | [`PVM_SYSCALL_STUB`] | `int3` → #BP entry → host |
//! | hardware stub | [`HW_SYSCALL_STUB`] | `out %al, $0x7f`; `sysretq` |
//! | PVM fast dispatcher | [`PVM_FAST_SYSCALL`] | answers guest-local calls at CPL3, else → PVM stub |
//! | hardware fast dispatcher | [`HW_FAST_SYSCALL`] | the same at CPL0 (`sysretq`), else → hardware stub |

use crate::abi::{self, port, selector, vector};
use crate::memory::{Fault, GuestMemory};

use abi::entry::ENTRY_SIZE;
pub use abi::entry::{
    CALL_ENTRY, HW_FAST_SYSCALL, HW_FAST_SYSRET, HW_SYSCALL_STUB, IRET_ENTRY, PVM_FAST_SYSCALL,
    PVM_SYSCALL_STUB,
};

#[cfg(test)]
mod assemble;

/// The code page, assembled at build time from the ABI constants (build.rs).
const CODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kernel_code.bin"));
/// The user-executable stub page, assembled likewise.
const STUBS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kernel_stubs.bin"));

/// A failure to lay out the guest kernel (a bug, reported rather than panicking).
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The kernel did not fit its pages.
    #[error("guest kernel layout: {0}")]
    Layout(#[from] Fault),
}

/// A 64-bit GDT descriptor for a flat segment.
const fn seg(access: u64, flags: u64) -> u64 {
    0xffff | (access << 40) | (0xf << 48) | (flags << 52)
}

fn gdt_bytes() -> Vec<u8> {
    let mut gdt = vec![0u8; 0x50];
    let mut put = |sel: u16, d: u64| {
        let o = (sel & !7) as usize;
        gdt[o..o + 8].copy_from_slice(&d.to_le_bytes());
    };
    put(selector::KERNEL_CS, seg(0x9b, 0xa)); // P, DPL0, code R/X, L
    put(selector::KERNEL_DS, seg(0x93, 0xc)); // P, DPL0, data R/W
    put(selector::USER_CS32, seg(0xfb, 0xc)); // P, DPL3, code, D
    put(selector::USER_DS, seg(0xf3, 0xc)); // P, DPL3, data
    put(selector::USER_CS, seg(0xfb, 0xa)); // P, DPL3, code, L
                                            // 16-byte TSS descriptor: available 64-bit TSS (type 9), present.
    let base = abi::TSS_ADDR;
    let limit = TSS_SIZE - 1;
    let lo = (limit & 0xffff)
        | ((base & 0xff_ffff) << 16)
        | (0x89 << 40)
        | (((limit >> 16) & 0xf) << 48)
        | (((base >> 24) & 0xff) << 56);
    put(selector::TSS, lo);
    put(selector::TSS + 8, base >> 32);
    gdt
}

/// Size of the TSS (no I/O bitmap).
pub const TSS_SIZE: u64 = 104;

fn tss_bytes() -> Vec<u8> {
    let mut tss = vec![0u8; TSS_SIZE as usize];
    tss[4..12].copy_from_slice(&abi::IST_STACK_TOP.to_le_bytes()); // RSP0
    tss[36..44].copy_from_slice(&abi::IST_STACK_TOP.to_le_bytes()); // IST1
    tss[102..104].copy_from_slice(&(TSS_SIZE as u16).to_le_bytes()); // no IOPB
    tss
}

fn idt_bytes() -> Vec<u8> {
    let mut idt = vec![0u8; 256 * 16];
    for v in 0..port::EXCEPTION_COUNT as u8 {
        let handler = abi::KERNEL_CODE_ADDR + ENTRY_SIZE * v as u64;
        // int3 and into must be reachable from user mode.
        let dpl: u64 = if v == vector::BREAKPOINT || v == vector::OVERFLOW {
            3
        } else {
            0
        };
        let lo = (handler & 0xffff)
            | (u64::from(selector::KERNEL_CS) << 16)
            | (1 << 32) // IST1
            | ((0x8e | (dpl << 5)) << 40) // present 64-bit interrupt gate
            | (((handler >> 16) & 0xffff) << 48);
        let o = v as usize * 16;
        idt[o..o + 8].copy_from_slice(&lo.to_le_bytes());
        idt[o + 8..o + 16].copy_from_slice(&(handler >> 32).to_le_bytes());
    }
    idt
}

/// Limit of the GDT as loaded into GDTR.
pub const GDT_LIMIT: u16 = 0x50 - 1;
/// Limit of the IDT as loaded into IDTR.
pub const IDT_LIMIT: u16 = 256 * 16 - 1;

/// Writes the guest kernel (tables and code) into guest memory.
pub fn install(mem: &mut GuestMemory) -> Result<(), KernelError> {
    mem.kernel_write(abi::GDT_ADDR, &gdt_bytes())?;
    mem.kernel_write(abi::IDT_ADDR, &idt_bytes())?;
    mem.kernel_write(abi::TSS_ADDR, &tss_bytes())?;
    mem.kernel_write(abi::KERNEL_CODE_ADDR, CODE)?;
    mem.kernel_write(abi::SYSCALL_STUB_ADDR, STUBS)?;
    Ok(())
}

/// The interrupt frame the CPU pushed (or the host wrote) on the IST stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Frame {
    /// Where the interrupted code resumes.
    pub rip: u64,
    /// Its code segment (CPL in the low bits).
    pub cs: u64,
    /// Its flags.
    pub rflags: u64,
    /// Its stack pointer.
    pub rsp: u64,
    /// Its stack segment.
    pub ss: u64,
}

impl Frame {
    /// A frame that returns to user mode at `rip` with stack `rsp`.
    pub fn user(rip: u64, rsp: u64, rflags: u64) -> Self {
        Self {
            rip,
            cs: u64::from(selector::USER_CS),
            rflags: (rflags & abi::USER_RFLAGS_MASK) | abi::USER_RFLAGS_FORCED,
            rsp,
            ss: u64::from(selector::USER_DS),
        }
    }

    /// Reads the frame at `addr` (guest kernel memory).
    pub fn read(mem: &GuestMemory, addr: u64) -> Result<Self, Fault> {
        let q = |i: u64| mem.kernel_read_u64(addr + 8 * i);
        Ok(Self {
            rip: q(0)?,
            cs: q(1)?,
            rflags: q(2)?,
            rsp: q(3)?,
            ss: q(4)?,
        })
    }

    /// Writes the frame at `addr` (guest kernel memory).
    pub fn write(&self, mem: &mut GuestMemory, addr: u64) -> Result<(), Fault> {
        let mut b = [0u8; 40];
        for (i, v) in [self.rip, self.cs, self.rflags, self.rsp, self.ss]
            .iter()
            .enumerate()
        {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        mem.kernel_write(addr, &b)
    }

    /// Whether the interrupted code ran in user mode.
    pub fn from_user(&self) -> bool {
        self.cs & 3 == 3
    }
}

/// Where the initial `iretq` finds its frame.
pub const INITIAL_FRAME_ADDR: u64 = abi::IST_STACK_TOP - 40;

/// How a syscall returns to the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyscallReturn {
    /// The hardware stub's `sysretq` returns; the host only sets RAX.
    Sysret,
    /// The guest kernel `iretq`s through the frame at this address, which the
    /// host rewrites to RIP←RCX, RFLAGS←R11.
    Iret(u64),
}

/// What an exit from the guest kernel means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trap {
    /// The program made a system call.
    Syscall(SyscallReturn),
    /// The program (or the guest kernel) took an exception.
    Exception {
        /// x86 vector.
        vector: u8,
        /// Error code, 0 when the vector has none.
        error_code: u64,
        /// The interrupted context.
        frame: Frame,
    },
    /// The hardware fast dispatcher answered a call, but its `sysretq` ran
    /// at CPL3 (PVM with the hardware path forced) and faulted: the host
    /// completes the return through the frame at this address (RAX holds the
    /// answer).
    FastReturn(u64),
    /// An I/O port the guest kernel never uses (the program cannot reach
    /// ports, so this means a broken guest kernel).
    Unknown(u16),
}

/// Decodes an `out` exit on `port`, reading the exception frame if there is one.
///
/// Platform-independent on purpose: both syscall shapes are recognised on
/// both hypervisors (see [`crate::hypervisor::platform`]).
pub fn decode(port_nr: u16, mem: &GuestMemory) -> Result<Trap, Fault> {
    if port_nr == port::SYSCALL {
        return Ok(Trap::Syscall(SyscallReturn::Sysret));
    }
    let Some(v) = port_nr
        .checked_sub(port::EXCEPTION_BASE)
        .filter(|v| *v < port::EXCEPTION_COUNT)
    else {
        return Ok(Trap::Unknown(port_nr));
    };
    let v = v as u8;
    let frame_addr = abi::exception_frame_addr(v);
    let (error_code, frame_at) = if vector::has_error_code(v) {
        (mem.kernel_read_u64(frame_addr)?, frame_addr + 8)
    } else {
        (0, frame_addr)
    };
    let frame = Frame::read(mem, frame_at)?;
    let pvm_syscall = v == vector::BREAKPOINT && frame.rip == PVM_SYSCALL_STUB + 1;
    let hw_on_pvm = v == vector::GENERAL_PROTECTION && frame.rip == HW_SYSCALL_STUB;
    if frame.from_user() && (pvm_syscall || hw_on_pvm) {
        return Ok(Trap::Syscall(SyscallReturn::Iret(frame_at)));
    }
    if frame.from_user() && v == vector::GENERAL_PROTECTION && frame.rip == HW_FAST_SYSRET {
        return Ok(Trap::FastReturn(frame_at));
    }
    Ok(Trap::Exception {
        vector: v,
        error_code,
        frame,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_assembles_and_fits() {
        assert_eq!(
            CODE,
            assemble::code().unwrap(),
            "embedded kernel is current"
        );
        assert_eq!(
            STUBS,
            assemble::stubs().unwrap(),
            "embedded stubs are current"
        );
        assert!((CODE.len() as u64) < abi::PAGE_SIZE);
        assert_eq!(STUBS[0], 0xcc, "PVM stub is int3");
        // out %al, $0x7f ; sysretq
        let hw = (HW_SYSCALL_STUB - abi::SYSCALL_STUB_ADDR) as usize;
        assert_eq!(&STUBS[hw..hw + 5], &[0xe6, 0x7f, 0x48, 0x0f, 0x07]);
        // #PF entry: out %al,$0x8e ; add $8,%rsp ; iretq
        let pf = (ENTRY_SIZE * 14) as usize;
        assert_eq!(&CODE[pf..pf + 2], &[0xe6, 0x8e]);
    }

    fn mem_with_frame(vector: u8, rip: u64, cs: u16) -> GuestMemory {
        let mut mem = GuestMemory::new(4 << 20).unwrap();
        install(&mut mem).unwrap();
        let mut at = abi::exception_frame_addr(vector);
        if vector::has_error_code(vector) {
            mem.kernel_write_u64(at, 6).unwrap();
            at += 8;
        }
        let mut f = Frame::user(rip, 0x7000_0000, 0x202);
        f.cs = u64::from(cs);
        f.write(&mut mem, at).unwrap();
        mem
    }

    #[test]
    fn decode_recognises_both_syscall_shapes() {
        let mem = GuestMemory::new(4 << 20).unwrap();
        assert_eq!(
            decode(port::SYSCALL, &mem).unwrap(),
            Trap::Syscall(SyscallReturn::Sysret)
        );
        let mem = mem_with_frame(3, PVM_SYSCALL_STUB + 1, selector::USER_CS);
        assert!(matches!(
            decode(port::EXCEPTION_BASE + 3, &mem).unwrap(),
            Trap::Syscall(SyscallReturn::Iret(_))
        ));
        let mem = mem_with_frame(13, HW_SYSCALL_STUB, selector::USER_CS);
        assert!(matches!(
            decode(port::EXCEPTION_BASE + 13, &mem).unwrap(),
            Trap::Syscall(SyscallReturn::Iret(a)) if a == abi::IST_STACK_TOP - 40
        ));
    }

    #[test]
    fn decode_reports_real_exceptions() {
        // int3 elsewhere is a breakpoint.
        let mem = mem_with_frame(3, 0x40_1234, selector::USER_CS);
        assert!(matches!(
            decode(port::EXCEPTION_BASE + 3, &mem).unwrap(),
            Trap::Exception { vector: 3, .. }
        ));
        // A page fault carries its error code.
        let mem = mem_with_frame(14, 0x40_1000, selector::USER_CS);
        match decode(port::EXCEPTION_BASE + 14, &mem).unwrap() {
            Trap::Exception {
                vector: 14,
                error_code: 6,
                frame,
            } => assert_eq!(frame.rip, 0x40_1000),
            t => panic!("{t:?}"),
        }
        // A kernel-mode int3 at the stub address is not a syscall.
        let mem = mem_with_frame(3, PVM_SYSCALL_STUB + 1, selector::KERNEL_CS);
        assert!(matches!(
            decode(port::EXCEPTION_BASE + 3, &mem).unwrap(),
            Trap::Exception { .. }
        ));
        assert_eq!(decode(0x10, &mem).unwrap(), Trap::Unknown(0x10));
    }
}
