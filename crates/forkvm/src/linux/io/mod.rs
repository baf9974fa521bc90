//! Data-transfer syscalls: read/write and their vector and positional forms,
//! lseek, pipe/pipe2, sendfile, splice/tee/vmsplice, fsync (and the sync calls), fadvise64 (readiness and poll/ppoll
//! are in [`super::poll`], ioctl in [`super::ioctl`]).
//!
//! Transfers go straight between guest memory and the host descriptor (or
//! the in-process pipe buffer). Guest lengths are validated against guest
//! memory before anything happens and capped at Linux's MAX_RW_COUNT; host
//! buffers are never sized by the guest beyond a fixed chunk.

mod pipe;
mod splice;
mod sync;
mod vectored;

use super::fdtable::{lock, FileKind, FileRef, OpenFile};
use super::poll::{host_ready, POLLIN};
use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use pipe::{pipe_read, pipe_write, sys_pipe, sys_pipe2};
use splice::{sys_splice, sys_tee, sys_vmsplice};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use sync::{sys_sync, sys_sync_file_range, sys_syncfs};
pub(crate) use vectored::{gather, iovecs, scatter};
use vectored::{sys_preadv, sys_pwritev, sys_readv, sys_writev};

/// Largest single transfer, as Linux's MAX_RW_COUNT.
pub const MAX_RW: u64 = 0x7fff_f000;
/// Bounce-buffer size for vectored and copying transfers.
const CHUNK: u64 = 64 * 1024;
/// Most iovec entries per call (UIO_MAXIOV).
pub(super) const MAX_IOV: u64 = 1024;

const SEEK_SET: u64 = 0;
const SEEK_CUR: u64 = 1;
const SEEK_END: u64 = 2;
const SEEK_DATA: u64 = 3;
const SEEK_HOLE: u64 = 4;

/// A handle on one of the host's standard streams.
pub(super) enum HostStd {
    In(std::io::Stdin),
    Out(std::io::Stdout),
    Err(std::io::Stderr),
}

impl AsFd for HostStd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            HostStd::In(s) => s.as_fd(),
            HostStd::Out(s) => s.as_fd(),
            HostStd::Err(s) => s.as_fd(),
        }
    }
}

/// The host stream a stdio kind passes through to.
pub(super) fn host_std(kind: &FileKind) -> Option<HostStd> {
    match kind {
        FileKind::Stdin => Some(HostStd::In(std::io::stdin())),
        FileKind::Stdout => Some(HostStd::Out(std::io::stdout())),
        FileKind::Stderr => Some(HostStd::Err(std::io::stderr())),
        _ => None,
    }
}

/// Guest memory `addr..addr+len` for writing; a zero length needs no valid address.
pub(super) fn guest_buf_mut(
    mem: &mut GuestMemory,
    addr: u64,
    len: u64,
) -> Result<&mut [u8], Errno> {
    if len == 0 {
        return Ok(&mut []);
    }
    Ok(mem.slice_mut(addr, len)?)
}

/// Guest memory `addr..addr+len` for reading; a zero length needs no valid address.
pub(super) fn guest_buf(mem: &GuestMemory, addr: u64, len: u64) -> Result<&[u8], Errno> {
    if len == 0 {
        return Ok(&[]);
    }
    Ok(mem.read(addr, len)?)
}

/// Whether a read may return less than asked while more would come later
/// (so vectored reads must stop after one transfer).
fn is_stream(f: &OpenFile) -> bool {
    matches!(
        f.kind,
        FileKind::Stdin | FileKind::Pipe(_) | FileKind::Socket(_) | FileKind::Pty(_)
    )
}

/// Reads into `buf` at the file position, or at `at` (pread).
pub(super) fn read_file(f: &mut OpenFile, buf: &mut [u8], at: Option<u64>) -> Result<usize, Errno> {
    if matches!(f.kind, FileKind::Dir { .. }) && !f.path_only() {
        return Err(Errno::EISDIR);
    }
    if !f.readable() {
        return Err(Errno::EBADF);
    }
    let nonblocking = f.nonblocking();
    if let FileKind::Event(e) = &mut f.kind {
        return super::event::read(e, buf);
    }
    if let FileKind::Socket(s) = &mut f.kind {
        return super::net::socket_read(s, buf, at);
    }
    match &f.kind {
        FileKind::Event(_) | FileKind::Socket(_) => Err(Errno::EINVAL),
        FileKind::Stdin => {
            let h = std::io::stdin();
            match at {
                Some(off) => Ok(rustix::io::pread(h.as_fd(), buf, off)?),
                None => {
                    if nonblocking && !buf.is_empty() && !host_ready(h.as_fd(), POLLIN)? {
                        return Err(Errno::EAGAIN);
                    }
                    Ok(rustix::io::read(h.as_fd(), buf)?)
                }
            }
        }
        FileKind::File { fd, .. } => {
            let off = at.unwrap_or(f.offset);
            let n = rustix::io::pread(fd.as_fd(), buf, off)?;
            if at.is_none() {
                f.offset = off.saturating_add(n as u64);
            }
            Ok(n)
        }
        FileKind::Pipe(end) => match at {
            Some(_) => Err(Errno::ESPIPE),
            None => pipe_read(end, buf),
        },
        FileKind::Pty(end) => match at {
            Some(_) => Err(Errno::ESPIPE),
            None => end.read(buf, nonblocking),
        },
        FileKind::Null => Ok(0),
        FileKind::Zero => {
            buf.fill(0);
            Ok(buf.len())
        }
        FileKind::Urandom => {
            getrandom::fill(buf).map_err(|_| Errno::EIO)?;
            Ok(buf.len())
        }
        FileKind::Stdout | FileKind::Stderr | FileKind::Dir { .. } | FileKind::PathOnly { .. } => {
            Err(Errno::EBADF)
        }
    }
}

/// Writes `buf` at the file position, or at `at` (pwrite).
pub(super) fn write_file(f: &mut OpenFile, buf: &[u8], at: Option<u64>) -> Result<usize, Errno> {
    if !f.writable() {
        return Err(Errno::EBADF);
    }
    if let FileKind::Event(e) = &mut f.kind {
        return super::event::write(e, buf);
    }
    if let FileKind::Socket(s) = &mut f.kind {
        return super::net::socket_write(s, buf, at);
    }
    match &f.kind {
        FileKind::Event(_) | FileKind::Socket(_) => Err(Errno::EINVAL),
        // Output goes on at the host's position, never elsewhere: the
        // host's stdout or stderr may be a file it shares (an operator's
        // log, a CI log), which the guest must not rewrite, so positional
        // writes are refused as on a pipe (see `sys_lseek`).
        FileKind::Stdout | FileKind::Stderr => {
            let Some(h) = host_std(&f.kind) else {
                return Err(Errno::EBADF);
            };
            match at {
                Some(_) => Err(Errno::ESPIPE),
                None => Ok(rustix::io::write(h.as_fd(), buf)?),
            }
        }
        FileKind::Pipe(end) => match at {
            Some(_) => Err(Errno::ESPIPE),
            None => pipe_write(end, buf),
        },
        FileKind::Pty(end) => match at {
            Some(_) => Err(Errno::ESPIPE),
            None => end.write(buf),
        },
        FileKind::Null | FileKind::Zero | FileKind::Urandom => Ok(buf.len()),
        // Only files opened for writing under --allow-write get here (writable()).
        FileKind::File { fd, .. } => {
            let append = f.flags & super::fdtable::oflags::O_APPEND != 0;
            let n = match at {
                Some(off) => rustix::io::pwrite(fd.as_fd(), buf, off)?,
                None if append => {
                    let n = rustix::io::write(fd.as_fd(), buf)?;
                    f.offset = rustix::fs::fstat(fd)?.st_size as u64;
                    return Ok(n);
                }
                None => rustix::io::pwrite(fd.as_fd(), buf, f.offset)?,
            };
            if at.is_none() {
                f.offset += n as u64;
            }
            Ok(n)
        }
        FileKind::Stdin | FileKind::Dir { .. } | FileKind::PathOnly { .. } => Err(Errno::EBADF),
    }
}

/// A positional offset argument: negative is EINVAL.
fn position(v: u64) -> Result<u64, Errno> {
    if (v as i64) < 0 {
        Err(Errno::EINVAL)
    } else {
        Ok(v)
    }
}

/// How many of `len` bytes a read from `f` can transfer right now. Only
/// those must be valid guest memory: Linux copies lazily, so a huge length
/// with 5 bytes left in the file is no error, while a copy that would run off
/// the end of guest memory is EFAULT.
///
/// A host file whose size reads as 0 may still have contents: the files of
/// the host's /sys and of an allowed /proc (cgroup limits, sysctls) are
/// made when read. Its read is not sized by that 0 but by [`CHUNK`] at most
/// (a short read, which such files give on Linux too), and the second value
/// says so: `do_read` reads it through a bounce buffer so that only what
/// arrives must be valid memory.
fn read_need(f: &OpenFile, len: u64, at: Option<u64>) -> (u64, bool) {
    let need = match &f.kind {
        FileKind::File { fd, .. } => match rustix::fs::fstat(fd.as_fd()) {
            Ok(st) if st.st_size <= 0 => return (len.min(CHUNK), true),
            Ok(st) => {
                let pos = at.unwrap_or(f.offset);
                len.min((st.st_size as u64).saturating_sub(pos))
            }
            Err(_) => len,
        },
        // At least one byte, so an empty pipe still answers EAGAIN or EOF.
        FileKind::Pipe(end) if end.read => len.min(lock(&end.pipe).buf.len().max(1) as u64),
        FileKind::Socket(s) => len.min(s.available().max(1) as u64),
        FileKind::Null => 0,
        _ => len,
    };
    (need, false)
}

/// A socket with nothing to read yet whose peer may be sending from another
/// thread: the read waits now rather than be sized by an emptiness that may
/// be gone by the time it copies (a read took 1 byte of 4, a datagram was
/// cut to its first byte).
/// A read first passes an urgent byte at the head of a TCP stream (see
/// `urgent.rs`): Linux's read consumes it even when nothing else is there.
pub(super) fn empty_socket(f: &mut OpenFile, at: Option<u64>) -> bool {
    match (&mut f.kind, at) {
        (FileKind::Socket(s), None) => {
            s.pass_urgent_mark();
            s.read_would_block()
        }
        _ => false,
    }
}

fn do_read(p: &mut Process, mem: &mut GuestMemory, a: &Args, at: Option<u64>) -> SysResult {
    let file = p.fds.get(a[0] as i32)?;
    let mut f = lock(&file);
    if !f.readable() {
        return Err(Errno::EBADF);
    }
    if let (FileKind::Pipe(end), None) = (&f.kind, at) {
        // An empty pipe with a writer (maybe another process, on another
        // thread): wait now rather than size the read by an emptiness that
        // may be gone by the time it copies (which read 1 byte of 7).
        let empty = {
            let pipe = lock(&end.pipe);
            pipe.buf.is_empty() && pipe.writers > 0
        };
        if empty && end.read && a[2] > 0 {
            let nonblocking = f.nonblocking();
            drop(f);
            return or_wait(p, nonblocking, Err(Errno::EAGAIN));
        }
    }
    if a[2] > 0 && empty_socket(&mut f, at) {
        let nonblocking = f.nonblocking();
        drop(f);
        return or_wait(p, nonblocking, Err(Errno::EAGAIN));
    }
    if let FileKind::Event(super::event::EventObj::SignalFd { mask }) = f.kind {
        let nonblocking = f.nonblocking();
        drop(f);
        if at.is_some() {
            return Err(Errno::ESPIPE);
        }
        return super::signalfd::read(p, mem, a[1], a[2], mask, nonblocking);
    }
    let (need, sizeless) = read_need(&f, a[2].min(MAX_RW), at);
    let nonblocking = f.nonblocking();
    if need > 0 && sizeless {
        let r = read_unsized(&mut f, mem, a[1], need as usize, at);
        drop(f);
        return or_wait(p, nonblocking, r);
    }
    let buf = guest_buf_mut(mem, a[1], need)?;
    let r = read_file(&mut f, buf, at);
    drop(f);
    or_wait(p, nonblocking, r.map(|n| n as u64))
}

/// Reads up to `len` bytes of an unsized file into a bounce buffer and
/// copies what arrived to `addr`: an empty file reads as 0 whatever the
/// buffer, as on Linux; a buffer that cannot take what arrived is EFAULT,
/// with the file's offset left where it was.
fn read_unsized(
    f: &mut OpenFile,
    mem: &mut GuestMemory,
    addr: u64,
    len: usize,
    at: Option<u64>,
) -> SysResult {
    let mut bounce = vec![0u8; len];
    let before = f.offset;
    let n = read_file(f, &mut bounce, at)?;
    if mem.write(addr, &bounce[..n]).is_err() {
        f.offset = before;
        return Err(Errno::EFAULT);
    }
    Ok(n as u64)
}

/// A blocking descriptor with nothing to transfer yet: the thread waits and
/// the call is made again (other threads run meanwhile).
///
/// EINTR from a host descriptor (a full stdout pipe, a terminal) is never the
/// guest's: only forkvm's own vCPU kick (preemption tick, deadline) interrupts
/// host calls. The call is made again from the run loop, which honours a
/// deadline first; passing EINTR on made `sort` fail with "write failed:
/// Interrupted system call" when its output pipe was full.
fn or_wait(p: &mut Process, nonblocking: bool, r: SysResult) -> SysResult {
    match r {
        Err(Errno::EAGAIN) if !nonblocking => {
            let _ = super::thread::wait(p, None, None);
            Ok(0)
        }
        Err(Errno::EINTR) => {
            let _ = super::thread::wait(p, None, Some(std::time::Instant::now()));
            Ok(0)
        }
        other => other,
    }
}

/// A blocking write to a pipe or stream socket that sent part of its bytes
/// and waits for room for the rest: Linux returns only when all are sent
/// (or a signal interrupts it: then with the count sent so far), and
/// programs rely on it (python's os.write of 1 MB to a pipe lost 934 KB
/// when a write returned what fitted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteProgress {
    /// The writing thread.
    pub tid: u64,
    /// The call: syscall number, fd, buffer (or iovec array), length (or count).
    pub call: [u64; 4],
    /// Bytes sent so far.
    pub done: u64,
}

/// Bytes an earlier attempt of this same call already sent (0 if none).
pub(super) fn sent_before(p: &Process, call: [u64; 4]) -> u64 {
    p.writes
        .iter()
        .find(|w| w.tid == p.tid && w.call == call)
        .map_or(0, |w| w.done)
}

/// After an attempt that sent `sent` bytes in all of `total`: done (the
/// count), or, for a blocking stream that took only part, a wait for room
/// (the call is made again and goes on from there).
/// `before` is what earlier attempts sent ([`sent_before`]).
fn finish_write(
    p: &mut Process,
    call: [u64; 4],
    before: u64,
    total: u64,
    stream: bool,
    nonblocking: bool,
    r: Result<u64, Errno>,
) -> SysResult {
    let tid = p.tid;
    p.writes.retain(|w| w.tid != tid);
    let blocking_stream = stream && !nonblocking;
    match r {
        Ok(n) if blocking_stream && before + n < total => {
            p.writes.push(WriteProgress {
                tid,
                call,
                done: before + n,
            });
            let _ = super::thread::wait(p, None, None);
            Ok(0)
        }
        Ok(n) => Ok(before + n),
        Err(Errno::EAGAIN) if blocking_stream && before > 0 => {
            p.writes.push(WriteProgress {
                tid,
                call,
                done: before,
            });
            let _ = super::thread::wait(p, None, None);
            Ok(0)
        }
        // The reader went away (EPIPE) or another error after some bytes:
        // those bytes are the answer, as on Linux.
        Err(_) if before > 0 => Ok(before),
        Err(e) => or_wait(p, nonblocking, Err(e)),
    }
}

/// The count a blocking write interrupted by a signal returns (what it had
/// sent), if the waiting call is one; forgets it.
pub fn interrupted_write(p: &mut Process) -> Option<u64> {
    let tid = p.tid;
    let i = p.writes.iter().position(|w| w.tid == tid)?;
    Some(p.writes.swap_remove(i).done)
}

fn is_stream_out(f: &OpenFile) -> bool {
    matches!(
        f.kind,
        FileKind::Pipe(_) | FileKind::Socket(_) | FileKind::Pty(_)
    )
}

fn do_write(p: &mut Process, mem: &mut GuestMemory, a: &Args, at: Option<u64>) -> SysResult {
    let file = p.fds.get(a[0] as i32)?;
    let len = a[2].min(MAX_RW);
    if at.is_none() && super::net::write_is_send(&lock(&file)) {
        return super::net::write_as_send(p, mem, a[0], &[(a[1], len)]);
    }
    let call = [if at.is_some() { 18 } else { 1 }, a[0], a[1], len];
    let before = if at.is_none() {
        sent_before(p, call).min(len)
    } else {
        0
    };
    let buf = guest_buf(mem, a[1] + before, len - before)?;
    let mut f = lock(&file);
    let nonblocking = f.nonblocking();
    super::fs::charge_write(p, mem.size(), &f, buf.len(), at)?;
    let r = write_file(&mut f, buf, at);
    let sigpipe = f.write_raises_sigpipe();
    let stream = at.is_none() && is_stream_out(&f);
    drop(f);
    super::pty::send_signals(p, &file);
    if sigpipe && r == Err(Errno::EPIPE) && before == 0 {
        super::net::raise_sigpipe(p);
    }
    finish_write(
        p,
        call,
        before,
        len,
        stream,
        nonblocking,
        r.map(|n| n as u64),
    )
}

/// Implements read(2).
fn sys_read(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_read(p, mem, a, None)
}

/// Implements write(2).
fn sys_write(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_write(p, mem, a, None)
}

/// Implements pread64(2).
fn sys_pread64(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let at = position(a[3])?;
    do_read(p, mem, a, Some(at))
}

/// Implements pwrite64(2).
fn sys_pwrite64(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let at = position(a[3])?;
    do_write(p, mem, a, Some(at))
}

/// Implements lseek(2).
fn sys_lseek(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    use rustix::fs::SeekFrom;
    let file = p.fds.get(a[0] as i32)?;
    let (off, whence) = (a[1] as i64, a[2] as u32 as u64);
    if whence > SEEK_HOLE {
        return Err(Errno::EINVAL);
    }
    let host_from = || -> Result<SeekFrom, Errno> {
        Ok(match whence {
            SEEK_SET => SeekFrom::Start(position(off as u64)?),
            SEEK_CUR => SeekFrom::Current(off),
            SEEK_END => SeekFrom::End(off),
            SEEK_DATA => SeekFrom::Data(position(off as u64)?),
            _ => SeekFrom::Hole(position(off as u64)?),
        })
    };
    let mut f = lock(&file);
    if f.path_only() {
        return Err(Errno::EBADF);
    }
    let cur = f.offset;
    match &f.kind {
        FileKind::Event(_) => Err(Errno::ESPIPE),
        // Stdin seeks as natively, so `program < file` may look around
        // in its input (what it moves is the offset of an input it was
        // given to read). Stdout and stderr are pipes to the guest: their
        // host offset, shared with whoever else writes that file, is not
        // the guest's to move (see `write_file`).
        FileKind::Stdin => {
            let Some(h) = host_std(&f.kind) else {
                return Err(Errno::EBADF);
            };
            Ok(rustix::fs::seek(h.as_fd(), host_from()?)?)
        }
        FileKind::Stdout | FileKind::Stderr => Err(Errno::ESPIPE),
        FileKind::Dir { fd, .. } => Ok(rustix::fs::seek(fd.as_fd(), host_from()?)?),
        FileKind::File { fd, .. } => {
            let new = match whence {
                SEEK_SET => off,
                SEEK_CUR => (cur as i64).checked_add(off).ok_or(Errno::EOVERFLOW)?,
                // END/DATA/HOLE need the host's view; its fd offset is otherwise unused.
                _ => rustix::fs::seek(fd.as_fd(), host_from()?)? as i64,
            };
            if new < 0 {
                return Err(Errno::EINVAL);
            }
            f.offset = new as u64;
            Ok(new as u64)
        }
        FileKind::Pipe(_) | FileKind::Socket(_) | FileKind::Pty(_) => Err(Errno::ESPIPE),
        FileKind::Null | FileKind::Zero | FileKind::Urandom => Ok(0),
        FileKind::PathOnly { .. } => Err(Errno::EBADF),
    }
}

/// Implements sendfile(2).
fn sys_sendfile(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [out_fd, in_fd, off_ptr, count, ..] = *a;
    let output = p.fds.get(out_fd as i32)?;
    let input = p.fds.get(in_fd as i32)?;
    if Arc::ptr_eq(&input, &output) {
        return Err(Errno::EINVAL);
    }
    let mut pos = if off_ptr == 0 {
        None
    } else {
        Some(position(mem.read_u64(off_ptr)?)?)
    };
    let mut inf = lock(&input);
    let mut outf = lock(&output);
    if !inf.readable() || !outf.writable() {
        return Err(Errno::EBADF);
    }
    // Only inputs whose consumed bytes can be un-consumed on a short write.
    if !matches!(
        inf.kind,
        FileKind::File { .. } | FileKind::Null | FileKind::Zero | FileKind::Urandom
    ) {
        return Err(Errno::EINVAL);
    }
    let total = count.min(MAX_RW);
    super::fs::charge_write(p, mem.size(), &outf, total as usize, None)?;
    let mut bounce = vec![0u8; total.min(CHUNK) as usize];
    let mut done = 0u64;
    let mut err = None;
    while done < total {
        let want = (total - done).min(CHUNK) as usize;
        let at = pos.unwrap_or(inf.offset);
        let n = match read_file(&mut inf, &mut bounce[..want], Some(at)) {
            Ok(n) => n,
            Err(e) => {
                err = Some(e);
                break;
            }
        };
        if n == 0 {
            break;
        }
        let w = match write_file(&mut outf, &bounce[..n], None) {
            Ok(w) => w,
            Err(e) => {
                err = Some(e);
                break;
            }
        };
        let next = at.saturating_add(w as u64);
        match &mut pos {
            Some(p) => *p = next,
            None => inf.offset = next,
        }
        done += w as u64;
        if w < n {
            break;
        }
    }
    if let Some(p) = pos {
        mem.write_u64(off_ptr, p)?;
    }
    let sigpipe = outf.write_raises_sigpipe();
    let nonblocking = outf.nonblocking();
    drop(outf);
    match err {
        // A blocking pipe or socket that is full: wait for room, as Linux
        // does (python's socket.sendfile failed with EAGAIN at ~200 KB).
        Some(Errno::EAGAIN) if done == 0 && !nonblocking => {
            let _ = super::thread::wait(p, None, None);
            Ok(0)
        }
        Some(e) if done == 0 => {
            if sigpipe && e == Errno::EPIPE {
                super::net::raise_sigpipe(p);
            }
            Err(e)
        }
        _ => Ok(done),
    }
}

fn sync_check(file: &FileRef) -> Result<(), Errno> {
    let f = lock(file);
    if f.path_only() {
        return Err(Errno::EBADF);
    }
    match &f.kind {
        FileKind::File { .. } | FileKind::Dir { .. } => Ok(()),
        k => match host_std(k) {
            Some(h) => Ok(rustix::fs::fsync(h.as_fd())?),
            None => Err(Errno::EINVAL),
        },
    }
}

/// Implements fsync(2): read-only files have nothing to flush.
fn sys_fsync(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    sync_check(&p.fds.get(a[0] as i32)?)?;
    Ok(0)
}

/// Implements fadvise64(2): advice is accepted and ignored.
fn sys_fadvise64(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let file = p.fds.get(a[0] as i32)?;
    let f = lock(&file);
    if f.path_only() {
        return Err(Errno::EBADF);
    }
    if matches!(f.kind, FileKind::Pipe(_)) {
        return Err(Errno::ESPIPE);
    }
    if a[3] as u32 > 5 || (a[2] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    Ok(0)
}

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 0, name: "read", handler: sys_read, support: Support::Full, note: "" },
    SyscallEntry { nr: 1, name: "write", handler: sys_write, support: Support::Full, note: "" },
    SyscallEntry { nr: 8, name: "lseek", handler: sys_lseek, support: Support::Partial,
        note: "ESPIPE on stdout and stderr, as on a pipe: the host's offset is not the guest's to move" },
    SyscallEntry { nr: 17, name: "pread64", handler: sys_pread64, support: Support::Full, note: "" },
    SyscallEntry { nr: 18, name: "pwrite64", handler: sys_pwrite64, support: Support::Partial,
        note: "ESPIPE on stdout and stderr; files outside --allow-write are read-only (EBADF)" },
    SyscallEntry { nr: 19, name: "readv", handler: sys_readv, support: Support::Full, note: "" },
    SyscallEntry { nr: 20, name: "writev", handler: sys_writev, support: Support::Partial,
        note: "transfers of more than 64 KiB are split into several host writes" },
    SyscallEntry { nr: 22, name: "pipe", handler: sys_pipe, support: Support::Partial,
        note: "in-process 64 KiB buffer; blocking reads and writes wait for the other end" },
    SyscallEntry { nr: 275, name: "splice", handler: sys_splice, support: Support::Partial,
        note: "a copy on the host; the non-pipe side is a file, stream socket, terminal, standard stream or /dev/{null,zero,urandom}" },
    SyscallEntry { nr: 276, name: "tee", handler: sys_tee, support: Support::Full, note: "" },
    SyscallEntry { nr: 278, name: "vmsplice", handler: sys_vmsplice, support: Support::Partial,
        note: "copies (SPLICE_F_GIFT gives no pages away)" },
    SyscallEntry { nr: 40, name: "sendfile", handler: sys_sendfile, support: Support::Partial,
        note: "input must be a regular file or /dev/{null,zero,urandom}" },
    SyscallEntry { nr: 74, name: "fsync", handler: sys_fsync, support: Support::Full, note: "" },
    SyscallEntry { nr: 75, name: "fdatasync", handler: sys_fsync, support: Support::Full, note: "" },
    SyscallEntry { nr: 162, name: "sync", handler: sys_sync, support: Support::Full, note: "" },
    SyscallEntry { nr: 306, name: "syncfs", handler: sys_syncfs, support: Support::Full, note: "" },
    SyscallEntry { nr: 277, name: "sync_file_range", handler: sys_sync_file_range, support: Support::Full,
        note: "" },
    SyscallEntry { nr: 221, name: "fadvise64", handler: sys_fadvise64, support: Support::Partial,
        note: "advice is accepted and ignored" },
    SyscallEntry { nr: 293, name: "pipe2", handler: sys_pipe2, support: Support::Partial,
        note: "as pipe; O_CLOEXEC and O_NONBLOCK only (O_DIRECT packet mode is EINVAL)" },
    SyscallEntry { nr: 295, name: "preadv", handler: sys_preadv, support: Support::Full, note: "" },
    SyscallEntry { nr: 296, name: "pwritev", handler: sys_pwritev, support: Support::Partial,
        note: "host files are read-only (EBADF)" },
];

#[cfg(test)]
mod tests;
