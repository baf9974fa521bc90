//! Assembles the guest kernel's code and stub pages from the ABI constants.
//!
//! Used by the build script (the bytes are embedded in the library, so no
//! program pays for assembling at run time) and by a unit test that checks
//! the embedded bytes are current.

use forkvm_abi::{self as abi, entry, exitless, fast, port, vector};
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
        assert!(
            bytes.len() as u64 <= entry::FAST_SYSCALL_SIZE,
            "fast dispatcher too long"
        );
        place(&mut stubs, at - abi::SYSCALL_STUB_ADDR, &bytes);
    }
    for (base, platform) in [
        (entry::exitless::PVM, FastReturn::Pvm),
        (entry::exitless::HW, FastReturn::Hardware),
    ] {
        exitless_block(&mut stubs, base, platform)?;
    }
    let fill = assemble_at(entry::GETRANDOM_FILL, getrandom_fill)?;
    assert!(
        fill.len() as u64 <= entry::GETRANDOM_FILL_SIZE,
        "getrandom fill too long"
    );
    place(
        &mut stubs,
        entry::GETRANDOM_FILL - abi::SYSCALL_STUB_ADDR,
        &fill,
    );
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

/// getrandom's syscall number.
const GETRANDOM: i32 = 318;
/// Largest getrandom the guest answers itself (glibc's and musl's
/// getentropy ask for at most 256 bytes).
const GETRANDOM_MAX: i32 = 256;

/// getrandom's fill loop (see [`entry::GETRANDOM_FILL`]): RSI bytes at RDI,
/// eight at a time, then the tail from one more RDRAND. Only RAX, RDI, RSI
/// and the flags change; CF set on return means filled.
fn getrandom_fill(a: &mut CodeAssembler) -> Result<(), IcedError> {
    let mut words = a.create_label();
    let mut tail = a.create_label();
    let mut bytes = a.create_label();
    let mut ok = a.create_label();
    let mut fail = a.create_label();
    a.set_label(&mut words)?;
    a.cmp(asm::rsi, 8)?;
    a.jb(tail)?;
    a.rdrand(asm::rax)?;
    a.jnc(fail)?;
    a.mov(asm::qword_ptr(asm::rdi), asm::rax)?;
    a.add(asm::rdi, 8)?;
    a.sub(asm::rsi, 8)?;
    a.jmp(words)?;
    a.set_label(&mut tail)?;
    a.test(asm::rsi, asm::rsi)?;
    a.jz(ok)?;
    a.rdrand(asm::rax)?;
    a.jnc(fail)?;
    a.set_label(&mut bytes)?;
    a.mov(asm::byte_ptr(asm::rdi), asm::al)?;
    a.shr(asm::rax, 8)?;
    a.inc(asm::rdi)?;
    a.dec(asm::rsi)?;
    a.jnz(bytes)?;
    a.set_label(&mut ok)?;
    a.stc()?;
    a.ret()?;
    a.set_label(&mut fail)?;
    a.clc()?;
    a.ret()
}

/// [`entry::RED_ZONE_SKIP`] as an assembler displacement.
const RED_ZONE_SKIP: i32 = entry::RED_ZONE_SKIP as i32;

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

impl FastReturn {
    /// The platform's exitless block (see [`entry::exitless`]).
    fn exitless_block(self) -> u64 {
        match self {
            Self::Pvm => entry::exitless::PVM,
            Self::Hardware => entry::exitless::HW,
        }
    }
}

/// The in-guest syscall dispatcher: answers the calls that concern the
/// guest alone from the fast-path data page, without leaving the VM, and
/// sends every other call on to the host: through the platform's exitless
/// block (see [`exitless_block`]), which posts it to a poller or takes the
/// ordinary stub (an exit exactly as if LSTAR pointed there). It touches
/// only RAX (the answer), RCX and R11 (which `syscall` clobbers anyway).
fn fast_dispatcher(a: &mut CodeAssembler, ret: FastReturn) -> Result<(), IcedError> {
    let data = |off: u64| asm::qword_ptr(abi::FAST_DATA_ADDR + off);
    // Everything not answered here goes on to the host: posted to the call
    // slot when a poller watches it, else through the exit stub.
    let slow = ret.exitless_block() + entry::exitless::POST;
    let mut answer_pid = a.create_label();
    let mut answer_ppid = a.create_label();
    let mut answer_tid = a.create_label();
    let mut answer_uid = a.create_label();
    let mut answer_gid = a.create_label();
    let mut answer_yield = a.create_label();
    let mut answer_getrandom = a.create_label();
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
        (GETRANDOM, answer_getrandom),
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
    a.jmp(done)?;
    // getrandom(buf, len, flags): RDRAND straight into the buffer when the
    // vCPU has it, the flags are plain (GRND_NONBLOCK/GRND_RANDOM) and the
    // request small; the host answers anything else (and a bad buffer, when
    // the fill faults). Below the red zone: the caller's RDI/RSI, then the
    // fill's return address.
    let mut filled = a.create_label();
    a.set_label(&mut answer_getrandom)?;
    a.cmp(data(fast::RDRAND), 0)?;
    a.je(slow)?;
    a.test(asm::rdx, -4)?;
    a.jne(slow)?;
    a.cmp(asm::rsi, GETRANDOM_MAX)?;
    a.ja(slow)?;
    a.cmp(asm::rdi, abi::USER_BASE as i32)?;
    a.jb(slow)?;
    a.lea(asm::rsp, asm::ptr(asm::rsp - RED_ZONE_SKIP))?;
    a.push(asm::rsi)?;
    a.push(asm::rdi)?;
    a.call(entry::GETRANDOM_FILL)?;
    // pop and lea leave CF (the fill's verdict) alone.
    a.pop(asm::rdi)?;
    a.pop(asm::rsi)?;
    a.lea(asm::rsp, asm::ptr(asm::rsp + RED_ZONE_SKIP))?;
    a.jc(filled)?;
    a.mov(asm::eax, GETRANDOM as u32)?; // RDRAND ran dry: the host answers
    a.jmp(slow)?;
    a.set_label(&mut filled)?;
    a.mov(asm::rax, asm::rsi)?;
    a.set_label(&mut done)?;
    return_to_program(a, ret)
}

/// Returns from a call answered in the guest, RAX holding the answer.
fn return_to_program(a: &mut CodeAssembler, ret: FastReturn) -> Result<(), IcedError> {
    match ret {
        FastReturn::Pvm => {
            // RFLAGS from R11 through the program's stack below its red zone
            // (free scratch by the ABI, where Linux puts signal frames too).
            a.lea(asm::rsp, asm::ptr(asm::rsp - RED_ZONE_SKIP))?;
            a.push(asm::r11)?;
            a.popfq()?;
            a.lea(asm::rsp, asm::ptr(asm::rsp + RED_ZONE_SKIP))?;
            a.jmp(asm::rcx)
        }
        FastReturn::Hardware => {
            // One `sysretq` at a fixed address for every answer: on PVM with
            // the hardware path forced it faults (#GP at CPL3), and the host
            // recognises that address as an answered call.
            a.jmp(entry::HW_FAST_SYSRET)
        }
    }
}

/// Largest call number the exitless call map covers.
const CALL_MAP_LAST: i32 = (fast::CALL_MAP_SIZE * 8 - 1) as i32;

/// One platform's exitless block at `base` (see [`entry::exitless`]):
/// post the call to the slot if the host's map lists it and a poller is
/// awake, spin a bounded number of rounds for the answer, and cancel to the
/// exit stub when none comes. Only RAX, RCX and R11 change, as for any
/// syscall; the arguments stay in their registers for the exit path.
fn exitless_block(stubs: &mut Vec<u8>, base: u64, ret: FastReturn) -> Result<(), IcedError> {
    use entry::exitless as x;
    let data = |off: u64| asm::qword_ptr(abi::FAST_DATA_ADDR + off);
    let state = || data(fast::CALL_STATE);
    let exit_stub = match ret {
        FastReturn::Pvm => entry::PVM_SYSCALL_STUB,
        FastReturn::Hardware => entry::HW_SYSCALL_STUB,
    };
    let (spin, cancel, done) = (base + x::SPIN, base + x::CANCEL, base + x::DONE);
    let mut parts: Vec<(u64, u64, Vec<u8>)> = Vec::new();
    parts.push((
        x::POST,
        x::SPIN - x::POST,
        assemble_at(base + x::POST, |a| {
            a.cmp(asm::rax, CALL_MAP_LAST)?;
            a.ja(exit_stub)?;
            a.bt(data(fast::CALL_MAP), asm::rax)?;
            a.jnc(exit_stub)?;
            a.cmp(data(fast::CALL_AWAKE), 0)?;
            a.je(exit_stub)?;
            a.mov(data(fast::CALL_NR), asm::rax)?;
            for (i, reg) in [asm::rdi, asm::rsi, asm::rdx, asm::r10, asm::r8, asm::r9]
                .into_iter()
                .enumerate()
            {
                a.mov(data(fast::CALL_ARGS + 8 * i as u64), reg)?;
            }
            a.mov(asm::rax, data(fast::CALL_SPIN))?;
            a.jmp(spin)
        })?,
    ));
    parts.push((
        x::SPIN,
        x::SPIN_SIZE,
        assemble_at(spin, |a| {
            let mut rounds = a.create_label();
            let mut claimed = a.create_label();
            let mut serving = a.create_label();
            let mut declined = a.create_label();
            a.mov(state(), exitless::POSTED as i32)?;
            let mut no_poller = a.create_label();
            // Leaves for `done` or `declined` once the poller has answered.
            let answered = |a: &mut CodeAssembler, declined| -> Result<(), IcedError> {
                a.cmp(state(), exitless::DONE as i32)?;
                a.je(done)?;
                a.cmp(state(), exitless::DECLINED as i32)?;
                a.je(declined)
            };
            a.set_label(&mut rounds)?;
            answered(a, declined)?;
            // POSTED cleared by a poller: it has the call.
            a.cmp(state(), exitless::IDLE as i32)?;
            a.je(claimed)?;
            // The poller went to sleep after we looked (it clears the word,
            // then looks at the slot once more): take the call back.
            a.cmp(data(fast::CALL_AWAKE), 0)?;
            a.je(no_poller)?;
            a.pause()?;
            a.dec(asm::rax)?;
            a.jnz(rounds)?;
            // Tired of waiting: take the call back unless a poller has it.
            a.lock().btr(state(), 0)?;
            a.jnc(claimed)?;
            a.inc(data(fast::CALL_CANCELS))?;
            a.jmp(cancel)?;
            a.set_label(&mut no_poller)?;
            a.lock().btr(state(), 0)?;
            a.jnc(claimed)?;
            a.jmp(cancel)?;
            // A poller has the call: wait `CALL_ANSWER_SPIN` rounds (four
            // budgets) for its answer, then leave through the exit, where the host waits for the
            // poller to finish. A poller that lost its core (a busy host)
            // then runs on the one the vCPU gives up.
            a.set_label(&mut claimed)?;
            a.mov(asm::rax, data(fast::CALL_ANSWER_SPIN))?;
            a.set_label(&mut serving)?;
            answered(a, declined)?;
            a.pause()?;
            a.dec(asm::rax)?;
            a.jnz(serving)?;
            a.mov(asm::rax, abi::hypercall::AWAIT_ANSWER)?;
            a.jmp(exit_stub)?;
            a.set_label(&mut declined)?;
            a.mov(state(), exitless::IDLE as i32)?;
            a.jmp(cancel)
        })?,
    ));
    parts.push((
        x::CANCEL,
        x::DONE - x::CANCEL,
        assemble_at(cancel, |a| {
            a.mov(asm::rax, data(fast::CALL_NR))?;
            a.jmp(exit_stub)
        })?,
    ));
    parts.push((
        x::DONE,
        x::RETURN - x::DONE,
        assemble_at(done, |a| {
            a.mov(asm::rax, data(fast::CALL_RESULT))?;
            a.mov(state(), exitless::IDLE as i32)?;
            a.jmp(base + x::RETURN)
        })?,
    ));
    parts.push((
        x::RETURN,
        x::SIZE - x::RETURN,
        assemble_at(base + x::RETURN, |a| return_to_program(a, ret))?,
    ));
    for (off, room, bytes) in parts {
        assert!(
            bytes.len() as u64 <= room,
            "exitless part at {off:#x} too long"
        );
        place(stubs, base + off - abi::SYSCALL_STUB_ADDR, &bytes);
    }
    Ok(())
}
