//! Signals: dispositions, masks, the alternate stack, and delivery to guest
//! handlers. A fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) or a signal
//! sent to itself runs the guest's handler on a Linux-compatible
//! `rt_sigframe` (so `siglongjmp` and `rt_sigreturn` work); with the default
//! action it ends the process like Linux would (status 128+signal).

use super::table::{Support, SyscallEntry};
use super::{process::PID, Args, Errno, Process, SigAction, SysResult};
use crate::hypervisor::XsaveArea;
use crate::memory::GuestMemory;

const SIGKILL: u64 = 9;
const SIGSTOP: u64 = 19;
const SIGCHLD: u64 = 17;
const SIG_DFL: u64 = 0;
const SIG_IGN: u64 = 1;
const SIGSET_SIZE: u64 = 8;
const SS_ONSTACK: i32 = 1;
const SS_DISABLE: i32 = 2;
const SS_AUTODISARM: i32 = 1 << 31;
const MINSIGSTKSZ: u64 = 2048;
/// Signals that cannot be blocked.
const UNBLOCKABLE: u64 = (1 << (SIGKILL - 1)) | (1 << (SIGSTOP - 1));

fn check_sig(sig: u64) -> Result<usize, Errno> {
    if (1..=64).contains(&sig) {
        Ok(sig as usize - 1)
    } else {
        Err(Errno::EINVAL)
    }
}

/// Implements rt_sigaction(2).
fn sys_rt_sigaction(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [sig, act, oldact, size, ..] = *a;
    let idx = check_sig(sig)?;
    if size != SIGSET_SIZE {
        return Err(Errno::EINVAL);
    }
    let new = if act != 0 {
        if sig == SIGKILL || sig == SIGSTOP {
            return Err(Errno::EINVAL);
        }
        let b = mem.read(act, 32)?;
        let q = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        Some(SigAction {
            handler: q(0),
            flags: q(1),
            restorer: q(2),
            mask: q(3) & !UNBLOCKABLE,
        })
    } else {
        None
    };
    if oldact != 0 {
        let o = p.sigactions[idx];
        let mut b = [0u8; 32];
        for (i, v) in [o.handler, o.flags, o.restorer, o.mask].iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        mem.write(oldact, &b)?;
    }
    if let Some(n) = new {
        p.sigactions[idx] = n;
        if sig == SIGCHLD {
            const SA_NOCLDWAIT: u64 = 2;
            if let Some(f) = &p.family {
                f.set_no_zombies(n.handler == SIG_IGN || n.flags & SA_NOCLDWAIT != 0);
            }
        }
    }
    Ok(0)
}

/// Takes the lowest-numbered signal of `set` that waits while blocked
/// (clearing its bit), if any.
fn take_waiting(p: &mut Process, set: u64) -> Option<u64> {
    let ready = p.blocked_pending & set;
    if ready == 0 {
        return None;
    }
    let sig = u64::from(ready.trailing_zeros()) + 1;
    p.blocked_pending &= !(1 << (sig - 1));
    Some(sig)
}

/// For a call that waits with `mask` as the signal mask while it waits
/// (pselect6, ppoll, epoll_pwait, rt_sigsuspend), looked at each time the
/// call is made: a signal that was blocked and that `mask` lets through is
/// taken now, and the call must end with EINTR (`Err`). Its handler runs
/// under `mask`; the frame saves the mask from before the call, so
/// sigreturn puts that back, as on Linux. (GNU make's jobserver waits for
/// SIGCHLD this way: a mask that ignored it hung `make -j2` for good.)
pub fn take_under_mask(p: &mut Process, mask: u64) -> Result<(), Errno> {
    if p.pending_signal.is_some() || p.exit_status.is_some() {
        return Err(Errno::EINTR);
    }
    let mask = mask & !UNBLOCKABLE;
    let Some(sig) = take_waiting(p, !mask) else {
        return Ok(());
    };
    let before = p.sigmask;
    p.sigmask = mask;
    send_self(p, sig)?;
    if p.pending_signal.is_none() && p.exit_status.is_none() {
        // Its action is to do nothing: the wait goes on under the old mask.
        p.sigmask = before;
        return Ok(());
    }
    p.frame_mask = Some(before);
    Err(Errno::EINTR)
}

/// Reads the 8-byte signal set at `addr` a waiting call passes (with its
/// size), or `None` when there is none (`addr` 0).
pub fn read_wait_mask(mem: &GuestMemory, addr: u64, size: u64) -> Result<Option<u64>, Errno> {
    if addr == 0 {
        return Ok(None);
    }
    if size != SIGSET_SIZE {
        return Err(Errno::EINVAL);
    }
    Ok(Some(mem.read_u64(addr)?))
}

/// Implements rt_sigpending(2): the signals sent while blocked, waiting.
fn sys_rt_sigpending(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[1] != SIGSET_SIZE {
        return Err(Errno::EINVAL);
    }
    mem.write_u64(a[0], p.blocked_pending)?;
    Ok(0)
}

/// Implements rt_sigprocmask(2).
fn sys_rt_sigprocmask(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [how, set, oldset, size, ..] = *a;
    if size != SIGSET_SIZE {
        return Err(Errno::EINVAL);
    }
    let new = if set != 0 {
        let s = mem.read_u64(set)?;
        Some(match how {
            0 => p.sigmask | s,
            1 => p.sigmask & !s,
            2 => s,
            _ => return Err(Errno::EINVAL),
        })
    } else {
        None
    };
    if oldset != 0 {
        mem.write_u64(oldset, p.sigmask)?;
    }
    if let Some(m) = new {
        p.sigmask = m & !UNBLOCKABLE;
        // A signal that arrived while blocked is delivered once unblocked.
        if let Some(sig) = take_waiting(p, !p.sigmask) {
            send_self(p, sig)?;
        }
    }
    Ok(0)
}

/// Implements sigaltstack(2).
fn sys_sigaltstack(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [ss, old, ..] = *a;
    let new = if ss != 0 {
        let sp = mem.read_u64(ss)?;
        let flags = mem.read_u32(ss + 8)? as i32;
        let size = mem.read_u64(ss + 16)?;
        if flags & !(SS_DISABLE | SS_AUTODISARM) != 0 {
            return Err(Errno::EINVAL);
        }
        if flags & SS_DISABLE == 0 && size < MINSIGSTKSZ {
            return Err(Errno::ENOMEM);
        }
        Some((sp, flags, size))
    } else {
        None
    };
    if old != 0 {
        let (sp, flags, size) = p.altstack;
        mem.write_u64(old, sp)?;
        mem.write_u64(old + 8, (flags & !SS_ONSTACK) as u32 as u64)?;
        mem.write_u64(old + 16, size)?;
    }
    if let Some(n) = new {
        p.altstack = n;
    }
    Ok(0)
}

/// Whether the default action of `sig` terminates the process.
fn default_terminates(sig: u64) -> bool {
    // Ignored by default: SIGCHLD, SIGCONT, SIGURG, SIGWINCH; stop signals stop.
    !matches!(sig, 17 | 18 | 23 | 28 | 19 | 20 | 21 | 22)
}

/// Sends `sig` to the process itself.
pub(super) fn send_self(p: &mut Process, sig: u64) -> SysResult {
    if sig == 0 {
        return Ok(0);
    }
    let idx = check_sig(sig)?;
    let action = p.sigactions[idx];
    let blocked = p.sigmask & (1 << idx) != 0;
    if blocked && sig != SIGKILL && action.handler != SIG_IGN {
        p.blocked_pending |= 1 << idx;
        return Ok(0);
    }
    if sig == SIGKILL || (action.handler == SIG_DFL && !blocked && default_terminates(sig)) {
        p.exit_status = Some(128 + sig as i32);
        p.killed_by = Some(sig as i32);
        return Ok(0);
    }
    if action.handler == SIG_IGN || blocked || action.handler == SIG_DFL {
        return Ok(0);
    }
    // A guest handler: delivered by the run loop when the syscall returns.
    p.pending_signal = Some(sig as i32);
    Ok(0)
}

const SA_ONSTACK: u64 = 0x0800_0000;
const SA_RESETHAND: u64 = 0x8000_0000;
const SA_NODEFER: u64 = 0x4000_0000;
const SA_RESTORER: u64 = 0x0400_0000;
/// `struct ucontext` (kernel layout): flags, link, stack_t, sigcontext, sigmask.
const UCONTEXT_SIZE: u64 = 304;
const MCONTEXT_OFFSET: u64 = 40;
const SIGMASK_OFFSET: u64 = 296;
const SIGINFO_SIZE: u64 = 128;
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

/// What a signal carries into `siginfo_t`.
#[derive(Debug, Clone, Copy)]
pub struct SigInfo {
    /// Signal number.
    pub signo: i32,
    /// si_code (SEGV_MAPERR, SI_TKILL, ...).
    pub code: i32,
    /// Faulting address (faults), or 0.
    pub addr: u64,
}

/// The handler that would run for `sig`, if one is installed and the signal is not blocked.
pub fn handler_for(p: &Process, sig: i32) -> Option<SigAction> {
    let idx = usize::try_from(sig).ok()?.checked_sub(1)?;
    let a = *p.sigactions.get(idx)?;
    let blocked = p.sigmask & (1 << idx) != 0;
    (a.handler > SIG_IGN && !blocked).then_some(a)
}

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
    // siginfo: signo, errno, code, then the union (si_addr, or pid/uid for kill).
    let sio = 8 + UCONTEXT_SIZE;
    put(&mut buf, sio, info.signo as u32 as u64);
    put(&mut buf, sio + 8, info.code as u32 as u64);
    // A fault (positive code below SI_KERNEL) carries its address, even 0
    // (a NULL dereference: Go turns it into a nil-pointer panic only then).
    if info.addr != 0 || (1..0x80).contains(&info.code) {
        put(&mut buf, sio + 16, info.addr);
    } else {
        put(&mut buf, sio + 16, PID | (super::process::UID << 32));
    }
    mem.write(fpstate, &fpu.to_sigframe())?;
    mem.write(frame, &buf)?;

    let idx = info.signo as usize - 1;
    let mut mask = p.sigmask | action.mask;
    if action.flags & SA_NODEFER == 0 {
        mask |= 1 << idx;
    }
    p.sigmask = mask & !UNBLOCKABLE;
    if action.flags & SA_RESETHAND != 0 {
        p.sigactions[idx] = SigAction::default();
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
    p.timer_blocked &= p.blocked_pending;
    if p.pending_signal.is_none() {
        if let Some(sig) = take_waiting(p, !p.sigmask & !p.timer_blocked) {
            send_self(p, sig)?;
        }
    }
    Ok((regs, fpu))
}

/// Whether call `nr`, interrupted while it waited by a signal whose handler
/// has SA_RESTART, is made again after the handler instead of failing with
/// EINTR, as Linux restarts it (glibc's `signal()` sets SA_RESTART, and C
/// programs then do not expect EINTR from read, write, wait or accept).
/// Waits with a timeout or a mask of their own (poll, select, epoll_wait,
/// nanosleep, sigsuspend...) end with EINTR whatever the flag says.
pub fn restarts(p: &Process, sig: i32, nr: u64) -> bool {
    const SA_RESTART: u64 = 0x1000_0000;
    const RESTARTABLE: [u64; 19] = [
        0,   // read
        1,   // write
        16,  // ioctl
        17,  // pread64
        18,  // pwrite64
        19,  // readv
        20,  // writev
        43,  // accept
        44,  // sendto
        45,  // recvfrom
        46,  // sendmsg
        47,  // recvmsg
        61,  // wait4
        72,  // fcntl (F_SETLKW)
        73,  // flock
        247, // waitid
        288, // accept4
        299, // recvmmsg
        307, // sendmmsg
    ];
    let Some(a) = usize::try_from(sig)
        .ok()
        .and_then(|s| s.checked_sub(1))
        .and_then(|i| p.sigactions.get(i))
    else {
        return false;
    };
    a.handler > SIG_IGN && a.flags & SA_RESTART != 0 && RESTARTABLE.contains(&nr)
}

const SIGALRM: u64 = 14;

/// Fires ITIMER_REAL if it is due: SIGALRM to the process (its handler, or
/// the default action: termination). Returns whether it fired.
pub fn fire_timer(p: &mut Process) -> bool {
    let posix = super::time::fire_posix_timers(p);
    let Some((next, period)) = p.itimer else {
        return posix;
    };
    let now = std::time::Instant::now();
    if now < next {
        return posix;
    }
    p.itimer = (!period.is_zero()).then(|| (super::time::after(now, period), period));
    let _ = send_self(p, SIGALRM);
    p.timer_blocked |= p.blocked_pending & (1 << (SIGALRM - 1));
    true
}

/// Implements pause(2): waits until a signal arrives (the interval timer's, here).
fn sys_pause(p: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    if p.pending_signal.is_some() || fire_timer(p) {
        return Err(Errno::EINTR);
    }
    let wake = p.next_timer_due();
    let _ = super::thread::wait(p, None, wake);
    Ok(0)
}

/// `SI_USER`: the si_code of a signal sent by kill.
const SI_USER: i32 = 0;

/// Implements rt_sigtimedwait(2) (sigwait, sigwaitinfo, sigtimedwait): takes
/// a pending signal of `set` (which the caller has blocked) without running
/// its handler, or waits for one: sent by another thread or process, or by a
/// timer. EAGAIN when `timeout` passes first; EINTR when a signal outside the
/// set is to be handled. The siginfo gives the number and SI_USER.
fn sys_rt_sigtimedwait(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [set, info, timeout, size, ..] = *a;
    if size != SIGSET_SIZE {
        return Err(Errno::EINVAL);
    }
    let set = mem.read_u64(set)? & !UNBLOCKABLE;
    let timeout = if timeout != 0 {
        Some(super::thread::read_timeout(mem, timeout)?)
    } else {
        None
    };
    fire_timer(p);
    if let Some(sig) = take_waiting(p, set) {
        p.waiting = None;
        if info != 0 {
            let mut si = [0u8; 128];
            si[0..4].copy_from_slice(&(sig as i32).to_le_bytes());
            si[8..12].copy_from_slice(&SI_USER.to_le_bytes());
            mem.write(info, &si)?;
        }
        return Ok(sig);
    }
    if p.pending_signal.is_some() || p.exit_status.is_some() {
        p.waiting = None;
        return Err(Errno::EINTR);
    }
    if timeout.is_some_and(|t| t.is_zero()) {
        return Err(Errno::EAGAIN);
    }
    let wake = p.next_timer_due();
    match super::thread::wait(p, timeout, wake) {
        super::thread::Waited::Retry => Ok(0),
        super::thread::Waited::TimedOut => Err(Errno::EAGAIN),
    }
}

/// Implements kill(2): to itself, and to other processes of the run (see `child::kill`).
fn sys_kill(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    super::child::kill(p, a[0] as i32 as i64, a[1])
}

/// Implements tgkill(2) for the process itself.
fn sys_tgkill(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    if a[0] != super::child::pid_of(p) {
        return Err(Errno::ESRCH);
    }
    send_to_thread(p, a[1], a[2])
}

/// Sends `sig` to thread `tid` of the process: the running one now, another
/// when it next runs (Go's preemption signal, SIGURG, goes this way).
pub(super) fn send_to_thread(p: &mut Process, tid: u64, sig: u64) -> SysResult {
    if tid == p.tid {
        return send_self(p, sig);
    }
    let idx = check_sig(sig)?;
    let Some(t) = p.threads.others.iter_mut().find(|t| t.tid == tid) else {
        return Err(Errno::ESRCH);
    };
    if sig == 0 {
        return Ok(0);
    }
    let action = p.sigactions[idx];
    // Blocked by that thread: pending until it is unblocked or taken by
    // sigwait (a signal-handling thread's way), whatever its action.
    if t.sigmask & (1 << idx) != 0 && sig != SIGKILL && action.handler != SIG_IGN {
        p.blocked_pending |= 1 << idx;
        return Ok(0);
    }
    if action.handler == SIG_IGN || (action.handler == SIG_DFL && !default_terminates(sig)) {
        return Ok(0);
    }
    if action.handler == SIG_DFL {
        // The default action of a terminating signal ends the whole process.
        p.exit_status = Some(128 + sig as i32);
        p.killed_by = Some(sig as i32);
        return Ok(0);
    }
    t.pending_signal = Some(sig as i32);
    Ok(0)
}

/// Implements tkill(2) for the thread itself.
fn sys_tkill(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    send_to_thread(p, a[0], a[1])
}

/// rt_sigreturn(2) needs the registers, so the run loop serves it (see [`sigreturn`]);
/// reaching this handler means it was called without a frame.
fn sys_rt_sigreturn(_: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Err(Errno::EFAULT)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 13, name: "rt_sigaction", handler: sys_rt_sigaction, support: Support::Partial,
        note: "handlers run for faults and signals sent to itself; no asynchronous signals or timers yet" },
    SyscallEntry { nr: 14, name: "rt_sigprocmask", handler: sys_rt_sigprocmask, support: Support::Full, note: "" },
    SyscallEntry { nr: 127, name: "rt_sigpending", handler: sys_rt_sigpending, support: Support::Full, note: "" },
    SyscallEntry { nr: 15, name: "rt_sigreturn", handler: sys_rt_sigreturn, support: Support::Full,
        note: "restores general registers, flags, mask and the FPU/vector state the frame carries" },
    SyscallEntry { nr: 34, name: "pause", handler: sys_pause, support: Support::Full, note: "" },
    SyscallEntry { nr: 128, name: "rt_sigtimedwait", handler: sys_rt_sigtimedwait, support: Support::Partial,
        note: "signals pending for the process, sent by its threads, other processes or timers; siginfo has the number and SI_USER" },
    SyscallEntry { nr: 62, name: "kill", handler: sys_kill, support: Support::Partial,
        note: "to itself only: handlers run, default actions terminate (status 128+sig)" },
    SyscallEntry { nr: 131, name: "sigaltstack", handler: sys_sigaltstack, support: Support::Full, note: "" },
    SyscallEntry { nr: 200, name: "tkill", handler: sys_tkill, support: Support::Partial,
        note: "any thread of the process; handlers run when the thread next runs" },
    SyscallEntry { nr: 234, name: "tgkill", handler: sys_tgkill, support: Support::Partial,
        note: "any thread of the process; handlers run when the thread next runs" },
];
