//! signalfd: a descriptor from which the process reads its pending signals
//! (those of the descriptor's mask, which it blocks) as `struct
//! signalfd_siginfo` records, and which poll, select and epoll report
//! readable while one is pending. An event object like eventfd and timerfd
//! ([`super::event`]), holding only its mask: the signals are the reading
//! process's own queue (`Process::sigqueue`), so after a fork the child's
//! copy reads the child's signals, as on Linux.

use super::event::EventObj;
use super::fdtable::{lock, oflags, FileKind, OpenFile};
use super::signal::UNBLOCKABLE;
use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;

/// `sizeof(struct signalfd_siginfo)`.
const RECORD: u64 = 128;
const SFD_NONBLOCK: u64 = oflags::O_NONBLOCK as u64;
const SFD_CLOEXEC: u64 = oflags::O_CLOEXEC as u64;

/// poll(2) bits of a signalfd with `mask` while signals `pending` wait.
pub fn readiness(mask: u64, pending: u64) -> i16 {
    if mask & pending != 0 {
        super::poll::POLLIN
    } else {
        0
    }
}

/// read(2) on a signalfd with `mask`: takes as many pending signals of the
/// mask as whole records fit in `len` bytes at `buf`, lowest number first.
/// EINVAL below one record; with none pending, EAGAIN or (blocking) the
/// thread waits and the call is made again, taking what other processes
/// and timers sent meanwhile.
pub(super) fn read(
    p: &mut Process,
    mem: &mut GuestMemory,
    buf: u64,
    len: u64,
    mask: u64,
    nonblocking: bool,
) -> SysResult {
    let fit = len / RECORD;
    if fit == 0 {
        return Err(Errno::EINVAL);
    }
    let n = (p.sigqueue.count(mask, p.tid) as u64).min(fit);
    if n == 0 {
        if nonblocking {
            return Err(Errno::EAGAIN);
        }
        let wake = p.next_timer_due();
        let _ = super::thread::wait(p, None, wake);
        return Ok(0);
    }
    // The whole destination first, so a bad buffer loses no signal.
    mem.slice_mut(buf, n * RECORD)?;
    let mut out = Vec::with_capacity((n * RECORD) as usize);
    for _ in 0..n {
        let Some(info) = p.sigqueue.take(mask, p.tid) else {
            break;
        };
        out.extend_from_slice(&info.to_signalfd());
    }
    mem.write(buf, &out)?;
    Ok(out.len() as u64)
}

/// Implements signalfd4(2): a new signalfd (fd -1) or a new mask for an
/// existing one. SIGKILL and SIGSTOP are never in a mask.
fn sys_signalfd4(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd, mask_addr, size, flags, ..] = *a;
    if flags & !(SFD_NONBLOCK | SFD_CLOEXEC) != 0 || size != 8 {
        return Err(Errno::EINVAL);
    }
    let mask = mem.read_u64(mask_addr)? & !UNBLOCKABLE;
    let fd = fd as i32;
    if fd != -1 {
        let file = p.fds.get(fd)?;
        let mut f = lock(&file);
        return match &mut f.kind {
            FileKind::Event(EventObj::SignalFd { mask: m }) => {
                *m = mask;
                Ok(fd as u64)
            }
            _ => Err(Errno::EINVAL),
        };
    }
    let mut fl = oflags::O_RDONLY;
    if flags & SFD_NONBLOCK != 0 {
        fl |= oflags::O_NONBLOCK;
    }
    let fd = p.fds.insert(
        OpenFile::new(FileKind::Event(EventObj::SignalFd { mask }), fl),
        flags & SFD_CLOEXEC != 0,
    )?;
    Ok(fd as u64)
}

/// Implements signalfd(2).
fn sys_signalfd(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    sys_signalfd4(p, mem, &[a[0], a[1], a[2], 0, 0, 0])
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 282, name: "signalfd", handler: sys_signalfd, support: Support::Partial,
        note: "as signalfd4" },
    SyscallEntry { nr: 289, name: "signalfd4", handler: sys_signalfd4, support: Support::Partial,
        note: "read (not readv) of the process's pending signals of the mask; poll, select and epoll see them" },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::signal::{send, SigInfo};
    use crate::linux::{test_call, test_process};

    #[test]
    fn reads_queued_signals_of_its_mask_and_refuses_bad_arguments() {
        let (mut p, mut m, buf) = test_process();
        const USR1: u64 = 1 << 9;
        const RTMIN: u64 = 1 << 33;
        m.write_u64(buf, USR1 | RTMIN | UNBLOCKABLE).unwrap();
        assert_eq!(
            test_call(&mut p, &mut m, sys_signalfd4, &[u64::MAX, buf, 4, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_signalfd4, &[u64::MAX, buf, 8, 1]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_signalfd4, &[u64::MAX, 8, 8, 0]),
            Err(Errno::EFAULT)
        );
        let fd = test_call(
            &mut p,
            &mut m,
            sys_signalfd4,
            &[u64::MAX, buf, 8, SFD_NONBLOCK],
        )
        .unwrap();
        // Not a signalfd: EINVAL; a closed fd: EBADF.
        assert_eq!(
            test_call(&mut p, &mut m, sys_signalfd4, &[1, buf, 8, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_signalfd4, &[77, buf, 8, 0]),
            Err(Errno::EBADF)
        );
        let mask = match &lock(&p.fds.get(fd as i32).unwrap()).kind {
            FileKind::Event(EventObj::SignalFd { mask }) => *mask,
            _ => panic!("not a signalfd"),
        };
        assert_eq!(mask, USR1 | RTMIN, "SIGKILL and SIGSTOP are left out");
        assert_eq!(
            read(&mut p, &mut m, buf, 128, mask, true),
            Err(Errno::EAGAIN)
        );
        assert_eq!(
            read(&mut p, &mut m, buf, 127, mask, true),
            Err(Errno::EINVAL)
        );
        p.sigmask = USR1 | RTMIN | (1 << 11);
        for v in [5, 6] {
            let mut i = SigInfo::user(34, 2);
            i.code = -1;
            i.value = v;
            send(&mut p, i).unwrap();
        }
        send(&mut p, SigInfo::user(10, 2)).unwrap();
        send(&mut p, SigInfo::user(12, 2)).unwrap(); // outside the mask
        assert_eq!(
            readiness(mask, p.sigqueue.bits_for(p.tid)),
            super::super::poll::POLLIN
        );
        // A bad buffer takes nothing.
        assert_eq!(read(&mut p, &mut m, 8, 256, mask, true), Err(Errno::EFAULT));
        assert_eq!(read(&mut p, &mut m, buf, 1000, mask, true), Ok(384));
        let rec = |i: u64| {
            (
                m.read_u32(buf + i * 128).unwrap(),
                m.read_u32(buf + i * 128 + 44).unwrap(),
            )
        };
        assert_eq!([rec(0), rec(1), rec(2)], [(10, 0), (34, 5), (34, 6)]);
        assert_eq!(readiness(mask, p.sigqueue.bits()), 0);
        assert_eq!(p.sigqueue.bits(), 1 << 11, "SIGUSR2 is still pending");
        // Blocking: the thread waits.
        assert_eq!(read(&mut p, &mut m, buf, 128, mask, false), Ok(0));
        assert!(p.sched.is_some());
    }
}
