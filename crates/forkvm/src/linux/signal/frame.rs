//! The signal frame: what delivery pushes on the user stack (Linux's
//! `rt_sigframe`, with the extended state) and what rt_sigreturn restores.

use super::{SigInfo, SIGINFO_SIZE, SS_DISABLE, SS_ONSTACK, UNBLOCKABLE};
use crate::hypervisor::XsaveArea;
use crate::linux::{Errno, Process, SigAction};
use crate::memory::GuestMemory;

const SA_ONSTACK: u64 = 0x0800_0000;
const SA_RESETHAND: u64 = 0x8000_0000;
const SA_NODEFER: u64 = 0x4000_0000;
const SA_RESTORER: u64 = 0x0400_0000;
/// `struct ucontext` (kernel layout): flags, link, stack_t, sigcontext, sigmask.
const UCONTEXT_SIZE: u64 = 304;
const MCONTEXT_OFFSET: u64 = 40;
const SIGMASK_OFFSET: u64 = 296;
/// `struct rt_sigframe`: return address, ucontext, siginfo.
const FRAME_SIZE: u64 = 8 + UCONTEXT_SIZE + SIGINFO_SIZE;
/// Most bytes a signal frame takes on the stack with `layout`'s XSAVE image:
/// the rt_sigframe, the image and its magic, alignment and the red zone (what
/// AT_MINSIGSTKSZ tells the program).
pub fn frame_bytes(layout: crate::hypervisor::XsaveLayout) -> u64 {
    FRAME_SIZE + layout.frame_size() + 64 + 16 + 128
}

/// `uc_flags`: the frame has XSAVE state; `ss` is saved and restored strictly.
const UC_FP_XSTATE: u64 = 0x1;
const UC_SIGCONTEXT_SS: u64 = 0x2;
const UC_STRICT_RESTORE_SS: u64 = 0x4;
/// `sigcontext.fpstate`: where the FPU state of the interrupted code is.
const FPSTATE_OFFSET: u64 = MCONTEXT_OFFSET + 184;

/// The 18 sigcontext registers, in kernel order, from `r`.
fn gregs(r: &kvm_bindings::kvm_regs) -> [u64; 18] {
    [
        r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rdi, r.rsi, r.rbp, r.rbx, r.rdx,
        r.rax, r.rcx, r.rsp, r.rip, r.rflags,
    ]
}

fn put(buf: &mut [u8], off: u64, v: u64) {
    buf[off as usize..off as usize + 8].copy_from_slice(&v.to_le_bytes());
}

/// Pushes a signal frame for `info` onto the user stack of `ctx`, with the
/// interrupted code's extended state `fpu` above it as Linux lays it out, and
/// returns the registers that enter the handler. (The handler itself starts
/// with the initial extended state: the caller loads it.)
#[allow(clippy::too_many_arguments)]
pub fn deliver(
    p: &mut Process,
    mem: &mut GuestMemory,
    ctx: &kvm_bindings::kvm_regs,
    fpu: &XsaveArea,
    info: SigInfo,
    action: SigAction,
    trapno: u64,
    err: u64,
) -> Result<kvm_bindings::kvm_regs, Errno> {
    let (ss_sp, ss_flags, ss_size) = p.altstack;
    let enabled = ss_flags & SS_DISABLE == 0;
    let on_alt = enabled && ctx.rsp > ss_sp && ctx.rsp <= ss_sp.saturating_add(ss_size);
    let top = if action.flags & SA_ONSTACK != 0 && enabled && !on_alt {
        ss_sp.saturating_add(ss_size)
    } else {
        ctx.rsp.saturating_sub(128) // red zone
    };
    // The FPU state first (64-byte aligned), then the frame below it, so that
    // the handler is entered with RSP+8 16-byte aligned.
    let fpstate = top
        .checked_sub(fpu.layout().frame_size())
        .ok_or(Errno::EFAULT)?
        & !63;
    let frame = (fpstate.checked_sub(FRAME_SIZE).ok_or(Errno::EFAULT)? & !15)
        .checked_sub(8)
        .ok_or(Errno::EFAULT)?;
    let uc = frame + 8;
    let si = uc + UCONTEXT_SIZE;
    let mut buf = vec![0u8; FRAME_SIZE as usize];
    let restorer = if action.flags & SA_RESTORER != 0 {
        action.restorer
    } else {
        0
    };
    put(&mut buf, 0, restorer);
    put(
        &mut buf,
        8,
        UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS,
    );
    // uc_stack
    put(&mut buf, 8 + 16, ss_sp);
    put(
        &mut buf,
        8 + 24,
        (if on_alt { SS_ONSTACK } else { ss_flags }) as u32 as u64,
    );
    put(&mut buf, 8 + 32, ss_size);
    let mc = 8 + MCONTEXT_OFFSET;
    for (i, v) in gregs(ctx).iter().enumerate() {
        put(&mut buf, mc + 8 * i as u64, *v);
    }
    // cs, gs, fs, ss as four u16.
    put(&mut buf, mc + 144, 0x33 | (0x2b << 48));
    put(&mut buf, mc + 152, err);
    put(&mut buf, mc + 160, trapno);
    // The mask sigreturn restores: from before a call that waited under
    // another one (see `take_under_mask`), else the current one.
    let saved = p.frame_mask.take().unwrap_or(p.sigmask);
    put(&mut buf, mc + 168, saved);
    put(&mut buf, mc + 176, info.addr);
    put(&mut buf, 8 + FPSTATE_OFFSET, fpstate);
    put(&mut buf, 8 + SIGMASK_OFFSET, saved);
    // siginfo: a fault's carries its address, even 0 (a NULL dereference:
    // Go turns it into a nil-pointer panic only then).
    let sio = (8 + UCONTEXT_SIZE) as usize;
    buf[sio..sio + SIGINFO_SIZE as usize].copy_from_slice(&info.to_siginfo());
    mem.write(fpstate, &fpu.to_sigframe())?;
    mem.write(frame, &buf)?;

    let idx = info.signo as usize - 1;
    let mut mask = p.sigmask | action.mask;
    if action.flags & SA_NODEFER == 0 {
        mask |= 1 << idx;
    }
    p.sigmask = mask & !UNBLOCKABLE;
    if action.flags & SA_RESETHAND != 0 {
        // Only the handler, as Linux's get_signal: the flags (SA_SIGINFO
        // too) and the mask stay (LTP's sigaction01).
        p.sigactions[idx].handler = 0;
    }
    Ok(kvm_bindings::kvm_regs {
        rdi: info.signo as u64,
        rsi: si,
        rdx: uc,
        rax: 0,
        rsp: frame,
        rip: action.handler,
        rflags: ctx.rflags & !0x100, // no single-step into the handler
        ..*ctx
    })
}

/// Implements rt_sigreturn(2): restores the context saved by [`deliver`];
/// `rsp` is the user stack pointer at the syscall (the frame's ucontext).
/// Returns the general registers and the extended state to resume with
/// (from the frame, sanitised; `initial` if the frame has none, as Linux
/// does). Everything in the frame is guest-written.
pub fn sigreturn(
    p: &mut Process,
    mem: &GuestMemory,
    rsp: u64,
    initial: XsaveArea,
) -> Result<(kvm_bindings::kvm_regs, XsaveArea), Errno> {
    let layout = initial.layout();
    let fpstate = mem.read_u64(rsp.checked_add(FPSTATE_OFFSET).ok_or(Errno::EFAULT)?)?;
    let fpu = if fpstate == 0 {
        initial
    } else {
        let legacy = mem.read(fpstate, 512)?;
        let len = XsaveArea::sigframe_len(legacy, layout);
        let image = mem.read(fpstate, len as u64)?;
        XsaveArea::from_sigframe(image, layout).map_err(|_| Errno::EFAULT)?
    };
    let mc = rsp + MCONTEXT_OFFSET;
    let mut g = [0u64; 18];
    for (i, v) in g.iter_mut().enumerate() {
        *v = mem.read_u64(mc + 8 * i as u64)?;
    }
    p.sigmask = mem.read_u64(rsp + SIGMASK_OFFSET)? & !UNBLOCKABLE;
    let [r8, r9, r10, r11, r12, r13, r14, r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, rflags] =
        g;
    let regs = kvm_bindings::kvm_regs {
        r8,
        r9,
        r10,
        r11,
        r12,
        r13,
        r14,
        r15,
        rdi,
        rsi,
        rbp,
        rbx,
        rdx,
        rax,
        rcx,
        rsp,
        rip,
        rflags,
    };
    // A signal that came while the handler blocked it (its own, raised
    // again after resetting it to SIG_DFL, as node does on SIGTERM) is due
    // now that the mask from before the handler is back. A timer's is left
    // for the next unblocking call: delivering it here, a timer faster than
    // its handler on this machine would run nothing but the handler.
    p.timer_blocked &= p.sigqueue.bits();
    super::deliver_waiting(p, !p.sigmask & !p.timer_blocked)?;
    Ok((regs, fpu))
}
