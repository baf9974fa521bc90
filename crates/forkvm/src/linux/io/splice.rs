//! splice(2), tee(2) and vmsplice(2): bytes moved between a pipe and another
//! descriptor, a second pipe, or guest memory, without passing through the
//! program's buffers.
//!
//! forkvm's pipes are buffers in the host process, so each of these is a
//! copy on the host. What Linux returns is kept:
//! - one side must be a pipe, and an offset may only be given for the other side;
//! - a call moves at most what the pipe holds, or what fits in it, and returns
//!   after one transfer (never waits to fill `len`);
//! - it blocks as Linux's does: a pipe side that cannot move waits unless
//!   SPLICE_F_NONBLOCK or the pipe's O_NONBLOCK says otherwise; the other side
//!   follows its own O_NONBLOCK (man splice(2));
//! - a write to a pipe with no reader, or to a closed stream, raises SIGPIPE.
//!
//! Bytes are taken out of a pipe only once the other side has accepted them,
//! so a short write leaves the rest in the pipe.

use super::{
    empty_socket, gather, iovecs, or_wait, position, read_file, scatter, write_file, MAX_RW,
};
use crate::linux::fdtable::{lock, oflags::O_APPEND, FileKind, FileRef, OpenFile, Pipe};
use crate::linux::unix_socket::SOCK_STREAM;
use crate::linux::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::sync::{Arc, Mutex, MutexGuard};

const SPLICE_F_NONBLOCK: u64 = 2;
/// SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT.
const SPLICE_F_ALL: u64 = 0xf;

/// The side of a transfer that has to change before anything can move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    In,
    Out,
}

/// Why a transfer moved nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// A side is not ready: wait for it, or EAGAIN.
    Wait(Side),
    /// An error to return.
    Fail(Errno),
}

impl From<Errno> for Stop {
    fn from(e: Errno) -> Self {
        Stop::Fail(e)
    }
}

/// An error from reading or writing `side`: EAGAIN means that side is not ready.
fn on(side: Side) -> impl Fn(Errno) -> Stop {
    move |e| match e {
        Errno::EAGAIN => Stop::Wait(side),
        e => Stop::Fail(e),
    }
}

/// Locks two different mutexes in address order, so two calls moving
/// between the same pair in opposite directions cannot deadlock.
fn lock_pair<'a, T>(a: &'a Mutex<T>, b: &'a Mutex<T>) -> (MutexGuard<'a, T>, MutexGuard<'a, T>) {
    if (a as *const Mutex<T>) < (b as *const Mutex<T>) {
        let ga = lock(a);
        (ga, lock(b))
    } else {
        let gb = lock(b);
        (lock(a), gb)
    }
}

/// The pipe a description is an end of.
fn pipe_of(f: &OpenFile) -> Option<Arc<Mutex<Pipe>>> {
    match &f.kind {
        FileKind::Pipe(end) => Some(end.pipe.clone()),
        _ => None,
    }
}

/// Whether a description that is not a pipe can be the other side of a
/// splice (Linux's `splice_read` / `splice_write`): regular files, stream
/// sockets, terminals, the standard streams and the character devices.
fn spliceable(f: &OpenFile) -> bool {
    match &f.kind {
        FileKind::Socket(s) => s.ty == SOCK_STREAM,
        FileKind::File { .. }
        | FileKind::Pty(_)
        | FileKind::Stdin
        | FileKind::Stdout
        | FileKind::Stderr
        | FileKind::Null
        | FileKind::Zero
        | FileKind::Urandom => true,
        _ => false,
    }
}

/// Whether an offset may be given for this side (FMODE_PREAD / FMODE_PWRITE).
fn positional(f: &OpenFile) -> bool {
    !matches!(f.kind, FileKind::Socket(_) | FileKind::Pty(_))
}

/// A guest `loff_t *`: None for NULL, else the offset it holds (EINVAL if negative).
fn read_offset(mem: &GuestMemory, ptr: u64) -> Result<Option<u64>, Errno> {
    if ptr == 0 {
        return Ok(None);
    }
    Ok(Some(position(mem.read_u64(ptr)?)?))
}

/// Moves up to `len` bytes from pipe `src` to pipe `dst`; `consume` false
/// (tee) leaves them in `src` too.
fn pipe_to_pipe(
    src: &Mutex<Pipe>,
    dst: &Mutex<Pipe>,
    len: u64,
    consume: bool,
) -> Result<u64, Stop> {
    let (mut s, mut d) = lock_pair(src, dst);
    if s.buf.is_empty() {
        return if s.writers == 0 {
            Ok(0)
        } else {
            Err(Stop::Wait(Side::In))
        };
    }
    if d.readers == 0 {
        return Err(Stop::Fail(Errno::EPIPE));
    }
    let space = d.capacity.saturating_sub(d.buf.len());
    if space == 0 {
        return Err(Stop::Wait(Side::Out));
    }
    let n = s.buf.len().min(space).min(len as usize);
    let Pipe { buf: from, .. } = &mut *s;
    d.buf.extend(from.range(..n));
    d.writes = d.writes.wrapping_add(1);
    if consume {
        s.buf.drain(..n);
        s.reads = s.reads.wrapping_add(1);
    }
    Ok(n as u64)
}

/// Moves up to `len` bytes from pipe `src` to the description `out` (at
/// `at`, or at its position); bytes `out` does not take stay in the pipe.
fn pipe_to_file(
    p: &Process,
    mem_size: u64,
    src: &Mutex<Pipe>,
    out: &mut OpenFile,
    len: u64,
    at: Option<u64>,
) -> Result<u64, Stop> {
    let mut s = lock(src);
    if s.buf.is_empty() {
        return if s.writers == 0 {
            Ok(0)
        } else {
            Err(Stop::Wait(Side::In))
        };
    }
    let n = s.buf.len().min(len as usize);
    let data: Vec<u8> = s.buf.range(..n).copied().collect();
    crate::linux::fs::charge_write(p, mem_size, out, n, at)?;
    let w = write_file(out, &data, at).map_err(on(Side::Out))?;
    s.buf.drain(..w.min(n));
    s.reads = s.reads.wrapping_add(1);
    Ok(w as u64)
}

/// Moves up to `len` bytes from the description `input` (at `at`, or at its
/// position) into pipe `dst`: at most what fits.
fn file_to_pipe(
    input: &mut OpenFile,
    dst: &Mutex<Pipe>,
    len: u64,
    at: Option<u64>,
) -> Result<u64, Stop> {
    let mut d = lock(dst);
    if d.readers == 0 {
        return Err(Stop::Fail(Errno::EPIPE));
    }
    let space = d.capacity.saturating_sub(d.buf.len());
    if space == 0 {
        return Err(Stop::Wait(Side::Out));
    }
    if empty_socket(input, at) {
        return Err(Stop::Wait(Side::In));
    }
    let mut bounce = vec![0u8; space.min(len as usize)];
    let n = read_file(input, &mut bounce, at).map_err(on(Side::In))?;
    if n > 0 {
        d.buf.extend(&bounce[..n]);
        d.writes = d.writes.wrapping_add(1);
    }
    Ok(n as u64)
}

/// The answer to a transfer: a count, an error (SIGPIPE with EPIPE when
/// the writing side raises it), or a wait for the side that was not ready
/// unless that side is non-blocking.
fn finish(
    p: &mut Process,
    r: Result<u64, Stop>,
    nonblocking: [bool; 2],
    sigpipe: bool,
) -> SysResult {
    match r {
        Ok(n) => Ok(n),
        Err(Stop::Wait(side)) => or_wait(p, nonblocking[side as usize], Err(Errno::EAGAIN)),
        Err(Stop::Fail(Errno::EPIPE)) => {
            if sigpipe {
                crate::linux::net::raise_sigpipe(p);
            }
            Err(Errno::EPIPE)
        }
        // EINTR from a host descriptor is made again, as for read and write.
        Err(Stop::Fail(e)) => or_wait(p, true, Err(e)),
    }
}

/// A call whose two descriptors are one description: only a FIFO opened
/// O_RDWR can be both ends, and a pipe cannot be spliced to itself.
fn same_description(f: &OpenFile, offsets: bool) -> SysResult {
    if !f.readable() || !f.writable() {
        return Err(Errno::EBADF);
    }
    if pipe_of(f).is_some() && offsets {
        return Err(Errno::ESPIPE);
    }
    Err(Errno::EINVAL)
}

/// Implements splice(2).
pub(super) fn sys_splice(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd_in, off_in, fd_out, off_out, len, flags] = *a;
    if len == 0 {
        return Ok(0);
    }
    if flags & !SPLICE_F_ALL != 0 {
        return Err(Errno::EINVAL);
    }
    let input = p.fds.get(fd_in as i32)?;
    let output = p.fds.get(fd_out as i32)?;
    let len = len.min(MAX_RW);
    if Arc::ptr_eq(&input, &output) {
        return same_description(&lock(&input), off_in != 0 || off_out != 0);
    }
    let (mut inf, mut outf) = lock_pair(&*input, &*output);
    if !inf.readable() || !outf.writable() {
        return Err(Errno::EBADF);
    }
    let (in_pipe, out_pipe) = (pipe_of(&inf), pipe_of(&outf));
    if (in_pipe.is_some() && off_in != 0) || (out_pipe.is_some() && off_out != 0) {
        return Err(Errno::ESPIPE);
    }
    let pipe_nonblocking = flags & SPLICE_F_NONBLOCK != 0;
    let sigpipe = outf.write_raises_sigpipe();
    let (r, nonblocking) = match (in_pipe, out_pipe) {
        (Some(src), Some(dst)) => {
            if Arc::ptr_eq(&src, &dst) {
                return Err(Errno::EINVAL);
            }
            let nb = pipe_nonblocking || inf.nonblocking() || outf.nonblocking();
            (pipe_to_pipe(&src, &dst, len, true), [nb, nb])
        }
        (Some(src), None) => {
            if !spliceable(&outf) || outf.flags & O_APPEND != 0 {
                return Err(Errno::EINVAL);
            }
            let at = read_offset(mem, off_out)?;
            if at.is_some() && !positional(&outf) {
                return Err(Errno::EINVAL);
            }
            let nb = [pipe_nonblocking || inf.nonblocking(), outf.nonblocking()];
            let r = pipe_to_file(p, mem.size(), &src, &mut outf, len, at);
            if let (Some(at), Ok(n)) = (at, r) {
                mem.write_u64(off_out, at + n)?;
            }
            (r, nb)
        }
        (None, Some(dst)) => {
            if !spliceable(&inf) {
                return Err(Errno::EINVAL);
            }
            let at = read_offset(mem, off_in)?;
            if at.is_some() && !positional(&inf) {
                return Err(Errno::EINVAL);
            }
            let nb = [inf.nonblocking(), pipe_nonblocking || outf.nonblocking()];
            let r = file_to_pipe(&mut inf, &dst, len, at);
            if let (Some(at), Ok(n)) = (at, r) {
                mem.write_u64(off_in, at + n)?;
            }
            (r, nb)
        }
        (None, None) => return Err(Errno::EINVAL),
    };
    drop((inf, outf));
    crate::linux::pty::send_signals(p, &output);
    finish(p, r, nonblocking, sigpipe)
}

/// Implements tee(2): copies from one pipe to another, leaving the bytes in the first.
pub(super) fn sys_tee(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd_in, fd_out, len, flags, ..] = *a;
    if flags & !SPLICE_F_ALL != 0 {
        return Err(Errno::EINVAL);
    }
    if len == 0 {
        return Ok(0);
    }
    let input = p.fds.get(fd_in as i32)?;
    let output = p.fds.get(fd_out as i32)?;
    if Arc::ptr_eq(&input, &output) {
        return same_description(&lock(&input), false);
    }
    let (inf, outf) = lock_pair(&*input, &*output);
    if !inf.readable() || !outf.writable() {
        return Err(Errno::EBADF);
    }
    let (Some(src), Some(dst)) = (pipe_of(&inf), pipe_of(&outf)) else {
        return Err(Errno::EINVAL);
    };
    if Arc::ptr_eq(&src, &dst) {
        return Err(Errno::EINVAL);
    }
    let nb = flags & SPLICE_F_NONBLOCK != 0 || inf.nonblocking() || outf.nonblocking();
    drop((inf, outf));
    let r = pipe_to_pipe(&src, &dst, len.min(MAX_RW), false);
    finish(p, r, [nb, nb], true)
}

/// Implements vmsplice(2): a write end takes the iovecs' bytes (as much as
/// fits); a read end gives its bytes to them.
pub(super) fn sys_vmsplice(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd, iov, count, flags, ..] = *a;
    if flags & !SPLICE_F_ALL != 0 {
        return Err(Errno::EINVAL);
    }
    let file: FileRef = p.fds.get(fd as i32)?;
    let f = lock(&file);
    let Some(pipe) = pipe_of(&f) else {
        return Err(Errno::EBADF);
    };
    let (writes, reads) = (f.writable(), f.readable());
    let nb = flags & SPLICE_F_NONBLOCK != 0 || f.nonblocking();
    drop(f);
    if !writes && !reads {
        return Err(Errno::EBADF);
    }
    let iovs = iovecs(mem, iov, count)?;
    let total: u64 = iovs.iter().map(|v| v.1).sum();
    if total == 0 {
        return Ok(0);
    }
    let mut pp = lock(&pipe);
    let r = if writes {
        if pp.readers == 0 {
            Err(Stop::Fail(Errno::EPIPE))
        } else {
            match pp.capacity.saturating_sub(pp.buf.len()) {
                0 => Err(Stop::Wait(Side::Out)),
                space => {
                    let mut bounce = vec![0u8; space.min(total as usize)];
                    gather(mem, &iovs, 0, &mut bounce)?;
                    pp.buf.extend(&bounce);
                    pp.writes = pp.writes.wrapping_add(1);
                    Ok(bounce.len() as u64)
                }
            }
        }
    } else if pp.buf.is_empty() {
        if pp.writers == 0 {
            Ok(0)
        } else {
            Err(Stop::Wait(Side::In))
        }
    } else {
        let n = pp.buf.len().min(total as usize);
        let data: Vec<u8> = pp.buf.range(..n).copied().collect();
        scatter(mem, &iovs, 0, &data)?;
        pp.buf.drain(..n);
        pp.reads = pp.reads.wrapping_add(1);
        Ok(n as u64)
    };
    drop(pp);
    finish(p, r, [nb, nb], true)
}
