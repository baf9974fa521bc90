//! Clocks and sleeping. Clocks read the host's; sleeps really sleep, but a
//! sleep interrupted by the watchdog returns EINTR so a timeout is honoured.

use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use rustix::thread::{ClockId as SleepClock, NanosleepRelativeResult};
use rustix::time::{ClockId, Timespec};

const NSEC_PER_SEC: i64 = 1_000_000_000;
const TIMER_ABSTIME: u64 = 1;

fn clock(id: u64) -> Result<ClockId, Errno> {
    Ok(match id {
        0 => ClockId::Realtime,
        1 => ClockId::Monotonic,
        // CPU time of the guest is CPU time of the vCPU thread.
        2 | 3 => ClockId::ThreadCPUTime,
        4 => ClockId::MonotonicRaw,
        5 => ClockId::RealtimeCoarse,
        6 => ClockId::MonotonicCoarse,
        7 => ClockId::Boottime,
        _ => return Err(Errno::EINVAL),
    })
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
fn sys_clock_gettime(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let t = rustix::time::clock_gettime(clock(a[0])?);
    write_timespec(mem, a[1], t)?;
    Ok(0)
}

/// Implements clock_getres(2).
fn sys_clock_getres(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let id = clock(a[0])?;
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
    let t = rustix::time::clock_gettime(ClockId::Realtime);
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
    let t = rustix::time::clock_gettime(ClockId::Realtime).tv_sec as u64;
    if a[0] != 0 {
        mem.write_u64(a[0], t)?;
    }
    Ok(t)
}

/// With other threads, a sleeping thread lets them run instead of sleeping the vCPU.
fn block_thread(p: &mut Process, d: std::time::Duration) -> SysResult {
    p.sched = Some(super::thread::Sched::Block(super::thread::Wait::Sleep(
        std::time::Instant::now() + d,
    )));
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
        );
    }
    slept(mem, rustix::thread::nanosleep(&req), rem_ptr)
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

/// Implements clock_nanosleep(2).
fn sys_clock_nanosleep(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [id, flags, req_ptr, rem_ptr, ..] = *a;
    let id = match clock(id)? {
        ClockId::Realtime => SleepClock::Realtime,
        ClockId::Monotonic => SleepClock::Monotonic,
        ClockId::Boottime => SleepClock::Boottime,
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
        return block_thread(p, d);
    }
    if flags & TIMER_ABSTIME != 0 {
        return match rustix::thread::clock_nanosleep_absolute(id, &req) {
            Ok(()) => Ok(0),
            Err(e) => Err(e.into()),
        };
    }
    if rem_ptr != 0 {
        mem.read(rem_ptr, 16)?;
    }
    slept(
        mem,
        rustix::thread::clock_nanosleep_relative(id, &req),
        rem_ptr,
    )
}

const ITIMER_REAL: u64 = 0;

fn write_itimerval(mem: &mut GuestMemory, addr: u64, p: &Process) -> Result<(), Errno> {
    let (left, period) = match p.itimer {
        Some((next, period)) => (
            next.saturating_duration_since(std::time::Instant::now()),
            period,
        ),
        None => (std::time::Duration::ZERO, std::time::Duration::ZERO),
    };
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

/// Implements getitimer(2) (ITIMER_REAL).
fn sys_getitimer(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[0] != ITIMER_REAL {
        return Err(Errno::EINVAL);
    }
    write_itimerval(mem, a[1], p)?;
    Ok(0)
}

/// Implements setitimer(2) (ITIMER_REAL: SIGALRM when it expires).
fn sys_setitimer(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[0] != ITIMER_REAL {
        return Err(Errno::EINVAL);
    }
    let new = if a[1] != 0 {
        Some((read_timeval(mem, a[1])?, read_timeval(mem, a[1] + 16)?))
    } else {
        None
    };
    if a[2] != 0 {
        write_itimerval(mem, a[2], p)?;
    }
    if let Some((period, value)) = new {
        p.itimer = (!value.is_zero()).then(|| (std::time::Instant::now() + value, period));
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

/// CPU time of the vCPU thread (the guest's user + system time).
fn cpu_time() -> std::time::Duration {
    let t = rustix::time::clock_gettime(ClockId::ThreadCPUTime);
    std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Implements times(2): guest CPU time as user time, in clock ticks (100 Hz).
fn sys_times(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let ticks = |d: std::time::Duration| (d.as_millis() / 10) as u64;
    if a[0] != 0 {
        let mut b = [0u8; 32];
        b[0..8].copy_from_slice(&ticks(cpu_time()).to_le_bytes());
        mem.write(a[0], &b)?;
    }
    Ok(ticks(p.started.elapsed()) + 1)
}

/// Implements getrusage(2): CPU time and peak memory of the guest.
fn sys_getrusage(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let who = a[0] as i64;
    if !(-1..=1).contains(&who) {
        return Err(Errno::EINVAL);
    }
    let mut b = [0u8; 144];
    if who != -1 {
        let t = cpu_time();
        b[0..8].copy_from_slice(&t.as_secs().to_le_bytes());
        b[8..16].copy_from_slice(&u64::from(t.subsec_micros()).to_le_bytes());
        b[32..40].copy_from_slice(&(mem.committed() >> 10).to_le_bytes()); // ru_maxrss, KiB
    }
    mem.write(a[1], &b)?;
    Ok(0)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 98, name: "getrusage", handler: sys_getrusage, support: Support::Partial,
        note: "CPU time and peak mapped memory; other fields 0" },
    SyscallEntry { nr: 100, name: "times", handler: sys_times, support: Support::Partial,
        note: "guest CPU time reported as user time" },
    SyscallEntry { nr: 36, name: "getitimer", handler: sys_getitimer, support: Support::Partial,
        note: "ITIMER_REAL only" },
    SyscallEntry { nr: 37, name: "alarm", handler: sys_alarm, support: Support::Full, note: "" },
    SyscallEntry { nr: 38, name: "setitimer", handler: sys_setitimer, support: Support::Partial,
        note: "ITIMER_REAL only; SIGALRM is delivered at the thread's next syscall or preemption tick" },
    SyscallEntry { nr: 35, name: "nanosleep", handler: sys_nanosleep, support: Support::Full, note: "" },
    SyscallEntry { nr: 96, name: "gettimeofday", handler: sys_gettimeofday, support: Support::Full, note: "" },
    SyscallEntry { nr: 201, name: "time", handler: sys_time, support: Support::Full, note: "" },
    SyscallEntry { nr: 228, name: "clock_gettime", handler: sys_clock_gettime, support: Support::Partial,
        note: "CPU-time clocks report the vCPU thread's CPU time; per-process/thread clock ids are refused" },
    SyscallEntry { nr: 229, name: "clock_getres", handler: sys_clock_getres, support: Support::Full, note: "" },
    SyscallEntry { nr: 230, name: "clock_nanosleep", handler: sys_clock_nanosleep, support: Support::Partial,
        note: "REALTIME, MONOTONIC and BOOTTIME clocks" },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_rusage_write_their_structs() {
        let (mut p, mut m, buf) = crate::linux::test_process();
        m.write(buf, &[0xff; 144]).unwrap();
        assert!(sys_times(&mut p, &mut m, &[buf, 0, 0, 0, 0, 0]).unwrap() > 0);
        assert_eq!(m.read_u64(buf + 8).unwrap(), 0, "system time");
        assert_eq!(
            sys_times(&mut p, &mut m, &[0, 0, 0, 0, 0, 0]).map(|_| ()),
            Ok(())
        );
        assert_eq!(sys_getrusage(&mut p, &mut m, &[0, buf, 0, 0, 0, 0]), Ok(0));
        assert_eq!(
            sys_getrusage(&mut p, &mut m, &[7, buf, 0, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            sys_getrusage(&mut p, &mut m, &[0, 0, 0, 0, 0, 0]),
            Err(Errno::EFAULT)
        );
    }
}
