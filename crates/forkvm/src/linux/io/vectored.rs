//! Vectored transfers: readv, writev, preadv, pwritev, and the iovec
//! arrays they (and sendmsg/recvmsg) describe guest memory with.

use super::{
    finish_write, guest_buf, is_stream, is_stream_out, or_wait, position, read_file, read_need,
    sent_before, write_file, CHUNK, MAX_IOV, MAX_RW,
};
use crate::linux::fdtable::lock;
use crate::linux::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;

/// Reads and checks an iovec array; the total is capped at [`MAX_RW`] like Linux.
pub(crate) fn iovecs(mem: &GuestMemory, addr: u64, count: u64) -> Result<Vec<(u64, u64)>, Errno> {
    if count > MAX_IOV {
        return Err(Errno::EINVAL);
    }
    let raw = guest_buf(mem, addr, count * 16)?;
    let mut out = Vec::with_capacity(count as usize);
    let mut total = 0u64;
    for chunk in raw.chunks_exact(16) {
        let mut base = [0u8; 8];
        let mut len = [0u8; 8];
        base.copy_from_slice(&chunk[..8]);
        len.copy_from_slice(&chunk[8..]);
        let (base, len) = (u64::from_le_bytes(base), u64::from_le_bytes(len));
        if (len as i64) < 0 {
            return Err(Errno::EINVAL);
        }
        let len = len.min(MAX_RW - total);
        total += len;
        out.push((base, len));
    }
    Ok(out)
}

/// Checks that the first `limit` bytes described by the iovecs are guest memory.
fn check_iovecs(mem: &GuestMemory, iovs: &[(u64, u64)], mut limit: u64) -> Result<(), Errno> {
    for &(base, len) in iovs {
        let n = len.min(limit);
        guest_buf(mem, base, n)?;
        limit -= n;
    }
    Ok(())
}

/// Copies `data` into the iovecs starting `skip` bytes into them.
pub(crate) fn scatter(
    mem: &mut GuestMemory,
    iovs: &[(u64, u64)],
    mut skip: u64,
    mut data: &[u8],
) -> Result<(), Errno> {
    for &(base, len) in iovs {
        if data.is_empty() {
            break;
        }
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = (len - skip).min(data.len() as u64);
        mem.write(base + skip, &data[..n as usize])?;
        data = &data[n as usize..];
        skip = 0;
    }
    Ok(())
}

/// Copies bytes out of the iovecs starting `skip` bytes into them, filling `out`.
pub(crate) fn gather(
    mem: &GuestMemory,
    iovs: &[(u64, u64)],
    mut skip: u64,
    out: &mut [u8],
) -> Result<(), Errno> {
    let mut filled = 0usize;
    for &(base, len) in iovs {
        if filled == out.len() {
            break;
        }
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = (len - skip).min((out.len() - filled) as u64);
        out[filled..filled + n as usize].copy_from_slice(mem.read(base + skip, n)?);
        filled += n as usize;
        skip = 0;
    }
    Ok(())
}

fn do_readv(p: &mut Process, mem: &mut GuestMemory, a: &Args, at: Option<u64>) -> SysResult {
    let file = p.fds.get(a[0] as i32)?;
    let iovs = iovecs(mem, a[1], a[2])?;
    let mut f = lock(&file);
    if !f.readable() {
        return Err(Errno::EBADF);
    }
    let asked: u64 = iovs.iter().map(|v| v.1).sum();
    let nonblocking = f.nonblocking();
    if asked > 0 && super::empty_socket(&mut f, at) {
        drop(f);
        return or_wait(p, nonblocking, Err(Errno::EAGAIN));
    }
    let (total, _) = read_need(&f, asked, at);
    check_iovecs(mem, &iovs, total)?;
    let stream = is_stream(&f);
    let mut bounce = vec![0u8; total.min(CHUNK) as usize];
    let mut done = 0u64;
    loop {
        let want = (total - done).min(CHUNK) as usize;
        let pos = at
            .map(|o| o.checked_add(done).ok_or(Errno::EINVAL))
            .transpose()?;
        let n = match read_file(&mut f, &mut bounce[..want], pos) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => {
                drop(f);
                return or_wait(p, nonblocking, Err(e));
            }
        };
        scatter(mem, &iovs, done, &bounce[..n])?;
        done += n as u64;
        if n < want || want == 0 || stream || done == total {
            break;
        }
    }
    Ok(done)
}

fn do_writev(p: &mut Process, mem: &mut GuestMemory, a: &Args, at: Option<u64>) -> SysResult {
    let file = p.fds.get(a[0] as i32)?;
    let iovs = iovecs(mem, a[1], a[2])?;
    if at.is_none() && crate::linux::net::write_is_send(&lock(&file)) {
        return crate::linux::net::write_as_send(p, mem, a[0], &iovs);
    }
    let total: u64 = iovs.iter().map(|v| v.1).sum();
    check_iovecs(mem, &iovs, total)?;
    let call = [if at.is_some() { 296 } else { 20 }, a[0], a[1], a[2]];
    let before = if at.is_none() {
        sent_before(p, call).min(total)
    } else {
        0
    };
    let mut f = lock(&file);
    let nonblocking = f.nonblocking();
    crate::linux::fs::charge_write(p, mem.size(), &f, (total - before) as usize, at)?;
    let stream = at.is_none() && is_stream_out(&f);
    let mut bounce = vec![0u8; (total - before).min(CHUNK) as usize];
    let mut done = before;
    let mut failed = None;
    loop {
        let want = (total - done).min(CHUNK) as usize;
        gather(mem, &iovs, done, &mut bounce[..want])?;
        let pos = at
            .map(|o| o.checked_add(done).ok_or(Errno::EINVAL))
            .transpose()?;
        let n = match write_file(&mut f, &bounce[..want], pos) {
            Ok(n) => n,
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        done += n as u64;
        if n < want || want == 0 || done == total {
            break;
        }
    }
    let sigpipe = f.write_raises_sigpipe();
    drop(f);
    crate::linux::pty::send_signals(p, &file);
    let r = match failed {
        Some(e) if done == before => {
            if sigpipe && e == Errno::EPIPE && before == 0 {
                crate::linux::net::raise_sigpipe(p);
            }
            Err(e)
        }
        _ => Ok(done - before),
    };
    finish_write(p, call, before, total, stream, nonblocking, r)
}

/// Implements readv(2).
pub(super) fn sys_readv(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_readv(p, mem, a, None)
}

/// Implements writev(2).
pub(super) fn sys_writev(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_writev(p, mem, a, None)
}

/// Implements preadv(2).
pub(super) fn sys_preadv(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let at = position(a[3])?;
    do_readv(p, mem, a, Some(at))
}

/// Implements pwritev(2).
pub(super) fn sys_pwritev(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let at = position(a[3])?;
    do_writev(p, mem, a, Some(at))
}
