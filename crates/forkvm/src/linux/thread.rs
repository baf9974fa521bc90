//! Threads and futexes: many guest threads on one vCPU.
//!
//! Model (see docs/design.md): one vCPU runs one thread at a time. The
//! others are saved register contexts. A thread switch happens when the
//! running thread blocks (futex wait, sleep), yields or exits, and, when more
//! than one thread can run, on a 10 ms preemption tick, so spinning threads
//! (Go's runtime, spin locks) cannot starve the rest. Switching is a register
//! load through SYNC_REGS (plus an FS-base MSR write when TLS differs), with
//! no guest-kernel code involved.
//!
//! Handlers here only decide; the run loop ([`crate::machine`]) owns the
//! registers and performs what [`Process::sched`] asks for.

use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

const FUTEX_WAIT: u64 = 0;
const FUTEX_WAKE: u64 = 1;
const FUTEX_REQUEUE: u64 = 3;
const FUTEX_CMP_REQUEUE: u64 = 4;
const FUTEX_WAKE_OP: u64 = 5;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_WAKE_BITSET: u64 = 10;
const FUTEX_CLOCK_REALTIME: u64 = 256;
const FUTEX_PRIVATE_FLAG: u64 = 128;
const FUTEX_CMD_MASK: u64 = !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
const FUTEX_BITSET_MATCH_ANY: u32 = u32::MAX;

const CLONE_VM: u64 = 0x100;
const CLONE_FS: u64 = 0x200;
const CLONE_FILES: u64 = 0x400;
const CLONE_SIGHAND: u64 = 0x800;
const CLONE_PIDFD: u64 = 0x1000;
const CLONE_SETTLS: u64 = 0x8_0000;
const CLONE_PARENT_SETTID: u64 = 0x10_0000;
const CLONE_CHILD_CLEARTID: u64 = 0x20_0000;
const CLONE_THREAD: u64 = 0x1_0000;
const CLONE_CHILD_SETTID: u64 = 0x100_0000;
const CLONE_SYSVSEM: u64 = 0x4_0000;
const CLONE_DETACHED: u64 = 0x40_0000;
/// Flags a thread-creating clone may carry.
const THREAD_FLAGS: u64 = CLONE_VM
    | CLONE_FS
    | CLONE_FILES
    | CLONE_SIGHAND
    | CLONE_THREAD
    | CLONE_SYSVSEM
    | CLONE_SETTLS
    | CLONE_PARENT_SETTID
    | CLONE_CHILD_CLEARTID
    | CLONE_CHILD_SETTID
    | CLONE_DETACHED;

/// Most threads a process may have.
pub const MAX_THREADS: usize = 4096;

/// Why a thread is not running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Ready to run.
    Runnable,
    /// In futex_wait on `addr` (matching `bitset`), until woken or `deadline`.
    Futex {
        /// The futex word.
        addr: u64,
        /// FUTEX_WAIT_BITSET mask.
        bitset: u32,
        /// Timeout, if any.
        deadline: Option<Instant>,
    },
    /// In nanosleep (or a relative clock_nanosleep) until then; a signal
    /// ends it early with EINTR and the time left written at `rem` (0: none).
    Sleep {
        /// When it ends.
        until: Instant,
        /// The guest's `struct timespec *rem`.
        rem: u64,
    },
    /// About to make its syscall again (nothing was ready) at this time.
    Retry(Instant),
    /// Returned from vfork (or clone with CLONE_VFORK) with the child's
    /// pid, and waits until the child execs or ends (the run loop looks,
    /// see `machine::vfork`).
    Vfork,
}

/// A thread that is not on the vCPU: its saved user context.
#[derive(Debug, Clone)]
pub struct ThreadCtx {
    /// Thread id.
    pub tid: u64,
    /// General registers, RIP, RSP, RFLAGS as of when it stopped.
    pub regs: kvm_bindings::kvm_regs,
    /// TLS base.
    pub fs_base: u64,
    /// set_tid_address / CLONE_CHILD_CLEARTID.
    pub clear_child_tid: u64,
    /// Blocked signals.
    pub sigmask: u64,
    /// Its alternate signal stack (sigaltstack is per thread).
    pub altstack: (u64, i32, u64),
    /// A signal sent to it with tgkill, delivered when it runs.
    pub pending_signal: Option<super::signal::SigInfo>,
    /// Why it is not running.
    pub wait: Wait,
    /// The deadline of a syscall it is waiting in (see [`wait`]).
    pub waiting: Option<Option<Instant>>,
    /// The mask from before the call it waits in (see
    /// [`super::Process::wait_mask`]).
    pub wait_mask: Option<u64>,
    /// Its wait on a shared futex (see [`super::Process::shared_futex`]).
    pub shared_futex: Option<std::sync::Arc<super::shared_futex::Waiter>>,
    /// [`super::Process::progress`] when it stopped: a retried call that
    /// looked before other threads did more may find something ready.
    pub looked: u64,
    /// Its x87/SSE/AVX state and control words.
    pub fpu: crate::hypervisor::XsaveArea,
}

impl ThreadCtx {
    /// Whether it can run at `now`: runnable or timed out, or, when
    /// `progress` is given (the process's count of completed calls), a
    /// retried call that looked before other threads did more.
    pub fn can_run(&self, now: Instant, progress: Option<u64>) -> bool {
        match self.wait {
            Wait::Runnable => true,
            Wait::Futex { deadline, .. } => deadline.is_some_and(|d| d <= now),
            // A signal sent to it ends its sleep (see `take_next`).
            Wait::Sleep { until, .. } => until <= now || self.pending_signal.is_some(),
            // A signal sent to it ends its wait (see `Machine::with_pending_signal`).
            Wait::Retry(until) => {
                self.pending_signal.is_some()
                    || until <= now
                    || progress.is_some_and(|p| self.looked != p)
            }
            Wait::Vfork => false,
        }
    }
}

/// What the run loop must do after a syscall returns.
#[derive(Debug)]
pub enum Sched {
    /// Create a thread from the caller's context (clone).
    Spawn {
        /// Its id (already returned to the parent).
        tid: u64,
        /// Its stack pointer (0: the parent's).
        stack: u64,
        /// Its TLS base, if CLONE_SETTLS.
        tls: Option<u64>,
        /// CLONE_CHILD_CLEARTID address.
        clear_tid: u64,
    },
    /// The caller blocks; when resumed its syscall returns what the wake-up says.
    Block(Wait),
    /// Let another thread run.
    Yield,
    /// The caller exited (exit(2) of one thread).
    Exit,
    /// The caller found nothing ready: run its syscall again at this time
    /// (or when other threads have had their turn).
    Retry(Instant),
    /// Start a child process, a copy of the caller (fork, see `linux::child`).
    Fork(Box<super::child::ForkReq>),
    /// Replace the program (execve, see `linux::exec`).
    Exec(Box<super::exec::ExecReq>),
}

/// What [`wait`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The timeout has passed: the syscall returns its timeout result now.
    TimedOut,
    /// The syscall will be made again; what it returns now is discarded.
    Retry,
}

/// How often a waiting syscall looks again when other threads could make it ready.
const RECHECK: Duration = Duration::from_millis(1);
/// ... and when only time or the host (stdin) could.
const RECHECK_ALONE: Duration = Duration::from_millis(20);

/// A syscall found nothing ready. Starts (or continues) the calling
/// thread's wait: the first call fixes the deadline from `timeout` (None:
/// forever); `wake` is a moment something becomes ready by itself (a timer).
pub fn wait(p: &mut Process, timeout: Option<Duration>, wake: Option<Instant>) -> Waited {
    let now = Instant::now();
    let deadline = *p.waiting.get_or_insert_with(|| timeout.map(|t| now + t));
    if deadline.is_some_and(|d| now >= d) {
        p.waiting = None;
        return Waited::TimedOut;
    }
    // Another process (a pipe's other end) may make it ready as well.
    let step = if p.threads.others.is_empty() && !super::child::others_alive(p) {
        RECHECK_ALONE
    } else {
        RECHECK
    };
    let mut until = now + step;
    if let Some(d) = deadline {
        until = until.min(d);
    }
    if let Some(w) = wake {
        until = until.min(w.max(now));
    }
    p.sched = Some(Sched::Retry(until));
    Waited::Retry
}

/// The threads of the process other than the running one.
#[derive(Debug, Clone, Default)]
pub struct Threads {
    /// Saved threads, in round-robin order.
    pub others: VecDeque<ThreadCtx>,
    /// The next id to hand out.
    pub next_tid: u64,
}

impl Threads {
    /// Whether some other thread can run now.
    pub fn any_runnable(&self, now: Instant, progress: Option<u64>) -> bool {
        self.others.iter().any(|t| t.can_run(now, progress))
    }

    /// The earliest time a waiting thread times out.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.others
            .iter()
            .filter_map(|t| match t.wait {
                Wait::Futex { deadline, .. } => deadline,
                Wait::Sleep { until, .. } | Wait::Retry(until) => Some(until),
                Wait::Runnable | Wait::Vfork => None,
            })
            .min()
    }

    /// Takes the next thread that can run, setting the result of its blocked syscall.
    pub fn take_next(&mut self, now: Instant, progress: Option<u64>) -> Option<ThreadCtx> {
        let i = self.others.iter().position(|t| t.can_run(now, progress))?;
        let mut t = self.others.remove(i)?;
        match t.wait {
            Wait::Futex { .. } => t.regs.rax = (-(Errno::ETIMEDOUT.0 as i64)) as u64,
            // Cut short by a signal: EINTR, and the wait stays for
            // `Machine::adopt` to write the time left.
            Wait::Sleep { until, .. } if until > now => {
                t.regs.rax = (-(Errno::EINTR.0 as i64)) as u64;
                return Some(t);
            }
            Wait::Sleep { .. } => t.regs.rax = 0,
            Wait::Runnable | Wait::Retry(_) | Wait::Vfork => {}
        }
        t.wait = Wait::Runnable;
        Some(t)
    }

    /// Wakes up to `n` threads waiting on `addr` whose bitset matches; returns how many.
    pub fn wake(&mut self, addr: u64, n: u64, bitset: u32) -> u64 {
        let mut woken = 0;
        for t in self.others.iter_mut() {
            if woken >= n {
                break;
            }
            if let Wait::Futex {
                addr: a, bitset: b, ..
            } = t.wait
            {
                if a == addr && b & bitset != 0 {
                    t.wait = Wait::Runnable;
                    t.regs.rax = 0;
                    woken += 1;
                }
            }
        }
        woken
    }

    /// Moves up to `n` waiters from `from` to `to`; returns how many.
    fn requeue(&mut self, from: u64, to: u64, n: u64) -> u64 {
        let mut moved = 0;
        for t in self.others.iter_mut() {
            if moved >= n {
                break;
            }
            if let Wait::Futex {
                addr,
                bitset,
                deadline,
            } = t.wait
            {
                if addr == from {
                    t.wait = Wait::Futex {
                        addr: to,
                        bitset,
                        deadline,
                    };
                    moved += 1;
                }
            }
        }
        moved
    }

    /// Total threads including the running one.
    pub fn count(&self) -> usize {
        self.others.len() + 1
    }
}

pub(super) fn read_timeout(mem: &GuestMemory, addr: u64) -> Result<Duration, Errno> {
    let sec = mem.read_u64(addr)?;
    let nsec = mem.read_u64(addr + 8)?;
    if nsec >= 1_000_000_000 || (sec as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    Ok(Duration::new(sec, nsec as u32))
}

fn realtime_now() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn monotonic_now() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Implements futex(2).
/// How often a futex wait on shared memory looks at the word again.
const SHARED_FUTEX_RECHECK: std::time::Duration = std::time::Duration::from_millis(1);

fn sys_futex(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [uaddr, op, val, timeout, uaddr2, val3] = *a;
    if uaddr % 4 != 0 {
        return Err(Errno::EINVAL);
    }
    let cmd = op & FUTEX_CMD_MASK;
    match cmd {
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            let bitset = if cmd == FUTEX_WAIT_BITSET {
                val3 as u32
            } else {
                FUTEX_BITSET_MATCH_ANY
            };
            if bitset == 0 {
                return Err(Errno::EINVAL);
            }
            // A requeued shared wait waits for a wake on the other futex,
            // whatever becomes of this word.
            let requeued = p.shared_futex.as_ref().is_some_and(|w| w.requeued());
            if !requeued && mem.read_u32(uaddr)? != val as u32 {
                if p.waiting.is_some() && mem.shared_at(uaddr).is_some() {
                    // This is the shared wait below looking again: the word
                    // changed while it waited, as another process's wake
                    // follows. Woken (0), as on Linux; EAGAIN is only for a
                    // word that differed when the wait began.
                    p.waiting = None;
                    return Ok(0);
                }
                return Err(Errno::EAGAIN);
            }
            // FUTEX_WAIT's timeout is relative; WAIT_BITSET's is absolute.
            let deadline = if timeout == 0 {
                None
            } else {
                let t = read_timeout(mem, timeout)?;
                let rel = if cmd == FUTEX_WAIT {
                    t
                } else if op & FUTEX_CLOCK_REALTIME != 0 {
                    t.saturating_sub(realtime_now())
                } else {
                    t.saturating_sub(monotonic_now())
                };
                Some(Instant::now() + rel)
            };
            if mem.shared_at(uaddr).is_some() {
                // A word in shared memory (a process-shared semaphore or
                // mutex): another process may change it, so the wait looks
                // at the word again every millisecond (a wake-up futex
                // callers allow), and registers with the run for another
                // process's FUTEX_WAKE, which may change nothing (see
                // `shared_futex`).
                if let Some(w) = &p.shared_futex {
                    if w.woken() {
                        p.waiting = None;
                        return Ok(0);
                    }
                } else if let (Some(key), Some(f)) = (
                    super::shared_futex::key(p, mem, uaddr, op & FUTEX_PRIVATE_FLAG != 0),
                    &p.family,
                ) {
                    p.shared_futex = Some(f.tree.futexes.wait(key, bitset));
                }
                let now = Instant::now();
                let timeout = deadline.map(|d| d.saturating_duration_since(now));
                return match wait(p, timeout, Some(now + SHARED_FUTEX_RECHECK)) {
                    Waited::Retry => Ok(0),
                    Waited::TimedOut => Err(Errno::ETIMEDOUT),
                };
            }
            if p.threads.others.is_empty() {
                // Nobody else can change the word: only a timeout ends the wait.
                let Some(deadline) = deadline else {
                    tracing::warn!("futex wait with no other thread and no timeout: deadlock");
                    p.exit_status = Some(128 + 6);
                    p.killed_by = Some(6);
                    return Err(Errno::EDEADLK);
                };
                // Waited for as other calls are (made again until the
                // deadline), so that only a signal ends it early: a host
                // sleep ended at every kick of the vCPU thread, which a
                // child gets every 10 ms, and the wait returned EINTR
                // (LTP's futex_wait05; a child's sem_timedwait).
                let left = deadline.saturating_duration_since(Instant::now());
                return match wait(p, Some(left), None) {
                    Waited::Retry => Ok(0),
                    Waited::TimedOut => Err(Errno::ETIMEDOUT),
                };
            }
            p.sched = Some(Sched::Block(Wait::Futex {
                addr: uaddr,
                bitset,
                deadline,
            }));
            Ok(0)
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => {
            let bitset = if cmd == FUTEX_WAKE_BITSET {
                val3 as u32
            } else {
                FUTEX_BITSET_MATCH_ANY
            };
            if bitset == 0 {
                return Err(Errno::EINVAL);
            }
            let private = op & FUTEX_PRIVATE_FLAG != 0;
            if !private {
                // Linux looks up a shared futex's page (EFAULT when it is
                // unmapped or inaccessible); a private one is only an address.
                mem.read_u32(uaddr)?;
            }
            let n = u64::from((val as u32).min(i32::MAX as u32));
            let mut woken = p.threads.wake(uaddr, n, bitset);
            if woken < n {
                if let (Some(key), Some(f)) =
                    (super::shared_futex::key(p, mem, uaddr, private), &p.family)
                {
                    woken += f.tree.futexes.wake(key, n - woken, bitset);
                }
            }
            Ok(woken)
        }
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE => {
            if uaddr2 % 4 != 0 {
                return Err(Errno::EINVAL);
            }
            if cmd == FUTEX_CMP_REQUEUE && mem.read_u32(uaddr)? != val3 as u32 {
                return Err(Errno::EAGAIN);
            }
            let (wake, most) = (val.min(i32::MAX as u64), timeout.min(i32::MAX as u64));
            let mut woken = p.threads.wake(uaddr, wake, FUTEX_BITSET_MATCH_ANY);
            // val2 travels in the timeout argument.
            let mut moved = p.threads.requeue(uaddr, uaddr2, most);
            // Waiters of the run's other processes (and this one's, on a
            // shared word) are in the registry, keyed by the object.
            let private = op & FUTEX_PRIVATE_FLAG != 0;
            if let (Some(from), Some(to), Some(f)) = (
                super::shared_futex::key(p, mem, uaddr, private),
                super::shared_futex::key(p, mem, uaddr2, private),
                &p.family,
            ) {
                let futexes = &f.tree.futexes;
                woken += futexes.wake(from, wake.saturating_sub(woken), FUTEX_BITSET_MATCH_ANY);
                moved += futexes.requeue(from, to, most.saturating_sub(moved));
            }
            Ok(woken + if cmd == FUTEX_CMP_REQUEUE { moved } else { 0 })
        }
        FUTEX_WAKE_OP => {
            if uaddr2 % 4 != 0 {
                return Err(Errno::EINVAL);
            }
            let encoded = val3 as u32;
            let (opk, cmp) = ((encoded >> 28) & 0xf, (encoded >> 24) & 0xf);
            let mut oparg = (encoded >> 12) & 0xfff;
            let cmparg = encoded & 0xfff;
            if opk & 8 != 0 {
                oparg = 1u32.checked_shl(oparg).unwrap_or(0);
            }
            let old = mem.read_u32(uaddr2)?;
            let new = match opk & 7 {
                0 => oparg,
                1 => old.wrapping_add(oparg),
                2 => old | oparg,
                3 => old & !oparg,
                4 => old ^ oparg,
                _ => return Err(Errno::ENOSYS),
            };
            mem.write_u32(uaddr2, new)?;
            let mut woken = p.threads.wake(uaddr, val, FUTEX_BITSET_MATCH_ANY);
            let hit = match cmp {
                0 => old == cmparg,
                1 => old != cmparg,
                2 => old < cmparg,
                3 => old <= cmparg,
                4 => old > cmparg,
                5 => old >= cmparg,
                _ => return Err(Errno::ENOSYS),
            };
            if hit {
                woken += p.threads.wake(uaddr2, timeout, FUTEX_BITSET_MATCH_ANY);
            }
            Ok(woken)
        }
        _ => Err(Errno::ENOSYS),
    }
}

fn spawn(
    p: &mut Process,
    mem: &mut GuestMemory,
    flags: u64,
    stack: u64,
    ptid: u64,
    ctid: u64,
    tls: u64,
) -> SysResult {
    if flags & CLONE_THREAD == 0 {
        // A new process: a new VM (linux::child).
        return super::child::fork(p, mem, flags, stack, ptid, ctid, tls);
    }
    if flags & CLONE_VM == 0 {
        return Err(Errno::EINVAL);
    }
    if flags & !(THREAD_FLAGS | 0xff) != 0 {
        return Err(Errno::EINVAL);
    }
    if p.threads.count() >= MAX_THREADS {
        return Err(Errno::EAGAIN);
    }
    if p.threads.next_tid <= super::process::PID {
        p.threads.next_tid = super::process::PID + 1;
    }
    let tid = p.threads.next_tid;
    if flags & CLONE_PARENT_SETTID != 0 {
        mem.write_u32(ptid, tid as u32)?;
    }
    if flags & CLONE_CHILD_SETTID != 0 {
        mem.write_u32(ctid, tid as u32)?;
    }
    p.threads.next_tid += 1;
    let (tls, clear_tid) = tls_and_clear_tid(flags, tls, ctid);
    p.sched = Some(Sched::Spawn {
        tid,
        stack,
        tls,
        clear_tid,
    });
    Ok(tid)
}

/// What clone's flags ask of the new thread or process: its TLS base
/// (CLONE_SETTLS) and the address cleared at its exit (CLONE_CHILD_CLEARTID; 0: none).
pub(super) fn tls_and_clear_tid(flags: u64, tls: u64, ctid: u64) -> (Option<u64>, u64) {
    let clear_tid = if flags & CLONE_CHILD_CLEARTID != 0 {
        ctid
    } else {
        0
    };
    ((flags & CLONE_SETTLS != 0).then_some(tls), clear_tid)
}

/// Implements clone(2) for threads (CLONE_VM | CLONE_THREAD).
fn sys_clone(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    // x86-64 order: flags, stack, parent_tid, child_tid, tls.
    let [flags, stack, ptid, ctid, tls, _] = *a;
    if flags & CLONE_PIDFD != 0 {
        // clone stores the pidfd where the parent's tid would go.
        if flags & (CLONE_THREAD | CLONE_PARENT_SETTID) != 0 {
            return Err(Errno::EINVAL);
        }
        return super::pidfd::clone_with_pidfd(p, mem, ptid, |p, mem| {
            spawn(p, mem, flags & !CLONE_PIDFD, stack, ptid, ctid, tls)
        });
    }
    spawn(p, mem, flags, stack, ptid, ctid, tls)
}

/// Implements clone3(2) for threads.
fn sys_clone3(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [args, size, ..] = *a;
    if size < 64 {
        return Err(Errno::EINVAL);
    }
    let q = |i: u64| mem.read_u64(args + 8 * i);
    let (flags, child_tid, parent_tid, stack, stack_size, tls) =
        (q(0)?, q(2)?, q(3)?, q(5)?, q(6)?, q(7)?);
    let top = if stack == 0 {
        0
    } else {
        stack.checked_add(stack_size).ok_or(Errno::EINVAL)?
    };
    if flags & CLONE_PIDFD != 0 {
        if flags & CLONE_THREAD != 0 {
            return Err(Errno::EINVAL);
        }
        let ptr = q(1)?;
        return super::pidfd::clone_with_pidfd(p, mem, ptr, |p, mem| {
            spawn(
                p,
                mem,
                flags & !CLONE_PIDFD,
                top,
                parent_tid,
                child_tid,
                tls,
            )
        });
    }
    spawn(p, mem, flags, top, parent_tid, child_tid, tls)
}

/// Implements sched_yield(2).
fn sys_sched_yield(p: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    if !p.threads.others.is_empty() {
        p.sched = Some(Sched::Yield);
    }
    Ok(0)
}

/// Implements exit(2): ends the calling thread (the process, if it is the last).
fn sys_exit_thread(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if p.threads.others.is_empty() {
        p.exit_status = Some((a[0] & 0xff) as i32);
        return Ok(0);
    }
    if p.clear_child_tid != 0 {
        // As the kernel does: clear the tid word and wake one waiter (pthread_join).
        if mem.write_u32(p.clear_child_tid, 0).is_ok() {
            p.threads.wake(p.clear_child_tid, 1, FUTEX_BITSET_MATCH_ANY);
        }
    }
    // Signals sent to this thread end with it.
    let tid = p.tid;
    p.sigqueue.forget_thread(tid);
    p.sched = Some(Sched::Exit);
    Ok(0)
}

/// Implements gettid(2).
fn sys_gettid(p: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Ok(p.tid)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 24, name: "sched_yield", handler: sys_sched_yield, support: Support::Full, note: "" },
    SyscallEntry { nr: 56, name: "clone", handler: sys_clone, support: Support::Partial,
        note: "threads (CLONE_VM|CLONE_THREAD) scheduled on one vCPU; without CLONE_THREAD a new process as fork, with CLONE_VM|CLONE_VFORK as vfork; CLONE_VM alone is ENOSYS; CLONE_PIDFD for a new process (the child inherits the pidfd, close-on-exec)" },
    SyscallEntry { nr: 60, name: "exit", handler: sys_exit_thread, support: Support::Full, note: "" },
    SyscallEntry { nr: 186, name: "gettid", handler: sys_gettid, support: Support::Full, note: "" },
    SyscallEntry { nr: 202, name: "futex", handler: sys_futex, support: Support::Partial,
        note: "WAIT, WAKE, WAIT_BITSET, WAKE_BITSET, REQUEUE, CMP_REQUEUE, WAKE_OP; PI futexes are ENOSYS" },
    SyscallEntry { nr: 435, name: "clone3", handler: sys_clone3, support: Support::Partial,
        note: "as clone" },
];
