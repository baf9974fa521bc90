//! Clocks and sleeping. Clocks read the host's; sleeps really sleep, but a
//! sleep interrupted by the watchdog returns EINTR so a timeout is honoured.

use super::signal::SigInfo;
use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use rustix::thread::{ClockId as SleepClock, NanosleepRelativeResult};
use rustix::time::{ClockId, Timespec};

const NSEC_PER_SEC: i64 = 1_000_000_000;
const TIMER_ABSTIME: u64 = 1;

/// The host clock behind guest clock `id` (a `clockid_t`: an int).
fn clock(id: u64) -> Result<ClockId, Errno> {
    let id = id as u32 as i32;
    Ok(match id {
        0 => ClockId::Realtime,
        1 => ClockId::Monotonic,
        // CPU time of the guest is CPU time of the vCPU thread.
        2 | 3 => ClockId::ThreadCPUTime,
        4 => ClockId::MonotonicRaw,
        5 => ClockId::RealtimeCoarse,
        6 => ClockId::MonotonicCoarse,
        // The *_ALARM clocks read as their base clocks (only their timers
        // need CAP_WAKE_ALARM).
        7 | 9 => ClockId::Boottime,
        8 => ClockId::Realtime,
        11 => ClockId::Tai,
        _ => return Err(Errno::EINVAL),
    })
}

/// [`clock`], and also a CPU clock named by pid or tid
/// (clock_getcpuclockid, pthread_getcpuclockid: `~id << 3 | kind`, kind 3
/// invalid): this process's, or one of its threads', is its CPU time (one
/// vCPU thread runs them all); another's is EINVAL.
fn clock_of(p: &Process, id: u64) -> Result<ClockId, Errno> {
    let Some((_, who)) = named_cpu_clock(id) else {
        return clock(id);
    };
    let mine = who == 0
        || who == super::child::pid_of(p)
        || who == p.tid
        || p.threads.others.iter().any(|t| t.tid == who);
    match mine {
        true => Ok(ClockId::ThreadCPUTime),
        false => Err(Errno::EINVAL),
    }
}

/// A CPU clock named by pid or tid (`~id << 3 | kind`, kind 3 invalid):
/// whether it is a thread's (kind bit 4), and whose (0: the caller).
fn named_cpu_clock(id: u64) -> Option<(bool, u64)> {
    let cpu = id as u32 as i32;
    if cpu >= 0 || cpu & 3 == 3 {
        return None;
    }
    Some((cpu & 4 != 0, u64::from(!(cpu >> 3) as u32)))
}

/// The time syscalls the vDSO answers while its time base is current:
/// clock_gettime, gettimeofday, time.
const TIME_CALLS: [u64; 3] = [228, 96, 201];

/// After call `nr` was answered by the host, on either path (an exit or the
/// poller): for a time call, the vDSO gave it up because its piece of the
/// time function had ended. From the second such call in this copy of the
/// process, or at once when `at_once` (before a master's ready point), the
/// vDSO gets the current piece. So a served request that reads the time
/// once pays one host answer rather than a page copied on write and
/// restored at reset, and one that reads it often gets the vDSO back.
/// Rewriting the page at every entry instead made every request of a
/// long-lived master copy one more page (~20-30 µs on PVM, bench/http.sh).
pub fn after_host_answer(
    p: &mut Process,
    mem: &mut GuestMemory,
    nr: u64,
    at_once: bool,
) -> Result<(), crate::memory::Fault> {
    if !TIME_CALLS.contains(&nr) {
        return Ok(());
    }
    p.time_reads = p.time_reads.saturating_add(1);
    if at_once || p.time_reads >= 2 {
        crate::clock::refresh_page(mem)?;
    }
    Ok(())
}

/// A duration as a `struct timespec`.
fn timespec_of(d: std::time::Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

fn write_timespec(mem: &mut GuestMemory, addr: u64, t: Timespec) -> Result<(), Errno> {
    mem.write_u64(addr, t.tv_sec as u64)?;
    mem.write_u64(addr + 8, t.tv_nsec as u64)?;
    Ok(())
}

fn read_timespec(mem: &GuestMemory, addr: u64) -> Result<Timespec, Errno> {
    let sec = mem.read_u64(addr)? as i64;
    let nsec = mem.read_u64(addr + 8)? as i64;
    if sec < 0 || !(0..NSEC_PER_SEC).contains(&nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(Timespec {
        tv_sec: sec,
        tv_nsec: nsec as _,
    })
}

/// Implements clock_gettime(2).
fn sys_clock_gettime(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if let Some(who) = cpu_clock_of(p, a[0])? {
        // The process's CPU time, or what a thread spent while it ran.
        write_timespec(mem, a[1], timespec_of(cpu_clock_now(p, who)))?;
        return Ok(0);
    }
    let t = guest_clock(clock_of(p, a[0])?);
    write_timespec(mem, a[1], t)?;
    Ok(0)
}

/// A clock as the guest sees it: monotonic, realtime and boottime from the
/// time function the vDSO also reads ([`crate::clock`]), so both agree and
/// never go backwards; other clocks straight from the host.
fn guest_clock(id: ClockId) -> Timespec {
    match crate::clock::guest_ns(id) {
        Some(ns) => Timespec {
            tv_sec: (ns / NSEC_PER_SEC as u64) as i64,
            tv_nsec: (ns % NSEC_PER_SEC as u64) as _,
        },
        None => rustix::time::clock_gettime(id),
    }
}

/// Implements clock_settime(2) as for an unprivileged user: the time is
/// read and checked (EFAULT, EINVAL), then setting CLOCK_REALTIME needs
/// CAP_SYS_TIME (EPERM) and the other clocks cannot be set (EINVAL).
fn sys_clock_settime(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    clock_of(p, a[0])?;
    read_timespec(mem, a[1])?;
    const CLOCK_REALTIME: u32 = 0;
    if a[0] as u32 == CLOCK_REALTIME {
        Err(Errno::EPERM)
    } else {
        Err(Errno::EINVAL)
    }
}

/// Implements settimeofday(2) as for an unprivileged user: EPERM, after the
/// pointers and the time are checked (EFAULT, EINVAL).
fn sys_settimeofday(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[0] != 0 {
        let sec = mem.read_u64(a[0])? as i64;
        let usec = mem.read_u64(a[0] + 8)? as i64;
        if sec < 0 || !(0..1_000_000).contains(&usec) {
            return Err(Errno::EINVAL);
        }
    }
    if a[1] != 0 {
        mem.read(a[1], 8)?;
    }
    Err(Errno::EPERM)
}

/// Implements clock_getres(2).
fn sys_clock_getres(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let id = clock_of(p, a[0])?;
    if a[1] != 0 {
        let res = match id {
            ClockId::RealtimeCoarse | ClockId::MonotonicCoarse => 4_000_000,
            _ => 1,
        };
        write_timespec(
            mem,
            a[1],
            Timespec {
                tv_sec: 0,
                tv_nsec: res,
            },
        )?;
    }
    Ok(0)
}

/// Implements gettimeofday(2).
fn sys_gettimeofday(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let t = guest_clock(ClockId::Realtime);
    if a[0] != 0 {
        mem.write_u64(a[0], t.tv_sec as u64)?;
        mem.write_u64(a[0] + 8, (t.tv_nsec / 1000) as u64)?;
    }
    if a[1] != 0 {
        mem.write(a[1], &[0u8; 8])?; // struct timezone: UTC
    }
    Ok(0)
}

/// Implements time(2).
fn sys_time(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let t = guest_clock(ClockId::Realtime).tv_sec as u64;
    if a[0] != 0 {
        mem.write_u64(a[0], t)?;
    }
    Ok(t)
}

/// `now + d`, saturating far in the future instead of overflowing (a guest
/// may ask for any number of seconds).
pub fn after(now: std::time::Instant, d: std::time::Duration) -> std::time::Instant {
    const CENTURY: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 86_400);
    now.checked_add(d.min(CENTURY)).unwrap_or(now)
}

/// Writes the time left until `until` at the guest's `rem` (a sleep a
/// signal cut short, see [`block_thread`]).
pub fn write_time_left(mem: &mut GuestMemory, rem: u64, until: std::time::Instant) {
    let left = until.saturating_duration_since(std::time::Instant::now());
    // A `rem` the guest made unwritable meanwhile only loses it the answer.
    let _ = write_timespec(mem, rem, timespec_of(left));
}

/// With other threads, a sleeping thread lets them run instead of sleeping
/// the vCPU; a signal ends its sleep with EINTR and the time left at `rem`
/// (a guest address, 0 for none).
fn block_thread(p: &mut Process, d: std::time::Duration, rem: u64) -> SysResult {
    p.sched = Some(super::thread::Sched::Block(super::thread::Wait::Sleep {
        until: after(std::time::Instant::now(), d),
        rem,
    }));
    Ok(0)
}

fn sleep_relative(
    p: &mut Process,
    mem: &mut GuestMemory,
    req: Timespec,
    rem_ptr: u64,
) -> SysResult {
    if !p.threads.others.is_empty() {
        return block_thread(
            p,
            std::time::Duration::new(req.tv_sec as u64, req.tv_nsec as u32),
            rem_ptr,
        );
    }
    let r = sleep_for(p, SleepClock::Monotonic, req);
    slept(mem, r, rem_ptr)
}

/// How often a sleep looks for signals from the run's other processes: the
/// first process gets no periodic kick (see [`kick_matters`]), so a
/// SIGCHLD or kill from a child could not end its sleep before the time was
/// up (perl's `sleep` in a parent slept on through its child's signal).
const SIGNAL_CHECK: std::time::Duration = std::time::Duration::from_millis(10);

/// A host sleep on `clock` until `left()` (the time still to go) is zero,
/// ended early (Interrupted with the time left) by a kick that matters or by
/// a signal another process of the run sent meanwhile that has something to
/// do ([`sleep_ends`]). While other processes live, it sleeps in slices of
/// [`SIGNAL_CHECK`] and looks between them.
fn sleep_watching(
    p: &mut Process,
    clock: SleepClock,
    left: impl Fn() -> std::time::Duration,
) -> NanosleepRelativeResult {
    super::child::set_asleep(p, true);
    let r = sleep_watching_asleep(p, clock, left);
    super::child::set_asleep(p, false);
    r
}

/// [`sleep_watching`] while /proc shows the process sleeping.
fn sleep_watching_asleep(
    p: &mut Process,
    clock: SleepClock,
    left: impl Fn() -> std::time::Duration,
) -> NanosleepRelativeResult {
    // Decided once: a child that exits during the sleep still signals.
    let watch = super::child::others_alive(p);
    loop {
        let to_go = left();
        if to_go.is_zero() {
            return NanosleepRelativeResult::Ok;
        }
        if watch && super::child::signals_waiting(p) && sleep_ends(p) {
            return NanosleepRelativeResult::Interrupted(timespec_of(left()));
        }
        let slice = if watch {
            to_go.min(SIGNAL_CHECK)
        } else {
            to_go
        };
        match rustix::thread::clock_nanosleep_relative(clock, &timespec_of(slice)) {
            NanosleepRelativeResult::Interrupted(_) if kick_matters(p) => {
                if is_child(p) && !sleep_ends(p) {
                    continue;
                }
                return NanosleepRelativeResult::Interrupted(timespec_of(left()));
            }
            NanosleepRelativeResult::Err(e) => return NanosleepRelativeResult::Err(e),
            _ => {}
        }
    }
}

/// Takes the signals other processes sent (a stop stops the process here
/// until it is continued) and says whether they end the sleep: a handler is
/// to run, the process is ending, or a timer of its own is due. One with
/// nothing to do (ignored, as SIGCHLD is by default, or a stop and its
/// continue) lets the sleep go on, as Linux restarts it: a child's exit cut
/// a parent's `sleep` short with EINTR.
fn sleep_ends(p: &mut Process) -> bool {
    super::child::take_signals(p);
    p.pending_signal.is_some()
        || p.exit_status.is_some()
        || p.next_timer_due()
            .is_some_and(|t| t <= std::time::Instant::now())
}

/// Whether `p` is a child process of the run (not the first process).
fn is_child(p: &Process) -> bool {
    p.family.as_ref().is_some_and(|f| !f.is_first())
}

/// [`sleep_watching`] for `req`, measured on the monotonic clock.
fn sleep_for(p: &mut Process, clock: SleepClock, req: Timespec) -> NanosleepRelativeResult {
    let total = std::time::Duration::new(req.tv_sec as u64, req.tv_nsec as u32);
    let end = after(std::time::Instant::now(), total);
    sleep_watching(p, clock, || {
        end.saturating_duration_since(std::time::Instant::now())
    })
}

/// Whether a host sleep cut short by a kick of the vCPU thread ends the
/// guest's sleep (EINTR). A child process's thread is kicked every 10 ms,
/// so that one computing without system calls can still be killed; for its
/// sleep that means nothing unless something is due for the guest: a signal
/// from another process, the end of the run, or one of its own timers (its
/// sleeps ended after 10 ms with EINTR, and `alarm` then `sleep` in a child
/// never ran the handler). The first process has no tick: every kick
/// matters there (`--timeout`, a request's time limit).
fn kick_matters(p: &Process) -> bool {
    !is_child(p)
        || p.pending_signal.is_some()
        || super::child::signals_waiting(p)
        || p.next_timer_due()
            .is_some_and(|t| t <= std::time::Instant::now())
}

/// The result of a relative sleep: 0, or EINTR (the watchdog's kick) with the remaining time.
fn slept(mem: &mut GuestMemory, r: NanosleepRelativeResult, rem_ptr: u64) -> SysResult {
    match r {
        NanosleepRelativeResult::Ok => Ok(0),
        NanosleepRelativeResult::Interrupted(rem) => {
            if rem_ptr != 0 {
                write_timespec(mem, rem_ptr, rem)?;
            }
            Err(Errno::EINTR)
        }
        NanosleepRelativeResult::Err(e) => Err(e.into()),
    }
}

/// Implements nanosleep(2).
fn sys_nanosleep(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let req = read_timespec(mem, a[0])?;
    if a[1] != 0 {
        mem.read(a[1], 16)?;
    }
    sleep_relative(p, mem, req, a[1])
}

/// Implements clock_nanosleep(2). As Linux: the clocks without a sleep
/// (CLOCK_THREAD_CPUTIME_ID, MONOTONIC_RAW and the coarse ones) are
/// EOPNOTSUPP before the times are read, and CLOCK_TAI sleeps (it was
/// EINVAL for both: LTP's clock_nanosleep01).
fn sys_clock_nanosleep(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [id, flags, req_ptr, rem_ptr, ..] = *a;
    if matches!(id as u32 as i32, 3..=6) {
        return Err(Errno::EOPNOTSUPP);
    }
    let id = match clock(id)? {
        ClockId::Realtime => SleepClock::Realtime,
        ClockId::Monotonic => SleepClock::Monotonic,
        ClockId::Boottime => SleepClock::Boottime,
        // A relative sleep is as long on every clock; an absolute one
        // reads CLOCK_TAI itself (below).
        ClockId::Tai => SleepClock::Realtime,
        // CLOCK_PROCESS_CPUTIME_ID: a sleep on CPU time is not kept.
        _ => return Err(Errno::EINVAL),
    };
    let req = read_timespec(mem, req_ptr)?;
    if !p.threads.others.is_empty() {
        let d = std::time::Duration::new(req.tv_sec as u64, req.tv_nsec as u32);
        let d = if flags & TIMER_ABSTIME != 0 {
            let now = rustix::time::clock_gettime(clock(a[0])?);
            d.saturating_sub(std::time::Duration::new(
                now.tv_sec as u64,
                now.tv_nsec as u32,
            ))
        } else {
            d
        };
        // An absolute sleep has no time left to tell.
        let rem = if flags & TIMER_ABSTIME != 0 {
            0
        } else {
            rem_ptr
        };
        return block_thread(p, d, rem);
    }
    if flags & TIMER_ABSTIME != 0 {
        // Until `req` on the clock itself: a clock set meanwhile is seen at
        // the next slice.
        let clock_id = clock(a[0])?;
        let until = std::time::Duration::new(req.tv_sec as u64, req.tv_nsec as u32);
        let to_go = || {
            let now = rustix::time::clock_gettime(clock_id);
            until.saturating_sub(std::time::Duration::new(
                now.tv_sec as u64,
                now.tv_nsec as u32,
            ))
        };
        return match sleep_watching(p, id, to_go) {
            NanosleepRelativeResult::Ok => Ok(0),
            NanosleepRelativeResult::Interrupted(_) => Err(Errno::EINTR),
            NanosleepRelativeResult::Err(e) => Err(e.into()),
        };
    }
    if rem_ptr != 0 {
        mem.read(rem_ptr, 16)?;
    }
    let r = sleep_for(p, id, req);
    slept(mem, r, rem_ptr)
}

const ITIMER_REAL: u64 = 0;
const ITIMER_PROF: u64 = 2;

fn write_itimerval(mem: &mut GuestMemory, addr: u64, p: &Process, which: u64) -> Result<(), Errno> {
    let (left, period) = match which {
        ITIMER_REAL => p.itimer.map(|(next, period)| {
            (
                next.saturating_duration_since(std::time::Instant::now()),
                period,
            )
        }),
        _ => p.cpu_itimers[which as usize - 1].map(|(at, period)| {
            // As Linux: an armed timer never reads zero.
            let left = at.saturating_sub(cpu_time());
            (left.max(std::time::Duration::from_micros(1)), period)
        }),
    }
    .unwrap_or_default();
    let mut b = [0u8; 32];
    for (i, d) in [period, left].iter().enumerate() {
        b[i * 16..i * 16 + 8].copy_from_slice(&d.as_secs().to_le_bytes());
        b[i * 16 + 8..i * 16 + 16].copy_from_slice(&u64::from(d.subsec_micros()).to_le_bytes());
    }
    mem.write(addr, &b)?;
    Ok(())
}

fn read_timeval(mem: &GuestMemory, addr: u64) -> Result<std::time::Duration, Errno> {
    let s = mem.read_u64(addr)? as i64;
    let us = mem.read_u64(addr + 8)? as i64;
    if s < 0 || !(0..1_000_000).contains(&us) {
        return Err(Errno::EINVAL);
    }
    Ok(std::time::Duration::new(s as u64, us as u32 * 1000))
}

/// Implements getitimer(2).
fn sys_getitimer(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    // `which` is an int.
    let which = u64::from(a[0] as u32);
    if which > ITIMER_PROF {
        return Err(Errno::EINVAL);
    }
    write_itimerval(mem, a[1], p, which)?;
    Ok(0)
}

/// Implements setitimer(2): ITIMER_REAL (SIGALRM) on the wall clock,
/// ITIMER_VIRTUAL (SIGVTALRM) and ITIMER_PROF (SIGPROF) on the process's
/// CPU time, which here is one clock for both (the vCPU thread's: the
/// guest's own time and the host's work for it alike).
fn sys_setitimer(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let which = u64::from(a[0] as u32);
    if which > ITIMER_PROF {
        return Err(Errno::EINVAL);
    }
    let new = if a[1] != 0 {
        Some((read_timeval(mem, a[1])?, read_timeval(mem, a[1] + 16)?))
    } else {
        None
    };
    if a[2] != 0 {
        write_itimerval(mem, a[2], p, which)?;
    }
    if let Some((period, value)) = new {
        if which == ITIMER_REAL {
            p.itimer =
                (!value.is_zero()).then(|| (after(std::time::Instant::now(), value), period));
        } else {
            p.cpu_itimers[which as usize - 1] =
                (!value.is_zero()).then(|| (cpu_time().saturating_add(value), period));
        }
    }
    Ok(0)
}

/// Implements alarm(2).
fn sys_alarm(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let now = std::time::Instant::now();
    let left = p.itimer.map_or(0, |(next, _)| {
        let d = next.saturating_duration_since(now);
        d.as_secs() + u64::from(d.subsec_nanos() > 0)
    });
    let secs = a[0] as u32;
    p.itimer = (secs != 0).then(|| {
        (
            now + std::time::Duration::from_secs(u64::from(secs)),
            std::time::Duration::ZERO,
        )
    });
    Ok(left)
}

/// CPU time of the vCPU thread (the guest's user + system time). One
/// thread runs all of a process's threads, so this is the process's.
pub(crate) fn cpu_time() -> std::time::Duration {
    let t = rustix::time::clock_gettime(ClockId::ThreadCPUTime);
    std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Implements times(2): guest CPU time as user time, its waited-for
/// children's as theirs, in clock ticks (100 Hz).
fn sys_times(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let ticks = |d: std::time::Duration| (d.as_millis() / 10) as u64;
    if a[0] != 0 {
        let mut b = [0u8; 32];
        b[0..8].copy_from_slice(&ticks(cpu_time()).to_le_bytes());
        b[16..24].copy_from_slice(&ticks(p.children_cpu).to_le_bytes()); // tms_cutime
        mem.write(a[0], &b)?;
    }
    Ok(ticks(p.started.elapsed()) + 1)
}

/// Implements getrusage(2): CPU time and peak memory of the guest, or the
/// CPU time of the children it waited for (RUSAGE_CHILDREN).
fn sys_getrusage(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    // `who` is an int: RUSAGE_CHILDREN (-1) may come without sign extension.
    let who = i64::from(a[0] as i32);
    if !(-1..=1).contains(&who) {
        return Err(Errno::EINVAL);
    }
    let b = if who == -1 {
        rusage(p.children_cpu)
    } else {
        let mut b = rusage(cpu_time());
        b[32..40].copy_from_slice(&(mem.committed() >> 10).to_le_bytes()); // ru_maxrss, KiB
        b
    };
    mem.write(a[1], &b)?;
    Ok(0)
}

/// A `struct rusage` holding `user` as its user CPU time (ru_utime), the
/// rest zero: what getrusage and the waits report.
pub(crate) fn rusage(user: std::time::Duration) -> [u8; 144] {
    let mut b = [0u8; 144];
    b[0..8].copy_from_slice(&user.as_secs().to_le_bytes());
    b[8..16].copy_from_slice(&u64::from(user.subsec_micros()).to_le_bytes());
    b
}

/// POSIX per-process timers (timer_create and friends).
pub mod posix;

/// The CPU time a CPU clock shows now: the process's (`who` 0) or a thread's.
fn cpu_clock_now(p: &Process, who: u64) -> std::time::Duration {
    let now = cpu_time();
    if who == 0 {
        now
    } else {
        p.thread_cpu.of(who, p.tid, now)
    }
}

/// The CPU clock `id` names, if it is one: 0 for the process's, else a
/// thread's tid (CLOCK_THREAD_CPUTIME_ID is the caller's; a clock from
/// clock_getcpuclockid or pthread_getcpuclockid names its owner, which
/// must be this process or one of its threads: EINVAL otherwise).
fn cpu_clock_of(p: &Process, id: u64) -> Result<Option<u64>, Errno> {
    let (thread, who) = match id as u32 as i32 {
        2 => return Ok(Some(0)),
        3 => return Ok(Some(p.tid)),
        _ => match named_cpu_clock(id) {
            Some(named) => named,
            None => return Ok(None),
        },
    };
    let ours = |tid: u64| tid == p.tid || p.threads.others.iter().any(|t| t.tid == tid);
    match (thread, who) {
        (true, 0) => Ok(Some(p.tid)),
        (true, tid) if ours(tid) => Ok(Some(tid)),
        (false, pid) if pid == 0 || pid == super::child::pid_of(p) => Ok(Some(0)),
        _ => Err(Errno::EINVAL),
    }
}

/// Most timers one process may create.
const MAX_POSIX_TIMERS: usize = 1024;
const SIGEV_SIGNAL: u32 = 0;
const SIGEV_NONE: u32 = 1;
const SIGEV_THREAD_ID: u32 = 4;
/// `struct sigevent` size.
const SIGEVENT_SIZE: u64 = 64;
const SIGALRM_NR: u64 = 14;

impl Process {
    /// The next moment a timer (alarm, setitimer or a POSIX timer) expires.
    pub fn next_timer_due(&self) -> Option<std::time::Instant> {
        let posix = self.posix_timers.next_due();
        let wall = match (self.itimer.map(|(next, _)| next), posix) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // A CPU-time timer cannot expire sooner than its CPU time left from
        // now: look then (and again then, if the process waited meanwhile).
        let limit = self.rlimits[super::process::RLIMIT_CPU as usize].map(|(soft, hard)| {
            let next = if self.xcpu_sent >= soft {
                self.xcpu_sent + 1
            } else {
                soft
            };
            std::time::Duration::from_secs(next.min(hard))
        });
        let cpu = self
            .cpu_itimers
            .iter()
            .flatten()
            .map(|&(at, _)| at)
            .chain(limit)
            .min();
        let now = std::time::Instant::now();
        let cpu = cpu.map(|at| after(now, at.saturating_sub(cpu_time())));
        // A CPU-time POSIX timer of the process or of the running thread
        // (another thread's clock stands still until it runs, and is looked
        // at again then).
        let posix_cpu = self
            .posix_timers
            .map
            .values()
            .filter_map(|t| match t.cpu {
                Some((who, Some(at))) if who == 0 || who == self.tid => {
                    Some(after(now, at.saturating_sub(cpu_clock_now(self, who))))
                }
                _ => None,
            })
            .min();
        [wall, cpu, posix_cpu].into_iter().flatten().min()
    }
}

/// How many times a timer due `late` ago has expired: once, plus every
/// `interval` (zero: a one-shot) since.
fn expiries(late: std::time::Duration, interval: std::time::Duration) -> u32 {
    if interval.is_zero() {
        return 1;
    }
    u32::try_from((late.as_nanos() / interval.as_nanos()).saturating_add(1)).unwrap_or(u32::MAX)
}

/// Fires the POSIX timers that are due: their signal is sent (expiries
/// missed meanwhile become the overrun count). Returns whether one fired.
pub fn fire_posix_timers(p: &mut Process) -> bool {
    let now = std::time::Instant::now();
    // CPU clocks now, of the process and of each thread a timer follows.
    let cpu_now: Vec<(u64, std::time::Duration)> = p
        .posix_timers
        .map
        .values()
        .filter_map(|t| t.cpu.filter(|(_, at)| at.is_some()).map(|(who, _)| who))
        .collect::<std::collections::BTreeSet<u64>>()
        .into_iter()
        .map(|who| (who, cpu_clock_now(p, who)))
        .collect();
    let mut sends = Vec::new();
    for (&id, t) in p.posix_timers.map.iter_mut() {
        let n = if let Some((who, at)) = &mut t.cpu {
            let Some(next) = *at else { continue };
            let clock = cpu_now
                .iter()
                .find(|(w, _)| w == who)
                .map_or(std::time::Duration::ZERO, |(_, c)| *c);
            if clock < next {
                continue;
            }
            let n = expiries(clock - next, t.interval);
            *at =
                (!t.interval.is_zero()).then(|| next.saturating_add(t.interval.saturating_mul(n)));
            u64::from(n)
        } else {
            let Some(next) = t.next else { continue };
            if now < next {
                continue;
            }
            let n = expiries(now - next, t.interval);
            t.next = (!t.interval.is_zero()).then(|| after(next, t.interval.saturating_mul(n)));
            u64::from(n)
        };
        t.overrun = n - 1;
        if t.notify != posix::Notify::None {
            sends.push((t.notify, id, t.overrun, t.value));
        }
    }
    let fired = !sends.is_empty();
    for (n, id, overrun, value) in sends {
        if p.sigqueue.add_overrun(id, overrun + 1) {
            // Its last signal is still queued: one per timer at a time.
            continue;
        }
        let info = |sig| SigInfo::timer(sig, id, overrun, value);
        let _ = match n {
            posix::Notify::None => continue,
            posix::Notify::Signal(sig) => {
                let r = super::signal::send(p, info(sig));
                if let Some(bit) = sig.checked_sub(1).filter(|b| *b < 64) {
                    p.timer_blocked |= p.sigqueue.bits() & p.sigmask & (1 << bit);
                }
                r
            }
            posix::Notify::Thread(tid, sig) => super::signal::send_to_thread(p, tid, info(sig)),
        };
    }
    fired
}

/// Implements timer_create(2).
fn sys_timer_create(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [clockid, sevp, idp, ..] = *a;
    // REALTIME, MONOTONIC, BOOTTIME, and the CPU clocks of this process and
    // its threads (counting CPU time: a thread's only while it runs).
    let cpu = cpu_clock_of(p, clockid)?;
    let clockid = clockid as u32 as u64;
    if cpu.is_none() && !matches!(clockid, 0 | 1 | 7) {
        return Err(if matches!(clockid, 8 | 9) {
            Errno::EPERM
        } else {
            Errno::EINVAL
        });
    }
    let next_id = (0..MAX_POSIX_TIMERS as i32)
        .find(|i| !p.posix_timers.map.contains_key(i))
        .ok_or(Errno::EAGAIN)?;
    let mut value = next_id as u64;
    let notify = if sevp == 0 {
        posix::Notify::Signal(SIGALRM_NR)
    } else {
        let b = mem.read(sevp, SIGEVENT_SIZE)?;
        value = u64::from_le_bytes(b[0..8].try_into().unwrap_or([0; 8]));
        let signo = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as u64;
        let how = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        let tid = u32::from_le_bytes([b[16], b[17], b[18], b[19]]) as u64;
        let valid_sig = (1..=64).contains(&signo);
        match how {
            SIGEV_NONE => posix::Notify::None,
            SIGEV_SIGNAL if valid_sig => posix::Notify::Signal(signo),
            SIGEV_THREAD_ID if valid_sig => {
                if tid != p.tid && !p.threads.others.iter().any(|t| t.tid == tid) {
                    return Err(Errno::EINVAL);
                }
                posix::Notify::Thread(tid, signo)
            }
            _ => return Err(Errno::EINVAL),
        }
    };
    mem.write_u32(idp, next_id as u32)?;
    p.posix_timers.map.insert(
        next_id,
        posix::Timer {
            clock: clockid,
            notify,
            next: None,
            interval: std::time::Duration::ZERO,
            overrun: 0,
            value,
            cpu: cpu.map(|who| (who, None)),
        },
    );
    Ok(0)
}

fn posix_timer(p: &mut Process, id: u64) -> Result<&mut posix::Timer, Errno> {
    // timer_t is an int: the upper half of the register is ignored.
    p.posix_timers
        .map
        .get_mut(&(id as u32 as i32))
        .ok_or(Errno::EINVAL)
}

fn duration(t: Timespec) -> std::time::Duration {
    std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Writes `struct itimerspec` {interval, value} for a timer.
fn write_itimerspec(
    mem: &mut GuestMemory,
    addr: u64,
    t: &posix::Timer,
    p: &Process,
    now: std::time::Instant,
) -> Result<(), Errno> {
    let left = match t.cpu {
        Some((who, at)) => at.map(|at| at.saturating_sub(cpu_clock_now(p, who))),
        None => t.next.map(|n| n.saturating_duration_since(now)),
    }
    .map_or(std::time::Duration::ZERO, |d| {
        d.max(std::time::Duration::from_nanos(1))
    });
    let mut b = [0u8; 32];
    for (i, d) in [t.interval, left].iter().enumerate() {
        b[i * 16..i * 16 + 8].copy_from_slice(&d.as_secs().to_le_bytes());
        b[i * 16 + 8..i * 16 + 16].copy_from_slice(&u64::from(d.subsec_nanos()).to_le_bytes());
    }
    mem.write(addr, &b)?;
    Ok(())
}

/// Implements timer_settime(2).
fn sys_timer_settime(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [id, flags, new, old, ..] = *a;
    posix_timer(p, id)?;
    if flags as u32 & !(TIMER_ABSTIME as u32) != 0 {
        return Err(Errno::EINVAL);
    }
    let interval = duration(read_timespec(mem, new)?);
    let value = read_timespec(mem, new + 16)?;
    let now = std::time::Instant::now();
    if old != 0 {
        let t = posix_timer(p, id)?.clone();
        write_itimerspec(mem, old, &t, p, now)?;
    }
    let cpu = posix_timer(p, id)?
        .cpu
        .map(|(who, _)| (who, cpu_clock_now(p, who)));
    let t = posix_timer(p, id)?;
    let disarm = value.tv_sec == 0 && value.tv_nsec == 0;
    let absolute = flags & TIMER_ABSTIME != 0;
    let armed = if let Some((who, clock_now)) = cpu {
        // On CPU time: the expiry is a reading of the timer's own clock.
        let first = match (disarm, absolute) {
            (true, _) => None,
            (false, true) => Some(duration(value)),
            (false, false) => Some(clock_now.saturating_add(duration(value))),
        };
        t.cpu = Some((who, first));
        t.next = None;
        first.is_some()
    } else {
        t.next = match (disarm, absolute) {
            (true, _) => None,
            (false, true) => {
                let cur = duration(rustix::time::clock_gettime(clock(t.clock)?));
                Some(after(now, duration(value).saturating_sub(cur)))
            }
            (false, false) => Some(after(now, duration(value))),
        };
        t.next.is_some()
    };
    t.interval = if armed {
        interval
    } else {
        std::time::Duration::ZERO
    };
    t.overrun = 0;
    Ok(0)
}

/// Implements timer_gettime(2).
fn sys_timer_gettime(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let t = posix_timer(p, a[0])?.clone();
    write_itimerspec(mem, a[1], &t, p, std::time::Instant::now())?;
    Ok(0)
}

/// Implements timer_getoverrun(2).
fn sys_timer_getoverrun(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    Ok(posix_timer(p, a[0])?.overrun.min(i32::MAX as u64))
}

/// Implements timer_delete(2).
fn sys_timer_delete(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    posix_timer(p, a[0])?;
    p.posix_timers.map.remove(&(a[0] as u32 as i32));
    Ok(0)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 222, name: "timer_create", handler: sys_timer_create, support: Support::Partial,
        note: "SIGEV_SIGNAL, SIGEV_NONE, SIGEV_THREAD_ID; CPU clocks (process, thread, by pid/tid) count CPU time, a thread's only while it runs" },
    SyscallEntry { nr: 223, name: "timer_settime", handler: sys_timer_settime, support: Support::Partial,
        note: "signals are delivered at the thread's next syscall or preemption tick" },
    SyscallEntry { nr: 224, name: "timer_gettime", handler: sys_timer_gettime, support: Support::Full, note: "" },
    SyscallEntry { nr: 225, name: "timer_getoverrun", handler: sys_timer_getoverrun, support: Support::Full, note: "" },
    SyscallEntry { nr: 226, name: "timer_delete", handler: sys_timer_delete, support: Support::Full, note: "" },
    SyscallEntry { nr: 98, name: "getrusage", handler: sys_getrusage, support: Support::Partial,
        note: "CPU time and peak mapped memory; other fields 0" },
    SyscallEntry { nr: 100, name: "times", handler: sys_times, support: Support::Partial,
        note: "guest CPU time reported as user time, its waited-for children's as theirs" },
    SyscallEntry { nr: 36, name: "getitimer", handler: sys_getitimer, support: Support::Full, note: "" },
    SyscallEntry { nr: 37, name: "alarm", handler: sys_alarm, support: Support::Full, note: "" },
    SyscallEntry { nr: 38, name: "setitimer", handler: sys_setitimer, support: Support::Partial,
        note: "ITIMER_VIRTUAL and ITIMER_PROF both count the process's CPU time; signals are delivered at the thread's next syscall or preemption tick" },
    SyscallEntry { nr: 35, name: "nanosleep", handler: sys_nanosleep, support: Support::Full, note: "" },
    SyscallEntry { nr: 96, name: "gettimeofday", handler: sys_gettimeofday, support: Support::Full, note: "" },
    SyscallEntry { nr: 201, name: "time", handler: sys_time, support: Support::Full, note: "" },
    SyscallEntry { nr: 228, name: "clock_gettime", handler: sys_clock_gettime, support: Support::Partial,
        note: "CPU-time clocks (also by pid or tid, for this process and its threads) report the vCPU thread's CPU time" },
    SyscallEntry { nr: 227, name: "clock_settime", handler: sys_clock_settime, support: Support::Full,
        note: "as for an unprivileged user: EPERM for CLOCK_REALTIME, EINVAL for the others" },
    SyscallEntry { nr: 164, name: "settimeofday", handler: sys_settimeofday, support: Support::Full,
        note: "as for an unprivileged user: EPERM" },
    SyscallEntry { nr: 229, name: "clock_getres", handler: sys_clock_getres, support: Support::Full, note: "" },
    SyscallEntry { nr: 230, name: "clock_nanosleep", handler: sys_clock_nanosleep, support: Support::Partial,
        note: "REALTIME, MONOTONIC, BOOTTIME (and their ALARM variants) and TAI; EOPNOTSUPP for the clocks Linux cannot sleep on; EINVAL for CPU-time clocks" },
];

#[cfg(test)]
mod tests;
