//! Readiness: what an open file is ready for (pipes, sockets, event objects,
//! host stdio), and poll/ppoll and select/pselect6 on it. epoll
//! ([`super::epoll`]) asks the same [`readiness_of`], and answers for an
//! epoll set itself.

use super::fdtable::{lock, FileKind, OpenFile};
use super::io::{guest_buf, guest_buf_mut, host_std};
use super::table::{Support, SyscallEntry};
use super::thread;
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

pub(super) const POLLIN: i16 = 0x1;
pub(super) const POLLOUT: i16 = 0x4;
pub(super) const POLLERR: i16 = 0x8;
pub(super) const POLLHUP: i16 = 0x10;
pub(super) const POLLNVAL: i16 = 0x20;
pub(super) const POLLRDNORM: i16 = 0x40;
pub(super) const POLLWRNORM: i16 = 0x100;
pub(super) const READABLE: i16 = POLLIN | POLLRDNORM;
pub(super) const WRITABLE: i16 = POLLOUT | POLLWRNORM;

/// Polls host descriptors; `timeout_ms` < 0 waits forever. EINTR when a signal (the watchdog) arrives.
pub(super) fn host_poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> Result<usize, Errno> {
    // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()`
    // pollfd structs; the kernel writes only their revents fields.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(rc as usize)
}

/// Whether a host stream has any of `events` ready right now.
pub(super) fn host_ready(fd: BorrowedFd<'_>, events: i16) -> Result<bool, Errno> {
    let mut pfd = [libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    }];
    host_poll(&mut pfd, 0)?;
    Ok(pfd[0].revents != 0)
}

enum PollSrc {
    /// Negative fd: ignored.
    Skip,
    /// Readiness known now (already masked).
    Now(i16),
    /// A host stream, polled on the host (index into the host set).
    Host(usize),
}

/// poll(2) bits of an open file now, host stdio included (for epoll and
/// select), while the process has signals `pending` (for a signalfd).
pub(super) fn readiness_of(f: &mut OpenFile, now: std::time::Instant, pending: u64) -> i16 {
    if let FileKind::Event(e) = &mut f.kind {
        return super::event::readiness(e, now, pending);
    }
    match host_std(&f.kind) {
        Some(h) if !f.path_only() => {
            let mut pfd = [libc::pollfd {
                fd: h.as_fd().as_raw_fd(),
                events: READABLE | WRITABLE,
                revents: 0,
            }];
            match host_poll(&mut pfd, 0) {
                Ok(_) => pfd[0].revents,
                Err(_) => POLLERR,
            }
        }
        _ => readiness(f),
    }
}

fn readiness(f: &OpenFile) -> i16 {
    if f.path_only() {
        return POLLNVAL;
    }
    match &f.kind {
        FileKind::Event(_) => 0,
        FileKind::Socket(s) => s.poll(),
        FileKind::Pty(end) => end.poll(),
        FileKind::Pipe(end) => {
            let p = lock(&end.pipe);
            let mut r = 0;
            if end.write {
                if p.buf.len() < p.capacity {
                    r |= WRITABLE;
                }
                if p.readers == 0 {
                    r |= POLLERR;
                }
            }
            if end.read {
                if !p.buf.is_empty() {
                    r |= READABLE;
                }
                if end.hung_up(&p) {
                    r |= POLLHUP;
                }
            }
            r
        }
        _ => READABLE | WRITABLE,
    }
}

fn do_poll(
    p: &mut Process,
    mem: &mut GuestMemory,
    addr: u64,
    nfds: u64,
    timeout: Option<Duration>,
) -> SysResult {
    if nfds > p.fds.limit() as u64 {
        return Err(Errno::EINVAL);
    }
    let raw = guest_buf(mem, addr, nfds * 8)?.to_vec();
    let mut entries = Vec::with_capacity(nfds as usize);
    let mut host: Vec<libc::pollfd> = Vec::new();
    for e in raw.chunks_exact(8) {
        let fd = i32::from_le_bytes([e[0], e[1], e[2], e[3]]);
        let events = i16::from_le_bytes([e[4], e[5]]);
        let mask = events | POLLERR | POLLHUP;
        let src = if fd < 0 {
            PollSrc::Skip
        } else {
            match p.fds.get(fd) {
                Err(_) => PollSrc::Now(POLLNVAL),
                Ok(file) => {
                    // An epoll set: readable when it has events to report.
                    if let Some(r) = super::epoll::readiness_if_epoll(p, &file, Instant::now()) {
                        entries.push((PollSrc::Now(r & mask), mask));
                        continue;
                    }
                    let mut f = lock(&file);
                    match host_std(&f.kind) {
                        Some(h) if !f.path_only() => {
                            host.push(libc::pollfd {
                                fd: h.as_fd().as_raw_fd(),
                                events,
                                revents: 0,
                            });
                            PollSrc::Host(host.len() - 1)
                        }
                        _ => {
                            // Event objects (eventfd, timerfd) too, not only pipes.
                            let r = readiness_of(
                                &mut f,
                                std::time::Instant::now(),
                                p.sigqueue.bits_for(p.tid),
                            );
                            PollSrc::Now(if r == POLLNVAL { r } else { r & mask })
                        }
                    }
                }
            }
        };
        entries.push((src, mask));
    }
    let count = |entries: &[(PollSrc, i16)], host: &[libc::pollfd]| -> (Vec<i16>, u64) {
        let rev: Vec<i16> = entries
            .iter()
            .map(|(s, mask)| match s {
                PollSrc::Skip => 0,
                PollSrc::Now(r) => *r,
                PollSrc::Host(i) => host[*i].revents & (mask | POLLNVAL),
            })
            .collect();
        let n = rev.iter().filter(|&&r| r != 0).count() as u64;
        (rev, n)
    };
    if !host.is_empty() {
        host_poll(&mut host, 0)?;
    }
    let (mut revents, mut ready) = count(&entries, &host);
    if ready == 0 && timeout != Some(Duration::ZERO) {
        // Nothing ready: this thread waits (others run) and asks again.
        if let super::thread::Waited::Retry = super::thread::wait(p, timeout, None) {
            return Ok(0);
        }
        (revents, ready) = count(&entries, &host);
    }
    let out = guest_buf_mut(mem, addr, nfds * 8)?;
    for (i, r) in revents.iter().enumerate() {
        out[i * 8 + 6..i * 8 + 8].copy_from_slice(&r.to_le_bytes());
    }
    Ok(ready)
}

/// Implements poll(2).
pub(super) fn sys_poll(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let ms = a[2] as i32;
    let timeout = (ms >= 0).then(|| Duration::from_millis(ms as u64));
    do_poll(p, mem, a[0], a[1], timeout)
}

/// Reads a `struct timespec` relative timeout.
pub(super) fn read_timespec(mem: &GuestMemory, addr: u64) -> Result<Duration, Errno> {
    let sec = mem.read_u64(addr)? as i64;
    let nsec = mem.read_u64(addr + 8)? as i64;
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(Duration::new(sec as u64, nsec as u32))
}

/// Implements ppoll(2).
pub(super) fn sys_ppoll(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [fds, nfds, tsp, sigmask, sigsetsize, _] = *a;
    let timeout = if tsp == 0 {
        None
    } else {
        Some(read_timespec(mem, tsp)?)
    };
    if let Some(mask) = super::signal::read_wait_mask(mem, sigmask, sigsetsize)? {
        super::signal::take_under_mask(p, mask)?;
    }
    do_poll(p, mem, fds, nfds, timeout)
}

/// select(2)/pselect6(2) on top of poll: converts the fd sets.
fn select(
    p: &mut Process,
    mem: &mut GuestMemory,
    nfds: u64,
    sets: [u64; 3],
    timeout: Option<Duration>,
) -> SysResult {
    if nfds > 1024 {
        return Err(Errno::EINVAL);
    }
    let bytes = nfds.div_ceil(64) * 8;
    let mut inp = [
        vec![0u8; bytes as usize],
        vec![0u8; bytes as usize],
        vec![0u8; bytes as usize],
    ];
    for (k, &addr) in sets.iter().enumerate() {
        if addr != 0 {
            inp[k].copy_from_slice(mem.read(addr, bytes)?);
        }
    }
    let bit = |v: &[u8], fd: u64| v[(fd / 8) as usize] & (1 << (fd % 8)) != 0;
    let now = Instant::now();
    let mut out = [
        vec![0u8; bytes as usize],
        vec![0u8; bytes as usize],
        vec![0u8; bytes as usize],
    ];
    let mut count = 0;
    for fd in 0..nfds {
        let want = [bit(&inp[0], fd), bit(&inp[1], fd), bit(&inp[2], fd)];
        if !want.iter().any(|w| *w) {
            continue;
        }
        let file = p.fds.get(fd as i32)?;
        let r = match super::epoll::readiness_if_epoll(p, &file, now) {
            Some(r) => r,
            None => readiness_of(&mut lock(&file), now, p.sigqueue.bits_for(p.tid)),
        };
        // Linux's POLLIN_SET, POLLOUT_SET and POLLEX_SET: an error counts
        // as readable and writable (a pipe whose reader is gone wakes a
        // select on its write end), and only POLLPRI is exceptional.
        let got = [
            r & (0x1 | 0x40 | 0x10 | 0x8) != 0,
            r & (0x4 | 0x100 | 0x8) != 0,
            r & 0x2 != 0,
        ];
        for k in 0..3 {
            if want[k] && got[k] {
                out[k][(fd / 8) as usize] |= 1 << (fd % 8);
                count += 1;
            }
        }
    }
    if count == 0 && timeout != Some(Duration::ZERO) {
        if let thread::Waited::Retry = thread::wait(p, timeout, None) {
            return Ok(0);
        }
    }
    for (k, &addr) in sets.iter().enumerate() {
        if addr != 0 {
            mem.write(addr, &out[k])?;
        }
    }
    Ok(count)
}

/// Implements select(2).
fn sys_select(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let t = if a[4] == 0 {
        None
    } else {
        let s = mem.read_u64(a[4])? as i64;
        let us = mem.read_u64(a[4] + 8)? as i64;
        if s < 0 || !(0..1_000_000).contains(&us) {
            return Err(Errno::EINVAL);
        }
        Some(Duration::new(s as u64, us as u32 * 1000))
    };
    select(p, mem, a[0], [a[1], a[2], a[3]], t)
}

/// Implements pselect6(2): a signal its mask lets through ends the wait.
fn sys_pselect6(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let t = if a[4] == 0 {
        None
    } else {
        Some(read_timespec(mem, a[4])?)
    };
    // The sixth argument points at { const sigset_t *ss; size_t ss_len; }.
    if a[5] != 0 {
        let (set, len) = (mem.read_u64(a[5])?, mem.read_u64(a[5] + 8)?);
        if let Some(mask) = super::signal::read_wait_mask(mem, set, len)? {
            super::signal::take_under_mask(p, mask)?;
        }
    }
    select(p, mem, a[0], [a[1], a[2], a[3]], t)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 7, name: "poll", handler: sys_poll, support: Support::Partial,
        note: "waiting re-checks readiness every 1 ms (20 ms with one thread); other threads run meanwhile" },
    SyscallEntry { nr: 271, name: "ppoll", handler: sys_ppoll, support: Support::Partial,
        note: "as poll; a signal the mask lets through ends the wait (EINTR, its handler under that mask); the remaining time is not written back" },
    SyscallEntry {
        nr: 23,
        name: "select",
        handler: sys_select,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 270,
        name: "pselect6",
        handler: sys_pselect6,
        support: Support::Partial,
        note: "a signal the mask lets through ends the wait (EINTR, its handler under that mask)",
    },
];
