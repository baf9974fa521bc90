//! Process descriptors: pidfd_open, pidfd_send_signal, pidfd_getfd, and
//! what the rest of the kernel does with a pidfd (poll and epoll readiness,
//! waitid(P_PIDFD), see `child::wait`).
//!
//! A pidfd is an event object behind an ordinary descriptor holding a
//! [`ProcHandle`]: the process itself, not its number. It is readable
//! (POLLIN) once the process ended and also hung up (POLLHUP) once it was
//! reaped, as on Linux; read and write are EINVAL. Go's os/exec, python's
//! asyncio (PidfdChildWatcher) and systemd-style supervisors use them.

use super::child::{handle_of, pid_of, Life, ProcHandle};
use super::event::EventObj;
use super::fdtable::{lock, oflags, FileKind, OpenFile};
use super::poll::{POLLHUP, READABLE};
use super::signal::{code::SI_TKILL, SigInfo};
use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;

/// pidfd_open: O_NONBLOCK for the descriptor.
const PIDFD_NONBLOCK: u64 = 0o4000;
/// pidfd_open: a descriptor for a thread (O_EXCL).
const PIDFD_THREAD: u64 = 0o200;
/// pidfd_send_signal: to the thread.
const PIDFD_SIGNAL_THREAD: u64 = 1;
/// pidfd_send_signal: to the process.
const PIDFD_SIGNAL_THREAD_GROUP: u64 = 2;
/// pidfd_send_signal: to the process group it leads.
const PIDFD_SIGNAL_PROCESS_GROUP: u64 = 4;
/// Size of `siginfo_t`.
const SIGINFO_SIZE: u64 = 128;

/// What a pidfd refers to.
#[derive(Debug, Clone)]
pub struct PidFd {
    /// The process.
    pub proc: ProcHandle,
    /// Opened with PIDFD_THREAD: signals go to the thread by default.
    pub thread: bool,
}

/// poll(2) bits of a pidfd: readable once the process ended, hung up
/// too once it was reaped.
pub fn readiness(fd: &PidFd) -> i16 {
    match fd.proc.life() {
        Life::Running => 0,
        Life::Ended => READABLE,
        Life::Reaped => READABLE | POLLHUP,
    }
}

/// The pidfd behind descriptor `fd` and whether it is non-blocking; EBADF
/// when `fd` is not open or not a pidfd.
pub fn pidfd_of(p: &Process, fd: i32) -> Result<(PidFd, bool), Errno> {
    let file = p.fds.get(fd)?;
    let f = lock(&file);
    match &f.kind {
        FileKind::Event(EventObj::Pidfd(pf)) => Ok((pf.clone(), f.nonblocking())),
        _ => Err(Errno::EBADF),
    }
}

/// A descriptor of a /proc/<pid> directory, which pidfd_send_signal takes
/// as the process's pidfd on Linux (python's test_signal sends with one).
/// The process is the one with that pid when the signal is sent.
fn proc_dir_pidfd(p: &Process, fd: i32) -> Option<PidFd> {
    let file = p.fds.get(fd).ok()?;
    let f = lock(&file);
    let FileKind::Dir { path, .. } = &f.kind else {
        return None;
    };
    let digits = path.strip_prefix(b"/proc/")?;
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let pid: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(PidFd {
        proc: handle_of(p, pid).ok()?,
        thread: false,
    })
}

/// Whether `tid` is one of the caller's threads other than its main one.
fn is_other_thread(p: &Process, tid: u64) -> bool {
    tid != pid_of(p) && (tid == p.tid || p.threads.others.iter().any(|t| t.tid == tid))
}

/// Implements pidfd_open(2).
fn sys_pidfd_open(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let flags = u64::from(a[1] as u32);
    if flags & !(PIDFD_NONBLOCK | PIDFD_THREAD) != 0 {
        return Err(Errno::EINVAL);
    }
    let pid = a[0] as i32;
    if pid <= 0 {
        return Err(Errno::EINVAL);
    }
    let pid = pid as u64;
    if is_other_thread(p, pid) {
        // Linux names threads too (with PIDFD_THREAD); here only processes.
        return Err(Errno::EINVAL);
    }
    let proc = handle_of(p, pid)?;
    let mut fl = oflags::O_RDWR;
    if flags & PIDFD_NONBLOCK != 0 {
        fl |= oflags::O_NONBLOCK;
    }
    let obj = EventObj::Pidfd(PidFd {
        proc,
        thread: flags & PIDFD_THREAD != 0,
    });
    // A pidfd is always close-on-exec.
    Ok(p.fds
        .insert(OpenFile::new(FileKind::Event(obj), fl), true)? as u64)
}

/// A new close-on-exec pidfd for process `pid` of the run.
fn open_for(p: &mut Process, pid: u64) -> Result<i32, Errno> {
    let obj = EventObj::Pidfd(PidFd {
        proc: handle_of(p, pid)?,
        thread: false,
    });
    p.fds
        .insert(OpenFile::new(FileKind::Event(obj), oflags::O_RDWR), true)
}

/// clone's and clone3's CLONE_PIDFD for a new process: `start` makes the
/// child (see `child::fork`), then a pidfd for it is stored (an int) at
/// `ptr`. EFAULT before any child exists when `ptr` cannot take it; a
/// child whose pidfd cannot be made (EMFILE) is not started.
pub(super) fn clone_with_pidfd(
    p: &mut Process,
    mem: &mut GuestMemory,
    ptr: u64,
    start: impl FnOnce(&mut Process, &mut GuestMemory) -> SysResult,
) -> SysResult {
    mem.slice_mut(ptr, 4)?;
    let pid = start(p, mem)?;
    match open_for(p, pid) {
        Ok(fd) => {
            mem.write_u32(ptr, fd as u32)?;
            Ok(pid)
        }
        Err(e) => {
            if let Some(super::thread::Sched::Fork(req)) = p.sched.take() {
                req.family.abandon();
            }
            Err(e)
        }
    }
}

/// Where pidfd_send_signal sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Thread,
    Process,
    Group,
}

/// Implements pidfd_send_signal(2).
fn sys_pidfd_send_signal(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [pidfd, sig, info, flags, ..] = *a;
    let flags = u64::from(flags as u32);
    let known = PIDFD_SIGNAL_THREAD | PIDFD_SIGNAL_THREAD_GROUP | PIDFD_SIGNAL_PROCESS_GROUP;
    if flags & !known != 0 || flags & flags.wrapping_sub(1) != 0 {
        return Err(Errno::EINVAL);
    }
    let fd = match pidfd_of(p, pidfd as i32) {
        Ok((fd, _)) => fd,
        Err(e) => proc_dir_pidfd(p, pidfd as i32).ok_or(e)?,
    };
    let scope = match flags {
        PIDFD_SIGNAL_THREAD => Scope::Thread,
        PIDFD_SIGNAL_THREAD_GROUP => Scope::Process,
        PIDFD_SIGNAL_PROCESS_GROUP => Scope::Group,
        _ if fd.thread => Scope::Thread,
        _ => Scope::Process,
    };
    // `int sig`: a negative one is no valid signal.
    let sig = u64::from(sig as u32);
    let me = pid_of(p);
    let target = fd.proc.pid();
    let kinfo = if info != 0 {
        let b = mem.read(info, SIGINFO_SIZE)?;
        let word = |off: usize| {
            b.get(off..off + 4)
                .and_then(|s| s.try_into().ok())
                .map_or(0, i32::from_le_bytes)
        };
        if u64::from(word(0) as u32) != sig {
            return Err(Errno::EINVAL);
        }
        // Only the kernel and the process itself may claim other senders.
        let code = word(8);
        if (target != me || scope == Scope::Group) && (code >= 0 || code == SI_TKILL) {
            return Err(Errno::EPERM);
        }
        SigInfo::from_siginfo(sig, b)
    } else if scope == Scope::Thread {
        SigInfo::tkill(sig, me)
    } else {
        SigInfo::user(sig, me)
    };
    match fd.proc.life() {
        Life::Reaped => Err(Errno::ESRCH),
        // An ended process takes any valid signal, and nothing happens.
        Life::Ended if sig <= 64 && scope != Scope::Group => Ok(0),
        _ if sig > 64 => Err(Errno::EINVAL),
        _ => match scope {
            // The group the process leads (none: ESRCH).
            Scope::Group => super::child::kill(p, -(target as i64), sig),
            Scope::Thread if target == me => super::signal::send_to_thread(p, target, kinfo),
            Scope::Process if target == me => super::signal::send(p, kinfo),
            _ => super::child::queue_to(p, target, kinfo),
        },
    }
}

/// Implements pidfd_getfd(2): the caller's own descriptors; another
/// process's are EPERM (no ptrace access between processes here).
fn sys_pidfd_getfd(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let [pidfd, targetfd, flags, ..] = *a;
    if flags as u32 != 0 {
        return Err(Errno::EINVAL);
    }
    let (fd, _) = pidfd_of(p, pidfd as i32)?;
    match fd.proc.life() {
        Life::Reaped => return Err(Errno::ESRCH),
        _ if fd.proc.pid() != pid_of(p) => return Err(Errno::EPERM),
        _ => {}
    }
    let file = p.fds.get(targetfd as i32)?;
    Ok(p.fds.insert_from(0, file, true)? as u64)
}

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 434, name: "pidfd_open", handler: sys_pidfd_open, support: Support::Partial,
        note: "processes of the run (the caller's other threads are EINVAL, even with PIDFD_THREAD); readable when the process ended, POLLHUP too once reaped; waitid(P_PIDFD) waits for it" },
    SyscallEntry { nr: 424, name: "pidfd_send_signal", handler: sys_pidfd_send_signal, support: Support::Partial,
        note: "as kill, rt_sigqueueinfo and tgkill, with a pidfd or a /proc/<pid> descriptor; PIDFD_SIGNAL_PROCESS_GROUP sends SI_USER whatever the siginfo says" },
    SyscallEntry { nr: 438, name: "pidfd_getfd", handler: sys_pidfd_getfd, support: Support::Partial,
        note: "the caller's own descriptors; another process's are EPERM" },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::child::{exit_status, take_signals, Tree};
    use crate::linux::poll::sys_poll;
    use crate::linux::{test_call as call, test_process};
    use crate::machine::Config;

    const WNOHANG: u64 = 1;
    const WEXITED: u64 = 4;
    const P_PIDFD: u64 = 3;

    fn waitid(p: &mut Process, m: &mut GuestMemory, fd: u64, buf: u64, options: u64) -> SysResult {
        let h = super::super::table::lookup(247).expect("waitid").handler;
        call(p, m, h, &[P_PIDFD, fd, buf, options])
    }

    /// poll(2) on one descriptor for POLLIN, at once: its revents.
    fn revents(p: &mut Process, m: &mut GuestMemory, fd: u64, buf: u64) -> i16 {
        let mut ent = (fd as i32).to_le_bytes().to_vec();
        ent.extend_from_slice(&1i16.to_le_bytes());
        ent.extend_from_slice(&0i16.to_le_bytes());
        m.write(buf, &ent).unwrap();
        call(p, m, sys_poll, &[buf, 1, 0]).unwrap();
        i16::from_le_bytes(m.read(buf + 6, 2).unwrap().try_into().unwrap())
    }

    #[test]
    fn open_checks_flags_and_pids() {
        let (mut p, mut m, _) = test_process();
        let me = pid_of(&p);
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_open, &[me, 1]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_open, &[0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_open, &[u64::MAX, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_open, &[4242, 0]),
            Err(Errno::ESRCH)
        );
        // Itself, without a tree: running; close-on-exec always.
        let fd = call(&mut p, &mut m, sys_pidfd_open, &[me, PIDFD_NONBLOCK]).unwrap();
        assert_eq!(p.fds.cloexec(fd as i32), Ok(true));
        let (pf, nb) = pidfd_of(&p, fd as i32).unwrap();
        assert!(nb);
        assert_eq!(readiness(&pf), 0);
        // Not readable or writable; not a pidfd elsewhere.
        let buf = crate::abi::USER_BASE;
        let read = super::super::table::lookup(0).expect("read").handler;
        assert_eq!(
            call(&mut p, &mut m, read, &[fd, buf, 8]),
            Err(Errno::EINVAL)
        );
        assert_eq!(pidfd_of(&p, 0).err(), Some(Errno::EBADF));
        assert_eq!(pidfd_of(&p, 99).err(), Some(Errno::EBADF));
        // Signal 0 to itself; getfd of its own descriptor.
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_send_signal, &[fd, 0, 0, 0]),
            Ok(0)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_send_signal, &[fd, 0, 0, 8]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_send_signal, &[fd, 0, 0, 3]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_send_signal, &[fd, 65, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_send_signal, &[1, 0, 0, 0]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_send_signal, &[fd, 0, 8 << 20, 0]),
            Err(Errno::EFAULT)
        );
        let dup = call(&mut p, &mut m, sys_pidfd_getfd, &[fd, 1, 0]).unwrap();
        assert_eq!(p.fds.cloexec(dup as i32), Ok(true));
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_getfd, &[fd, 1, 1]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_getfd, &[fd, 99, 0]),
            Err(Errno::EBADF)
        );
        // Its own pid is not its child.
        assert_eq!(waitid(&mut p, &mut m, fd, buf, WEXITED), Err(Errno::ECHILD));
        assert_eq!(waitid(&mut p, &mut m, 1, buf, WEXITED), Err(Errno::EBADF));
        assert_eq!(
            waitid(&mut p, &mut m, u64::MAX, buf, WEXITED),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn a_childs_pidfd_follows_its_life() {
        let (mut p, mut m, buf) = test_process();
        p.family = Some(Tree::root(Config::default()));
        let child = p.family.as_ref().unwrap().new_child().unwrap();
        let mut cp = Process::new(
            Default::default(),
            crate::memory::AddressSpace::new(0x40_0000, 0x70_0000),
            "/".into(),
            "/prog".into(),
        );
        cp.family = Some(child.clone());
        let fd = call(&mut p, &mut m, sys_pidfd_open, &[child.pid, 0]).unwrap();
        let nb = call(&mut p, &mut m, sys_pidfd_open, &[child.pid, PIDFD_NONBLOCK]).unwrap();
        assert_eq!(revents(&mut p, &mut m, fd, buf), 0);
        // Running: a non-blocking pidfd says EAGAIN, or 0 with WNOHANG.
        assert_eq!(waitid(&mut p, &mut m, nb, buf, WEXITED), Err(Errno::EAGAIN));
        assert_eq!(waitid(&mut p, &mut m, nb, buf, WEXITED | WNOHANG), Ok(0));
        // Another process may not claim to be someone else.
        m.write(buf, &[0u8; 128]).unwrap();
        m.write(buf, &15i32.to_le_bytes()).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_send_signal, &[fd, 15, buf, 0]),
            Err(Errno::EPERM)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_send_signal, &[fd, 14, buf, 0]),
            Err(Errno::EINVAL)
        );
        // A signal reaches it.
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_send_signal, &[fd, 15, 0, 0]),
            Ok(0)
        );
        take_signals(&mut cp);
        assert_eq!(cp.killed_by, Some(15));
        assert_eq!(p.exit_status, None);
        // Ended: readable; signals are taken and do nothing.
        child.exited(exit_status(7));
        assert_eq!(revents(&mut p, &mut m, fd, buf), 1);
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_send_signal, &[fd, 9, 0, 0]),
            Ok(0)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_getfd, &[fd, 1, 0]),
            Err(Errno::EPERM)
        );
        // waitid(P_PIDFD) reaps it; then hung up, and gone for signals.
        assert_eq!(waitid(&mut p, &mut m, fd, buf, WEXITED), Ok(0));
        assert_eq!(m.read_u32(buf + 16).unwrap(), child.pid as u32);
        assert_eq!(m.read_u32(buf + 24).unwrap(), 7);
        assert_eq!(revents(&mut p, &mut m, fd, buf), 1 | 0x10);
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_send_signal, &[fd, 0, 0, 0]),
            Err(Errno::ESRCH)
        );
        assert_eq!(waitid(&mut p, &mut m, fd, buf, WEXITED), Err(Errno::ECHILD));
        assert_eq!(
            call(&mut p, &mut m, sys_pidfd_open, &[child.pid, 0]),
            Err(Errno::ESRCH)
        );
    }
}
