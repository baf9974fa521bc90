//! Assembles the guest kernel's code and stub pages from the ABI constants.
//!
//! Used by the build script (the bytes are embedded in the library, so no
//! program pays for assembling at run time) and by a unit test that checks
//! the embedded bytes are current.

use forkvm_abi::{self as abi, entry, port, vector};
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
