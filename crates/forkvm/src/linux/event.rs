//! Event loops: eventfd, timerfd and epoll (select is with poll), so runtimes with an
//! event loop (Go's netpoller, tokio, libuv) start and wait as they would
//! on Linux.
//!
//! All three are in-process objects behind ordinary descriptors. A wait that
//! finds nothing ready blocks the calling thread (see
//! [`super::thread::wait`]), so other guest threads run meanwhile; a timerfd
//! becomes readable by the passage of time alone.

use super::fdtable::{lock, FileKind, OpenFile};
use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const EFD_SEMAPHORE: u64 = 1;
const TFD_TIMER_ABSTIME: u64 = 1;
const O_NONBLOCK: u64 = 0o4000;
const O_CLOEXEC: u64 = 0o2000000;

/// An in-process event object behind a descriptor.
#[derive(Debug, Clone)]
pub enum EventObj {
    /// eventfd(2): a counter.
    EventFd {
        /// The counter.
        count: u64,
        /// EFD_SEMAPHORE: reads take 1.
        semaphore: bool,
    },
    /// timerfd_create(2).
    TimerFd(Timer),
    /// epoll_create1(2): the interest list, by fd.
    Epoll(BTreeMap<i32, super::epoll::Interest>),
    /// signalfd(2): the signals it reads (see [`super::signalfd`]).
    SignalFd {
        /// Bit n-1 for signal n.
        mask: u64,
    },
    /// pidfd_open(2): a process (see [`super::pidfd`]).
    Pidfd(super::pidfd::PidFd),
    /// inotify_init1(2): a host instance (see [`super::inotify`]).
    Inotify(super::inotify::Inotify),
}

/// A timerfd's state.
#[derive(Debug, Clone, Default)]
pub struct Timer {
    /// The clock (CLOCK_REALTIME, MONOTONIC or BOOTTIME), for gettime.
    pub clock: u64,
    /// Next expiry, if armed.
    pub next: Option<Instant>,
    /// Period (zero: one shot).
    pub interval: Duration,
    /// Expirations not yet read.
    pub expired: u64,
}

impl Timer {
    /// Counts the expirations up to now.
    fn update(&mut self, now: Instant) {
        let Some(next) = self.next else { return };
        if now < next {
            return;
        }
        if self.interval.is_zero() {
            self.expired += 1;
            self.next = None;
        } else {
            let n = (now - next).as_nanos() / self.interval.as_nanos() + 1;
            self.expired = self.expired.saturating_add(n as u64);
            let n32 = u32::try_from(n).unwrap_or(u32::MAX);
            self.next = Some(super::time::after(next, self.interval.saturating_mul(n32)));
        }
    }
}

/// poll(2) bits of an event object (POLLIN = 1, POLLOUT = 4), while the
/// process has signals `pending` (bit n-1 for signal n: for a signalfd).
pub fn readiness(obj: &mut EventObj, now: Instant, pending: u64) -> i16 {
    match obj {
        EventObj::EventFd { count, .. } => {
            let mut r = 0;
            if *count > 0 {
                r |= 1;
            }
            if *count < u64::MAX - 1 {
                r |= 4;
            }
            r
        }
        EventObj::TimerFd(t) => {
            t.update(now);
            if t.expired > 0 {
                1
            } else {
                0
            }
        }
        EventObj::SignalFd { mask } => super::signalfd::readiness(*mask, pending),
        EventObj::Pidfd(fd) => super::pidfd::readiness(fd),
        EventObj::Inotify(i) => super::inotify::readiness(i),
        // Nested epoll readiness is not tracked.
        EventObj::Epoll(_) => 0,
    }
}

/// The next moment an event object becomes ready by itself: a timerfd's
/// expiry, or for a signalfd the process's next timer (`timers`), whose
/// signal it may read.
pub(super) fn next_change(obj: &EventObj, timers: Option<Instant>) -> Option<Instant> {
    match obj {
        EventObj::TimerFd(t) => t.next,
        EventObj::SignalFd { .. } => timers,
        _ => None,
    }
}

/// read(2) on an event object: Ok(n) or EAGAIN when nothing is there yet.
pub fn read(obj: &mut EventObj, buf: &mut [u8]) -> Result<usize, Errno> {
    if let EventObj::Inotify(i) = obj {
        return super::inotify::read(i, buf);
    }
    if buf.len() < 8 {
        return Err(Errno::EINVAL);
    }
    let v = match obj {
        EventObj::EventFd { count, semaphore } => {
            if *count == 0 {
                return Err(Errno::EAGAIN);
            }
            if *semaphore {
                *count -= 1;
                1
            } else {
                std::mem::take(count)
            }
        }
        EventObj::TimerFd(t) => {
            t.update(Instant::now());
            if t.expired == 0 {
                return Err(Errno::EAGAIN);
            }
            std::mem::take(&mut t.expired)
        }
        // A signalfd is read with the process (`signalfd::read`): not vectored.
        EventObj::Epoll(_)
        | EventObj::SignalFd { .. }
        | EventObj::Pidfd(_)
        | EventObj::Inotify(_) => return Err(Errno::EINVAL),
    };
    buf[..8].copy_from_slice(&v.to_le_bytes());
    Ok(8)
}

/// write(2) on an event object.
pub fn write(obj: &mut EventObj, buf: &[u8]) -> Result<usize, Errno> {
    match obj {
        EventObj::EventFd { count, .. } => {
            let b: [u8; 8] = buf
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .ok_or(Errno::EINVAL)?;
            let v = u64::from_le_bytes(b);
            if v == u64::MAX {
                return Err(Errno::EINVAL);
            }
            if count.checked_add(v).is_none_or(|c| c > u64::MAX - 1) {
                return Err(Errno::EAGAIN);
            }
            *count += v;
            Ok(8)
        }
        _ => Err(Errno::EINVAL),
    }
}

pub(super) fn new_fd(p: &mut Process, obj: EventObj, flags: u64) -> SysResult {
    let mut fl = super::fdtable::oflags::O_RDWR;
    if flags & O_NONBLOCK != 0 {
        fl |= super::fdtable::oflags::O_NONBLOCK;
    }
    let fd = p.fds.insert(
        OpenFile::new(FileKind::Event(obj), fl),
        flags & O_CLOEXEC != 0,
    )?;
    Ok(fd as u64)
}

/// Implements eventfd2(2).
pub(super) fn sys_eventfd2(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let [initval, flags, ..] = *a;
    if flags & !(EFD_SEMAPHORE | O_NONBLOCK | O_CLOEXEC) != 0 || initval > u64::from(u32::MAX) {
        return Err(Errno::EINVAL);
    }
    new_fd(
        p,
        EventObj::EventFd {
            count: initval,
            semaphore: flags & EFD_SEMAPHORE != 0,
        },
        flags,
    )
}

/// Implements eventfd(2).
fn sys_eventfd(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    sys_eventfd2(p, mem, &[a[0], 0, 0, 0, 0, 0])
}

/// Implements timerfd_create(2).
fn sys_timerfd_create(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let [clock, flags, ..] = *a;
    if !matches!(clock, 0 | 1 | 7 | 8 | 9) || flags & !(O_NONBLOCK | O_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    new_fd(
        p,
        EventObj::TimerFd(Timer {
            clock,
            ..Timer::default()
        }),
        flags,
    )
}

fn with_timer<T>(
    p: &Process,
    fd: u64,
    f: impl FnOnce(&mut Timer) -> Result<T, Errno>,
) -> Result<T, Errno> {
    let file = p.fds.get(fd as i32)?;
    let mut of = lock(&file);
    match &mut of.kind {
        FileKind::Event(EventObj::TimerFd(t)) => f(t),
        _ => Err(Errno::EINVAL),
    }
}

fn write_itimerspec(
    mem: &mut GuestMemory,
    addr: u64,
    t: &Timer,
    now: Instant,
) -> Result<(), Errno> {
    let left = t
        .next
        .map_or(Duration::ZERO, |n| n.saturating_duration_since(now));
    let mut b = [0u8; 32];
    b[0..8].copy_from_slice(&t.interval.as_secs().to_le_bytes());
    b[8..16].copy_from_slice(&u64::from(t.interval.subsec_nanos()).to_le_bytes());
    b[16..24].copy_from_slice(&left.as_secs().to_le_bytes());
    b[24..32].copy_from_slice(&u64::from(left.subsec_nanos()).to_le_bytes());
    mem.write(addr, &b)?;
    Ok(())
}

/// Implements timerfd_settime(2).
fn sys_timerfd_settime(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd, flags, new, old, ..] = *a;
    if flags & !(TFD_TIMER_ABSTIME | 2) != 0 {
        return Err(Errno::EINVAL);
    }
    let interval = super::poll::read_timespec(mem, new)?;
    let value = super::poll::read_timespec(mem, new + 16)?;
    let now = Instant::now();
    let clock = with_timer(p, fd, |t| Ok(t.clock))?;
    let first = if value.is_zero() {
        None
    } else if flags & TFD_TIMER_ABSTIME != 0 {
        let id = if clock == 0 || clock == 8 {
            rustix::time::ClockId::Realtime
        } else {
            rustix::time::ClockId::Monotonic
        };
        let c = rustix::time::clock_gettime(id);
        let cur = Duration::new(c.tv_sec as u64, c.tv_nsec as u32);
        // A start in the past counts the periods since then, as Linux does
        // (a 20 ms timer started 10 s ago reads ~500 expirations at once).
        Some(match value.checked_sub(cur) {
            Some(ahead) => super::time::after(now, ahead),
            None => now.checked_sub(cur - value).unwrap_or(now),
        })
    } else {
        Some(super::time::after(now, value))
    };
    if old != 0 {
        let t = with_timer(p, fd, |t| Ok(t.clone()))?;
        write_itimerspec(mem, old, &t, now)?;
    }
    with_timer(p, fd, |t| {
        t.next = first;
        t.interval = interval;
        t.expired = 0;
        Ok(0)
    })
}

/// Implements timerfd_gettime(2).
fn sys_timerfd_gettime(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let now = Instant::now();
    let t = with_timer(p, a[0], |t| {
        t.update(now);
        Ok(t.clone())
    })?;
    write_itimerspec(mem, a[1], &t, now)?;
    Ok(0)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry {
        nr: 283,
        name: "timerfd_create",
        handler: sys_timerfd_create,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 284,
        name: "eventfd",
        handler: sys_eventfd,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 286,
        name: "timerfd_settime",
        handler: sys_timerfd_settime,
        support: Support::Partial,
        note: "TFD_TIMER_CANCEL_ON_SET is accepted and ignored",
    },
    SyscallEntry {
        nr: 287,
        name: "timerfd_gettime",
        handler: sys_timerfd_gettime,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 290,
        name: "eventfd2",
        handler: sys_eventfd2,
        support: Support::Full,
        note: "",
    },
];

#[cfg(test)]
pub(super) trait KindEvent {
    fn kind_event(&mut self) -> &mut EventObj;
}

#[cfg(test)]
impl KindEvent for OpenFile {
    fn kind_event(&mut self) -> &mut EventObj {
        match &mut self.kind {
            FileKind::Event(e) => e,
            _ => panic!("not an event object"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::test_process;

    use crate::linux::test_call;

    #[test]
    fn eventfd_counts_and_semaphores() {
        let (mut p, mut m, buf) = test_process();
        let fd = test_call(&mut p, &mut m, sys_eventfd2, &[3, O_NONBLOCK, 0, 0, 0, 0]).unwrap();
        let file = p.fds.get(fd as i32).unwrap();
        let mut out = [0u8; 8];
        assert_eq!(read(lock(&file).kind_event(), &mut out), Ok(8));
        assert_eq!(u64::from_le_bytes(out), 3);
        assert_eq!(read(lock(&file).kind_event(), &mut out), Err(Errno::EAGAIN));
        assert_eq!(write(lock(&file).kind_event(), &2u64.to_le_bytes()), Ok(8));
        assert_eq!(
            write(lock(&file).kind_event(), &u64::MAX.to_le_bytes()),
            Err(Errno::EINVAL)
        );
        let sem = test_call(
            &mut p,
            &mut m,
            sys_eventfd2,
            &[2, EFD_SEMAPHORE, 0, 0, 0, 0],
        )
        .unwrap();
        let sem = p.fds.get(sem as i32).unwrap();
        assert_eq!(read(lock(&sem).kind_event(), &mut out), Ok(8));
        assert_eq!(u64::from_le_bytes(out), 1, "a semaphore read takes one");
        assert_eq!(
            test_call(&mut p, &mut m, sys_eventfd2, &[0, 0xdead, 0, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        let _ = buf;
    }

    /// A periodic timer whose absolute start is in the past has expired
    /// once per period since then, as on Linux (it read 1).
    #[test]
    fn a_timerfd_started_in_the_past_counts_the_periods_since() {
        let (mut p, mut m, buf) = test_process();
        let fd = test_call(&mut p, &mut m, sys_timerfd_create, &[0, 0, 0, 0, 0, 0]).unwrap();
        let now = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
        // it_interval 1 s, it_value 100 s ago (CLOCK_REALTIME, absolute).
        let mut spec = Vec::new();
        for v in [1i64, 0, now.tv_sec - 100, now.tv_nsec as i64] {
            spec.extend_from_slice(&v.to_le_bytes());
        }
        m.write(buf, &spec).unwrap();
        let set = [fd, TFD_TIMER_ABSTIME, buf, 0, 0, 0];
        assert_eq!(test_call(&mut p, &mut m, sys_timerfd_settime, &set), Ok(0));
        let expired = with_timer(&p, fd, |t| {
            t.update(Instant::now());
            Ok(t.expired)
        });
        assert!(
            expired.is_ok_and(|n| (100..=102).contains(&n)),
            "{expired:?} expirations"
        );
    }

    #[test]
    fn timerfd_expires_by_time_alone() {
        let (mut p, mut m, buf) = test_process();
        let t = test_call(&mut p, &mut m, sys_timerfd_create, &[1, 0, 0, 0, 0, 0]).unwrap();
        // it_interval 0, it_value 1 ns: expired almost at once.
        let mut spec = [0u8; 32];
        spec[24..32].copy_from_slice(&1u64.to_le_bytes());
        m.write(buf, &spec).unwrap();
        assert_eq!(
            test_call(&mut p, &mut m, sys_timerfd_settime, &[t, 0, buf, 0, 0, 0]),
            Ok(0)
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
        let f = p.fds.get(t as i32).unwrap();
        let mut out = [0u8; 8];
        assert_eq!(read(lock(&f).kind_event(), &mut out), Ok(8));
        assert_eq!(u64::from_le_bytes(out), 1);
        assert_eq!(
            read(lock(&f).kind_event(), &mut out),
            Err(Errno::EAGAIN),
            "one shot"
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_timerfd_create, &[42, 0, 0, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_timerfd_gettime, &[t, 0, 0, 0, 0, 0]),
            Err(Errno::EFAULT)
        );
    }
}
