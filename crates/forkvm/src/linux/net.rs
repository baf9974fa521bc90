//! Sockets: the socket calls of every family. AF_UNIX sockets live inside
//! the VM (see [`super::unix_socket`]): `socketpair` gives a connected pair
//! (stream, datagram or seqpacket) with SCM_RIGHTS descriptor passing;
//! `socket(AF_UNIX)` sockets bind, listen, connect and accept by names the
//! run shares (abstract or paths: [`super::unix_names`]), and datagram
//! sockets send to bound names ([`super::unix_dgram`]). AF_INET/AF_INET6
//! stream sockets are virtual TCP ([`super::inet`]), whose connects reach
//! the host only for `--allow-connect` addresses ([`super::host_socket`]).
//! Every other family is refused with the error a host without network
//! access would give. Socket options are in [`super::sockopt`], the
//! receiving calls in [`super::net_recv`].

use super::fdtable::{lock, oflags, FileKind, FileRef, OpenFile};
use super::fs::StatInfo;
use super::io::{guest_buf, guest_buf_mut, MAX_IOV, MAX_RW};
use super::net_recv::{sys_recvfrom, sys_recvmmsg, sys_recvmsg};
use super::process::UID;
use super::table::{Support, SyscallEntry};
use super::thread::{self, Waited};
use super::unix_socket::{Socket, MAX_FDS_PER_MSG, SOCK_DGRAM, SOCK_SEQPACKET, SOCK_STREAM};
use super::{inet, unix_names, Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::sync::Arc;
use std::time::Duration;

pub(super) const AF_UNIX: u64 = 1;
const SOCK_RAW: u32 = 3;
const SOCK_TYPE_MASK: u64 = 0xf;
const SOCK_NONBLOCK: u64 = 0o4000;
const SOCK_CLOEXEC: u64 = 0o2000000;
/// Longest `struct sockaddr_un`.
const SOCKADDR_UN_SIZE: u64 = 110;

pub(super) const MSG_OOB: u64 = 0x1;
pub(super) const MSG_PEEK: u64 = 0x2;
pub(super) const MSG_CTRUNC: u32 = 0x8;
pub(super) const MSG_TRUNC: u64 = 0x20;
pub(super) const MSG_DONTWAIT: u64 = 0x40;
pub(super) const MSG_WAITALL: u64 = 0x100;
const MSG_NOSIGNAL: u64 = 0x4000;
pub(super) const MSG_WAITFORONE: u64 = 0x10000;
pub(super) const MSG_CMSG_CLOEXEC: u64 = 0x4000_0000;

/// SOL_SOCKET (options and control messages).
pub(super) const SOL_SOCKET: u64 = 1;
pub(super) const SCM_RIGHTS: u32 = 1;
const SCM_CREDENTIALS: u32 = 2;
/// `struct cmsghdr` header: len (u64), level (i32), type (i32).
pub(super) const CMSG_HDR: u64 = 16;
/// Largest control buffer a send accepts (Linux's optmem_max).
pub(super) const MAX_CONTROL: u64 = 20480;
/// `struct msghdr` on x86-64.
pub(super) const MSGHDR_SIZE: u64 = 56;
/// `struct mmsghdr`: a msghdr and the u32 length (padded).
pub(super) const MMSGHDR_SIZE: u64 = 64;

const SIGPIPE: u64 = 13;

/// Splits a `type` argument into (SOCK_* type, nonblocking, cloexec) for AF_UNIX.
fn socket_type(ty: u64, protocol: u64) -> Result<(u32, bool, bool), Errno> {
    if ty & !(SOCK_TYPE_MASK | SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    let base = match (ty & SOCK_TYPE_MASK) as u32 {
        SOCK_STREAM => SOCK_STREAM,
        SOCK_DGRAM | SOCK_RAW => SOCK_DGRAM,
        SOCK_SEQPACKET => SOCK_SEQPACKET,
        _ => return Err(Errno::ESOCKTNOSUPPORT),
    };
    // protocol 0 or PF_UNIX.
    if protocol as u32 > 1 {
        return Err(Errno::EPROTONOSUPPORT);
    }
    Ok((base, ty & SOCK_NONBLOCK != 0, ty & SOCK_CLOEXEC != 0))
}

fn socket_file(s: Socket, nonblocking: bool) -> OpenFile {
    let nb = if nonblocking { oflags::O_NONBLOCK } else { 0 };
    OpenFile::new(FileKind::Socket(s), oflags::O_RDWR | nb)
}

/// Implements socket(2): AF_UNIX sockets inside the VM; other families EACCES.
fn sys_socket(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    if matches!(a[0] as u32 as u16, inet::AF_INET | inet::AF_INET6) {
        return inet::socket(p, a);
    }
    if a[0] as u32 as u16 == super::netlink::AF_NETLINK {
        let (ty, nb, cloexec) = socket_type(a[1] as u32 as u64, 0)?;
        let s = super::netlink::new_socket(p, ty, a[2])?;
        return Ok(p.fds.insert(socket_file(s, nb), cloexec)? as u64);
    }
    if a[0] as u32 as u64 != AF_UNIX {
        return Err(Errno::EACCES);
    }
    let (ty, nb, cloexec) = socket_type(a[1] as u32 as u64, a[2])?;
    Ok(p.fds.insert(socket_file(Socket::new(ty), nb), cloexec)? as u64)
}

/// Implements socketpair(2): a connected AF_UNIX pair inside the VM.
fn sys_socketpair(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[0] as u32 as u64 != AF_UNIX {
        return Err(Errno::EACCES);
    }
    let (ty, nb, cloexec) = socket_type(a[1] as u32 as u64, a[2])?;
    let sv = a[3];
    mem.slice_mut(sv, 8)?;
    let (mut x, mut y) = Socket::pair(ty);
    // Each end's SO_PEERCRED names the caller, as on Linux.
    x.peer_pid = super::child::pid_of(p);
    y.peer_pid = x.peer_pid;
    let fx = p.fds.insert(socket_file(x, nb), cloexec)?;
    let fy = match p.fds.insert(socket_file(y, nb), cloexec) {
        Ok(fd) => fd,
        Err(e) => {
            p.fds.close(fx)?;
            return Err(e);
        }
    };
    mem.write_u32(sv, fx as u32)?;
    mem.write_u32(sv + 4, fy as u32)?;
    Ok(0)
}

/// The socket behind `fd`: EBADF if not open, ENOTSOCK if no socket.
pub(super) fn socket_ref(p: &Process, fd: u64) -> Result<FileRef, Errno> {
    let file = p.fds.get(fd as i32)?;
    if !matches!(lock(&file).kind, FileKind::Socket(_)) {
        return Err(Errno::ENOTSOCK);
    }
    Ok(file)
}

/// Runs `f` on the socket behind `fd` and its O_NONBLOCK flag.
pub(super) fn with_socket<T>(
    p: &Process,
    fd: u64,
    f: impl FnOnce(&mut Socket, bool) -> Result<T, Errno>,
) -> Result<T, Errno> {
    let file = socket_ref(p, fd)?;
    let mut of = lock(&file);
    let nonblocking = of.nonblocking();
    match &mut of.kind {
        FileKind::Socket(s) => f(s, nonblocking),
        _ => Err(Errno::ENOTSOCK),
    }
}

/// read(2) on a socket (called by the I/O family).
pub(super) fn socket_read(s: &mut Socket, buf: &mut [u8], at: Option<u64>) -> Result<usize, Errno> {
    if at.is_some() {
        return Err(Errno::ESPIPE);
    }
    if buf.is_empty() {
        return Ok(0);
    }
    // Descriptors passed to a plain read are closed, as on Linux.
    Ok(s.recv(buf, false)?.copied)
}

/// write(2) on a socket (called by the I/O family); EPIPE raises SIGPIPE there.
pub(super) fn socket_write(s: &mut Socket, buf: &[u8], at: Option<u64>) -> Result<usize, Errno> {
    if at.is_some() {
        return Err(Errno::ESPIPE);
    }
    s.send(buf, Vec::new())
}

/// fstat(2) of a socket.
pub(super) fn socket_stat(s: &Socket) -> StatInfo {
    const S_IFSOCK: u32 = 0o140000;
    let uid = super::process::UID as u32;
    StatInfo {
        dev: 8, // makedev(0, 8): sockfs
        ino: s.ino,
        nlink: 1,
        mode: S_IFSOCK | 0o777,
        uid,
        gid: uid,
        blksize: 4096,
        ..StatInfo::default()
    }
}

/// A write to a broken socket: SIGPIPE to the process (its handler, or death).
pub(super) fn raise_sigpipe(p: &mut Process) {
    let _ = super::signal::send_self(p, SIGPIPE);
}

/// Checks a `struct sockaddr` the guest names: EINVAL unless a plausible AF_UNIX address.
fn check_unix_addr(mem: &GuestMemory, addr: u64, len: u64) -> Result<(), Errno> {
    if !(2..=SOCKADDR_UN_SIZE).contains(&(len as u32 as u64)) {
        return Err(Errno::EINVAL);
    }
    let b = mem.read(addr, len as u32 as u64)?;
    if u16::from_le_bytes([b[0], b[1]]) as u64 != AF_UNIX {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Implements connect(2): virtual TCP, or an AF_UNIX listener of this process.
fn sys_connect(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if inet::is_inet(p, a[0]) {
        return inet::connect(p, mem, a);
    }
    if super::netlink::is_netlink_fd(p, a[0]) {
        // Its answers come from the kernel whatever it is connected to.
        return Ok(0);
    }
    unix_names::connect(p, mem, a)
}

/// Implements bind(2): virtual TCP addresses, AF_UNIX names (kept in the process).
fn sys_bind(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if super::netlink::is_netlink_fd(p, a[0]) {
        return super::netlink::bind(p, mem, a[0], a[1], a[2]);
    }
    let r = if inet::is_inet(p, a[0]) {
        inet::bind(p, mem, a)
    } else {
        unix_names::bind(p, mem, a)
    }?;
    publish(p, a[0]);
    Ok(r)
}

/// Implements listen(2).
fn sys_listen(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let r = if inet::is_inet(p, a[0]) {
        inet::listen(p, a)
    } else {
        unix_names::listen(p, a)
    }?;
    publish(p, a[0]);
    Ok(r)
}

/// Makes the bound or listening socket `fd` known to the run's other
/// processes (see `child::Tree::publish_socket`).
pub(super) fn publish(p: &Process, fd: u64) {
    if let (Some(family), Ok(file)) = (&p.family, p.fds.get(fd as i32)) {
        family.tree.publish_socket(&file);
    }
}

/// The sockets a bind or connect by address may meet: the process's own,
/// then those other processes of the run bound (each once).
pub(super) fn named_sockets(p: &Process) -> Vec<FileRef> {
    let mut all: Vec<FileRef> = Vec::new();
    let own = p
        .fds
        .open_fds()
        .into_iter()
        .filter_map(|fd| p.fds.get(fd).ok());
    let run = p.family.iter().flat_map(|f| f.tree.sockets());
    for f in own.chain(run) {
        if !all.iter().any(|g| Arc::ptr_eq(g, &f)) {
            all.push(f);
        }
    }
    all
}

/// What listen and accept answer on a socket that cannot listen: EINVAL for
/// connection sockets, EOPNOTSUPP for datagrams.
fn not_listening(s: &Socket) -> Errno {
    if s.connection() {
        Errno::EINVAL
    } else {
        Errno::EOPNOTSUPP
    }
}

/// Implements accept(2): virtual TCP connections the host pushed, or
/// connections to a listening AF_UNIX socket.
fn sys_accept(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    accept_with(p, mem, a, 0)
}

fn accept_with(p: &mut Process, mem: &mut GuestMemory, a: &Args, flags: u64) -> SysResult {
    if flags & !(SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    if inet::is_inet(p, a[0]) {
        return inet::accept(p, mem, a, flags);
    }
    if unix_names::is_listening(p, a[0]) {
        return unix_names::accept(p, mem, a, flags);
    }
    with_socket(p, a[0], |s, _| Err(not_listening(s)))
}

/// Implements accept4(2): as accept, with SOCK_NONBLOCK/SOCK_CLOEXEC flags.
fn sys_accept4(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    accept_with(p, mem, a, a[3] as u32 as u64)
}

/// Implements shutdown(2).
fn sys_shutdown(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    with_socket(p, a[0], |s, _| s.shutdown(a[1] as u32 as u64))?;
    Ok(0)
}

/// Implements getsockname(2).
fn sys_getsockname(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if inet::is_inet(p, a[0]) {
        return inet::getsockname(p, mem, a);
    }
    if super::netlink::is_netlink_fd(p, a[0]) {
        return super::netlink::getsockname(p, mem, a[0], a[1], a[2]);
    }
    let name = with_socket(p, a[0], |s, _| {
        Ok(s.unix.as_ref().and_then(|n| n.local.clone()))
    })?;
    unix_names::write_name(mem, a[1], a[2], name.as_deref())?;
    Ok(0)
}

/// Implements getpeername(2).
fn sys_getpeername(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if inet::is_inet(p, a[0]) {
        return inet::getpeername(p, mem, a);
    }
    let (connected, name) = with_socket(p, a[0], |s, _| {
        Ok((s.connected(), s.unix.as_ref().and_then(|n| n.peer.clone())))
    })?;
    if !connected {
        return Err(Errno::ENOTCONN);
    }
    unix_names::write_name(mem, a[1], a[2], name.as_deref())?;
    Ok(0)
}

/// A blocking call found nothing to do: wait (other threads run) and make
/// the call again, or EAGAIN once `timeout` has passed.
pub(super) fn wait_or(p: &mut Process, timeout: Option<Duration>) -> SysResult {
    match thread::wait(p, timeout, None) {
        Waited::Retry => Ok(0),
        Waited::TimedOut => Err(Errno::EAGAIN),
    }
}

/// A message's iovec array ([`super::io::iovecs`]), with sendmsg/recvmsg's
/// errno for too many entries.
pub(super) fn msg_iovecs(
    mem: &GuestMemory,
    addr: u64,
    count: u64,
) -> Result<Vec<(u64, u64)>, Errno> {
    if count > MAX_IOV {
        return Err(Errno::EMSGSIZE);
    }
    super::io::iovecs(mem, addr, count)
}

/// Checks that the iovecs are writable guest memory.
pub(super) fn check_writable(mem: &mut GuestMemory, iovs: &[(u64, u64)]) -> Result<(), Errno> {
    for &(base, len) in iovs {
        guest_buf_mut(mem, base, len)?;
    }
    Ok(())
}

/// Descriptors named by SCM_RIGHTS messages in a send's control buffer.
fn control_fds(p: &Process, mem: &GuestMemory, addr: u64, len: u64) -> Result<Vec<FileRef>, Errno> {
    if len == 0 {
        return Ok(Vec::new());
    }
    if len > MAX_CONTROL {
        return Err(Errno::ENOBUFS);
    }
    let buf = mem.read(addr, len)?;
    let mut fds = Vec::new();
    let mut off = 0usize;
    while off + CMSG_HDR as usize <= buf.len() {
        let h = &buf[off..];
        let clen = u64::from_le_bytes(h[..8].try_into().map_err(|_| Errno::EINVAL)?) as usize;
        let level = u32::from_le_bytes(h[8..12].try_into().map_err(|_| Errno::EINVAL)?);
        let ty = u32::from_le_bytes(h[12..16].try_into().map_err(|_| Errno::EINVAL)?);
        if clen < CMSG_HDR as usize || clen > buf.len() - off {
            return Err(Errno::EINVAL);
        }
        if u64::from(level) != SOL_SOCKET {
            return Err(Errno::EINVAL);
        }
        let data = &h[CMSG_HDR as usize..clen];
        match ty {
            SCM_RIGHTS => {
                for c in data.chunks_exact(4) {
                    if fds.len() >= MAX_FDS_PER_MSG {
                        return Err(Errno::EINVAL);
                    }
                    let fd = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    let f = p.fds.get(fd)?;
                    if lock(&f).path_only() {
                        return Err(Errno::EBADF);
                    }
                    fds.push(f);
                }
            }
            // The receiver's credentials are always ours: nothing to carry.
            // But only our own may be claimed, as Linux checks them (the
            // guest has no capabilities): pid, then uid, then gid.
            SCM_CREDENTIALS if data.len() == 12 => {
                let word =
                    |i: usize| u32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
                let ours = u64::from(word(0)) == super::child::pid_of(p)
                    && u64::from(word(4)) == UID
                    && u64::from(word(8)) == UID;
                if !ours {
                    return Err(Errno::EPERM);
                }
            }
            _ => return Err(Errno::EINVAL),
        }
        off += clen.div_ceil(8) * 8;
    }
    Ok(fds)
}

/// Whether a write(2) on `f` is a send: a UDP socket's (to its connected
/// peer) or a netlink socket's (a request).
pub(super) fn write_is_send(f: &super::fdtable::OpenFile) -> bool {
    matches!(&f.kind, FileKind::Socket(s)
        if super::udp::is_udp_socket(s) || super::netlink::is_netlink(s))
}

/// write(2) and writev(2) on a socket whose writes are sends
/// ([`write_is_send`]): one datagram, as Linux sends it (a UDP socket's
/// to its connected peer, EDESTADDRREQ without one).
pub(super) fn write_as_send(
    p: &mut Process,
    mem: &GuestMemory,
    fd: u64,
    iovs: &[(u64, u64)],
) -> SysResult {
    send_common(p, mem, [1, fd, 0, 0], fd, iovs, 0, None, (0, 0))
}

/// The common part of send, sendto, sendmsg and sendmmsg.
#[allow(clippy::too_many_arguments)]
fn send_common(
    p: &mut Process,
    mem: &GuestMemory,
    call: [u64; 4],
    fd: u64,
    iovs: &[(u64, u64)],
    flags: u64,
    to: Option<(u64, u64)>,
    control: (u64, u64),
) -> SysResult {
    let file = socket_ref(p, fd)?;
    let urgent = flags & MSG_OOB != 0;
    if urgent
        && !matches!(&lock(&file).kind, FileKind::Socket(s) if s.inet.is_some() && s.ty == SOCK_STREAM)
    {
        // TCP's urgent data only (see urgent.rs).
        return Err(Errno::EOPNOTSUPP);
    }
    if matches!(&lock(&file).kind, FileKind::Socket(s) if super::netlink::is_netlink(s)) {
        // A request larger than the send buffer is EMSGSIZE, as on Linux.
        let total: u64 = iovs.iter().map(|v| v.1).sum();
        if total > u64::from(super::unix_socket::DEFAULT_BUF) {
            return Err(Errno::EMSGSIZE);
        }
        for &(base, len) in iovs {
            guest_buf(mem, base, len)?;
        }
        let mut data = vec![0u8; total as usize];
        super::io::gather(mem, iovs, 0, &mut data)?;
        let mut of = lock(&file);
        let FileKind::Socket(s) = &mut of.kind else {
            return Err(Errno::ENOTSOCK);
        };
        return Ok(super::netlink::send(s, &data)? as u64);
    }
    // A datagram goes to the socket bound to the address given (UDP: by
    // port, to the connected peer without one).
    let mut target = None;
    let total: u64 = iovs.iter().map(|v| v.1).sum();
    let udp = matches!(&lock(&file).kind, FileKind::Socket(s) if super::udp::is_udp_socket(s));
    let mut udp_from = Vec::new();
    if udp {
        (target, udp_from) = super::udp::target(p, mem, fd, to, total)?;
    } else if let Some((addr, len)) = to {
        let (connection, connected, inet) = match &lock(&file).kind {
            FileKind::Socket(s) => (s.connection(), s.connected(), s.inet.is_some()),
            _ => return Err(Errno::ENOTSOCK),
        };
        // TCP ignores the address of a send, as POSIX asks of
        // connection-mode sockets (AF_UNIX refuses it).
        if !(inet && connection) {
            if connection {
                return Err(if connected {
                    Errno::EISCONN
                } else {
                    Errno::EOPNOTSUPP
                });
            }
            check_unix_addr(mem, addr, len)?;
            target = Some(unix_names::dgram_target(p, mem, addr, len)?.0);
        }
    }
    // What earlier attempts of this call sent (only a blocking stream send
    // makes several), and the descriptors, which go with the first bytes
    // only: taken before the socket is locked (they may name it).
    let sent = super::io::sent_before(p, call).min(total);
    let fds = if sent == 0 {
        control_fds(p, mem, control.0, control.1)?
    } else {
        Vec::new()
    };
    let mut of = lock(&file);
    let nonblocking = of.nonblocking() || flags & MSG_DONTWAIT != 0;
    let FileKind::Socket(s) = &mut of.kind else {
        return Err(Errno::ENOTSOCK);
    };
    let sndbuf = u64::from(s.send_capacity());
    let timeout = s.sndtimeo;
    let sigpipe = s.sigpipe();
    // A blocking stream send returns only when all is sent (or the peer is
    // gone, or a signal interrupts it), as a write does: what earlier
    // attempts of this call sent is kept in `p.writes`.
    let whole = s.ty == SOCK_STREAM && !nonblocking;
    let before = if whole { sent } else { 0 };
    // A stream send takes at most a send buffer's worth; a larger datagram is EMSGSIZE.
    let limit = if s.ty == SOCK_STREAM {
        (total - before).min(sndbuf)
    } else if total > sndbuf {
        return Err(Errno::EMSGSIZE);
    } else {
        total
    };
    // Linux checks the whole buffer before sending any of it.
    for &(base, len) in iovs {
        guest_buf(mem, base, len)?;
    }
    let mut data = vec![0u8; limit as usize];
    super::io::gather(mem, iovs, before, &mut data)?;
    let r = if udp {
        if s.shut & super::unix_socket::SEND_SHUTDOWN != 0 {
            Err(Errno::EPIPE)
        } else {
            super::udp::deliver(target.as_ref(), udp_from, &data, fds)
        }
    } else {
        match &target {
            Some(to) => s.send_to(to, &data, fds),
            None if urgent => s.send_urgent(&data),
            None => s.send(&data, fds),
        }
    };
    drop(of);
    if whole {
        let tid = p.tid;
        p.writes.retain(|w| w.tid != tid);
        let more = |p: &mut Process, done: u64| {
            p.writes.push(super::io::WriteProgress { tid, call, done });
            let _ = thread::wait(p, None, None);
            Ok(0)
        };
        match r {
            Ok(n) if before + (n as u64) < total => return more(p, before + n as u64),
            Ok(n) => return Ok(before + n as u64),
            Err(Errno::EAGAIN) if before > 0 => return more(p, before),
            // The peer went away after some bytes: those are the answer.
            Err(_) if before > 0 => return Ok(before),
            _ => {}
        }
    }
    match r {
        Ok(n) => Ok(n as u64),
        Err(Errno::EAGAIN) if !nonblocking => wait_or(p, timeout),
        Err(Errno::EPIPE) => {
            if sigpipe && flags & MSG_NOSIGNAL == 0 {
                raise_sigpipe(p);
            }
            Err(Errno::EPIPE)
        }
        Err(e) => Err(e),
    }
}

/// Implements sendto(2) (and send(3)).
fn sys_sendto(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd, buf, len, flags, addr, alen] = *a;
    let to = (addr != 0).then_some((addr, alen));
    let len = len.min(MAX_RW);
    send_common(
        p,
        mem,
        [44, fd, buf, len],
        fd,
        &[(buf, len)],
        flags,
        to,
        (0, 0),
    )
}

/// A guest `struct msghdr`.
pub(super) struct MsgHdr {
    pub name: u64,
    pub namelen: u64,
    pub iov: u64,
    pub iovlen: u64,
    pub control: u64,
    pub controllen: u64,
}

pub(super) fn read_msghdr(mem: &GuestMemory, addr: u64) -> Result<MsgHdr, Errno> {
    let b = mem.read(addr, MSGHDR_SIZE)?;
    let q = |o: usize| -> u64 {
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[o..o + 8]);
        u64::from_le_bytes(v)
    };
    Ok(MsgHdr {
        name: q(0),
        namelen: q(8) & 0xffff_ffff,
        iov: q(16),
        iovlen: q(24),
        control: q(32),
        controllen: q(40),
    })
}

fn sendmsg_one(p: &mut Process, mem: &GuestMemory, fd: u64, hdr: u64, flags: u64) -> SysResult {
    socket_ref(p, fd)?;
    let h = read_msghdr(mem, hdr)?;
    let iovs = msg_iovecs(mem, h.iov, h.iovlen)?;
    let to = (h.name != 0 && h.namelen != 0).then_some((h.name, h.namelen));
    send_common(
        p,
        mem,
        [46, fd, hdr, h.iovlen],
        fd,
        &iovs,
        flags,
        to,
        (h.control, h.controllen),
    )
}

/// Implements sendmsg(2), with SCM_RIGHTS descriptor passing.
fn sys_sendmsg(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    sendmsg_one(p, mem, a[0], a[1], a[2])
}

/// Implements sendmmsg(2).
fn sys_sendmmsg(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd, vec, vlen, flags, ..] = *a;
    socket_ref(p, fd)?;
    let vlen = vlen.min(MAX_IOV);
    let mut sent = 0u64;
    for i in 0..vlen {
        let hdr = vec.checked_add(i * MMSGHDR_SIZE).ok_or(Errno::EFAULT)?;
        // After the first message, never wait (as Linux returns what it sent).
        let fl = if sent > 0 {
            flags | MSG_DONTWAIT
        } else {
            flags
        };
        match sendmsg_one(p, mem, fd, hdr, fl) {
            Ok(n) if p.sched.is_none() => {
                mem.write_u32(hdr + MSGHDR_SIZE, n as u32)?;
                sent += 1;
            }
            Ok(_) => return Ok(0), // waiting: the call is made again
            Err(_) if sent > 0 => break,
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

const NO_NET: &str = "AF_UNIX only, inside the VM; other families are refused (no network): EACCES";

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 41, name: "socket", handler: sys_socket, support: Support::Partial,
        note: "AF_UNIX (named within the run: see bind); AF_INET/AF_INET6 SOCK_STREAM: virtual TCP (connections pushed by `forkvm serve`); SOCK_DGRAM: UDP between the run's sockets (see udp.rs); AF_NETLINK NETLINK_ROUTE: the VM's interfaces, lo alone (see netlink.rs); raw sockets, other netlink protocols and other families are refused (no network): EACCES" },
    SyscallEntry { nr: 42, name: "connect", handler: sys_connect, support: Support::Partial,
        note: "virtual TCP: to a loopback address a process of the run listens on, a connection inside forkvm; addresses given with --allow-connect are real host TCP connections (blocking or EINPROGRESS); any other address ECONNREFUSED; AF_UNIX stream/seqpacket: to a listener of the run (none: ECONNREFUSED, ENOENT for a path with no file); AF_UNIX datagram: the default destination, a datagram socket of the run bound to the name (AF_UNSPEC disconnects); UDP: the default destination and only sender heard, any address (binds an ephemeral port first)" },
    SyscallEntry { nr: 43, name: "accept", handler: sys_accept, support: Support::Partial,
        note: "virtual TCP: connections the host pushed or the program made to itself; AF_UNIX: connections made to the listener's name" },
    SyscallEntry { nr: 44, name: "sendto", handler: sys_sendto, support: Support::Partial,
        note: "connected AF_UNIX sockets; an AF_UNIX datagram to a path or abstract name goes to the datagram socket of the run bound there (none: ECONNREFUSED; its queue full: waits, or EAGAIN); a UDP datagram goes to the run's socket bound to the port at a local address (none: dropped, ECONNREFUSED when connected; a full queue drops; another address ENETUNREACH; binds an ephemeral port first); a connection socket refuses an address (EISCONN/EOPNOTSUPP); a blocking stream send returns when all is sent; EPIPE raises SIGPIPE unless MSG_NOSIGNAL" },
    SyscallEntry { nr: 45, name: "recvfrom", handler: sys_recvfrom, support: Support::Partial,
        note: "AF_UNIX, virtual TCP and UDP; the address is a datagram's sender (none for an unbound AF_UNIX one, a loopback address for UDP); MSG_WAITALL waits for the whole length on a blocking stream" },
    SyscallEntry { nr: 46, name: "sendmsg", handler: sys_sendmsg, support: Support::Partial,
        note: "as sendto; SCM_RIGHTS passes descriptors, SCM_CREDENTIALS is checked (EPERM unless the caller's own) and not carried" },
    SyscallEntry { nr: 47, name: "recvmsg", handler: sys_recvmsg, support: Support::Partial,
        note: "as recvfrom; SCM_RIGHTS received, MSG_TRUNC/MSG_CTRUNC reported" },
    SyscallEntry { nr: 48, name: "shutdown", handler: sys_shutdown, support: Support::Full, note: "" },
    SyscallEntry { nr: 49, name: "bind", handler: sys_bind, support: Support::Partial,
        note: "virtual TCP and UDP: the address is recorded (port 0: a virtual port; TCP and UDP ports apart); AF_UNIX: abstract names, and paths (a socket file is made, mode 0777 less the umask); names are shared by the processes of a run; an empty name autobinds" },
    SyscallEntry { nr: 50, name: "listen", handler: sys_listen, support: Support::Partial,
        note: "virtual TCP: takes the connections `forkvm serve` pushes; AF_UNIX: a bound stream/seqpacket socket (EOPNOTSUPP for datagrams)" },
    SyscallEntry { nr: 51, name: "getsockname", handler: sys_getsockname, support: Support::Full, note: "" },
    SyscallEntry { nr: 52, name: "getpeername", handler: sys_getpeername, support: Support::Full, note: "" },
    SyscallEntry { nr: 53, name: "socketpair", handler: sys_socketpair, support: Support::Partial, note: NO_NET },
    SyscallEntry { nr: 288, name: "accept4", handler: sys_accept4, support: Support::Partial,
        note: "as accept" },
    SyscallEntry { nr: 299, name: "recvmmsg", handler: sys_recvmmsg, support: Support::Partial,
        note: "as recvmsg, but MSG_WAITALL does not wait for the whole length; the timeout is checked but not applied" },
    SyscallEntry { nr: 307, name: "sendmmsg", handler: sys_sendmmsg, support: Support::Partial,
        note: "as sendmsg" },
];

#[cfg(test)]
mod tests {
    use super::super::sockopt::{sys_getsockopt, sys_setsockopt, SO_SNDBUF, SO_TYPE};
    use super::super::unix_socket::MIN_SNDBUF;
    use super::*;
    use crate::abi::USER_BASE;
    use crate::linux::test_call as call;

    fn setup() -> (Process, GuestMemory) {
        crate::linux::test_setup(crate::linux::Policy::default())
    }

    fn pair(p: &mut Process, m: &mut GuestMemory, ty: u64) -> (u64, u64) {
        let sv = USER_BASE + 0x7000;
        assert_eq!(call(p, m, sys_socketpair, &[AF_UNIX, ty, 0, sv]), Ok(0));
        (
            u64::from(m.read_u32(sv).unwrap()),
            u64::from(m.read_u32(sv + 4).unwrap()),
        )
    }

    #[test]
    fn other_families_are_refused_and_non_sockets_are_enotsock() {
        let (mut p, mut m) = setup();
        for fam in [2u64, 10, 16, 17] {
            // AF_INET/AF_INET6 streams are virtual TCP (crate::linux::inet) and
            // datagrams UDP (crate::linux::udp); raw sockets stay refused.
            // Route netlink answers (crate::linux::netlink); audit does not.
            let (ty, proto) = match fam {
                2 | 10 => (3, 0),
                16 => (3, 9),
                _ => (1, 0),
            };
            assert_eq!(
                call(&mut p, &mut m, sys_socket, &[fam, ty, proto]),
                Err(Errno::EACCES)
            );
            assert_eq!(
                call(&mut p, &mut m, sys_socketpair, &[fam, 1, 0, USER_BASE]),
                Err(Errno::EACCES)
            );
        }
        for e in SYSCALLS.iter().filter(|e| !matches!(e.nr, 41 | 53)) {
            for args in [[1u64, 0, 0, 0, 0, 0], [77, u64::MAX, 0, 0, 0, 0]] {
                let r = (e.handler)(&mut p, &mut m, &args);
                assert!(
                    matches!(r, Err(Errno::ENOTSOCK | Errno::EBADF)),
                    "{}: {r:?}",
                    e.name
                );
            }
        }
        assert_eq!(p.fds.open_fds(), vec![0, 1, 2]);
    }

    #[test]
    fn socketpair_checks_its_arguments() {
        let (mut p, mut m) = setup();
        for bad in [0u64, 0xffff_8000_0000_0000, 8 << 20, u64::MAX - 3] {
            assert_eq!(
                call(&mut p, &mut m, sys_socketpair, &[AF_UNIX, 1, 0, bad]),
                Err(Errno::EFAULT)
            );
        }
        assert_eq!(
            call(&mut p, &mut m, sys_socketpair, &[AF_UNIX, 4, 0, USER_BASE]),
            Err(Errno::ESOCKTNOSUPPORT)
        );
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_socketpair,
                &[AF_UNIX, 1 | 0x100, 0, USER_BASE]
            ),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_socketpair, &[AF_UNIX, 1, 6, USER_BASE]),
            Err(Errno::EPROTONOSUPPORT)
        );
        assert_eq!(p.fds.open_fds(), vec![0, 1, 2], "nothing leaked");
        let (a, b) = pair(&mut p, &mut m, 1 | SOCK_CLOEXEC | SOCK_NONBLOCK);
        assert_eq!((a, b), (3, 4));
        assert_eq!(p.fds.cloexec(3), Ok(true));
        assert!(lock(&p.fds.get(4).unwrap()).nonblocking());
    }

    #[test]
    fn send_recv_options_and_sigpipe() {
        let (mut p, mut m) = setup();
        let (a, b) = pair(&mut p, &mut m, u64::from(SOCK_STREAM));
        let buf = USER_BASE;
        m.write(buf, b"ping").unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_sendto, &[a, buf, 4, 0, 0, 0]),
            Ok(4)
        );
        let out = USER_BASE + 0x1000;
        assert_eq!(
            call(&mut p, &mut m, sys_recvfrom, &[b, out, 100, MSG_PEEK, 0, 0]),
            Ok(4)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_recvfrom, &[b, out, 100, 0, 0, 0]),
            Ok(4)
        );
        assert_eq!(m.read(out, 4).unwrap(), b"ping");
        // Empty and MSG_DONTWAIT: EAGAIN; blocking: the thread waits.
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_recvfrom,
                &[b, out, 100, MSG_DONTWAIT, 0, 0]
            ),
            Err(Errno::EAGAIN)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_recvfrom, &[b, out, 100, 0, 0, 0]),
            Ok(0)
        );
        assert!(matches!(p.sched.take(), Some(thread::Sched::Retry(_))));
        p.waiting = None;
        // Options.
        let (val, len) = (USER_BASE + 0x2000, USER_BASE + 0x2100);
        m.write_u32(len, 4).unwrap();
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_getsockopt,
                &[a, SOL_SOCKET, SO_TYPE, val, len]
            ),
            Ok(0)
        );
        assert_eq!(m.read_u32(val), Ok(SOCK_STREAM));
        m.write_u32(val, 1000).unwrap();
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_setsockopt,
                &[a, SOL_SOCKET, SO_SNDBUF, val, 4]
            ),
            Ok(0)
        );
        call(
            &mut p,
            &mut m,
            sys_getsockopt,
            &[a, SOL_SOCKET, SO_SNDBUF, val, len],
        )
        .unwrap();
        assert_eq!(m.read_u32(val), Ok(MIN_SNDBUF));
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_getsockopt,
                &[a, SOL_SOCKET, 999, val, len]
            ),
            Err(Errno::ENOPROTOOPT)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_getsockopt, &[a, 6, 1, val, len]),
            Err(Errno::EOPNOTSUPP)
        );
        // Peer gone: EPIPE, and SIGPIPE only without MSG_NOSIGNAL.
        p.fds.close(b as i32).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_sendto, &[a, buf, 4, MSG_NOSIGNAL, 0, 0]),
            Err(Errno::EPIPE)
        );
        assert_eq!(p.exit_status, None);
        assert_eq!(
            call(&mut p, &mut m, sys_sendto, &[a, buf, 4, 0, 0, 0]),
            Err(Errno::EPIPE)
        );
        assert_eq!(p.killed_by, Some(SIGPIPE as i32));
    }

    #[test]
    fn rights_pass_descriptors_and_bad_control_is_rejected() {
        let (mut p, mut m) = setup();
        let (a, b) = pair(&mut p, &mut m, u64::from(SOCK_DGRAM));
        let (hdr, iov, data, ctl) = (
            USER_BASE,
            USER_BASE + 0x100,
            USER_BASE + 0x200,
            USER_BASE + 0x300,
        );
        m.write(data, b"fd!").unwrap();
        m.write_u64(iov, data).unwrap();
        m.write_u64(iov + 8, 3).unwrap();
        let mut c = Vec::new();
        c.extend_from_slice(&20u64.to_le_bytes());
        c.extend_from_slice(&1u32.to_le_bytes());
        c.extend_from_slice(&SCM_RIGHTS.to_le_bytes());
        c.extend_from_slice(&1i32.to_le_bytes()); // stdout
        c.extend_from_slice(&[0; 4]);
        m.write(ctl, &c).unwrap();
        let mut h = vec![0u8; MSGHDR_SIZE as usize];
        h[16..24].copy_from_slice(&iov.to_le_bytes());
        h[24..32].copy_from_slice(&1u64.to_le_bytes());
        h[32..40].copy_from_slice(&ctl.to_le_bytes());
        h[40..48].copy_from_slice(&24u64.to_le_bytes());
        m.write(hdr, &h).unwrap();
        assert_eq!(call(&mut p, &mut m, sys_sendmsg, &[a, hdr, 0]), Ok(3));
        // A bad descriptor in the control message: EBADF, nothing sent.
        m.write(ctl + 16, &99i32.to_le_bytes()).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_sendmsg, &[a, hdr, 0]),
            Err(Errno::EBADF)
        );
        m.write_u64(ctl, 9999).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_sendmsg, &[a, hdr, 0]),
            Err(Errno::EINVAL)
        );
        // Receive: a new descriptor for stdout's description.
        m.write(ctl, &[0u8; 24]).unwrap();
        m.write(data, &[0u8; 3]).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_recvmsg, &[b, hdr, MSG_CMSG_CLOEXEC]),
            Ok(3)
        );
        assert_eq!(m.read(data, 3).unwrap(), b"fd!");
        assert_eq!(m.read_u64(hdr + 40), Ok(24));
        let got = m.read_u32(ctl + 16).unwrap() as i32;
        assert_eq!(got, 5);
        assert!(std::sync::Arc::ptr_eq(
            &p.fds.get(got).unwrap(),
            &p.fds.get(1).unwrap()
        ));
        assert_eq!(p.fds.cloexec(got), Ok(true));
        // Bad headers.
        for bad in [0u64, 0xffff_8000_0000_0000, u64::MAX - 8] {
            assert_eq!(
                call(&mut p, &mut m, sys_recvmsg, &[b, bad, 0]),
                Err(Errno::EFAULT)
            );
            assert_eq!(
                call(&mut p, &mut m, sys_sendmsg, &[a, bad, 0]),
                Err(Errno::EFAULT)
            );
        }
        // A huge iovec count is refused before any allocation.
        m.write_u64(hdr + 24, 1 << 40).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_sendmsg, &[a, hdr, 0]),
            Err(Errno::EMSGSIZE)
        );
        // Message vectors at the top of the address space: EFAULT, no overflow.
        for h in [sys_sendmmsg as crate::linux::Handler, sys_recvmmsg] {
            assert_eq!(
                call(&mut p, &mut m, h, &[a, u64::MAX - 70, 4, MSG_DONTWAIT]),
                Err(Errno::EFAULT)
            );
        }
    }
}
