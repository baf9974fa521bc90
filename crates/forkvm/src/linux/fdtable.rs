//! The file-descriptor table and the open file descriptions behind it, plus
//! the descriptor syscalls: close, dup, dup2, dup3, fcntl, close_range, flock.
//!
//! A slot holds a shared [`FileRef`] (the Linux "open file description":
//! kind, status flags and offset) and its own FD_CLOEXEC bit, so `dup`ed
//! descriptors share offset and flags exactly as on Linux.

use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Most descriptors a process may have open (RLIMIT_NOFILE's hard limit,
/// Linux's own default one); fds are `0..MAX_FDS`.
pub const MAX_FDS: usize = 4096;
/// RLIMIT_NOFILE's soft limit at start, as on Linux: a program that wants
/// more raises it (Go's runtime and node do, to the hard limit).
pub const DEFAULT_FD_LIMIT: usize = 1024;

/// Open flags (x86-64 values).
pub mod oflags {
    pub const O_RDONLY: u32 = 0;
    pub const O_WRONLY: u32 = 0o1;
    pub const O_RDWR: u32 = 0o2;
    pub const O_ACCMODE: u32 = 0o3;
    pub const O_CREAT: u32 = 0o100;
    pub const O_EXCL: u32 = 0o200;
    pub const O_NOCTTY: u32 = 0o400;
    pub const O_TRUNC: u32 = 0o1000;
    pub const O_APPEND: u32 = 0o2000;
    pub const O_NONBLOCK: u32 = 0o4000;
    pub const O_ASYNC: u32 = 0o20000;
    pub const O_LARGEFILE: u32 = 0o100000;
    pub const O_DIRECTORY: u32 = 0o200000;
    pub const O_NOFOLLOW: u32 = 0o400000;
    pub const O_CLOEXEC: u32 = 0o2000000;
    pub const O_PATH: u32 = 0o10000000;
    pub const O_TMPFILE: u32 = 0o20000000;
}
use oflags::*;

const F_DUPFD: u64 = 0;
const F_GETFD: u64 = 1;
const F_SETFD: u64 = 2;
const F_GETFL: u64 = 3;
const F_SETFL: u64 = 4;
const F_GETLK: u64 = 5;
const F_SETLK: u64 = 6;
const F_SETLKW: u64 = 7;
const F_OFD_GETLK: u64 = 36;
const F_OFD_SETLK: u64 = 37;
const F_OFD_SETLKW: u64 = 38;
const F_DUPFD_CLOEXEC: u64 = 1030;
const F_SETPIPE_SZ: u64 = 1031;
const F_GETPIPE_SZ: u64 = 1032;
/// Linux's default /proc/sys/fs/pipe-max-size.
pub(crate) const PIPE_MAX_SIZE: u64 = 1 << 20;
const F_ADD_SEALS: u64 = 1033;
const F_GET_SEALS: u64 = 1034;
const FD_CLOEXEC: u64 = 1;
const CLOSE_RANGE_UNSHARE: u64 = 2;
const CLOSE_RANGE_CLOEXEC: u64 = 4;

/// Locks a mutex, ignoring poisoning (a panicking handler leaves no torn state we care about).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub use super::pipe::{FifoNode, Pipe, PipeEnd, PIPE_CAPACITY};

/// What an open file description refers to.
pub enum FileKind {
    /// The host's standard input (fd 0), read through.
    Stdin,
    /// The host's standard output (fd 1), written through.
    Stdout,
    /// The host's standard error (fd 2), written through.
    Stderr,
    /// A host regular file opened read-only (or O_PATH).
    File {
        /// Host descriptor.
        fd: OwnedFd,
        /// Guest path it was opened as.
        path: Vec<u8>,
    },
    /// A host directory (for getdents64, fstat, *at calls, fchdir).
    Dir {
        /// Host descriptor; its kernel offset is the getdents position.
        fd: OwnedFd,
        /// Canonical guest path.
        path: Vec<u8>,
    },
    /// Something only opened with O_PATH (a symlink, fifo, device...).
    PathOnly {
        /// Host O_PATH descriptor.
        fd: OwnedFd,
        /// Guest path.
        path: Vec<u8>,
    },
    /// One end of an in-process pipe.
    Pipe(PipeEnd),
    /// /dev/null.
    Null,
    /// /dev/zero.
    Zero,
    /// /dev/urandom (and /dev/random).
    Urandom,
    /// eventfd, timerfd or epoll.
    Event(super::event::EventObj),
    /// A UNIX-domain socket (socketpair or unnamed socket).
    Socket(super::unix_socket::Socket),
    /// One end of a pseudo-terminal (`/dev/ptmx`, `/dev/pts/N`).
    Pty(super::pty::PtyEnd),
}

/// An open file description: shared by every fd `dup`ed from the same open.
pub struct OpenFile {
    /// What it refers to.
    pub kind: FileKind,
    /// Access mode and status flags (O_ACCMODE, O_APPEND, O_NONBLOCK, O_PATH, ...).
    pub flags: u32,
    /// Current file offset (regular files; directories use the host fd's offset).
    pub offset: u64,
    /// Who would get SIGIO: (`F_OWNER_*` kind, pid, or a negated group; 0: none)
    /// (see `fasync`).
    pub owner: (i32, i32),
    /// The signal sent instead of SIGIO (`F_SETSIG`; 0: SIGIO).
    pub owner_signal: u8,
}

/// A shared open file description.
pub type FileRef = Arc<Mutex<OpenFile>>;

impl OpenFile {
    /// A description of `kind` with `flags`, at offset 0.
    pub fn new(kind: FileKind, flags: u32) -> Self {
        Self {
            kind,
            flags,
            offset: 0,
            owner: (0, 0),
            owner_signal: 0,
        }
    }

    /// Wraps it for sharing between descriptors.
    pub fn into_ref(self) -> FileRef {
        Arc::new(Mutex::new(self))
    }

    /// Whether a write that fails with EPIPE raises SIGPIPE, as on Linux:
    /// pipes, the host's standard output streams (a closed pipe there, as in
    /// `forkvm run yes | head -1`) and stream sockets (unless MSG_NOSIGNAL).
    pub fn write_raises_sigpipe(&self) -> bool {
        match &self.kind {
            FileKind::Pipe(_) | FileKind::Stdout | FileKind::Stderr => true,
            FileKind::Socket(s) => s.sigpipe(),
            _ => false,
        }
    }

    /// Opened with O_PATH: only usable as a dirfd and for fstat.
    pub fn path_only(&self) -> bool {
        self.flags & O_PATH != 0
    }

    /// Opened for reading.
    pub fn readable(&self) -> bool {
        !self.path_only() && matches!(self.flags & O_ACCMODE, O_RDONLY | O_RDWR)
    }

    /// Opened for writing.
    pub fn writable(&self) -> bool {
        !self.path_only() && matches!(self.flags & O_ACCMODE, O_WRONLY | O_RDWR)
    }

    /// Non-blocking I/O requested.
    pub fn nonblocking(&self) -> bool {
        self.flags & O_NONBLOCK != 0
    }

    /// Guest path of a host file or directory, if it has one.
    pub fn guest_path(&self) -> Option<&[u8]> {
        match &self.kind {
            FileKind::File { path, .. }
            | FileKind::Dir { path, .. }
            | FileKind::PathOnly { path, .. } => Some(path),
            _ => None,
        }
    }
}

#[derive(Clone)]
struct Slot {
    file: FileRef,
    cloexec: bool,
}

/// Open files of the process.
pub struct FdTable {
    slots: Vec<Option<Slot>>,
    /// File-mode creation mask for umask(2) (kept with the per-process file state).
    pub umask: u32,
    /// RLIMIT_NOFILE's soft limit: new descriptors are below it (those
    /// already open above a lowered limit stay usable, as on Linux).
    limit: usize,
}

fn index(fd: i32) -> Result<usize, Errno> {
    usize::try_from(fd)
        .ok()
        .filter(|&i| i < MAX_FDS)
        .ok_or(Errno::EBADF)
}

impl FdTable {
    /// stdin, stdout and stderr open.
    pub fn with_stdio() -> Self {
        let slot = |kind, flags| {
            Some(Slot {
                file: OpenFile::new(kind, flags).into_ref(),
                cloexec: false,
            })
        };
        Self {
            slots: vec![
                slot(FileKind::Stdin, O_RDONLY),
                slot(FileKind::Stdout, O_WRONLY),
                slot(FileKind::Stderr, O_WRONLY),
            ],
            umask: 0o022,
            limit: DEFAULT_FD_LIMIT,
        }
    }

    fn slot(&self, fd: i32) -> Result<&Slot, Errno> {
        self.slots
            .get(index(fd)?)
            .and_then(Option::as_ref)
            .ok_or(Errno::EBADF)
    }

    /// The open file behind `fd`, or EBADF.
    pub fn get(&self, fd: i32) -> Result<FileRef, Errno> {
        Ok(self.slot(fd)?.file.clone())
    }

    /// Whether `fd` is open.
    pub fn is_open(&self, fd: i32) -> bool {
        self.slot(fd).is_ok()
    }

    /// The FD_CLOEXEC bit of `fd`.
    pub fn cloexec(&self, fd: i32) -> Result<bool, Errno> {
        Ok(self.slot(fd)?.cloexec)
    }

    /// Sets the FD_CLOEXEC bit of `fd`.
    pub fn set_cloexec(&mut self, fd: i32, on: bool) -> Result<(), Errno> {
        let i = index(fd)?;
        match self.slots.get_mut(i).and_then(Option::as_mut) {
            Some(s) => {
                s.cloexec = on;
                Ok(())
            }
            None => Err(Errno::EBADF),
        }
    }

    /// The highest descriptor number plus one that a new descriptor may have.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Sets RLIMIT_NOFILE's soft limit (at most [`MAX_FDS`]).
    pub fn set_limit(&mut self, limit: u64) {
        self.limit = usize::try_from(limit).unwrap_or(MAX_FDS).min(MAX_FDS);
    }

    /// Installs `file` at the lowest free fd `>= min`; EMFILE when full.
    pub fn insert_from(&mut self, min: usize, file: FileRef, cloexec: bool) -> Result<i32, Errno> {
        let free = (min..self.limit)
            .find(|&i| !matches!(self.slots.get(i), Some(Some(_))))
            .ok_or(Errno::EMFILE)?;
        if self.slots.len() <= free {
            self.slots.resize(free + 1, None);
        }
        self.slots[free] = Some(Slot { file, cloexec });
        Ok(free as i32)
    }

    /// Opens a new description at the lowest free fd.
    pub fn insert(&mut self, file: OpenFile, cloexec: bool) -> Result<i32, Errno> {
        self.insert_from(0, file.into_ref(), cloexec)
    }

    /// Puts `file` at exactly `fd`, closing what was there (dup2 semantics).
    pub fn install(&mut self, fd: i32, file: FileRef, cloexec: bool) -> Result<(), Errno> {
        let i = index(fd)?;
        if i >= self.limit {
            return Err(Errno::EBADF);
        }
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        // The old description (if any) drops here, after the new one is in place.
        let _old = self.slots[i].replace(Slot { file, cloexec });
        Ok(())
    }

    /// Closes `fd`; EBADF if it was not open.
    pub fn close(&mut self, fd: i32) -> Result<(), Errno> {
        let i = index(fd)?;
        match self.slots.get_mut(i).and_then(Option::take) {
            Some(_) => {
                while matches!(self.slots.last(), Some(None)) {
                    self.slots.pop();
                }
                Ok(())
            }
            None => Err(Errno::EBADF),
        }
    }

    /// Numbers of all open fds, ascending.
    pub fn open_fds(&self) -> Vec<i32> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| i as i32)
            .collect()
    }

    /// A copy for a child process: the same open file descriptions (shared
    /// offsets, pipe ends, sockets), as fork(2) makes.
    pub fn share_copy(&self) -> FdTable {
        FdTable {
            slots: self.slots.clone(),
            umask: self.umask,
            limit: self.limit,
        }
    }

    /// Closes every fd marked FD_CLOEXEC (for execve).
    pub fn close_on_exec(&mut self) {
        for s in &mut self.slots {
            if s.as_ref().is_some_and(|s| s.cloexec) {
                *s = None;
            }
        }
    }

    /// Checks that `fd` can back a private file mapping (mmap).
    pub fn check_mappable(&self, fd: i32) -> Result<(), Errno> {
        let f = self.get(fd)?;
        let f = lock(&f);
        if f.path_only() {
            return Err(Errno::EBADF);
        }
        if !f.readable() {
            return Err(Errno::EACCES);
        }
        match f.kind {
            FileKind::File { .. } | FileKind::Zero => Ok(()),
            _ => Err(Errno::ENODEV),
        }
    }

    /// Fills `buf` with the file's bytes from `off`; bytes past EOF are left untouched.
    /// A duplicate of the host descriptor behind `fd` and the file's size,
    /// when it is a regular host file that can be mapped directly.
    pub fn host_file_for_mmap(&self, fd: i32) -> Option<(OwnedFd, u64)> {
        self.check_mappable(fd).ok()?;
        let f = self.get(fd).ok()?;
        let f = lock(&f);
        match &f.kind {
            FileKind::File { fd, .. } => {
                let size = rustix::fs::fstat(fd).ok()?.st_size as u64;
                Some((fd.try_clone().ok()?, size))
            }
            _ => None,
        }
    }

    /// What a writable `MAP_SHARED` mapping of `fd` maps: `Some` host file
    /// (a duplicate of its descriptor, and its size), `None` for /dev/zero
    /// (shared anonymous memory); EACCES unless opened for reading and
    /// writing, as Linux requires.
    pub fn host_file_for_shared_mmap(&self, fd: i32) -> Result<Option<(OwnedFd, u64)>, Errno> {
        self.check_mappable(fd)?;
        let f = self.get(fd)?;
        let f = lock(&f);
        if !f.writable() {
            return Err(Errno::EACCES);
        }
        match &f.kind {
            FileKind::File { fd, .. } => {
                // A memfd sealed against writes cannot be mapped for them.
                let no_writes = rustix::fs::SealFlags::WRITE | rustix::fs::SealFlags::FUTURE_WRITE;
                if rustix::fs::fcntl_get_seals(fd).is_ok_and(|s| s.intersects(no_writes)) {
                    return Err(Errno::EPERM);
                }
                let size = rustix::fs::fstat(fd)?.st_size as u64;
                Ok(Some((fd.try_clone().map_err(|_| Errno::ENOMEM)?, size)))
            }
            _ => Ok(None),
        }
    }

    pub fn read_at_for_mmap(&self, fd: i32, buf: &mut [u8], off: u64) -> Result<(), Errno> {
        self.check_mappable(fd)?;
        let f = self.get(fd)?;
        let f = lock(&f);
        match &f.kind {
            FileKind::File { fd, .. } => {
                let mut done = 0usize;
                while done < buf.len() {
                    let at = off.checked_add(done as u64).ok_or(Errno::EOVERFLOW)?;
                    match rustix::io::pread(fd.as_fd(), &mut buf[done..], at) {
                        Ok(0) => break,
                        Ok(n) => done += n,
                        Err(rustix::io::Errno::INTR) => continue,
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok(())
            }
            FileKind::Zero => {
                buf.fill(0);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Implements close(2).
fn sys_close(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let f = p.fds.get(a[0] as i32)?;
    p.fds.close(a[0] as i32)?;
    super::locks::closed(p, &f);
    Ok(0)
}

/// Implements dup(2).
fn sys_dup(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let f = p.fds.get(a[0] as i32)?;
    Ok(p.fds.insert_from(0, f, false)? as u64)
}

fn dup_to(p: &mut Process, old: i32, new: i32, cloexec: bool) -> SysResult {
    let f = p.fds.get(old)?;
    let replaced = p.fds.get(new).ok();
    p.fds.install(new, f, cloexec)?;
    if let Some(r) = replaced {
        super::locks::closed(p, &r);
    }
    Ok(new as u64)
}

/// Implements dup2(2).
fn sys_dup2(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let (old, new) = (a[0] as i32, a[1] as i32);
    if old == new {
        p.fds.get(old)?;
        return Ok(new as u64);
    }
    dup_to(p, old, new, false)
}

/// Implements dup3(2).
fn sys_dup3(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let (old, new, flags) = (a[0] as i32, a[1] as i32, a[2] as u32);
    if flags & !O_CLOEXEC != 0 || old == new {
        return Err(Errno::EINVAL);
    }
    dup_to(p, old, new, flags & O_CLOEXEC != 0)
}

/// Implements fcntl(2).
fn sys_fcntl(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let fd = a[0] as i32;
    let file = p.fds.get(fd)?;
    let arg = a[2];
    match a[1] as u32 as u64 {
        cmd @ (F_DUPFD | F_DUPFD_CLOEXEC) => {
            let min = usize::try_from(arg)
                .ok()
                .filter(|&m| m < p.fds.limit())
                .ok_or(Errno::EINVAL)?;
            Ok(p.fds.insert_from(min, file, cmd == F_DUPFD_CLOEXEC)? as u64)
        }
        F_GETFD => Ok(if p.fds.cloexec(fd)? { FD_CLOEXEC } else { 0 }),
        F_SETFD => {
            p.fds.set_cloexec(fd, arg & FD_CLOEXEC != 0)?;
            Ok(0)
        }
        F_GETFL => Ok(u64::from(lock(&file).flags)),
        F_SETFL => {
            let mut f = lock(&file);
            if f.path_only() {
                return Err(Errno::EBADF);
            }
            if (arg as u32 ^ f.flags) & O_ASYNC != 0 {
                drop(f);
                super::fasync::set_async(&file, arg as u32 & O_ASYNC != 0);
                f = lock(&file);
            }
            let settable = O_APPEND | O_NONBLOCK;
            // A host file's writes append by its host descriptor's flag (a
            // pwrite there appends too): it follows the guest's.
            if let FileKind::File { fd, .. } = &f.kind {
                let mut host = rustix::fs::fcntl_getfl(fd)?;
                host.set(rustix::fs::OFlags::APPEND, arg as u32 & O_APPEND != 0);
                rustix::fs::fcntl_setfl(fd, host)?;
            }
            f.flags = (f.flags & !settable) | (arg as u32 & settable);
            Ok(0)
        }
        cmd @ (F_GETLK | F_SETLK | F_SETLKW | F_OFD_GETLK | F_OFD_SETLK | F_OFD_SETLKW) => {
            use super::locks::Cmd;
            let which = match cmd {
                F_GETLK | F_OFD_GETLK => Cmd::Get,
                F_SETLK | F_OFD_SETLK => Cmd::Set,
                _ => Cmd::SetWait,
            };
            let ofd = matches!(cmd, F_OFD_GETLK | F_OFD_SETLK | F_OFD_SETLKW);
            super::locks::fcntl(p, mem, &file, which, ofd, arg)
        }
        // Seals are the host file's own (a memfd's; elsewhere the host's
        // EINVAL or EPERM).
        F_ADD_SEALS => match &lock(&file).kind {
            FileKind::File { fd, .. } => {
                let seals = rustix::fs::SealFlags::from_bits(arg as u32).ok_or(Errno::EINVAL)?;
                rustix::fs::fcntl_add_seals(fd, seals)?;
                Ok(0)
            }
            _ => Err(Errno::EINVAL),
        },
        F_GET_SEALS => match &lock(&file).kind {
            FileKind::File { fd, .. } => Ok(u64::from(rustix::fs::fcntl_get_seals(fd)?.bits())),
            _ => Err(Errno::EINVAL),
        },
        cmd @ (super::fasync::F_SETOWN
        | super::fasync::F_GETOWN
        | super::fasync::F_SETSIG
        | super::fasync::F_GETSIG
        | super::fasync::F_SETOWN_EX
        | super::fasync::F_GETOWN_EX) => super::fasync::fcntl_owner(p, mem, &file, cmd, a[2]),
        F_GETPIPE_SZ => match &lock(&file).kind {
            FileKind::Pipe(end) => Ok(lock(&end.pipe).capacity as u64),
            _ => Err(Errno::EBADF),
        },
        F_SETPIPE_SZ => match &lock(&file).kind {
            FileKind::Pipe(end) => {
                // As Linux: at least a page, a power of two, at most
                // pipe-max-size for an unprivileged process, never below
                // what the pipe holds.
                let asked = u64::from(a[2] as u32);
                if asked > PIPE_MAX_SIZE {
                    return Err(Errno::EPERM);
                }
                let size = asked.max(crate::abi::PAGE_SIZE).next_power_of_two() as usize;
                let mut pipe = lock(&end.pipe);
                if size < pipe.buf.len() {
                    return Err(Errno::EBUSY);
                }
                pipe.capacity = size;
                Ok(size as u64)
            }
            _ => Err(Errno::EBADF),
        },
        _ => Err(Errno::EINVAL),
    }
}

/// Implements close_range(2).
fn sys_close_range(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let (first, last, flags) = (a[0] as u32, a[1] as u32, a[2]);
    if flags & !(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC) != 0 || first > last {
        return Err(Errno::EINVAL);
    }
    for fd in p.fds.open_fds() {
        let n = fd as u32;
        if n < first || n > last {
            continue;
        }
        if flags & CLOSE_RANGE_CLOEXEC != 0 {
            p.fds.set_cloexec(fd, true)?;
        } else {
            let f = p.fds.get(fd)?;
            p.fds.close(fd)?;
            super::locks::closed(p, &f);
        }
    }
    Ok(0)
}

/// Implements flock(2) (see `locks`).
fn sys_flock(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let f = p.fds.get(a[0] as i32)?;
    super::locks::flock(p, &f, a[1] as u32 as u64)
}

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 3, name: "close", handler: sys_close, support: Support::Full, note: "" },
    SyscallEntry { nr: 32, name: "dup", handler: sys_dup, support: Support::Full, note: "" },
    SyscallEntry { nr: 33, name: "dup2", handler: sys_dup2, support: Support::Full, note: "" },
    SyscallEntry { nr: 72, name: "fcntl", handler: sys_fcntl, support: Support::Partial,
        note: "F_DUPFD(_CLOEXEC), F_GETFD/F_SETFD, F_GETFL/F_SETFL (O_APPEND/O_NONBLOCK), F_GETPIPE_SZ/F_SETPIPE_SZ, F_ADD_SEALS/F_GET_SEALS (the host file's seals: memfds); record locks (POSIX and OFD) between the run's processes, held on the host (see locks.rs); others EINVAL" },
    SyscallEntry { nr: 73, name: "flock", handler: sys_flock, support: Support::Partial,
        note: "host flock on the file's description; a lock held elsewhere is looked at again every 1 ms; pipes and sockets lock nothing" },
    SyscallEntry { nr: 292, name: "dup3", handler: sys_dup3, support: Support::Full, note: "" },
    SyscallEntry { nr: 436, name: "close_range", handler: sys_close_range, support: Support::Full, note: "" },
];

/// Copying a table for a fork: same descriptors, same sharing between them,
/// but no open file description shared with the original (offsets, pipe
/// contents and directory positions of a fork never reach the master).
impl FdTable {
    /// A deep copy of the table.
    pub fn fork_copy(&self) -> Result<FdTable, Errno> {
        let mut files: Vec<(*const Mutex<OpenFile>, FileRef)> = Vec::new();
        let mut pipes: Vec<(*const Mutex<Pipe>, Arc<Mutex<Pipe>>)> = Vec::new();
        let mut socks = super::unix_dgram::ForkCopies::default();
        let mut ptys = Vec::new();
        let mut slots = Vec::with_capacity(self.slots.len());
        for slot in &self.slots {
            let Some(slot) = slot else {
                slots.push(None);
                continue;
            };
            let key = Arc::as_ptr(&slot.file);
            let file = match files.iter().find(|(k, _)| *k == key) {
                Some((_, f)) => f.clone(),
                None => {
                    let f =
                        copy_file(&lock(&slot.file), &mut pipes, &mut socks, &mut ptys)?.into_ref();
                    files.push((key, f.clone()));
                    f
                }
            };
            slots.push(Some(Slot {
                file,
                cloexec: slot.cloexec,
            }));
        }
        Ok(FdTable {
            slots,
            umask: self.umask,
            limit: self.limit,
        })
    }
}

fn dup(fd: &OwnedFd) -> Result<OwnedFd, Errno> {
    rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(Errno::from)
}

fn copy_file(
    f: &OpenFile,
    pipes: &mut Vec<(*const Mutex<Pipe>, Arc<Mutex<Pipe>>)>,
    socks: &mut super::unix_dgram::ForkCopies,
    ptys: &mut Vec<(*const Mutex<super::pty::Pty>, Arc<Mutex<super::pty::Pty>>)>,
) -> Result<OpenFile, Errno> {
    let kind = match &f.kind {
        FileKind::Stdin => FileKind::Stdin,
        FileKind::Stdout => FileKind::Stdout,
        FileKind::Stderr => FileKind::Stderr,
        FileKind::Null => FileKind::Null,
        FileKind::Zero => FileKind::Zero,
        FileKind::Urandom => FileKind::Urandom,
        // A fork never shares the master's inotify queue (see `inotify`).
        FileKind::Event(super::event::EventObj::Inotify(_)) => FileKind::Event(
            super::event::EventObj::Inotify(super::inotify::new_instance()?),
        ),
        FileKind::Event(e) => FileKind::Event(e.clone()),
        FileKind::Socket(s) => FileKind::Socket(s.fork_copy(socks)),
        FileKind::Pty(end) => FileKind::Pty(end.fork_copy(ptys)),
        FileKind::File { fd, path } => FileKind::File {
            fd: dup(fd)?,
            path: path.clone(),
        },
        FileKind::PathOnly { fd, path } => FileKind::PathOnly {
            fd: dup(fd)?,
            path: path.clone(),
        },
        FileKind::Dir { fd, path } => {
            // A new description (own position), moved to the same position.
            let new = rustix::fs::openat(
                fd,
                ".",
                rustix::fs::OFlags::RDONLY
                    | rustix::fs::OFlags::DIRECTORY
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )?;
            let pos = rustix::fs::seek(fd, rustix::fs::SeekFrom::Current(0))?;
            rustix::fs::seek(&new, rustix::fs::SeekFrom::Start(pos))?;
            FileKind::Dir {
                fd: new,
                path: path.clone(),
            }
        }
        FileKind::Pipe(end) => {
            let key = Arc::as_ptr(&end.pipe);
            let pipe = match pipes.iter().find(|(k, _)| *k == key) {
                Some((_, p)) => p.clone(),
                None => {
                    let old = lock(&end.pipe);
                    let p = Arc::new(Mutex::new(Pipe {
                        buf: old.buf.clone(),
                        capacity: old.capacity,
                        readers: old.readers,
                        writers: old.writers,
                        id: old.id,
                        writes: old.writes,
                        reads: old.reads,
                        reader_opens: old.reader_opens,
                        writer_opens: old.writer_opens,
                    }));
                    pipes.push((key, p.clone()));
                    p
                }
            };
            FileKind::Pipe(PipeEnd {
                pipe,
                read: end.read,
                write: end.write,
                node: end.node.clone(),
                writers_seen: end.writers_seen,
            })
        }
    };
    Ok(OpenFile {
        kind,
        flags: f.flags,
        offset: f.offset,
        owner: f.owner,
        owner_signal: f.owner_signal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::Policy;

    fn setup() -> (Process, GuestMemory) {
        crate::linux::test_setup(Policy::default())
    }

    fn call(
        p: &mut Process,
        m: &mut GuestMemory,
        h: super::super::Handler,
        a: [u64; 6],
    ) -> SysResult {
        h(p, m, &a)
    }

    #[test]
    fn stdio_is_open_and_close_works() {
        let (mut p, mut m) = setup();
        assert_eq!(p.fds.open_fds(), vec![0, 1, 2]);
        assert_eq!(call(&mut p, &mut m, sys_close, [0, 0, 0, 0, 0, 0]), Ok(0));
        assert_eq!(
            call(&mut p, &mut m, sys_close, [0, 0, 0, 0, 0, 0]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_close, [5000, 0, 0, 0, 0, 0]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_close, [u64::MAX, 0, 0, 0, 0, 0]),
            Err(Errno::EBADF)
        );
        // Lowest free slot is reused.
        assert_eq!(call(&mut p, &mut m, sys_dup, [1, 0, 0, 0, 0, 0]), Ok(0));
    }

    #[test]
    fn dup_shares_description_but_not_cloexec() {
        let (mut p, mut m) = setup();
        let fd = p
            .fds
            .insert(OpenFile::new(FileKind::Null, O_RDONLY), true)
            .unwrap();
        assert_eq!(fd, 3);
        let d = call(&mut p, &mut m, sys_dup, [3, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(d, 4);
        assert_eq!(
            call(&mut p, &mut m, sys_fcntl, [3, F_GETFD, 0, 0, 0, 0]),
            Ok(1)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_fcntl, [4, F_GETFD, 0, 0, 0, 0]),
            Ok(0)
        );
        call(
            &mut p,
            &mut m,
            sys_fcntl,
            [4, F_SETFL, u64::from(O_NONBLOCK), 0, 0, 0],
        )
        .unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_fcntl, [3, F_GETFL, 0, 0, 0, 0]),
            Ok(u64::from(O_NONBLOCK))
        );
        lock(&p.fds.get(3).unwrap()).offset = 77;
        assert_eq!(lock(&p.fds.get(4).unwrap()).offset, 77);
        // dup2 onto an open fd replaces it; same fd is a no-op.
        assert_eq!(call(&mut p, &mut m, sys_dup2, [3, 1, 0, 0, 0, 0]), Ok(1));
        assert!(matches!(lock(&p.fds.get(1).unwrap()).kind, FileKind::Null));
        assert_eq!(call(&mut p, &mut m, sys_dup2, [3, 3, 0, 0, 0, 0]), Ok(3));
        assert_eq!(
            call(&mut p, &mut m, sys_dup2, [99, 3, 0, 0, 0, 0]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_dup2, [3, 1024, 0, 0, 0, 0]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_dup3, [3, 3, 0, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_dup3, [3, 9, 1, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        let cx = u64::from(O_CLOEXEC);
        assert_eq!(call(&mut p, &mut m, sys_dup3, [3, 9, cx, 0, 0, 0]), Ok(9));
        assert_eq!(p.fds.cloexec(9), Ok(true));
        assert_eq!(
            call(&mut p, &mut m, sys_fcntl, [3, F_DUPFD_CLOEXEC, 20, 0, 0, 0]),
            Ok(20)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_fcntl, [3, F_DUPFD, 20, 0, 0, 0]),
            Ok(21)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_fcntl, [3, F_DUPFD, 1024, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_fcntl, [3, 9999, 0, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_fcntl, [77, F_GETFD, 0, 0, 0, 0]),
            Err(Errno::EBADF)
        );
    }

    #[test]
    fn fd_limit_is_emfile() {
        let (mut p, mut m) = setup();
        for _ in 3..DEFAULT_FD_LIMIT {
            call(&mut p, &mut m, sys_dup, [0, 0, 0, 0, 0, 0]).unwrap();
        }
        assert_eq!(
            call(&mut p, &mut m, sys_dup, [0, 0, 0, 0, 0, 0]),
            Err(Errno::EMFILE)
        );
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_close_range,
                [10, u64::from(u32::MAX), 0, 0, 0, 0]
            ),
            Ok(0)
        );
        assert_eq!(p.fds.open_fds().len(), 10);
        assert_eq!(
            call(&mut p, &mut m, sys_close_range, [5, 2, 0, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_close_range,
                [3, 4, CLOSE_RANGE_CLOEXEC, 0, 0, 0]
            ),
            Ok(0)
        );
        assert_eq!(p.fds.cloexec(4), Ok(true));
        p.fds.close_on_exec();
        assert!(!p.fds.is_open(3) && !p.fds.is_open(4) && p.fds.is_open(5));
    }

    #[test]
    fn locks_check_pointers() {
        let (mut p, mut m) = setup();
        let buf = crate::abi::USER_BASE;
        assert_eq!(
            call(&mut p, &mut m, sys_fcntl, [0, F_GETLK, buf, 0, 0, 0]),
            Ok(0)
        );
        assert_eq!(
            m.read(buf, 2).unwrap(),
            &2u16.to_le_bytes() /* F_UNLCK */
        );
        for bad in [0, 0xffff_8000_0000_0000, 8 << 20, u64::MAX - 4] {
            assert_eq!(
                call(&mut p, &mut m, sys_fcntl, [0, F_SETLK, bad, 0, 0, 0]),
                Err(Errno::EFAULT)
            );
        }
        assert_eq!(call(&mut p, &mut m, sys_flock, [0, 2, 0, 0, 0, 0]), Ok(0));
        assert_eq!(
            call(&mut p, &mut m, sys_flock, [0, 3, 0, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_flock, [50, 2, 0, 0, 0, 0]),
            Err(Errno::EBADF)
        );
    }

    #[test]
    fn fork_copy_shares_nothing_with_the_original() {
        let (mut p, _m) = setup();
        let (r, w) = PipeEnd::pair();
        let pipe = r.pipe.clone();
        let rfd = p
            .fds
            .insert(OpenFile::new(FileKind::Pipe(r), O_RDONLY), false)
            .unwrap();
        let wfd = p
            .fds
            .insert(OpenFile::new(FileKind::Pipe(w), O_WRONLY), true)
            .unwrap();
        let dup = p
            .fds
            .insert_from(0, p.fds.get(rfd).unwrap(), false)
            .unwrap();
        lock(&pipe).buf.extend(b"abc");
        let copy = p.fds.fork_copy().unwrap();
        assert_eq!(copy.open_fds(), p.fds.open_fds());
        assert_eq!(copy.cloexec(wfd), Ok(true));
        // Sharing inside the copy is kept, with the original it is not.
        let (cr, cd) = (copy.get(rfd).unwrap(), copy.get(dup).unwrap());
        assert!(Arc::ptr_eq(&cr, &cd));
        assert!(!Arc::ptr_eq(&cr, &p.fds.get(rfd).unwrap()));
        let cpipe = match &lock(&cr).kind {
            FileKind::Pipe(end) => end.pipe.clone(),
            _ => panic!("not a pipe"),
        };
        assert!(!Arc::ptr_eq(&cpipe, &pipe));
        assert_eq!(lock(&cpipe).buf, b"abc");
        lock(&cpipe).buf.clear();
        assert_eq!(lock(&pipe).buf.len(), 3);
        drop((cr, cd));
        drop(copy);
        let g = lock(&pipe);
        assert_eq!((g.readers, g.writers), (1, 1));
    }

    #[test]
    fn table_is_send() {
        fn send<T: Send>() {}
        send::<FdTable>();
    }

    #[test]
    fn pipe_ends_track_counts() {
        let (r, w) = PipeEnd::pair();
        let pipe = r.pipe.clone();
        let counts = |p: &Arc<Mutex<Pipe>>| {
            let g = lock(p);
            (g.readers, g.writers)
        };
        assert_eq!(counts(&pipe), (1, 1));
        drop(w);
        assert_eq!(lock(&pipe).writers, 0);
        drop(r);
        assert_eq!(lock(&pipe).readers, 0);
    }
}
