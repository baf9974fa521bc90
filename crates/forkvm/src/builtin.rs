//! Built-in guest programs, assembled at start-up into tiny static ELF
//! executables: the demo and the benchmark need no toolchain.

use iced_x86::code_asm::{self as asm, CodeAssembler};
use iced_x86::IcedError;

/// Load address of the built-in programs.
const BASE: u64 = 0x40_0000;
/// ELF header + three program headers (text, bss, PT_GNU_STACK) precede the code.
const HEADERS: u64 = 64 + 3 * 56;
/// A zero-filled, writable area the built-in programs may use.
pub const BSS: u64 = 0x80_0000;
/// Its size.
pub const BSS_SIZE: u64 = 2 << 20;

/// A static x86-64 ELF executable with one RX segment holding `code` (run
/// from its start) and a writable zero-filled segment at [`BSS`].
fn elf(code: &[u8]) -> Vec<u8> {
    let total = HEADERS + code.len() as u64;
    let mut f = Vec::with_capacity(total as usize);
    // e_ident: ELF64, little-endian, version 1, System V ABI.
    f.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    f.extend_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    f.extend_from_slice(&1u32.to_le_bytes()); // EV_CURRENT
    f.extend_from_slice(&(BASE + HEADERS).to_le_bytes()); // e_entry
    f.extend_from_slice(&64u64.to_le_bytes()); // e_phoff
    f.extend_from_slice(&0u64.to_le_bytes()); // e_shoff
    f.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    f.extend_from_slice(&64u16.to_le_bytes()); // e_ehsize
    f.extend_from_slice(&56u16.to_le_bytes()); // e_phentsize
    f.extend_from_slice(&3u16.to_le_bytes()); // e_phnum
    f.extend_from_slice(&[0; 6]); // e_shentsize, e_shnum, e_shstrndx
                                  // PT_LOAD, R+X, the whole file at BASE.
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&5u32.to_le_bytes());
    for v in [0, BASE, BASE, total, total, 0x1000] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    // PT_LOAD, R+W, no file bytes: the bss.
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&6u32.to_le_bytes());
    for v in [0, BSS, BSS, 0, BSS_SIZE, 0x1000] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    // PT_GNU_STACK, R+W.
    f.extend_from_slice(&0x6474_e551u32.to_le_bytes());
    f.extend_from_slice(&6u32.to_le_bytes());
    for v in [0u64, 0, 0, 0, 0, 16] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(code);
    f
}

fn assemble(
    f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Result<Vec<u8>, IcedError> {
    let mut a = CodeAssembler::new(64)?;
    f(&mut a)?;
    Ok(elf(&a.assemble(BASE + HEADERS)?))
}

/// The message the built-in hello world prints.
pub const HELLO_MESSAGE: &[u8] = b"Hello from a forkvm guest!\n";

/// A hello world: write(1, msg, len); exit_group(0).
pub fn hello() -> Result<Vec<u8>, IcedError> {
    assemble(|a| {
        let mut msg = a.create_label();
        a.mov(asm::eax, 1)?;
        a.mov(asm::edi, 1)?;
        a.lea(asm::rsi, asm::ptr(msg))?;
        a.mov(asm::edx, HELLO_MESSAGE.len() as u32)?;
        a.syscall()?;
        a.mov(asm::eax, 231)?;
        a.xor(asm::edi, asm::edi)?;
        a.syscall()?;
        a.set_label(&mut msg)?;
        a.db(HELLO_MESSAGE)
    })
}

/// Calls getppid() `n` times, then exit_group(0): one host-handled syscall per iteration.
pub fn syscall_loop(n: u32) -> Result<Vec<u8>, IcedError> {
    assemble(|a| {
        let mut top = a.create_label();
        let mut done = a.create_label();
        a.mov(asm::ebx, n)?;
        a.set_label(&mut top)?;
        a.test(asm::ebx, asm::ebx)?;
        a.jz(done)?;
        a.mov(asm::eax, 110)?; // getppid
        a.syscall()?;
        a.dec(asm::ebx)?;
        a.jmp(top)?;
        a.set_label(&mut done)?;
        a.mov(asm::eax, 231)?;
        a.xor(asm::edi, asm::edi)?;
        a.syscall()
    })
}

/// Calls getrandom(16 bytes on the stack, flags 0) `n` times, then
/// exit_group(0); exits 1 if a call fails.
pub fn getrandom_loop(n: u32) -> Result<Vec<u8>, IcedError> {
    assemble(|a| {
        let failed = checked_loop(a, n, 16, |a| {
            a.lea(asm::rdi, asm::ptr(asm::rsp - 64))?;
            a.mov(asm::esi, 16)?;
            a.xor(asm::edx, asm::edx)?;
            a.mov(asm::eax, 318) // getrandom
        })?;
        exit_failed(a, failed)
    })
}

/// Emits a loop of `n` syscalls (EBX counts), each set up by `args` and
/// expected to return `expect`, then exit_group(0). Returns the label the
/// loop jumps to when a call returns anything else (the caller places it).
fn checked_loop(
    a: &mut CodeAssembler,
    n: u32,
    expect: u32,
    args: impl Fn(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Result<asm::CodeLabel, IcedError> {
    let mut top = a.create_label();
    let mut done = a.create_label();
    let failed = a.create_label();
    a.mov(asm::ebx, n)?;
    a.set_label(&mut top)?;
    a.test(asm::ebx, asm::ebx)?;
    a.jz(done)?;
    args(a)?;
    a.syscall()?;
    a.cmp(asm::rax, expect as i32)?;
    a.jne(failed)?;
    a.dec(asm::ebx)?;
    a.jmp(top)?;
    a.set_label(&mut done)?;
    a.mov(asm::eax, 231)?;
    a.xor(asm::edi, asm::edi)?;
    a.syscall()?;
    Ok(failed)
}

/// Places `failed`: exit_group(1).
fn exit_failed(a: &mut CodeAssembler, mut failed: asm::CodeLabel) -> Result<(), IcedError> {
    a.set_label(&mut failed)?;
    a.mov(asm::eax, 231)?;
    a.mov(asm::edi, 1)?;
    a.syscall()
}

/// Opens `path` with `flags` (openat from the working directory), then
/// makes `n` calls of `nr` (read/write/pread64/pwrite64 shaped:
/// `nr(fd, buf, len, 0)`, the buffer on the stack) and exits 0; exits 1 if
/// the open fails or a call does not transfer `len` bytes. The benchmark's
/// write(/dev/null) and pread loops.
pub fn file_call_loop(
    n: u32,
    path: &str,
    flags: u32,
    nr: u32,
    len: u32,
) -> Result<Vec<u8>, IcedError> {
    let mut name = path.as_bytes().to_vec();
    name.push(0);
    assemble(|a| {
        let mut path_label = a.create_label();
        a.mov(asm::rdi, -100i64)?; // AT_FDCWD
        a.lea(asm::rsi, asm::ptr(path_label))?;
        a.mov(asm::edx, flags)?;
        a.xor(asm::r10d, asm::r10d)?;
        a.mov(asm::eax, 257)?; // openat
        a.syscall()?;
        a.mov(asm::r12, asm::rax)?;
        let failed = checked_loop(a, n, len, |a| {
            a.mov(asm::rdi, asm::r12)?;
            a.lea(asm::rsi, asm::ptr(asm::rsp - 256))?;
            a.mov(asm::edx, len)?;
            a.xor(asm::r10d, asm::r10d)?;
            a.mov(asm::eax, nr)
        })?;
        exit_failed(a, failed)?;
        a.set_label(&mut path_label)?;
        a.db(&name)
    })
}

/// Makes `n` calls of newfstatat(AT_FDCWD, `path`, buf, 0) (the buffer on
/// the stack) and exits 0; exits 1 if one fails. The benchmark's path
/// lookup loop.
pub fn stat_loop(n: u32, path: &str) -> Result<Vec<u8>, IcedError> {
    let mut name = path.as_bytes().to_vec();
    name.push(0);
    assemble(|a| {
        let mut path_label = a.create_label();
        let failed = checked_loop(a, n, 0, |a| {
            a.mov(asm::rdi, -100i64)?; // AT_FDCWD
            a.lea(asm::rsi, asm::ptr(path_label))?;
            a.lea(asm::rdx, asm::ptr(asm::rsp - 512))?;
            a.xor(asm::r10d, asm::r10d)?;
            a.mov(asm::eax, 262)
        })?;
        exit_failed(a, failed)?;
        a.set_label(&mut path_label)?;
        a.db(&name)
    })
}

/// A static program that calls the vDSO's `__vdso_clock_gettime(CLOCK_MONOTONIC)`
/// `n` times (through AT_SYSINFO_EHDR's fixed address) and exits 0; exits 1
/// when it has no vDSO.
pub fn vdso_clock_loop(n: u32) -> Result<Vec<u8>, IcedError> {
    let Some(func) = crate::vdso::symbol("__vdso_clock_gettime") else {
        return syscall_loop(0);
    };
    assemble(|a| {
        let mut top = a.create_label();
        let mut done = a.create_label();
        a.mov(asm::ebx, n)?;
        a.sub(asm::rsp, 32)?;
        a.set_label(&mut top)?;
        a.test(asm::ebx, asm::ebx)?;
        a.jz(done)?;
        a.mov(asm::edi, 1)?; // CLOCK_MONOTONIC
        a.mov(asm::rsi, asm::rsp)?;
        a.mov(asm::rax, crate::abi::VDSO_ADDR + func)?;
        a.call(asm::rax)?;
        a.dec(asm::ebx)?;
        a.jmp(top)?;
        a.set_label(&mut done)?;
        a.mov(asm::eax, 231)?;
        a.xor(asm::edi, asm::edi)?;
        a.syscall()
    })
}

/// A program that says ready and then serves calls, with its functions' addresses.
pub struct Callee {
    /// The ELF image.
    pub image: Vec<u8>,
    /// `noop()`: returns 0.
    pub noop: u64,
    /// `write_pages(n)`: writes one byte in each of `n` pages of the bss; returns `n`.
    pub write_pages: u64,
}

/// Builds the [`Callee`] program.
pub fn callee() -> Result<Callee, IcedError> {
    let mut a = CodeAssembler::new(64)?;
    let mut noop = a.create_label();
    let mut write_pages = a.create_label();
    let mut top = a.create_label();
    let mut done = a.create_label();
    a.mov(asm::rax, forkvm_abi::hypercall::READY)?;
    a.syscall()?;
    a.mov(asm::eax, 231)?;
    a.xor(asm::edi, asm::edi)?;
    a.syscall()?;
    a.set_label(&mut noop)?;
    a.xor(asm::eax, asm::eax)?;
    a.ret()?;
    a.set_label(&mut write_pages)?;
    a.mov(asm::rax, asm::rdi)?;
    a.mov(asm::rcx, BSS)?;
    a.set_label(&mut top)?;
    a.test(asm::rdi, asm::rdi)?;
    a.jz(done)?;
    a.mov(asm::byte_ptr(asm::rcx), 1)?;
    a.add(asm::rcx, 4096)?;
    a.dec(asm::rdi)?;
    a.jmp(top)?;
    a.set_label(&mut done)?;
    a.ret()?;
    let r = a.assemble_options(
        BASE + HEADERS,
        iced_x86::BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS,
    )?;
    Ok(Callee {
        noop: r.label_ip(&noop)?,
        write_pages: r.label_ip(&write_pages)?,
        image: elf(&r.inner.code_buffer),
    })
}

/// The body the built-in serving example answers with.
pub const SERVE_HELLO_BODY: &[u8] =
    b"Hello from a forkvm guest! Every request runs in its own VM.\n";

/// The built-in example for `forkvm serve`: registers a handler that
/// answers every request with [`SERVE_HELLO_BODY`].
pub fn serve_hello() -> Result<Vec<u8>, IcedError> {
    const HEADERS: &[u8] = b"Content-Type: text/plain; charset=utf-8";
    assemble(|a| {
        let mut handler = a.create_label();
        let mut headers = a.create_label();
        let mut body = a.create_label();
        a.lea(asm::rdi, asm::ptr(handler))?;
        a.mov(asm::rax, forkvm_abi::hypercall::READY)?;
        a.syscall()?;
        a.mov(asm::eax, 231)?;
        a.xor(asm::edi, asm::edi)?;
        a.syscall()?;
        a.set_label(&mut handler)?;
        a.mov(asm::edi, 200)?;
        a.lea(asm::rsi, asm::ptr(headers))?;
        a.mov(asm::edx, HEADERS.len() as u32)?;
        a.lea(asm::r10, asm::ptr(body))?;
        a.mov(asm::r8d, SERVE_HELLO_BODY.len() as u32)?;
        a.mov(asm::rax, forkvm_abi::hypercall::RESPOND)?;
        a.syscall()?;
        a.ret()?;
        a.set_label(&mut headers)?;
        a.db(HEADERS)?;
        a.set_label(&mut body)?;
        a.db(SERVE_HELLO_BODY)
    })
}

/// Spins forever (for timeout tests).
pub fn spin() -> Result<Vec<u8>, IcedError> {
    assemble(|a| {
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.jmp(top)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_as_elf() {
        for img in [
            hello().unwrap(),
            syscall_loop(3).unwrap(),
            spin().unwrap(),
            callee().unwrap().image,
            serve_hello().unwrap(),
        ] {
            crate::loader::parse(&img).unwrap();
        }
    }
}
