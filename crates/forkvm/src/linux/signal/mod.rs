//! Signals: dispositions, masks, the alternate stack, and delivery to guest
//! handlers. A fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) or a signal
//! sent to itself runs the guest's handler on a Linux-compatible
//! `rt_sigframe` (so `siglongjmp` and `rt_sigreturn` work); with the default
//! action it ends the process like Linux would (status 128+signal).
//!
//! The system calls are here; what a signal carries is in `info`, where it
//! waits in `queue`, and the frame a handler runs on in `frame`.

use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SigAction, SysResult};
use crate::memory::GuestMemory;

mod frame;
mod info;
mod queue;

pub use frame::{deliver, frame_bytes, sigreturn};
use info::code::*;
use info::SIGINFO_SIZE;
pub use info::{code, SigInfo};
pub use queue::{Inbox, Pending, MAX_QUEUED};

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
/// A thread's alternate signal stack when it has none (a new process's,
/// and a new thread's: see `machine::threads`).
pub const NO_ALTSTACK: (u64, i32, u64) = (0, SS_DISABLE, 0);
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
        // Pending instances of a signal now ignored are dropped, blocked or
        // not, as POSIX and Linux say.
        if ignores(&n, sig) {
            p.sigqueue.discard(1 << idx);
            p.timer_blocked &= !(1 << idx);
        }
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
    let tid = p.tid;
    p.sigqueue.take(set, tid)
}

/// Delivers the waiting signals of `set` until one has a handler to run
/// (or ends the process): those whose action is to do nothing (a blocked,
/// ignored one) go without holding up the others.
pub(super) fn deliver_waiting(p: &mut Process, set: u64) -> Result<(), Errno> {
    while p.pending_signal.is_none() && p.exit_status.is_none() {
        let Some(info) = take_waiting(p, set) else {
            break;
        };
        send(p, info)?;
    }
    Ok(())
}

/// For a call that waits with `mask` as the signal mask while it waits
/// (pselect6, ppoll, epoll_pwait, rt_sigsuspend), looked at each time the
/// call is made: `mask` is the process's mask until the wait ends (see
/// [`end_wait_mask`]), so a signal it blocks that comes meanwhile waits in
/// the queue and leaves the call waiting. A signal that was blocked and
/// that `mask` lets through is taken now, and the call must end with EINTR
/// (`Err`). Its handler runs under `mask`; the frame saves the mask from
/// before the call, so sigreturn puts that back, as on Linux. (GNU make's
/// jobserver waits for SIGCHLD this way: a mask that ignored it hung `make
/// -j2` for good; and a SIGUSR1 that `mask` blocked ended an epoll_pwait
/// with EINTR when it came during the wait.)
pub fn take_under_mask(p: &mut Process, mask: u64) -> Result<(), Errno> {
    p.wait_mask.get_or_insert(p.sigmask);
    if p.pending_signal.is_some() || p.exit_status.is_some() {
        return Err(Errno::EINTR);
    }
    let mask = mask & !UNBLOCKABLE;
    p.sigmask = mask;
    deliver_waiting(p, !mask)?;
    if p.pending_signal.is_some() || p.exit_status.is_some() {
        return Err(Errno::EINTR);
    }
    Ok(())
}

/// Ends the wait of a call made under a mask of its own (see
/// [`take_under_mask`]): a handler due now runs under that mask and its
/// frame saves the one from before, which sigreturn puts back; otherwise
/// the mask from before is back at once, and a signal that waited for it
/// to open is delivered (its handler runs as the call returns).
pub fn end_wait_mask(p: &mut Process) {
    let Some(before) = p.wait_mask.take() else {
        return;
    };
    if p.pending_signal.is_some() {
        p.frame_mask = Some(before);
        return;
    }
    p.sigmask = before;
    let _ = deliver_waiting(p, !before);
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
    mem.write_u64(a[0], p.sigqueue.bits_for(p.tid) & p.sigmask)?;
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
        deliver_waiting(p, !p.sigmask)?;
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

const SIGCONT: u64 = 18;
const SIGXCPU: u64 = 24;
/// SA_NOCLDSTOP: no SIGCHLD when a child stops or continues.
const SA_NOCLDSTOP: u64 = 1;

/// Whether `sig` stops the process by default (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU).
fn default_stops(sig: u64) -> bool {
    matches!(sig, 19..=22)
}

/// Whether the default action of `sig` terminates the process.
fn default_terminates(sig: u64) -> bool {
    // Ignored by default: SIGCHLD, SIGCONT, SIGURG, SIGWINCH; stop signals stop.
    !matches!(sig, 17 | 18 | 23 | 28 | 19 | 20 | 21 | 22)
}

/// Whether `info` is dropped when sent even to a thread that blocks it:
/// the news of a child's end or stop for a parent whose SIGCHLD action is
/// SIG_IGN (Linux sends none; the child is reaped at once).
fn discarded_at_once(action: &SigAction, info: &SigInfo) -> bool {
    info.signo == SIGCHLD as i32
        && action.handler == SIG_IGN
        && matches!(
            info.code,
            code::CLD_EXITED
                | code::CLD_KILLED
                | code::CLD_DUMPED
                | code::CLD_STOPPED
                | code::CLD_CONTINUED
        )
}

/// Whether `action` discards `sig` on delivery (SIG_IGN, or the default
/// action of a signal ignored by default).
fn ignores(action: &SigAction, sig: u64) -> bool {
    action.handler == SIG_IGN
        || (action.handler == SIG_DFL && !default_terminates(sig) && !default_stops(sig))
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
/// A signal sent to one thread (`info.thread`, see [`send_to_thread`])
/// waits for that thread; one sent to the process may go to another
/// thread when the running one blocks it.
pub fn send(p: &mut Process, info: SigInfo) -> SysResult {
    let sig = u64::from(info.signo as u32);
    if sig == 0 {
        return Ok(0);
    }
    let idx = check_sig(sig)?;
    let action = p.sigactions[idx];
    let blocked = p.sigmask & (1 << idx) != 0;
    if sig == SIGCONT {
        // Continues the process whatever its disposition, and cancels a stop.
        p.stopping = None;
    }
    let news_of_a_stop = matches!(info.code, code::CLD_STOPPED | code::CLD_CONTINUED);
    if sig == SIGCHLD && news_of_a_stop && action.flags & SA_NOCLDSTOP != 0 {
        return Ok(0);
    }
    // Blocked, it waits, even if ignored (its action may change before it
    // is unblocked, and sigwait or a signalfd takes it: PostgreSQL's
    // latches wake on a blocked, ignored SIGURG read from a signalfd), as
    // on Linux; a child's end is no signal for a parent ignoring SIGCHLD.
    if blocked && sig != SIGKILL && !discarded_at_once(&action, &info) {
        // A signal for the process goes to a thread that does not block
        // it, as Linux's complete_signal picks one (Go's crash dump relays
        // SIGQUIT from thread to thread this way: each blocks it once its
        // handler ran, and the next raise must reach one that has not).
        let bit = 1u64 << idx;
        let taker = p
            .threads
            .others
            .iter()
            .find(|t| t.sigmask & bit == 0 && t.pending_signal.is_none())
            .map(|t| t.tid);
        if let (0, Some(tid)) = (info.thread, taker) {
            return send_to_thread(p, tid, info);
        }
        p.sigqueue.push(info)?;
        return Ok(0);
    }
    if sig == SIGSTOP || (action.handler == SIG_DFL && !blocked && default_stops(sig)) {
        p.stopping = Some(sig as i32);
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

/// The handler that would run for `sig`, if one is installed and the signal is not blocked.
pub fn handler_for(p: &Process, sig: i32) -> Option<SigAction> {
    let idx = usize::try_from(sig).ok()?.checked_sub(1)?;
    let a = *p.sigactions.get(idx)?;
    let blocked = p.sigmask & (1 << idx) != 0;
    (a.handler > SIG_IGN && !blocked).then_some(a)
}

/// Whether call `nr`, interrupted while it waited by a signal whose handler
/// has SA_RESTART, is made again after the handler instead of failing with
/// EINTR, as Linux restarts it (glibc's `signal()` sets SA_RESTART, and C
/// programs then do not expect EINTR from read, write, wait or accept).
/// Waits with a timeout or a mask of their own (poll, select, epoll_wait,
/// nanosleep, sigsuspend...) end with EINTR whatever the flag says.
pub fn restarts(p: &Process, sig: i32, nr: u64) -> bool {
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
    let cpu = fire_cpu_timers(p);
    let Some((next, period)) = p.itimer else {
        return posix || cpu;
    };
    let now = std::time::Instant::now();
    if now < next {
        return posix || cpu;
    }
    p.itimer = (!period.is_zero()).then(|| (super::time::after(now, period), period));
    let _ = send(p, SigInfo::kernel(SIGALRM));
    p.timer_blocked |= p.sigqueue.bits() & p.sigmask & (1 << (SIGALRM - 1));
    true
}

/// Fires ITIMER_VIRTUAL (SIGVTALRM) and ITIMER_PROF (SIGPROF) if the
/// process's CPU time has reached them. Returns whether one fired.
fn fire_cpu_timers(p: &mut Process) -> bool {
    const SIGNALS: [u64; 2] = [26, 27]; // SIGVTALRM, SIGPROF
    let limit = p.rlimits[super::process::RLIMIT_CPU as usize];
    if p.cpu_itimers.iter().all(Option::is_none) && limit.is_none() {
        return false;
    }
    let now = super::time::cpu_time();
    let mut fired = false;
    if let Some((soft, hard)) = limit {
        // RLIMIT_CPU, in seconds: SIGKILL at the hard limit; SIGXCPU at the
        // soft one and once a second after it.
        let secs = now.as_secs();
        if secs >= hard {
            let _ = send(p, SigInfo::kernel(SIGKILL));
            return true;
        }
        if secs >= soft && secs > p.xcpu_sent {
            p.xcpu_sent = secs;
            let _ = send(p, SigInfo::kernel(SIGXCPU));
            fired = true;
        }
    }
    for (slot, sig) in SIGNALS.into_iter().enumerate() {
        let Some((at, period)) = p.cpu_itimers[slot] else {
            continue;
        };
        if now < at {
            continue;
        }
        // Expiries missed meanwhile fold into this one, as for ITIMER_REAL.
        p.cpu_itimers[slot] = (!period.is_zero()).then(|| (now.saturating_add(period), period));
        let _ = send(p, SigInfo::kernel(sig));
        p.timer_blocked |= p.sigqueue.bits() & p.sigmask & (1 << (sig - 1));
        fired = true;
    }
    fired
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
    if info != 0 && p.sigqueue.bits_for(p.tid) & set != 0 {
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
    // A pid that cannot be one is EINVAL before anything, as on Linux
    // (it was ESRCH: LTP's tgkill03).
    if a[0] as i32 <= 0 || a[1] as i32 <= 0 {
        return Err(Errno::EINVAL);
    }
    if a[0] != super::child::pid_of(p) {
        return Err(Errno::ESRCH);
    }
    let pid = super::child::pid_of(p);
    send_to_thread(p, a[1], SigInfo::tkill(a[2], pid))
}

/// Sends `sig` to thread `tid` of the process: the running one now, another
/// when it next runs (Go's preemption signal, SIGURG, goes this way).
pub(super) fn send_to_thread(p: &mut Process, tid: u64, mut info: SigInfo) -> SysResult {
    info.thread = tid;
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
    if sig == SIGCONT {
        p.stopping = None;
    }
    let unblocked = t.sigmask & (1 << idx) == 0;
    if sig == SIGSTOP || (action.handler == SIG_DFL && unblocked && default_stops(sig)) {
        // Stops the whole process, whichever thread it was sent to.
        p.stopping = Some(sig as i32);
        return Ok(0);
    }
    // Blocked by that thread: pending until it is unblocked or taken by
    // sigwait (a signal-handling thread's way), whatever its action.
    if t.sigmask & (1 << idx) != 0 && sig != SIGKILL && !discarded_at_once(&action, &info) {
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
    // A futex wait ends, as on Linux: made again after the handler when it
    // has no timeout and the handler SA_RESTART, else EINTR (sem_wait's
    // caller sees it; python runs its handlers in a blocked lock acquire).
    if let super::thread::Wait::Futex { deadline, .. } = t.wait {
        t.wait = super::thread::Wait::Runnable;
        if deadline.is_none() && action.flags & SA_RESTART != 0 {
            t.regs.rip = t.regs.rip.wrapping_sub(2);
            t.regs.rax = SYS_FUTEX;
        } else {
            t.regs.rax = (-(Errno::EINTR.0 as i64)) as u64;
        }
    }
    Ok(0)
}

/// Implements tkill(2) for the thread itself.
fn sys_tkill(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    if a[0] as i32 <= 0 {
        return Err(Errno::EINVAL);
    }
    let pid = super::child::pid_of(p);
    send_to_thread(p, a[0], SigInfo::tkill(a[1], pid))
}

/// sigaction's flag: interrupted calls are made again after the handler.
const SA_RESTART: u64 = 0x1000_0000;
/// futex(2)'s number, for a futex wait made again.
const SYS_FUTEX: u64 = 202;

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
        note: "handlers run for faults, timers and signals from itself, its threads and the run's other processes, at a system call or a timer tick; stop signals stop the process until SIGCONT (a sleep they cut short returns EINTR)" },
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

    /// A tgid or tid that cannot be one is EINVAL before anything else, as
    /// on Linux (it was ESRCH: LTP's tgkill03); another process's is ESRCH.
    #[test]
    fn tgkill_and_tkill_refuse_impossible_ids() {
        let (mut p, mut m, _) = test_process();
        let me = super::super::child::pid_of(&p);
        let minus_one = u64::from(u32::MAX);
        let tgkill =
            |p: &mut Process, m: &mut GuestMemory, a: &[u64]| test_call(p, m, sys_tgkill, a);
        assert_eq!(
            tgkill(&mut p, &mut m, &[minus_one, me, 10]),
            Err(Errno::EINVAL)
        );
        assert_eq!(tgkill(&mut p, &mut m, &[me, 0, 10]), Err(Errno::EINVAL));
        assert_eq!(
            tgkill(&mut p, &mut m, &[me + 100, me, 10]),
            Err(Errno::ESRCH)
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_tkill, &[minus_one, 10]),
            Err(Errno::EINVAL)
        );
        let tid = p.tid;
        assert_eq!(tgkill(&mut p, &mut m, &[me, tid, 0]), Ok(0));
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
        assert_eq!(p.sigqueue.take(u64::MAX, 0).map(|i| i.value), Some(5));
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
            p.sigqueue.take(u64::MAX, tid).map(|i| (i.code, i.value)),
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
