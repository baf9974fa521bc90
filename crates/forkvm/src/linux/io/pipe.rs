//! Pipes: an in-process buffer (PIPE_CAPACITY bytes unless F_SETPIPE_SZ) shared by its two
//! ends (and by every process of the run holding them).

use crate::linux::fdtable::{lock, oflags::*, FileKind, OpenFile, PipeEnd};
use crate::linux::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::io::{Read, Write};

/// Pipe writes up to this size are atomic.
const PIPE_BUF: usize = 4096;

pub(super) fn pipe_read(end: &PipeEnd, buf: &mut [u8]) -> Result<usize, Errno> {
    if !end.read {
        return Err(Errno::EBADF);
    }
    let mut p = lock(&end.pipe);
    if buf.is_empty() {
        return Ok(0);
    }
    if p.buf.is_empty() {
        // One guest thread: a live writer can only be this process, so
        // waiting would never end.
        return if p.writers == 0 {
            Ok(0)
        } else {
            Err(Errno::EAGAIN)
        };
    }
    let n = p.buf.read(buf).unwrap_or(0);
    p.reads = p.reads.wrapping_add(1);
    Ok(n)
}

pub(super) fn pipe_write(end: &PipeEnd, buf: &[u8]) -> Result<usize, Errno> {
    if !end.write {
        return Err(Errno::EBADF);
    }
    let mut p = lock(&end.pipe);
    if buf.is_empty() {
        return Ok(0);
    }
    if p.readers == 0 {
        return Err(Errno::EPIPE);
    }
    let space = p.capacity.saturating_sub(p.buf.len());
    if space == 0 || (buf.len() <= PIPE_BUF && space < buf.len()) {
        return Err(Errno::EAGAIN);
    }
    let n = space.min(buf.len());
    p.buf.write_all(&buf[..n]).map_err(|_| Errno::EIO)?;
    p.writes = p.writes.wrapping_add(1);
    Ok(n)
}

fn do_pipe(p: &mut Process, mem: &mut GuestMemory, addr: u64, flags: u64) -> SysResult {
    let flags = u32::try_from(flags).map_err(|_| Errno::EINVAL)?;
    if flags & !(O_CLOEXEC | O_NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    mem.slice_mut(addr, 8)?;
    let cloexec = flags & O_CLOEXEC != 0;
    let nb = flags & O_NONBLOCK;
    let (r, w) = PipeEnd::pair();
    let rfd = p
        .fds
        .insert(OpenFile::new(FileKind::Pipe(r), O_RDONLY | nb), cloexec)?;
    let wfd = match p
        .fds
        .insert(OpenFile::new(FileKind::Pipe(w), O_WRONLY | nb), cloexec)
    {
        Ok(fd) => fd,
        Err(e) => {
            p.fds.close(rfd)?;
            return Err(e);
        }
    };
    mem.write_u32(addr, rfd as u32)?;
    mem.write_u32(addr + 4, wfd as u32)?;
    Ok(0)
}

/// Implements pipe(2).
pub(super) fn sys_pipe(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_pipe(p, mem, a[0], 0)
}

/// Implements pipe2(2).
pub(super) fn sys_pipe2(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_pipe(p, mem, a[0], a[1])
}
