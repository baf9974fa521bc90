//! File locks between the run's processes: flock(2) and fcntl(2)'s record
//! locks (POSIX and open-file-description), held on the host.
//!
//! Every guest process of a run is a VM in one host process, so the host's
//! own per-process POSIX locks could never make two guest processes
//! conflict; they would all be granted, as they were until this module, and
//! programs that share a file between processes (SQLite, a `flock` in a
//! shell script, python's `fcntl.lockf`) then corrupted it silently. Instead:
//!
//! - **flock** is the host's flock on the host descriptor behind the guest's
//!   open file description: per description, as on Linux.
//! - **OFD locks** (`F_OFD_*`) are host OFD locks on that same descriptor.
//! - **POSIX locks** (`F_SETLK`...) belong to a process, not a description:
//!   a process never conflicts with itself, its locks go when it closes any
//!   descriptor of the file or ends, and a child does not inherit them. Each
//!   guest process therefore holds them as host OFD locks on a descriptor of
//!   its own per locked file ([`RecordLocks`]), opened on first use and
//!   closed (releasing them) when one of those events happens.
//!
//! A lock that is not free waits by looking again every millisecond
//! (`F_SETLKW`, flock without `LOCK_NB`): the holder is another VM, whose
//! release wakes nothing here. Descriptors that are not host files or
//! directories (pipes, sockets, /dev/null) lock nothing and are always
//! granted, as a single process would see them.

use super::fdtable::{lock, FileKind, FileRef, OpenFile};
use super::{Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// `struct flock` is 32 bytes on x86-64: type, whence, start, len, pid.
pub const FLOCK_SIZE: u64 = 32;
const F_RDLCK: i16 = 0;
const F_WRLCK: i16 = 1;
const F_UNLCK: i16 = 2;
const SEEK_SET: i16 = 0;
const SEEK_CUR: i16 = 1;
const SEEK_END: i16 = 2;

/// How often a lock that is held elsewhere is asked for again.
const RECHECK: Duration = Duration::from_millis(1);

/// A file, as the host knows it.
type FileId = (u64, u64);

/// One process's POSIX record locks: a host descriptor per file it locked,
/// holding them as OFD locks. Never copied: a fork or child starts without.
#[derive(Default)]
pub struct RecordLocks {
    by_file: HashMap<FileId, Arc<OwnedFd>>,
}

impl std::fmt::Debug for RecordLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordLocks")
            .field("files", &self.by_file.len())
            .finish()
    }
}

/// Who holds POSIX locks on each file, for F_GETLK's `l_pid`: the guest pid
/// and the holding descriptor of each process that locked it.
type Holders = HashMap<FileId, Vec<(u64, Weak<OwnedFd>)>>;

fn holders() -> &'static Mutex<Holders> {
    static H: OnceLock<Mutex<Holders>> = OnceLock::new();
    H.get_or_init(Default::default)
}

/// The host descriptor behind a guest open file description, if it is one
/// that can hold locks.
fn host_fd(f: &OpenFile) -> Option<BorrowedFd<'_>> {
    match &f.kind {
        FileKind::File { fd, .. } | FileKind::Dir { fd, .. } => Some(fd.as_fd()),
        _ => None,
    }
}

fn file_id(fd: BorrowedFd<'_>) -> Result<FileId, Errno> {
    let st = rustix::fs::fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

/// A guest `struct flock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flock {
    ty: i16,
    whence: i16,
    start: i64,
    len: i64,
    pid: i32,
}

impl Flock {
    fn read(mem: &GuestMemory, addr: u64) -> Result<Self, Errno> {
        let b = mem.read(addr, FLOCK_SIZE)?;
        let i16_at = |o: usize| i16::from_le_bytes([b[o], b[o + 1]]);
        let i64_at = |o: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[o..o + 8]);
            i64::from_le_bytes(w)
        };
        Ok(Self {
            ty: i16_at(0),
            whence: i16_at(2),
            start: i64_at(8),
            len: i64_at(16),
            pid: i32::from_le_bytes([b[24], b[25], b[26], b[27]]),
        })
    }

    fn write(&self, mem: &mut GuestMemory, addr: u64) -> Result<(), Errno> {
        let mut b = [0u8; FLOCK_SIZE as usize];
        b[0..2].copy_from_slice(&self.ty.to_le_bytes());
        b[2..4].copy_from_slice(&self.whence.to_le_bytes());
        b[8..16].copy_from_slice(&self.start.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..28].copy_from_slice(&self.pid.to_le_bytes());
        Ok(mem.write(addr, &b)?)
    }

    fn to_host(self) -> libc::flock {
        // SAFETY: `libc::flock` is plain old data; all-zero is a valid value.
        let mut h: libc::flock = unsafe { std::mem::zeroed() };
        h.l_type = self.ty;
        h.l_whence = self.whence;
        h.l_start = self.start;
        h.l_len = self.len;
        h.l_pid = 0; // OFD locks require 0
        h
    }

    fn from_host(h: &libc::flock) -> Self {
        Self {
            ty: h.l_type,
            whence: h.l_whence,
            start: h.l_start,
            len: h.l_len,
            pid: h.l_pid,
        }
    }
}

/// fcntl(fd, cmd, &lock) on the host, for the OFD lock commands only.
fn host_ofd(fd: BorrowedFd<'_>, cmd: i32, l: &mut libc::flock) -> Result<(), Errno> {
    debug_assert!(matches!(cmd, libc::F_OFD_GETLK | libc::F_OFD_SETLK));
    // SAFETY: `fd` is a live descriptor borrowed for the call, and `l` is a
    // valid, exclusively borrowed `struct flock` the kernel reads and (for
    // F_OFD_GETLK) writes; no other memory is touched.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), cmd, l as *mut libc::flock) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// The record-lock commands of fcntl(2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    /// F_GETLK / F_OFD_GETLK.
    Get,
    /// F_SETLK / F_OFD_SETLK.
    Set,
    /// F_SETLKW / F_OFD_SETLKW: waits while the lock is held elsewhere.
    SetWait,
}

/// fcntl's record locks on guest descriptor `file`; `ofd` for the `F_OFD_*`
/// commands (held by the open file description rather than the process).
pub fn fcntl(
    p: &mut Process,
    mem: &mut GuestMemory,
    file: &FileRef,
    cmd: Cmd,
    ofd: bool,
    arg: u64,
) -> SysResult {
    let f = lock(file);
    if f.path_only() {
        return Err(Errno::EBADF);
    }
    let mut req = Flock::read(mem, arg)?;
    if !matches!(req.ty, F_RDLCK | F_WRLCK | F_UNLCK)
        || !matches!(req.whence, SEEK_SET | SEEK_CUR | SEEK_END)
    {
        return Err(Errno::EINVAL);
    }
    if ofd && req.pid != 0 {
        return Err(Errno::EINVAL);
    }
    if cmd != Cmd::Get
        && ((req.ty == F_RDLCK && !f.readable()) || (req.ty == F_WRLCK && !f.writable()))
    {
        return Err(Errno::EBADF);
    }
    let Some(own) = host_fd(&f) else {
        // Nothing to share it with: granted, and nobody else holds one.
        if cmd == Cmd::Get {
            mem.write(arg, &F_UNLCK.to_le_bytes())?;
        }
        return Ok(0);
    };
    // The guest's offset is forkvm's, not the host descriptor's.
    if req.whence == SEEK_CUR {
        req.start = i64::try_from(f.offset)
            .ok()
            .and_then(|o| o.checked_add(req.start))
            .ok_or(Errno::EOVERFLOW)?;
        req.whence = SEEK_SET;
    }
    let own = own.try_clone_to_owned()?;
    drop(f);
    let holder = if ofd {
        Arc::new(own)
    } else {
        let want_new = cmd != Cmd::Get && req.ty != F_UNLCK;
        match process_fd(p, own.as_fd(), want_new)? {
            Some(fd) => fd,
            // Unlocking what this process never locked: nothing to do.
            None if cmd != Cmd::Get => return Ok(0),
            // Asking, without locks of its own on the file.
            None => Arc::new(own),
        }
    };
    let mut h = req.to_host();
    match cmd {
        Cmd::Get => {
            host_ofd(holder.as_fd(), libc::F_OFD_GETLK, &mut h)?;
            if h.l_type == F_UNLCK {
                mem.write(arg, &F_UNLCK.to_le_bytes())?;
            } else {
                let mut out = Flock::from_host(&h);
                out.pid = if ofd {
                    -1
                } else {
                    holder_pid(holder.as_fd(), &h, super::child::pid_of(p)).unwrap_or(-1)
                };
                out.write(mem, arg)?;
            }
            Ok(0)
        }
        Cmd::Set | Cmd::SetWait => match host_ofd(holder.as_fd(), libc::F_OFD_SETLK, &mut h) {
            Ok(()) => {
                if !ofd && req.ty != F_UNLCK {
                    keep(p, holder)?;
                }
                Ok(0)
            }
            Err(e) if e == Errno::EAGAIN && cmd == Cmd::SetWait => {
                let _ = super::thread::wait(p, None, Some(Instant::now() + RECHECK));
                Ok(0)
            }
            Err(e) => Err(e),
        },
    }
}

/// The descriptor holding this process's POSIX locks on the file `own`
/// refers to; with `open`, one is opened if there is none yet.
fn process_fd(
    p: &mut Process,
    own: BorrowedFd<'_>,
    open: bool,
) -> Result<Option<Arc<OwnedFd>>, Errno> {
    let id = file_id(own)?;
    if let Some(fd) = p.record_locks.by_file.get(&id) {
        return Ok(Some(fd.clone()));
    }
    if !open {
        return Ok(None);
    }
    // A description of its own (so the guest's other descriptors and other
    // processes conflict with it, and closing it releases only these locks),
    // writable if the host allows, since a write lock needs it; it is used
    // for nothing but locks.
    let path = format!("/proc/self/fd/{}", own.as_raw_fd());
    let opened = [rustix::fs::OFlags::RDWR, rustix::fs::OFlags::RDONLY]
        .into_iter()
        .find_map(|acc| {
            rustix::fs::open(
                path.as_str(),
                acc | rustix::fs::OFlags::CLOEXEC
                    | rustix::fs::OFlags::NONBLOCK
                    | rustix::fs::OFlags::NOCTTY,
                rustix::fs::Mode::empty(),
            )
            .ok()
        });
    opened.map(|fd| Some(Arc::new(fd))).ok_or(Errno::ENOLCK)
}

/// Records that this process holds POSIX locks through `fd`.
fn keep(p: &mut Process, fd: Arc<OwnedFd>) -> Result<(), Errno> {
    let id = file_id(fd.as_fd())?;
    if p.record_locks.by_file.contains_key(&id) {
        return Ok(());
    }
    let pid = super::child::pid_of(p);
    let mut h = holders().lock().unwrap_or_else(|e| e.into_inner());
    h.retain(|_, list| {
        list.retain(|(_, w)| w.strong_count() > 0);
        !list.is_empty()
    });
    h.entry(id).or_default().push((pid, Arc::downgrade(&fd)));
    p.record_locks.by_file.insert(id, fd);
    Ok(())
}

/// The guest pid of a process whose POSIX locks conflict with `probe`,
/// asked through `mine`: the holder is the process through whose own
/// descriptor the same question finds no conflict, or another one.
fn holder_pid(mine: BorrowedFd<'_>, probe: &libc::flock, me: u64) -> Option<i32> {
    let id = file_id(mine).ok()?;
    let h = holders().lock().unwrap_or_else(|e| e.into_inner());
    let others: Vec<(u64, Arc<OwnedFd>)> = h
        .get(&id)?
        .iter()
        .filter(|(pid, _)| *pid != me)
        .filter_map(|(pid, w)| Some((*pid, w.upgrade()?)))
        .collect();
    drop(h);
    let mut fallback = None;
    for (pid, fd) in others {
        let mut q = *probe;
        q.l_pid = 0;
        q.l_type = F_WRLCK;
        if host_ofd(fd.as_fd(), libc::F_OFD_GETLK, &mut q).is_ok()
            && (q.l_type == F_UNLCK || q.l_start != probe.l_start || q.l_len != probe.l_len)
        {
            return i32::try_from(pid).ok();
        }
        fallback.get_or_insert(pid);
    }
    fallback.and_then(|p| i32::try_from(p).ok())
}

/// A descriptor of `file` was closed: as on Linux, the process's POSIX
/// locks on that file go with it, whatever descriptor took them.
pub fn closed(p: &mut Process, file: &FileRef) {
    if p.record_locks.by_file.is_empty() {
        return;
    }
    let f = lock(file);
    let Some(id) = host_fd(&f).and_then(|fd| file_id(fd).ok()) else {
        return;
    };
    drop(f);
    p.record_locks.by_file.remove(&id);
}

/// Implements flock(2) on guest descriptor `file`: the host's flock on its
/// host descriptor; a lock held elsewhere is waited for unless `LOCK_NB`.
pub fn flock(p: &mut Process, file: &FileRef, op: u64) -> SysResult {
    const LOCK_SH: u64 = 1;
    const LOCK_EX: u64 = 2;
    const LOCK_NB: u64 = 4;
    const LOCK_UN: u64 = 8;
    use rustix::fs::FlockOperation as Op;
    let f = lock(file);
    if f.path_only() {
        return Err(Errno::EBADF);
    }
    let nonblocking = op & LOCK_NB != 0;
    let host_op = match op & !LOCK_NB {
        LOCK_SH => Op::NonBlockingLockShared,
        LOCK_EX => Op::NonBlockingLockExclusive,
        LOCK_UN => Op::Unlock,
        _ => return Err(Errno::EINVAL),
    };
    let Some(fd) = host_fd(&f) else {
        return Ok(0);
    };
    match rustix::fs::flock(fd, host_op) {
        Ok(()) => Ok(0),
        Err(rustix::io::Errno::WOULDBLOCK) if !nonblocking => {
            drop(f);
            let _ = super::thread::wait(p, None, Some(Instant::now() + RECHECK));
            Ok(0)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::test_process;

    /// Bad requests are errors to the guest, and descriptors that are not
    /// host files lock nothing (granted; nobody else holds one).
    #[test]
    fn bad_requests_and_lockless_descriptors() {
        let (mut p, mut m, buf) = test_process();
        // pipe(buf)
        assert_eq!(
            crate::linux::dispatch(&mut p, &mut m, 22, &[buf, 0, 0, 0, 0, 0]),
            0
        );
        let w = m.read_u32(buf).expect("fd") as i32;
        let file = p.fds.get(w).expect("open");
        let l = Flock {
            ty: F_WRLCK,
            whence: SEEK_SET,
            start: 0,
            len: 0,
            pid: 0,
        };
        l.write(&mut m, buf + 64).expect("write");
        assert_eq!(
            fcntl(&mut p, &mut m, &file, Cmd::Get, false, buf + 64),
            Ok(0)
        );
        assert_eq!(Flock::read(&m, buf + 64).expect("read").ty, F_UNLCK);
        for bad in [Flock { ty: 7, ..l }, Flock { whence: 9, ..l }] {
            bad.write(&mut m, buf + 64).expect("write");
            assert_eq!(
                fcntl(&mut p, &mut m, &file, Cmd::Set, false, buf + 64),
                Err(Errno::EINVAL)
            );
        }
        Flock { pid: 5, ..l }
            .write(&mut m, buf + 64)
            .expect("write");
        assert_eq!(
            fcntl(&mut p, &mut m, &file, Cmd::Set, true, buf + 64),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            fcntl(&mut p, &mut m, &file, Cmd::Set, false, 0),
            Err(Errno::EFAULT)
        );
        assert_eq!(flock(&mut p, &file, 2), Ok(0));
        assert_eq!(flock(&mut p, &file, 3), Err(Errno::EINVAL));
    }
}
