//! Signals: dispositions, masks, the alternate stack, and delivery to guest
//! handlers. A fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) or a signal
//! sent to itself runs the guest's handler on a Linux-compatible
//! `rt_sigframe` (so `siglongjmp` and `rt_sigreturn` work); with the default
//! action it ends the process like Linux would (status 128+signal).

use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SigAction, SysResult};
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
pub(super) const UNBLOCKABLE: u64 = (1 << (SIGKILL - 1)) | (1 << (SIGSTOP - 1));

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

/// Takes the lowest-numbered signal of `set` that waits (blocked, or
/// behind another handler), if any; of a real-time one, the first sent.
pub(super) fn take_waiting(p: &mut Process, set: u64) -> Option<SigInfo> {
    p.sigqueue.take(set)
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
    let Some(info) = take_waiting(p, !mask) else {
        return Ok(());
    };
    let before = p.sigmask;
    p.sigmask = mask;
    send(p, info)?;
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
    mem.write_u64(a[0], p.sigqueue.bits() & p.sigmask)?;
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
        if p.pending_signal.is_none() {
            if let Some(info) = take_waiting(p, !p.sigmask) {
                send(p, info)?;
            }
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

/// Sends `sig` to the process itself, as kill(2) from itself does (SI_USER
/// and its own pid; also what the kernel sends for it: SIGPIPE).
pub(super) fn send_self(p: &mut Process, sig: u64) -> SysResult {
    let pid = super::child::pid_of(p);
    send(p, SigInfo::user(sig, pid))
}

/// Sends the signal `info` describes to the process: it waits in the queue
/// while blocked (or while another handler is about to run: one handler at
/// a time), ends the process by its default action, is dropped when
/// ignored, or becomes the handler the run loop runs when the call returns.
/// EAGAIN when it does not fit in the queue (see [`Pending::push`]).
pub fn send(p: &mut Process, info: SigInfo) -> SysResult {
    let sig = u64::from(info.signo as u32);
    if sig == 0 {
        return Ok(0);
    }
    let idx = check_sig(sig)?;
    let action = p.sigactions[idx];
    let blocked = p.sigmask & (1 << idx) != 0;
    if blocked && sig != SIGKILL && action.handler != SIG_IGN {
        p.sigqueue.push(info)?;
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
    if p.pending_signal.is_some() {
        // Its turn comes when that handler returns (see `sigreturn`).
        p.sigqueue.push(info)?;
        return Ok(0);
    }
    // A guest handler: delivered by the run loop when the syscall returns.
    p.pending_signal = Some(info);
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

/// `si_code` values (x86-64).
pub mod code {
    /// kill(2).
    pub const SI_USER: i32 = 0;
    /// Sent by the kernel (SIGALRM of alarm and setitimer).
    pub const SI_KERNEL: i32 = 0x80;
    /// sigqueue(3).
    pub const SI_QUEUE: i32 = -1;
    /// A POSIX timer expired.
    pub const SI_TIMER: i32 = -2;
    /// tkill(2), tgkill(2).
    pub const SI_TKILL: i32 = -6;
    /// SIGCHLD: the child exited, was killed, was killed and dumped core.
    pub const CLD_EXITED: i32 = 1;
    /// See [`CLD_EXITED`].
    pub const CLD_KILLED: i32 = 2;
    /// See [`CLD_EXITED`].
    pub const CLD_DUMPED: i32 = 3;
}
use code::*;

/// What a signal carries into `siginfo_t` (and a signalfd record). Which
/// fields mean something depends on the code, as Linux's `siginfo_layout`
/// says: see [`SigInfo::to_siginfo`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SigInfo {
    /// Signal number.
    pub signo: i32,
    /// si_code (SEGV_MAPERR, SI_USER, SI_QUEUE, CLD_EXITED...).
    pub code: i32,
    /// Faulting address (faults).
    pub addr: u64,
    /// Sender's pid (kill, sigqueue) or the child's (SIGCHLD).
    pub pid: u32,
    /// Sender's uid.
    pub uid: u32,
    /// SIGCHLD: exit code or signal.
    pub status: i32,
    /// sigqueue's or the timer's `sigval` (int or pointer).
    pub value: u64,
    /// POSIX timer: its id and overrun count.
    pub timer: i32,
    /// See `timer`.
    pub overrun: i32,
}

/// What the union of `siginfo_t` holds (Linux's `enum siginfo_layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Kill,
    Timer,
    Rt,
    Child,
    Fault,
}

impl SigInfo {
    /// Sent by process `pid` with kill(2) (also what the kernel sends on a
    /// process's behalf: SIGPIPE).
    pub fn user(signo: u64, pid: u64) -> Self {
        Self::from_process(signo, SI_USER, pid)
    }

    /// Sent by process `pid` with tkill/tgkill (raise, pthread_kill).
    pub fn tkill(signo: u64, pid: u64) -> Self {
        Self::from_process(signo, SI_TKILL, pid)
    }

    fn from_process(signo: u64, code: i32, pid: u64) -> Self {
        Self {
            signo: signo as i32,
            code,
            pid: pid as u32,
            uid: super::process::UID as u32,
            ..Self::default()
        }
    }

    /// Sent by the kernel (the interval timer's SIGALRM).
    pub fn kernel(signo: u64) -> Self {
        Self {
            signo: signo as i32,
            code: SI_KERNEL,
            ..Self::default()
        }
    }

    /// A fault at `addr` (SEGV_MAPERR, BUS_ADRERR...).
    pub fn fault(signo: i32, code: i32, addr: u64) -> Self {
        Self {
            signo,
            code,
            addr,
            ..Self::default()
        }
    }

    /// SIGCHLD for child `pid` that ended with wait status `status`.
    pub fn child(pid: u64, status: i32) -> Self {
        let (code, value) = if status & 0x7f == 0 {
            (CLD_EXITED, (status >> 8) & 0xff)
        } else if status & 0x80 != 0 {
            (CLD_DUMPED, status & 0x7f)
        } else {
            (CLD_KILLED, status & 0x7f)
        };
        Self {
            signo: SIGCHLD as i32,
            code,
            pid: pid as u32,
            uid: super::process::UID as u32,
            status: value,
            ..Self::default()
        }
    }

    /// POSIX timer `id` expired, carrying its `sigev_value`.
    pub fn timer(signo: u64, id: i32, overrun: u64, value: u64) -> Self {
        Self {
            signo: signo as i32,
            code: SI_TIMER,
            timer: id,
            overrun: i32::try_from(overrun).unwrap_or(i32::MAX),
            value,
            ..Self::default()
        }
    }

    fn layout(&self) -> Layout {
        if self.code > SI_USER && self.code < SI_KERNEL {
            match self.signo {
                4 | 5 | 7 | 8 | 11 => Layout::Fault,
                17 => Layout::Child,
                _ => Layout::Kill,
            }
        } else if self.code == SI_TIMER {
            Layout::Timer
        } else if self.code < 0 {
            Layout::Rt
        } else {
            Layout::Kill
        }
    }

    /// The `siginfo_t` (128 bytes) Linux would write.
    pub fn to_siginfo(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        let put32 = |b: &mut [u8; 128], off: usize, v: u32| {
            b[off..off + 4].copy_from_slice(&v.to_le_bytes())
        };
        put32(&mut b, 0, self.signo as u32);
        put32(&mut b, 8, self.code as u32);
        match self.layout() {
            Layout::Fault => b[16..24].copy_from_slice(&self.addr.to_le_bytes()),
            Layout::Timer => {
                put32(&mut b, 16, self.timer as u32);
                put32(&mut b, 20, self.overrun as u32);
                b[24..32].copy_from_slice(&self.value.to_le_bytes());
            }
            l => {
                put32(&mut b, 16, self.pid);
                put32(&mut b, 20, self.uid);
                // kill's is 0; rt_sigqueueinfo to itself may give one any code.
                match l {
                    Layout::Child => put32(&mut b, 24, self.status as u32),
                    _ => b[24..32].copy_from_slice(&self.value.to_le_bytes()),
                }
            }
        }
        b
    }

    /// What a guest's `siginfo_t` `b` (128 bytes, for rt_sigqueueinfo) says
    /// for signal `signo` (which replaces its own si_signo, as on Linux).
    pub fn from_siginfo(signo: u64, b: &[u8]) -> Self {
        let u32_at = |off: usize| {
            b.get(off..off + 4)
                .and_then(|s| s.try_into().ok())
                .map_or(0, u32::from_le_bytes)
        };
        let u64_at = |off: usize| {
            b.get(off..off + 8)
                .and_then(|s| s.try_into().ok())
                .map_or(0, u64::from_le_bytes)
        };
        let mut i = Self {
            signo: signo as i32,
            code: u32_at(8) as i32,
            ..Self::default()
        };
        match i.layout() {
            Layout::Fault => i.addr = u64_at(16),
            Layout::Timer => {
                i.timer = u32_at(16) as i32;
                i.overrun = u32_at(20) as i32;
                i.value = u64_at(24);
            }
            l => {
                i.pid = u32_at(16);
                i.uid = u32_at(20);
                match l {
                    Layout::Child => i.status = u32_at(24) as i32,
                    _ => i.value = u64_at(24),
                }
            }
        }
        i
    }

    /// The `struct signalfd_siginfo` (128 bytes) a signalfd read returns.
    pub fn to_signalfd(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        let mut put = |off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
        put(0, &(self.signo as u32).to_le_bytes());
        put(8, &self.code.to_le_bytes());
        match self.layout() {
            Layout::Fault => put(72, &self.addr.to_le_bytes()),
            Layout::Timer => {
                put(24, &(self.timer as u32).to_le_bytes());
                put(32, &(self.overrun as u32).to_le_bytes());
                put(44, &(self.value as u32).to_le_bytes());
                put(48, &self.value.to_le_bytes());
            }
            l => {
                put(12, &self.pid.to_le_bytes());
                put(16, &self.uid.to_le_bytes());
                match l {
                    Layout::Rt => {
                        put(44, &(self.value as u32).to_le_bytes());
                        put(48, &self.value.to_le_bytes());
                    }
                    Layout::Child => put(40, &self.status.to_le_bytes()),
                    _ => {}
                }
            }
        }
        b
    }
}

/// Most signals one process may have queued (RLIMIT_SIGPENDING): beyond
/// it, another instance of a signal already pending is refused (EAGAIN for
/// sigqueue) or, sent by kill, dropped, as Linux does. A signal not yet
/// pending always fits, so each number is pending at least once.
pub const MAX_QUEUED: usize = 1024;

/// First real-time signal (the kernel's SIGRTMIN; libcs keep the first few).
const SIGRTMIN: i32 = 32;

/// Signals pending for a process, each with what it carries: a standard
/// signal at most once (another is merged into it), a real-time one once
/// per send, in the order sent.
#[derive(Debug, Clone, Default)]
pub struct Pending {
    list: std::collections::VecDeque<SigInfo>,
    /// Bit n-1 for each signal n in `list`.
    bits: u64,
}

impl Pending {
    /// The pending signals (bit n-1 for signal n).
    pub fn bits(&self) -> u64 {
        self.bits
    }

    /// Whether none is pending.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Queues `info` (see [`MAX_QUEUED`]): EAGAIN when a real-time signal
    /// other than kill's does not fit.
    pub fn push(&mut self, info: SigInfo) -> Result<(), Errno> {
        if !(1..=64).contains(&info.signo) {
            return Err(Errno::EINVAL);
        }
        let bit = 1u64 << (info.signo - 1);
        if self.bits & bit != 0 {
            if info.signo < SIGRTMIN {
                return Ok(());
            }
            if self.list.len() >= MAX_QUEUED {
                return if info.code == SI_USER {
                    Ok(())
                } else {
                    Err(Errno::EAGAIN)
                };
            }
        }
        self.list.push_back(info);
        self.bits |= bit;
        Ok(())
    }

    /// Takes the first sent of the lowest-numbered signal of `set`.
    pub fn take(&mut self, set: u64) -> Option<SigInfo> {
        let ready = self.bits & set;
        if ready == 0 {
            return None;
        }
        let signo = ready.trailing_zeros() as i32 + 1;
        let i = self.list.iter().position(|s| s.signo == signo)?;
        let info = self.list.remove(i)?;
        if !self.list.iter().any(|s| s.signo == signo) {
            self.bits &= !(1 << (signo - 1));
        }
        Some(info)
    }

    /// If the signal of POSIX timer `id` is still queued, counts `missed`
    /// more expiries into its overrun and returns true: Linux queues one
    /// signal per timer at a time.
    pub fn add_overrun(&mut self, id: i32, missed: u64) -> bool {
        let Some(i) = self
            .list
            .iter_mut()
            .find(|s| s.code == SI_TIMER && s.timer == id)
        else {
            return false;
        };
        let missed = i32::try_from(missed).unwrap_or(i32::MAX);
        i.overrun = i.overrun.saturating_add(missed);
        true
    }

    /// How many of the pending signals are in `set`.
    pub fn count(&self, set: u64) -> usize {
        if self.bits & set == 0 {
            return 0;
        }
        self.list
            .iter()
            .filter(|s| set & (1 << ((s.signo - 1) & 63)) != 0)
            .count()
    }
}

/// Signals other processes of the run sent to one process, with what each
/// carries, until it takes them at its next system call
/// (`child::take_signals`). Bounded like [`Pending`].
#[derive(Debug, Default)]
pub struct Inbox {
    /// Whether any waits: looked at on every call, without the lock.
    any: std::sync::atomic::AtomicBool,
    queue: std::sync::Mutex<Pending>,
}

impl Inbox {
    /// Whether signals wait to be taken.
    pub fn waiting(&self) -> bool {
        self.any.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Adds `info` (EAGAIN when it does not fit, see [`Pending::push`]).
    pub fn push(&self, info: SigInfo) -> Result<(), Errno> {
        let mut q = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        q.push(info)?;
        self.any.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Takes every waiting signal.
    pub fn take(&self) -> Pending {
        let mut q = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.any.store(false, std::sync::atomic::Ordering::Release);
        std::mem::take(&mut *q)
    }
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
    p.timer_blocked &= p.sigqueue.bits();
    if p.pending_signal.is_none() {
        if let Some(info) = take_waiting(p, !p.sigmask & !p.timer_blocked) {
            send(p, info)?;
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
    let _ = send(p, SigInfo::kernel(SIGALRM));
    p.timer_blocked |= p.sigqueue.bits() & p.sigmask & (1 << (SIGALRM - 1));
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

/// Implements rt_sigtimedwait(2) (sigwait, sigwaitinfo, sigtimedwait): takes
/// a pending signal of `set` (which the caller has blocked) without running
/// its handler, or waits for one: sent by another thread or process, or by a
/// timer. EAGAIN when `timeout` passes first; EINTR when a signal outside the
/// set is to be handled. The siginfo is the one the signal carries.
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
    if info != 0 && p.sigqueue.bits() & set != 0 {
        // Checked before the signal is taken, so a bad pointer loses none.
        mem.slice_mut(info, SIGINFO_SIZE)?;
    }
    if let Some(taken) = take_waiting(p, set) {
        p.waiting = None;
        if info != 0 {
            mem.write(info, &taken.to_siginfo())?;
        }
        return Ok(u64::from(taken.signo as u32));
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
    let pid = super::child::pid_of(p);
    send_to_thread(p, a[1], SigInfo::tkill(a[2], pid))
}

/// Sends `sig` to thread `tid` of the process: the running one now, another
/// when it next runs (Go's preemption signal, SIGURG, goes this way).
pub(super) fn send_to_thread(p: &mut Process, tid: u64, info: SigInfo) -> SysResult {
    if tid == p.tid {
        return send(p, info);
    }
    let sig = u64::from(info.signo as u32);
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
        p.sigqueue.push(info)?;
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
    if t.pending_signal.is_some() {
        // One handler at a time: this one waits for the next unblocking.
        p.sigqueue.push(info)?;
        return Ok(0);
    }
    t.pending_signal = Some(info);
    Ok(0)
}

/// Implements tkill(2) for the thread itself.
fn sys_tkill(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let pid = super::child::pid_of(p);
    send_to_thread(p, a[0], SigInfo::tkill(a[1], pid))
}

/// The siginfo a sigqueue call passes at `addr`, for signal `sig`: refused
/// (EPERM) when it claims to come from kill, tkill or the kernel (a
/// non-negative si_code, or SI_TKILL) and goes to another task than `me`
/// (`target`), as Linux refuses such forgeries.
fn queued_info(
    mem: &GuestMemory,
    addr: u64,
    sig: u64,
    me: u64,
    target: u64,
) -> Result<SigInfo, Errno> {
    let b = mem.read(addr, SIGINFO_SIZE)?;
    let info = SigInfo::from_siginfo(sig, b);
    if (info.code >= 0 || info.code == SI_TKILL) && target != me {
        return Err(Errno::EPERM);
    }
    if sig != 0 {
        check_sig(sig)?;
    }
    Ok(info)
}

/// Implements rt_sigqueueinfo(2) (sigqueue): to itself, or to another
/// process of the run (see `child::queue_to`).
fn sys_rt_sigqueueinfo(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [pid, sig, uinfo, ..] = *a;
    let pid = pid as i32;
    let me = super::child::pid_of(p);
    let info = queued_info(mem, uinfo, sig, me, pid as u64)?;
    if pid <= 0 {
        return Err(Errno::ESRCH);
    }
    if pid as u64 == me {
        return send(p, info);
    }
    super::child::queue_to(p, pid as u64, info)
}

/// Implements rt_tgsigqueueinfo(2) (pthread_sigqueue): to a thread of
/// itself, or to another process of the run by its pid as thread id.
fn sys_rt_tgsigqueueinfo(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [tgid, tid, sig, uinfo, ..] = *a;
    let (tgid, tid) = (tgid as i32, tid as i32);
    if tgid <= 0 || tid <= 0 {
        return Err(Errno::EINVAL);
    }
    let (tgid, tid) = (tgid as u64, tid as u64);
    let info = queued_info(mem, uinfo, sig, p.tid, tid)?;
    if tgid == super::child::pid_of(p) {
        return send_to_thread(p, tid, info);
    }
    if tid != tgid {
        return Err(Errno::ESRCH);
    }
    super::child::queue_to(p, tgid, info)
}

/// rt_sigreturn(2) needs the registers, so the run loop serves it (see [`sigreturn`]);
/// reaching this handler means it was called without a frame.
fn sys_rt_sigreturn(_: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Err(Errno::EFAULT)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 13, name: "rt_sigaction", handler: sys_rt_sigaction, support: Support::Partial,
        note: "handlers run for faults, timers and signals from itself, its threads and the run's other processes, at a system call or a timer tick; no SIGSTOP/SIGCONT" },
    SyscallEntry { nr: 14, name: "rt_sigprocmask", handler: sys_rt_sigprocmask, support: Support::Full, note: "" },
    SyscallEntry { nr: 127, name: "rt_sigpending", handler: sys_rt_sigpending, support: Support::Full, note: "" },
    SyscallEntry { nr: 15, name: "rt_sigreturn", handler: sys_rt_sigreturn, support: Support::Full,
        note: "restores general registers, flags, mask and the FPU/vector state the frame carries" },
    SyscallEntry { nr: 34, name: "pause", handler: sys_pause, support: Support::Full, note: "" },
    SyscallEntry { nr: 128, name: "rt_sigtimedwait", handler: sys_rt_sigtimedwait, support: Support::Partial,
        note: "signals pending for the process, sent by its threads, other processes or timers, with their siginfo" },
    SyscallEntry { nr: 62, name: "kill", handler: sys_kill, support: Support::Partial,
        note: "to itself and the run's other processes (taken at their next system call); SI_USER with the sender's pid; the first process's parent (pid 1) is alive to signal 0, EPERM to others" },
    SyscallEntry { nr: 129, name: "rt_sigqueueinfo", handler: sys_rt_sigqueueinfo, support: Support::Full,
        note: "to itself and the run's other processes; a kill-like si_code to another is EPERM; at most 1024 queued (EAGAIN)" },
    SyscallEntry { nr: 297, name: "rt_tgsigqueueinfo", handler: sys_rt_tgsigqueueinfo, support: Support::Partial,
        note: "its own threads, and the run's other processes by pid" },
    SyscallEntry { nr: 131, name: "sigaltstack", handler: sys_sigaltstack, support: Support::Full, note: "" },
    SyscallEntry { nr: 200, name: "tkill", handler: sys_tkill, support: Support::Partial,
        note: "any thread of the process; handlers run when the thread next runs" },
    SyscallEntry { nr: 234, name: "tgkill", handler: sys_tgkill, support: Support::Partial,
        note: "any thread of the process; handlers run when the thread next runs" },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::{test_call, test_process};

    #[test]
    fn standard_signals_merge_real_time_ones_queue_in_order_and_are_bounded() {
        let mut q = Pending::default();
        let rt = |sig: u64, v: u64| SigInfo {
            code: SI_QUEUE,
            value: v,
            ..SigInfo::user(sig, 2)
        };
        q.push(rt(35, 1)).unwrap();
        q.push(SigInfo::user(10, 2)).unwrap();
        q.push(SigInfo::user(10, 3)).unwrap();
        q.push(rt(34, 2)).unwrap();
        q.push(rt(35, 3)).unwrap();
        assert_eq!(q.count(u64::MAX), 4, "the second SIGUSR1 merged");
        assert_eq!(q.bits(), (1 << 9) | (1 << 33) | (1 << 34));
        let order: Vec<_> = std::iter::from_fn(|| q.take(u64::MAX))
            .map(|i| (i.signo, i.pid, i.value))
            .collect();
        assert_eq!(order, [(10, 2, 0), (34, 2, 2), (35, 2, 1), (35, 2, 3)]);
        assert!(q.is_empty() && q.bits() == 0);
        // Bounded: further instances are refused (kill's dropped), but a
        // signal not yet pending still gets in.
        for v in 0..MAX_QUEUED as u64 {
            q.push(rt(40, v)).unwrap();
        }
        assert_eq!(q.push(rt(40, 0)), Err(Errno::EAGAIN));
        assert_eq!(q.push(SigInfo::user(40, 2)), Ok(()));
        assert_eq!(q.count(1 << 39), MAX_QUEUED);
        q.push(rt(41, 0)).unwrap();
        q.push(SigInfo::user(12, 2)).unwrap();
        assert_eq!(q.count(u64::MAX), MAX_QUEUED + 2);
        assert_eq!(q.push(SigInfo::user(65, 2)), Err(Errno::EINVAL));
        assert_eq!(q.push(SigInfo::user(0, 2)), Err(Errno::EINVAL));
        // A timer's signal still queued gathers the expiries as overrun.
        assert!(!q.add_overrun(3, 1));
        q.push(SigInfo::timer(42, 3, 0, 9)).unwrap();
        assert!(q.add_overrun(3, 2) && q.add_overrun(3, 1));
        assert_eq!(q.take(1 << 41).map(|i| i.overrun), Some(3));
    }

    #[test]
    fn siginfo_layouts_follow_the_code() {
        let b = SigInfo::child(1000, 7 << 8).to_siginfo();
        let u32_at = |b: &[u8; 128], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!(
            [0, 8, 16, 20, 24].map(|o| u32_at(&b, o)),
            [17, CLD_EXITED as u32, 1000, 1000, 7]
        );
        assert_eq!(SigInfo::child(1000, 15).code, CLD_KILLED);
        assert_eq!(SigInfo::child(1000, 0x80 | 11).status, 11);
        let t = SigInfo::timer(34, 3, 2, 0x1234).to_siginfo();
        assert_eq!(
            [8, 16, 20, 24].map(|o| u32_at(&t, o)),
            [SI_TIMER as u32, 3, 2, 0x1234]
        );
        let f = SigInfo::fault(11, 1, 0).to_siginfo();
        assert_eq!(u64::from_le_bytes(f[16..24].try_into().unwrap()), 0);
        // A guest's siginfo round-trips through what sigqueue keeps.
        let q = SigInfo {
            code: SI_QUEUE,
            value: 77,
            ..SigInfo::user(34, 1000)
        };
        assert_eq!(SigInfo::from_siginfo(34, &q.to_siginfo()), q);
        let sfd = q.to_signalfd();
        assert_eq!([12, 16, 44].map(|o| u32_at(&sfd, o)), [1000, 1000, 77]);
        // Garbage never panics.
        let _ = SigInfo::from_siginfo(99, &[0xff; 3]);
    }

    #[test]
    fn sigqueue_refuses_forged_codes_to_others_and_bad_arguments() {
        let (mut p, mut m, buf) = test_process();
        let mut si = [0u8; 128];
        si[8..12].copy_from_slice(&SI_QUEUE.to_le_bytes());
        si[24..28].copy_from_slice(&5u32.to_le_bytes());
        m.write(buf, &si).unwrap();
        let me = super::super::child::pid_of(&p);
        assert_eq!(
            test_call(&mut p, &mut m, sys_rt_sigqueueinfo, &[me, 65, buf]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_rt_sigqueueinfo, &[me, 34, 8]),
            Err(Errno::EFAULT)
        );
        // No such process (no tree: no others at all).
        assert_eq!(
            test_call(&mut p, &mut m, sys_rt_sigqueueinfo, &[4242, 34, buf]),
            Err(Errno::ESRCH)
        );
        p.sigmask = 1 << 33;
        assert_eq!(
            test_call(&mut p, &mut m, sys_rt_sigqueueinfo, &[me, 34, buf]),
            Ok(0)
        );
        assert_eq!(p.sigqueue.take(u64::MAX).map(|i| i.value), Some(5));
        // SI_USER (0) and SI_TKILL claimed to another process: EPERM.
        for code in [0, SI_TKILL, SI_KERNEL] {
            m.write(buf + 8, &code.to_le_bytes()).unwrap();
            assert_eq!(
                test_call(&mut p, &mut m, sys_rt_sigqueueinfo, &[4242, 34, buf]),
                Err(Errno::EPERM)
            );
            assert_eq!(
                test_call(&mut p, &mut m, sys_rt_tgsigqueueinfo, &[me, 4242, 34, buf]),
                Err(Errno::EPERM)
            );
        }
        assert_eq!(
            test_call(&mut p, &mut m, sys_rt_tgsigqueueinfo, &[0, me, 34, buf]),
            Err(Errno::EINVAL)
        );
        // To its own thread with its own code: allowed, like to itself.
        let tid = p.tid;
        assert_eq!(
            test_call(&mut p, &mut m, sys_rt_tgsigqueueinfo, &[me, tid, 34, buf]),
            Ok(0)
        );
        assert_eq!(
            p.sigqueue.take(u64::MAX).map(|i| (i.code, i.value)),
            Some((SI_KERNEL, 5))
        );
        // The queue is bounded: EAGAIN, not host memory.
        m.write(buf + 8, &SI_QUEUE.to_le_bytes()).unwrap();
        let mut n = 0;
        while test_call(&mut p, &mut m, sys_rt_sigqueueinfo, &[me, 34, buf]).is_ok() {
            n += 1;
            assert!(n <= MAX_QUEUED + 1);
        }
        assert_eq!(n, MAX_QUEUED);
    }
}
