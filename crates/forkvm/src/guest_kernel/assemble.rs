//! Assembles the guest kernel's code and stub pages from the ABI constants.
//!
//! Used by the build script (the bytes are embedded in the library, so no
//! program pays for assembling at run time) and by a unit test that checks
//! the embedded bytes are current.

use forkvm_abi::{self as abi, entry, fast, port, vector};
use iced_x86::code_asm::{self as asm, CodeAssembler};
use iced_x86::IcedError;

fn assemble_at(
    ip: u64,
    f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Result<Vec<u8>, IcedError> {
    let mut a = CodeAssembler::new(64)?;
    f(&mut a)?;
    a.assemble(ip)
}

fn place(buf: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let off = offset as usize;
    if buf.len() < off + bytes.len() {
        buf.resize(off + bytes.len(), 0xcc);
    }
    buf[off..off + bytes.len()].copy_from_slice(bytes);
}

/// The code page: one entry per exception vector, then the initial `iretq`.
pub fn code() -> Result<Vec<u8>, IcedError> {
    let mut code = Vec::new();
    for v in 0..port::EXCEPTION_COUNT as u8 {
        let ip = abi::KERNEL_CODE_ADDR + entry::ENTRY_SIZE * v as u64;
        let bytes = assemble_at(ip, |a| {
            a.out(u32::from(port::EXCEPTION_BASE) + u32::from(v), asm::al)?;
            if vector::has_error_code(v) {
                a.add(asm::rsp, 8)?;
            }
            a.iretq()
        })?;
        assert!(
            bytes.len() as u64 <= entry::ENTRY_SIZE,
            "entry {v} too long"
        );
        place(&mut code, ip - abi::KERNEL_CODE_ADDR, &bytes);
    }
    let iret = assemble_at(entry::IRET_ENTRY, |a| a.iretq())?;
    place(&mut code, entry::IRET_ENTRY - abi::KERNEL_CODE_ADDR, &iret);
    Ok(code)
}

/// The user-executable stub page: both syscall stubs and the call entry.
pub fn stubs() -> Result<Vec<u8>, IcedError> {
    let mut stubs = Vec::new();
    let pvm = assemble_at(entry::PVM_SYSCALL_STUB, |a| a.int3())?;
    place(
        &mut stubs,
        entry::PVM_SYSCALL_STUB - abi::SYSCALL_STUB_ADDR,
        &pvm,
    );
    let hw = assemble_at(entry::HW_SYSCALL_STUB, |a| {
        a.out(u32::from(port::SYSCALL), asm::al)?;
        a.sysretq()
    })?;
    place(
        &mut stubs,
        entry::HW_SYSCALL_STUB - abi::SYSCALL_STUB_ADDR,
        &hw,
    );
    for (at, platform) in [
        (entry::PVM_FAST_SYSCALL, FastReturn::Pvm),
        (entry::HW_FAST_SYSCALL, FastReturn::Hardware),
    ] {
        let bytes = assemble_at(at, |a| fast_dispatcher(a, platform))?;
        assert!(bytes.len() <= 0xf0, "fast dispatcher too long");
        place(&mut stubs, at - abi::SYSCALL_STUB_ADDR, &bytes);
    }
    let sysret = assemble_at(entry::HW_FAST_SYSRET, |a| a.sysretq())?;
    place(
        &mut stubs,
        entry::HW_FAST_SYSRET - abi::SYSCALL_STUB_ADDR,
        &sysret,
    );
    let call = assemble_at(entry::CALL_ENTRY, |a| {
        a.mov(asm::r10, asm::rdx)?;
        a.mov(asm::eax, u32::MAX)?;
        a.mov(asm::edx, u32::MAX)?;
        a.xrstor64(asm::ptr(abi::XSAVE_AREA_ADDR))?;
        a.mov(asm::rdx, asm::r10)?;
        a.call(asm::r11)?;
        a.mov(asm::rdi, asm::rax)?;
        a.mov(asm::rax, abi::hypercall::CALL_RETURN)?;
        a.syscall()?;
        a.ud2()
    })?;
    place(
        &mut stubs,
        entry::CALL_ENTRY - abi::SYSCALL_STUB_ADDR,
        &call,
    );
    Ok(stubs)
}

/// The x86-64 red zone (128 bytes below RSP that leaf code may use) plus one
/// slot, skipped before the dispatcher's `push`.
const RED_ZONE_SKIP: i32 = 136;

/// How the dispatcher returns to the program.
#[derive(Clone, Copy)]
enum FastReturn {
    /// PVM: `syscall` stayed at CPL3, so return like a function that also
    /// restores RFLAGS from R11 (below the program's red zone, which may be
    /// live), then `jmp *%rcx`.
    Pvm,
    /// Hardware KVM: `syscall` entered CPL0; `sysretq` returns (RIP←RCX, RFLAGS←R11).
    Hardware,
}

/// The in-guest syscall dispatcher: answers the calls that concern the
/// guest alone from the fast-path data page, without leaving the VM, and
/// sends every other call to the platform's ordinary stub (which exits to
/// the host exactly as if LSTAR pointed there). It touches only RAX (the
/// answer), RCX and R11 (which `syscall` clobbers anyway), reads the data
/// page and never writes it.
fn fast_dispatcher(a: &mut CodeAssembler, ret: FastReturn) -> Result<(), IcedError> {
    let data = |off: u64| asm::qword_ptr(abi::FAST_DATA_ADDR + off);
    let slow = match ret {
        FastReturn::Pvm => entry::PVM_SYSCALL_STUB,
        FastReturn::Hardware => entry::HW_SYSCALL_STUB,
    };
    let mut answer_pid = a.create_label();
    let mut answer_ppid = a.create_label();
    let mut answer_tid = a.create_label();
    let mut answer_uid = a.create_label();
    let mut answer_gid = a.create_label();
    let mut answer_yield = a.create_label();
    let mut done = a.create_label();
    // Syscall numbers (x86-64): getpid 39, getppid 110, gettid 186,
    // getuid 102, geteuid 107, getgid 104, getegid 108, sched_yield 24.
    for (nr, label) in [
        (39, answer_pid),
        (186, answer_tid),
        (110, answer_ppid),
        (102, answer_uid),
        (107, answer_uid),
        (104, answer_gid),
        (108, answer_gid),
        (24, answer_yield),
    ] {
        a.cmp(asm::rax, nr)?;
        a.je(label)?;
    }
    a.jmp(slow)?;
    for (label, off) in [
        (&mut answer_pid, fast::PID),
        (&mut answer_ppid, fast::PPID),
        (&mut answer_tid, fast::TID),
        (&mut answer_uid, fast::UID),
        (&mut answer_gid, fast::GID),
    ] {
        a.set_label(label)?;
        a.mov(asm::rax, data(off))?;
        a.jmp(done)?;
    }
    // sched_yield with nobody to yield to returns 0 at once; otherwise the
    // host switches threads.
    a.set_label(&mut answer_yield)?;
    a.cmp(data(fast::ALONE), 0)?;
    a.je(slow)?;
    a.xor(asm::eax, asm::eax)?;
    a.set_label(&mut done)?;
    match ret {
        FastReturn::Pvm => {
            // RFLAGS from R11 through the program's stack below its red zone
            // (free scratch by the ABI, where Linux puts signal frames too):
            // the data page is never written, so a fork's copy stays shared.
            a.lea(asm::rsp, asm::ptr(asm::rsp - RED_ZONE_SKIP))?;
            a.push(asm::r11)?;
            a.popfq()?;
            a.lea(asm::rsp, asm::ptr(asm::rsp + RED_ZONE_SKIP))?;
            a.jmp(asm::rcx)?;
        }
        FastReturn::Hardware => {
            // One `sysretq` at a fixed address for every answer: on PVM with
            // the hardware path forced it faults (#GP at CPL3), and the host
            // recognises that address as an answered call.
            a.jmp(entry::HW_FAST_SYSRET)?;
        }
    }
    Ok(())
}
