//! The receiving socket calls: recv/recvfrom, recvmsg and recvmmsg (the
//! others are in [`super::net`]): a blocking MSG_WAITALL receive on a stream
//! waits for the whole length, a datagram's sender is given as its address,
//! and descriptors passed with SCM_RIGHTS are installed.

use super::fdtable::{lock, FileKind, FileRef};
use super::io::{guest_buf_mut, MAX_IOV, MAX_RW};
use super::net::{
    check_writable, msg_iovecs, read_msghdr, socket_ref, wait_or, with_socket, CMSG_HDR,
    MAX_CONTROL, MMSGHDR_SIZE, MSGHDR_SIZE, MSG_CMSG_CLOEXEC, MSG_CTRUNC, MSG_DONTWAIT, MSG_OOB,
    MSG_PEEK, MSG_TRUNC, MSG_WAITALL, MSG_WAITFORONE, SCM_RIGHTS, SOL_SOCKET,
};
use super::thread::{self, Waited};
use super::{unix_names, Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;

/// One receive: the bytes, the message length and its descriptors, or a wait.
enum Got {
    Data {
        data: Vec<u8>,
        full: usize,
        fds: Vec<FileRef>,
        /// The sender's name (a datagram from a bound socket).
        from: Option<Vec<u8>>,
    },
    /// The thread waits; the call will be made again.
    Waiting,
}

fn recv_common(p: &mut Process, fd: u64, want: u64, flags: u64) -> Result<Got, Errno> {
    let file = socket_ref(p, fd)?;
    if flags & MSG_OOB != 0 {
        // TCP's urgent byte, which never waits (see urgent.rs).
        let mut of = lock(&file);
        let FileKind::Socket(s) = &mut of.kind else {
            return Err(Errno::ENOTSOCK);
        };
        let byte = s.recv_urgent(flags & MSG_PEEK != 0)?;
        let data = if want == 0 { Vec::new() } else { vec![byte] };
        let full = data.len();
        return Ok(Got::Data {
            data,
            full,
            fds: Vec::new(),
            from: None,
        });
    }
    let mut of = lock(&file);
    let nonblocking = of.nonblocking() || flags & MSG_DONTWAIT != 0;
    let FileKind::Socket(s) = &mut of.kind else {
        return Err(Errno::ENOTSOCK);
    };
    let timeout = s.rcvtimeo;
    if flags & MSG_PEEK == 0 {
        s.pass_urgent_mark();
    }
    if want > 0 && s.read_would_block() {
        // Nothing yet: wait before sizing the read (see `io::empty_socket`).
        drop(of);
        return match nonblocking {
            true => Err(Errno::EAGAIN),
            false => wait_or(p, timeout).map(|_| Got::Waiting),
        };
    }
    // Never more than is queued (bounded by the send buffer), so the bounce
    // buffer is not sized by the guest.
    let n = want.min(s.available().max(1) as u64) as usize;
    let mut buf = vec![0u8; n];
    let r = s.recv(&mut buf, flags & MSG_PEEK != 0);
    drop(of);
    match r {
        Ok(got) => {
            buf.truncate(got.copied);
            Ok(Got::Data {
                data: buf,
                full: got.full,
                fds: got.fds,
                from: got.from,
            })
        }
        Err(Errno::EAGAIN) if !nonblocking => wait_or(p, timeout).map(|_| Got::Waiting),
        Err(e) => Err(e),
    }
}

/// Whether `fd` is a blocking stream socket (MSG_WAITALL waits there).
fn blocking_stream(p: &Process, fd: u64) -> Result<bool, Errno> {
    let file = socket_ref(p, fd)?;
    let of = lock(&file);
    Ok(!of.nonblocking()
        && matches!(&of.kind, FileKind::Socket(s) if s.ty == super::unix_socket::SOCK_STREAM))
}

/// Bytes earlier attempts of this same MSG_WAITALL receive got (0 if none);
/// forgets them.
fn take_received(p: &mut Process, call: [u64; 4]) -> u64 {
    let done = super::io::sent_before(p, call);
    let tid = p.tid;
    p.writes.retain(|w| w.tid != tid);
    done
}

/// A MSG_WAITALL receive that has `done` of the bytes it wants: waits for
/// the rest (`None`: the call is made again and goes on from there), or,
/// once SO_RCVTIMEO has passed, gives what it has, as Linux does.
fn wait_for_rest(
    p: &mut Process,
    fd: u64,
    call: [u64; 4],
    done: u64,
) -> Result<Option<u64>, Errno> {
    let timeout = with_socket(p, fd, |s, _| Ok(s.rcvtimeo))?;
    match thread::wait(p, timeout, None) {
        Waited::Retry => {
            p.writes.push(super::io::WriteProgress {
                tid: p.tid,
                call,
                done,
            });
            Ok(None)
        }
        Waited::TimedOut => Ok(Some(done)),
    }
}

/// Implements recvfrom(2) (and recv(3)). With MSG_WAITALL on a blocking
/// stream it returns only when `len` bytes are in, the peer has closed, or
/// a signal interrupts it (then with what it got), as Linux does: it
/// returned what was queued, and a program reading a fixed-size header
/// went on with part of it.
pub(super) fn sys_recvfrom(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd, buf, len, flags, addr, alen] = *a;
    let len = len.min(MAX_RW);
    socket_ref(p, fd)?;
    guest_buf_mut(mem, buf, len)?;
    let waitall =
        flags & (MSG_WAITALL | MSG_PEEK | MSG_DONTWAIT) == MSG_WAITALL && blocking_stream(p, fd)?;
    let call = [45, fd, buf, len];
    let before = if waitall {
        take_received(p, call).min(len)
    } else {
        0
    };
    let keep = |p: &mut Process, done: u64| {
        if done > 0 {
            p.writes.push(super::io::WriteProgress {
                tid: p.tid,
                call,
                done,
            });
        }
    };
    let got = match recv_common(p, fd, len - before, flags) {
        Ok(g) => g,
        Err(_) if before > 0 => return Ok(before),
        Err(e) => return Err(e),
    };
    match got {
        Got::Waiting => {
            keep(p, before);
            Ok(0)
        }
        Got::Data {
            data, full, from, ..
        } => {
            guest_buf_mut(mem, buf + before, data.len() as u64)?.copy_from_slice(&data);
            let total = before + data.len() as u64;
            if waitall
                && total < len
                && !data.is_empty()
                && wait_for_rest(p, fd, call, total)?.is_none()
            {
                return Ok(0);
            }
            if addr != 0 && alen != 0 {
                write_sender(mem, addr, alen, from.as_deref(), super::udp::family(p, fd))?;
            }
            Ok(if waitall {
                total
            } else if flags & MSG_TRUNC != 0 {
                full as u64
            } else {
                data.len() as u64
            })
        }
    }
}

/// Writes where a datagram came from to the guest's (addr, *len): the
/// sender's name, or an empty address (length 0) for an unnamed sender, as
/// Linux does; for a UDP socket of family `udp`, its internet address.
fn write_sender(
    mem: &mut GuestMemory,
    addr: u64,
    len_ptr: u64,
    from: Option<&[u8]>,
    udp: Option<u16>,
) -> Result<(), Errno> {
    if let Some(family) = udp {
        return super::udp::write_sender(mem, addr, len_ptr, family, from);
    }
    if super::netlink::is_kernel_name(from) {
        return super::netlink::write_sender(mem, addr, len_ptr);
    }
    if from.is_some() {
        return unix_names::write_name(mem, addr, len_ptr, from);
    }
    if (mem.read_u32(len_ptr)? as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    mem.write_u32(len_ptr, 0)?;
    Ok(())
}

/// Installs received descriptors and writes the SCM_RIGHTS control message;
/// returns (control bytes used, MSG_CTRUNC if some did not fit).
fn deliver_fds(
    p: &mut Process,
    mem: &mut GuestMemory,
    control: u64,
    controllen: u64,
    fds: Vec<FileRef>,
    cloexec: bool,
) -> Result<(u64, u32), Errno> {
    if fds.is_empty() {
        return Ok((0, 0));
    }
    let room = if control == 0 {
        0
    } else {
        controllen.saturating_sub(CMSG_HDR) / 4
    };
    let total = fds.len();
    let mut nums = Vec::new();
    for f in fds.into_iter().take(room as usize) {
        match p.fds.insert_from(0, f, cloexec) {
            Ok(n) => nums.push(n),
            Err(_) => break,
        }
    }
    if nums.is_empty() {
        return Ok((0, MSG_CTRUNC));
    }
    let clen = CMSG_HDR + 4 * nums.len() as u64;
    let mut b = Vec::with_capacity(clen as usize);
    b.extend_from_slice(&clen.to_le_bytes());
    b.extend_from_slice(&(SOL_SOCKET as u32).to_le_bytes());
    b.extend_from_slice(&SCM_RIGHTS.to_le_bytes());
    for n in &nums {
        b.extend_from_slice(&n.to_le_bytes());
    }
    mem.write(control, &b)?;
    let used = clen.div_ceil(8) * 8;
    let trunc = if nums.len() < total { MSG_CTRUNC } else { 0 };
    Ok((used.min(controllen), trunc))
}

/// recvmsg for one header; `None` when the thread waits. With MSG_WAITALL
/// on a blocking stream (and `waitall`), it returns only when the whole
/// length is in, the peer has closed, descriptors came, an error follows
/// some bytes or a signal interrupts it (then with what it got), as Linux
/// does.
fn recvmsg_one(
    p: &mut Process,
    mem: &mut GuestMemory,
    fd: u64,
    hdr: u64,
    flags: u64,
    waitall: bool,
) -> Result<Option<u64>, Errno> {
    socket_ref(p, fd)?;
    let h = read_msghdr(mem, hdr)?;
    let iovs = msg_iovecs(mem, h.iov, h.iovlen)?;
    check_writable(mem, &iovs)?;
    if h.controllen > 0 && h.control != 0 {
        guest_buf_mut(mem, h.control, h.controllen.min(MAX_CONTROL))?;
    }
    let want: u64 = iovs.iter().map(|v| v.1).sum::<u64>().min(MAX_RW);
    let waitall = waitall
        && flags & (MSG_WAITALL | MSG_PEEK | MSG_DONTWAIT) == MSG_WAITALL
        && blocking_stream(p, fd)?;
    let call = [47, fd, hdr, want];
    let before = if waitall {
        take_received(p, call).min(want)
    } else {
        0
    };
    // What earlier attempts got is the answer when this one ends with an error.
    let partial = |mem: &mut GuestMemory| -> Result<Option<u64>, Errno> {
        mem.write_u64(hdr + 40, 0)?;
        mem.write_u32(hdr + 48, 0)?;
        if h.name != 0 {
            write_sender(mem, h.name, hdr + 8, None, None)?;
        }
        Ok(Some(before))
    };
    let got = match recv_common(p, fd, want - before, flags) {
        Ok(g) => g,
        Err(_) if before > 0 => return partial(mem),
        Err(e) => return Err(e),
    };
    let Got::Data {
        data,
        full,
        fds,
        from,
    } = got
    else {
        if before > 0 {
            p.writes.push(super::io::WriteProgress {
                tid: p.tid,
                call,
                done: before,
            });
        }
        return Ok(None);
    };
    super::io::scatter(mem, &iovs, before, &data)?;
    let total = before + data.len() as u64;
    // Descriptors end the wait: they belong to this read.
    if waitall
        && total < want
        && !data.is_empty()
        && fds.is_empty()
        && wait_for_rest(p, fd, call, total)?.is_none()
    {
        return Ok(None);
    }
    let (used, mut mflags) = deliver_fds(
        p,
        mem,
        h.control,
        h.controllen,
        fds,
        flags & MSG_CMSG_CLOEXEC != 0,
    )?;
    if full > data.len() {
        mflags |= MSG_TRUNC as u32;
    }
    // Linux hands MSG_CMSG_CLOEXEC back in msg_flags (Go checks it).
    mflags |= (flags & MSG_CMSG_CLOEXEC) as u32;
    if h.name != 0 {
        write_sender(
            mem,
            h.name,
            hdr + 8,
            from.as_deref(),
            super::udp::family(p, fd),
        )?;
    }
    mem.write_u64(hdr + 40, used)?;
    mem.write_u32(hdr + 48, mflags)?;
    Ok(Some(if waitall {
        total
    } else if flags & MSG_TRUNC != 0 {
        full as u64
    } else {
        data.len() as u64
    }))
}

/// Implements recvmsg(2), with SCM_RIGHTS descriptor passing.
pub(super) fn sys_recvmsg(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    Ok(recvmsg_one(p, mem, a[0], a[1], a[2], true)?.unwrap_or(0))
}

/// Implements recvmmsg(2) (the timeout is checked, not applied).
pub(super) fn sys_recvmmsg(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd, vec, vlen, flags, timeout, _] = *a;
    socket_ref(p, fd)?;
    if timeout != 0 {
        super::poll::read_timespec(mem, timeout)?;
    }
    let vlen = vlen.min(MAX_IOV);
    let mut got = 0u64;
    for i in 0..vlen {
        let hdr = vec.checked_add(i * MMSGHDR_SIZE).ok_or(Errno::EFAULT)?;
        let fl = if got > 0 && flags & MSG_WAITFORONE != 0 {
            flags | MSG_DONTWAIT
        } else {
            flags
        };
        let fl = if got > 0 { fl | MSG_DONTWAIT } else { fl };
        match recvmsg_one(p, mem, fd, hdr, fl & !MSG_WAITFORONE, false) {
            Ok(Some(n)) => {
                mem.write_u32(hdr + MSGHDR_SIZE, n as u32)?;
                got += 1;
            }
            Ok(None) => return Ok(0),
            Err(_) if got > 0 => break,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
