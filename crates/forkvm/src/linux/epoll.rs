//! epoll: an interest list of descriptors behind an epoll descriptor, and
//! waits that report which are ready (see [`super::event`] for the other
//! event objects, and [`super::poll`] for what each kind of descriptor
//! reports).
//!
//! A wait that finds nothing ready blocks the calling thread (see
//! [`super::thread::wait`]), so other guest threads run meanwhile.

use super::event::{new_fd, next_change, EventObj};
use super::fdtable::{lock, FileKind, FileRef};
use super::table::{Support, SyscallEntry};
use super::thread;
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const O_CLOEXEC: u64 = 0o2000000;
const EPOLL_CTL_ADD: u64 = 1;
const EPOLL_CTL_DEL: u64 = 2;
const EPOLL_CTL_MOD: u64 = 3;
const EPOLLIN: u32 = 0x001;
const EPOLLOUT: u32 = 0x004;
const EPOLLERR: u32 = 0x008;
const EPOLLHUP: u32 = 0x010;
const EPOLLRDHUP: u32 = 0x2000;
const EPOLLONESHOT: u32 = 1 << 30;
const EPOLLET: u32 = 1 << 31;
/// Most events one epoll_wait may return.
const MAX_EVENTS: u64 = 1 << 16;

/// One entry of an epoll interest list.
#[derive(Debug, Clone, Copy)]
pub struct Interest {
    /// EPOLL* events asked for.
    pub events: u32,
    /// The user's data, returned with each event.
    pub data: u64,
    /// Disabled by EPOLLONESHOT after firing.
    pub disabled: bool,
    /// EPOLLET: the bits ready when last looked at; only bits that rose since are reported.
    pub seen: u32,
    /// EPOLLET: an eventfd's counter when last looked at: a write since is an edge
    /// even if it stayed readable (mio's waker never reads it).
    pub token: u64,
    /// When it was last reported, in the set's own count (or added): the
    /// least recent goes first (see `epoll_wait`).
    pub order: u64,
}

/// Implements epoll_create1(2).
fn sys_epoll_create1(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    if a[0] & !O_CLOEXEC != 0 {
        return Err(Errno::EINVAL);
    }
    new_fd(p, EventObj::Epoll(BTreeMap::new()), a[0])
}

/// Implements epoll_create(2).
fn sys_epoll_create(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[0] as i32 <= 0 {
        return Err(Errno::EINVAL);
    }
    sys_epoll_create1(p, mem, &[0; 6])
}

/// Runs `f` on the epoll set behind `epfd`.
fn with_epoll<T>(
    p: &Process,
    epfd: u64,
    f: impl FnOnce(&mut BTreeMap<i32, Interest>) -> Result<T, Errno>,
) -> Result<T, Errno> {
    let file = p.fds.get(epfd as i32)?;
    let mut of = lock(&file);
    match &mut of.kind {
        FileKind::Event(EventObj::Epoll(set)) => f(set),
        _ => Err(Errno::EINVAL),
    }
}

/// Implements epoll_ctl(2), with Linux's order of checks: the event
/// (EFAULT), both descriptors (EBADF), one that cannot be polled (EPERM),
/// an `epfd` that is no epoll set or is `fd` itself (EINVAL), a set added
/// that would close a loop or nest too deep (ELOOP), then the operation.
fn sys_epoll_ctl(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [epfd, op, fd, event, ..] = *a;
    let ev = if op == EPOLL_CTL_DEL {
        None
    } else {
        let b = mem.read(event, 12)?;
        let events = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let mut d = [0u8; 8];
        d.copy_from_slice(&b[4..12]);
        Some(Interest {
            events: events | EPOLLERR | EPOLLHUP,
            data: u64::from_le_bytes(d),
            disabled: false,
            seen: 0,
            token: 0,
            order: 0,
        })
    };
    let ep_file = p.fds.get(i32::try_from(epfd).map_err(|_| Errno::EBADF)?)?;
    let fd = i32::try_from(fd).map_err(|_| Errno::EBADF)?;
    let file = p.fds.get(fd)?;
    let inner = {
        let f = lock(&file);
        if f.path_only() {
            return Err(Errno::EBADF);
        }
        // Regular files, directories and /dev/null and /dev/zero cannot be
        // polled: Linux refuses them (asyncio relies on EPERM to tell files
        // from pipes).
        if matches!(
            f.kind,
            FileKind::File { .. } | FileKind::Dir { .. } | FileKind::Null | FileKind::Zero
        ) {
            return Err(Errno::EPERM);
        }
        match &f.kind {
            FileKind::Event(EventObj::Epoll(set)) => Some(set.clone()),
            _ => None,
        }
    };
    if std::sync::Arc::ptr_eq(&ep_file, &file) {
        return Err(Errno::EINVAL);
    }
    if !matches!(lock(&ep_file).kind, FileKind::Event(EventObj::Epoll(_))) {
        return Err(Errno::EINVAL);
    }
    if let (EPOLL_CTL_ADD, Some(inner)) = (op, &inner) {
        // The sets below the one added, and above the one it goes into,
        // may not hold this one (a loop) nor be more than MAX_NESTS deep.
        let below = depth_below(p, inner, &ep_file, 1).ok_or(Errno::ELOOP)?;
        if below + 1 + depth_above(p, &ep_file, 0) > MAX_NESTS {
            return Err(Errno::ELOOP);
        }
    }
    let mut of = lock(&ep_file);
    let FileKind::Event(EventObj::Epoll(set)) = &mut of.kind else {
        return Err(Errno::EINVAL);
    };
    match (op, ev) {
        (EPOLL_CTL_ADD, Some(mut i)) => {
            if set.contains_key(&fd) {
                return Err(Errno::EEXIST);
            }
            // Behind every descriptor reported so far (see `epoll_wait`).
            i.order = set.values().map(|i| i.order + 1).max().unwrap_or(0);
            set.insert(fd, i);
        }
        (EPOLL_CTL_MOD, Some(mut i)) => {
            let e = set.get_mut(&fd).ok_or(Errno::ENOENT)?;
            i.order = e.order;
            *e = i;
        }
        (EPOLL_CTL_DEL, None) => {
            set.remove(&fd).ok_or(Errno::ENOENT)?;
        }
        _ => return Err(Errno::EINVAL),
    }
    Ok(0)
}

/// Most epoll sets nested below one another, as Linux's EP_MAX_NESTS.
const MAX_NESTS: u32 = 4;

/// The epoll sets among the descriptors of `set` (of the caller's table).
fn nested_sets(p: &Process, set: &BTreeMap<i32, Interest>) -> Vec<(FileRef, Interests)> {
    set.keys()
        .filter_map(|&fd| p.fds.get(fd).ok())
        .filter_map(|f| {
            let inner = match &lock(&f).kind {
                FileKind::Event(EventObj::Epoll(s)) => s.clone(),
                _ => return None,
            };
            Some((f, inner))
        })
        .collect()
}

/// How deep the sets nest below `set` (itself `depth` below the set it
/// would join), or None if `target` is among them (a loop) or they nest
/// past MAX_NESTS.
fn depth_below(p: &Process, set: &Interests, target: &FileRef, depth: u32) -> Option<u32> {
    if depth > MAX_NESTS {
        return None;
    }
    let mut deepest = 0;
    for (f, inner) in nested_sets(p, set) {
        if std::sync::Arc::ptr_eq(&f, target) {
            return None;
        }
        deepest = deepest.max(1 + depth_below(p, &inner, target, depth + 1)?);
    }
    Some(deepest)
}

/// How many sets of the caller's table hold `file`, one inside the next
/// (the longest such chain).
fn depth_above(p: &Process, file: &FileRef, depth: u32) -> u32 {
    if depth > MAX_NESTS {
        return depth;
    }
    let mut highest = 0;
    for f in p
        .fds
        .open_fds()
        .into_iter()
        .filter_map(|fd| p.fds.get(fd).ok())
    {
        let holds = match &lock(&f).kind {
            FileKind::Event(EventObj::Epoll(s)) => s.keys().any(|&fd| {
                p.fds
                    .get(fd)
                    .is_ok_and(|g| std::sync::Arc::ptr_eq(&g, file))
            }),
            _ => false,
        };
        if holds {
            highest = highest.max(1 + depth_above(p, &f, depth + 1));
        }
    }
    highest
}

/// An epoll interest list, by descriptor.
type Interests = BTreeMap<i32, Interest>;

/// What a look at one descriptor of a set found.
struct Look {
    /// The EPOLL* bits to report now (for EPOLLET, only those that rose).
    bits: u32,
    /// The bits ready now, for EPOLLET's next look.
    now_set: u32,
    /// Its edge token now (see [`Interest::token`]).
    token: u64,
    /// When it may become ready by itself (a timer).
    wake: Option<Instant>,
}

/// Looks at descriptor `fd` for interest `i`, `depth` sets down from the
/// one waited on; None if it is closed.
fn look(p: &Process, fd: i32, i: &Interest, now: Instant, depth: u32) -> Option<Look> {
    let file = p.fds.get(fd).ok()?;
    let nested = match &lock(&file).kind {
        FileKind::Event(EventObj::Epoll(set)) => Some(set.clone()),
        _ => None,
    };
    let (r, token, wake) = match nested {
        // An epoll set is readable when one of its own descriptors has an
        // event for it (Linux's ep_eventpoll_poll).
        Some(set) => {
            let (r, wake) = set_readiness(p, &set, now, depth + 1);
            (r, 0, wake)
        }
        None => {
            let mut f = lock(&file);
            let r = super::poll::readiness_of(&mut f, now, p.sigqueue.bits_for(p.tid));
            let token = match &f.kind {
                FileKind::Event(EventObj::EventFd { count, .. }) => *count,
                FileKind::Socket(s) => s.edge_token(),
                FileKind::Pty(end) => end.edge_token(),
                FileKind::Pipe(end) => {
                    let pipe = lock(&end.pipe);
                    match (end.read, end.write) {
                        // A FIFO opened O_RDWR: either count moves it.
                        (true, true) => pipe.reads.wrapping_add(pipe.writes),
                        (false, _) => pipe.reads,
                        (true, false) => pipe.writes,
                    }
                }
                _ => 0,
            };
            let wake = match &f.kind {
                FileKind::Event(obj) => next_change(obj, p.next_timer_due()),
                _ => None,
            };
            (r, token, wake)
        }
    };
    let mut bits = 0u32;
    if r & 1 != 0 {
        bits |= EPOLLIN;
    }
    if r & 4 != 0 {
        bits |= EPOLLOUT;
    }
    if r & 8 != 0 {
        bits |= EPOLLERR;
    }
    if r & 16 != 0 {
        bits |= EPOLLHUP;
    }
    if r & super::unix_socket::POLLRDHUP != 0 {
        bits |= EPOLLRDHUP;
    }
    let mut bits = bits & i.events;
    let now_set = bits;
    if i.events & EPOLLET != 0 {
        // Edge-triggered: what rose since the last look (what stays
        // ready is not reported again; a drop re-arms it).
        bits &= !i.seen;
        if token != i.token {
            // A socket's token counts what moved through its queues
            // (a host socket's, its drains); a pipe's, the writes into
            // it (read end) or the reads that
            // made room (write end).
            let rearm = match &lock(&file).kind {
                FileKind::Socket(_) | FileKind::Pty(_) => EPOLLIN | EPOLLOUT,
                FileKind::Pipe(end) if end.read && end.write => EPOLLIN | EPOLLOUT,
                FileKind::Pipe(end) if end.write => EPOLLOUT,
                _ => EPOLLIN,
            };
            bits |= now_set & rearm;
        }
    }
    Some(Look {
        bits,
        now_set,
        token,
        wake,
    })
}

/// poll(2) bits of an epoll set `depth` sets down from the one waited on
/// (POLLIN when a descriptor of it has an event to report), and when it may
/// become so by itself. Nothing below MAX_NESTS is looked at.
fn set_readiness(p: &Process, set: &Interests, now: Instant, depth: u32) -> (i16, Option<Instant>) {
    if depth > MAX_NESTS {
        return (0, None);
    }
    let mut wake: Option<Instant> = None;
    for (&fd, i) in set.iter().filter(|(_, i)| !i.disabled) {
        let Some(l) = look(p, fd, i, now, depth) else {
            continue;
        };
        if l.bits != 0 {
            return (super::poll::POLLIN, None);
        }
        if let Some(t) = l.wake {
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
    }
    (0, wake)
}

/// poll(2) bits of `file` if it is an epoll set (for poll and select on
/// one), else None.
pub(super) fn readiness_if_epoll(p: &Process, file: &FileRef, now: Instant) -> Option<i16> {
    let set = match &lock(file).kind {
        FileKind::Event(EventObj::Epoll(set)) => set.clone(),
        _ => return None,
    };
    Some(set_readiness(p, &set, now, 0).0)
}

/// Implements epoll_wait(2), epoll_pwait(2) and epoll_pwait2(2).
///
/// Which ready descriptors a call reports when more are ready than it
/// takes: those reported least recently first (each `Interest::order`),
/// as Linux moves a reported descriptor to the end of its ready list; in
/// descriptor order every call, the same first `max` starved the rest.
fn epoll_wait(
    p: &mut Process,
    mem: &mut GuestMemory,
    epfd: u64,
    events: u64,
    max: u64,
    timeout: Option<Duration>,
) -> SysResult {
    if max == 0 || max > MAX_EVENTS {
        return Err(Errno::EINVAL);
    }
    mem.slice_mut(events, max * 12)?;
    let interests: Vec<(i32, Interest)> = with_epoll(p, epfd, |set| {
        Ok(set.iter().map(|(k, v)| (*k, *v)).collect())
    })?;
    let now = Instant::now();
    let next_order = interests
        .iter()
        .map(|(_, i)| i.order + 1)
        .max()
        .unwrap_or(0);
    let mut wake: Option<Instant> = None;
    let mut gone = Vec::new();
    let mut looks = Vec::new();
    for (fd, i) in interests {
        if i.disabled {
            continue;
        }
        let Some(l) = look(p, fd, &i, now, 0) else {
            gone.push(fd);
            continue;
        };
        if let Some(t) = l.wake {
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        looks.push((fd, i, l));
    }
    let mut ready: Vec<usize> = (0..looks.len()).filter(|&k| looks[k].2.bits != 0).collect();
    // Stable: descriptors never reported keep their order of addition.
    ready.sort_by_key(|&k| looks[k].1.order);
    ready.truncate(max as usize);
    with_epoll(p, epfd, |set| {
        for fd in &gone {
            set.remove(fd);
        }
        for (k, (fd, i, l)) in looks.iter().enumerate() {
            let Some(e) = set.get_mut(fd) else {
                continue;
            };
            let reported = ready.iter().position(|&r| r == k);
            // EPOLLET: what it saw counts once reported (or when there was
            // nothing to report); one left out by `max` is reported later.
            if i.events & EPOLLET != 0 && (l.bits == 0 || reported.is_some()) {
                e.seen = l.now_set;
                e.token = l.token;
            }
            if let Some(n) = reported {
                e.order = next_order + n as u64;
                if i.events & EPOLLONESHOT != 0 {
                    e.disabled = true;
                }
            }
        }
        Ok(())
    })?;
    if ready.is_empty() && timeout != Some(Duration::ZERO) {
        return match thread::wait(p, timeout, wake) {
            thread::Waited::TimedOut => Ok(0),
            thread::Waited::Retry => Ok(0),
        };
    }
    let mut out = vec![0u8; ready.len() * 12];
    for (n, &k) in ready.iter().enumerate() {
        let (_, i, l) = &looks[k];
        out[n * 12..n * 12 + 4].copy_from_slice(&l.bits.to_le_bytes());
        out[n * 12 + 4..n * 12 + 12].copy_from_slice(&i.data.to_le_bytes());
    }
    mem.write(events, &out)?;
    Ok(ready.len() as u64)
}

fn ms_timeout(ms: u64) -> Option<Duration> {
    let ms = ms as i32;
    (ms >= 0).then(|| Duration::from_millis(ms as u64))
}

/// Implements epoll_wait(2).
fn sys_epoll_wait(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    epoll_wait(p, mem, a[0], a[1], a[2], ms_timeout(a[3]))
}

/// Implements epoll_pwait(2): a signal its mask lets through ends the wait.
fn sys_epoll_pwait(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if let Some(mask) = super::signal::read_wait_mask(mem, a[4], a[5])? {
        super::signal::take_under_mask(p, mask)?;
    }
    epoll_wait(p, mem, a[0], a[1], a[2], ms_timeout(a[3]))
}

/// Implements epoll_pwait2(2).
fn sys_epoll_pwait2(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let t = if a[3] == 0 {
        None
    } else {
        Some(super::poll::read_timespec(mem, a[3])?)
    };
    if let Some(mask) = super::signal::read_wait_mask(mem, a[4], a[5])? {
        super::signal::take_under_mask(p, mask)?;
    }
    epoll_wait(p, mem, a[0], a[1], a[2], t)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry {
        nr: 213,
        name: "epoll_create",
        handler: sys_epoll_create,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 232,
        name: "epoll_wait",
        handler: sys_epoll_wait,
        support: Support::Partial,
        note: "EPOLLET reports readiness that rose since the last epoll_wait looked (a drop between two looks re-arms it; an eventfd or pipe write, and a pipe read for its writer, is an edge); the least recently reported go first; a nested epoll set is ready when it has events",
    },
    SyscallEntry {
        nr: 233,
        name: "epoll_ctl",
        handler: sys_epoll_ctl,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 281,
        name: "epoll_pwait",
        handler: sys_epoll_pwait,
        support: Support::Partial,
        note: "as epoll_wait; a signal the mask lets through ends the wait (EINTR)",
    },
    SyscallEntry {
        nr: 291,
        name: "epoll_create1",
        handler: sys_epoll_create1,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 441,
        name: "epoll_pwait2",
        handler: sys_epoll_pwait2,
        support: Support::Partial,
        note: "as epoll_wait",
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::event::{sys_eventfd2, write, KindEvent};
    use crate::linux::fdtable::OpenFile;

    const O_NONBLOCK: u64 = 0o4000;
    use crate::linux::test_process;

    use crate::linux::test_call;

    #[test]
    fn edge_triggered_reports_rises_and_eventfd_writes_once() {
        let (mut p, mut m, buf) = test_process();
        let ep = test_call(&mut p, &mut m, sys_epoll_create1, &[0; 6]).unwrap();
        let ev = test_call(&mut p, &mut m, sys_eventfd2, &[0, O_NONBLOCK, 0, 0, 0, 0]).unwrap();
        let (a, _b) = crate::linux::unix_socket::Socket::pair(1);
        let sock = p
            .fds
            .insert(OpenFile::new(FileKind::Socket(a), 2), false)
            .unwrap() as u64;
        for (fd, events) in [
            (ev, EPOLLIN | EPOLLET),
            (sock, EPOLLIN | EPOLLOUT | EPOLLET),
        ] {
            let mut e = [0u8; 12];
            e[..4].copy_from_slice(&events.to_le_bytes());
            e[4..].copy_from_slice(&fd.to_le_bytes());
            m.write(buf, &e).unwrap();
            let add = [ep, EPOLL_CTL_ADD, fd, buf, 0, 0];
            assert_eq!(test_call(&mut p, &mut m, sys_epoll_ctl, &add), Ok(0));
        }
        let events = buf + 0x100;
        let wait = [ep, events, 8, 0, 0, 0];
        // The socket is writable: reported once, not again while it stays so.
        assert_eq!(test_call(&mut p, &mut m, sys_epoll_wait, &wait), Ok(1));
        assert_eq!(m.read_u64(events + 4), Ok(sock));
        assert_eq!(test_call(&mut p, &mut m, sys_epoll_wait, &wait), Ok(0));
        // Each eventfd write is an edge, even while it stays readable (never read).
        let file = p.fds.get(ev as i32).unwrap();
        for _ in 0..2 {
            write(lock(&file).kind_event(), &1u64.to_le_bytes()).unwrap();
            assert_eq!(test_call(&mut p, &mut m, sys_epoll_wait, &wait), Ok(1));
            assert_eq!(m.read_u64(events + 4), Ok(ev));
            assert_eq!(test_call(&mut p, &mut m, sys_epoll_wait, &wait), Ok(0));
        }
    }

    /// A pipe under EPOLLET: every write is an edge for its reader, even
    /// while it stays readable, and so is a drain and refill between two
    /// looks (Go's os/exec pipes waited for good when the refill came from
    /// a child between the reader's EAGAIN and its next epoll_wait).
    #[test]
    fn edge_triggered_pipes_see_every_write() {
        let (mut p, mut m, buf) = test_process();
        let ep = test_call(&mut p, &mut m, sys_epoll_create1, &[0; 6]).unwrap();
        let (r, w) = crate::linux::fdtable::PipeEnd::pair();
        let pipe = r.pipe.clone();
        let rfd = p
            .fds
            .insert(
                OpenFile::new(FileKind::Pipe(r), crate::linux::fdtable::oflags::O_NONBLOCK),
                false,
            )
            .unwrap() as u64;
        let wfd = p
            .fds
            .insert(
                OpenFile::new(
                    FileKind::Pipe(w),
                    1 | crate::linux::fdtable::oflags::O_NONBLOCK,
                ),
                false,
            )
            .unwrap() as u64;
        let put = |p: &mut Process, m: &mut GuestMemory, n: u64| {
            assert_eq!(
                crate::linux::dispatch(p, m, 1, &[wfd, buf + 0x200, n, 0, 0, 0]),
                n
            );
        };
        let mut e = [0u8; 12];
        e[..4].copy_from_slice(&(EPOLLIN | EPOLLET).to_le_bytes());
        e[4..].copy_from_slice(&rfd.to_le_bytes());
        m.write(buf, &e).unwrap();
        let add = [ep, EPOLL_CTL_ADD, rfd, buf, 0, 0];
        assert_eq!(test_call(&mut p, &mut m, sys_epoll_ctl, &add), Ok(0));
        let wait = [ep, buf + 0x100, 8, 0, 0, 0];
        assert_eq!(test_call(&mut p, &mut m, sys_epoll_wait, &wait), Ok(0));
        put(&mut p, &mut m, 1);
        assert_eq!(test_call(&mut p, &mut m, sys_epoll_wait, &wait), Ok(1));
        assert_eq!(test_call(&mut p, &mut m, sys_epoll_wait, &wait), Ok(0));
        // Another write while still readable: an edge, as on Linux.
        put(&mut p, &mut m, 1);
        assert_eq!(test_call(&mut p, &mut m, sys_epoll_wait, &wait), Ok(1));
        // Drained and refilled between two looks: an edge.
        lock(&pipe).buf.clear();
        put(&mut p, &mut m, 3);
        assert_eq!(test_call(&mut p, &mut m, sys_epoll_wait, &wait), Ok(1));
        assert_eq!(test_call(&mut p, &mut m, sys_epoll_wait, &wait), Ok(0));
    }

    #[test]
    fn epoll_reports_ready_descriptors_with_their_data() {
        let (mut p, mut m, buf) = test_process();
        let ep = test_call(&mut p, &mut m, sys_epoll_create1, &[0; 6]).unwrap();
        let ev = test_call(&mut p, &mut m, sys_eventfd2, &[0, 0, 0, 0, 0, 0]).unwrap();
        // struct epoll_event { u32 events; u64 data } (packed, 12 bytes)
        let mut e = [0u8; 12];
        e[..4].copy_from_slice(&EPOLLIN.to_le_bytes());
        e[4..].copy_from_slice(&0xfeed_u64.to_le_bytes());
        m.write(buf, &e).unwrap();
        assert_eq!(
            test_call(
                &mut p,
                &mut m,
                sys_epoll_ctl,
                &[ep, EPOLL_CTL_ADD, ev, buf, 0, 0]
            ),
            Ok(0)
        );
        assert_eq!(
            test_call(
                &mut p,
                &mut m,
                sys_epoll_ctl,
                &[ep, EPOLL_CTL_ADD, ev, buf, 0, 0]
            ),
            Err(Errno::EEXIST)
        );
        let events = buf + 0x100;
        // Nothing ready, zero timeout: 0 at once.
        assert_eq!(
            test_call(&mut p, &mut m, sys_epoll_wait, &[ep, events, 8, 0, 0, 0]),
            Ok(0)
        );
        // Nothing ready, a timeout: the thread waits (the call is made again).
        assert_eq!(
            test_call(&mut p, &mut m, sys_epoll_wait, &[ep, events, 8, 50, 0, 0]),
            Ok(0)
        );
        assert!(matches!(
            p.sched.take(),
            Some(crate::linux::thread::Sched::Retry(_))
        ));
        p.waiting = None;
        let f = p.fds.get(ev as i32).unwrap();
        write(lock(&f).kind_event(), &1u64.to_le_bytes()).unwrap();
        assert_eq!(
            test_call(&mut p, &mut m, sys_epoll_wait, &[ep, events, 8, 0, 0, 0]),
            Ok(1)
        );
        let got = m.read(events, 12).unwrap();
        assert_eq!(
            u32::from_le_bytes(got[..4].try_into().unwrap()) & EPOLLIN,
            EPOLLIN
        );
        assert_eq!(u64::from_le_bytes(got[4..12].try_into().unwrap()), 0xfeed);
        assert_eq!(
            test_call(
                &mut p,
                &mut m,
                sys_epoll_ctl,
                &[ep, EPOLL_CTL_DEL, ev, 0, 0, 0]
            ),
            Ok(0)
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_epoll_wait, &[ep, events, 8, 0, 0, 0]),
            Ok(0)
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_epoll_wait, &[ep, events, 0, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_epoll_wait, &[ev, events, 8, 0, 0, 0]),
            Err(Errno::EINVAL),
            "not an epoll fd"
        );
    }
}
