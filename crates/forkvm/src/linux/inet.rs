//! Virtual TCP sockets (AF_INET, AF_INET6 stream). The guest gets no host
//! network: a listening socket is a queue of pending connections that the
//! host pushes ([`connect`]), and a connection is a connected stream pair
//! from [`super::unix_socket`] whose other end the host holds
//! ([`HostConn`], in [`super::served`]). Reads, writes, shutdown, close and readiness
//! (poll, epoll, select) are those of the stream pair; this file adds the
//! names (bind, getsockname, getpeername), listen/accept and the TCP/IP
//! socket options servers set. A connect to a socket the program itself
//! listens on stays in the VM ([`super::loopback`]); any other outbound connect is refused (ECONNREFUSED)
//! unless the address is in `--allow-connect`: then the socket is backed by
//! a real host connection ([`super::host_socket`]).
//! UDP sockets are datagram sockets inside the run ([`super::udp`]), named
//! here; raw sockets stay refused (EACCES).

use super::fdtable::{lock, oflags, FileKind, OpenFile};
use super::host_socket::{Connect, HostStream};
use super::thread::{self, Waited};
use super::unix_socket::{Socket, SOCK_DGRAM, SOCK_STREAM};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

pub use super::served::{
    connect_to_listener, connect_to_listener_on, listening_addr, listening_addrs,
    waits_for_connection, HostConn,
};

/// `AF_INET`.
pub const AF_INET: u16 = 2;
/// `AF_INET6`.
pub const AF_INET6: u16 = 10;
const SOCK_NONBLOCK: u64 = 0o4000;
const SOCK_CLOEXEC: u64 = 0o2000000;
const SOCK_TYPE_MASK: u64 = 0xf;
const IPPROTO_IP: u64 = 0;
const IPPROTO_TCP: u64 = 6;
const IPPROTO_IPV6: u64 = 41;
const SOL_SOCKET: u64 = 1;
const SO_ACCEPTCONN: u64 = 30;
const SO_DOMAIN: u64 = 39;
const SO_PROTOCOL: u64 = 38;
const IPV6_V6ONLY: u64 = 26;
const SOCKADDR_IN: usize = 16;
const SOCKADDR_IN6: usize = 28;
const EAFNOSUPPORT: Errno = Errno(97);
const EALREADY: Errno = Errno(114);
const EINPROGRESS: Errno = Errno(115);
const TCP_NODELAY: u64 = 1;
const EADDRINUSE: Errno = Errno(98);
/// Largest backlog recorded (SOMAXCONN).
pub(super) const SOMAXCONN: i32 = 4096;

/// A listening socket's queue of connections (pushed by the host for
/// virtual TCP, made by connect for AF_UNIX names).
pub struct Listener {
    /// The backlog given to listen.
    pub backlog: i32,
    /// The process that called listen (SO_PEERCRED of its connections' other ends).
    pub pid: u64,
    /// Connections not yet accepted (the guest's ends).
    pub pending: VecDeque<Socket>,
    /// Connections queued so far: each is an edge for EPOLLET, even when
    /// the queue an epoll_wait last saw was not empty.
    pub arrivals: u64,
}

impl Listener {
    /// listen(2) on a socket whose queue is `slot`: a queue, or the new
    /// backlog for the one it has.
    /// `pid` is the caller's.
    pub fn listen(slot: &mut Option<Arc<Mutex<Listener>>>, backlog: i64, pid: u64) {
        let backlog = (backlog as i32).clamp(0, SOMAXCONN);
        match slot {
            Some(l) => {
                let mut l = lock(l);
                l.backlog = backlog;
                l.pid = pid;
            }
            None => {
                *slot = Some(Arc::new(Mutex::new(Listener {
                    backlog,
                    pid,
                    pending: VecDeque::new(),
                    arrivals: 0,
                })))
            }
        }
    }

    /// The queue a forked process's copy listens with: the same backlog and
    /// no pending connection (they belong to the original).
    pub fn fork_copy(l: &Arc<Mutex<Listener>>) -> Arc<Mutex<Listener>> {
        let l = lock(l);
        Arc::new(Mutex::new(Listener {
            backlog: l.backlog,
            pid: l.pid,
            pending: VecDeque::new(),
            arrivals: 0,
        }))
    }
}

/// accept(2)'s end: a new descriptor for `conn` with accept4's `flags`, or,
/// when no connection waits, EAGAIN for a nonblocking socket and a wait
/// otherwise (the call is made again). `Ok(None)` is the wait.
pub(super) fn install_accepted(
    p: &mut Process,
    conn: Option<Socket>,
    nonblocking: bool,
    flags: u64,
) -> Result<Option<i32>, Errno> {
    let Some(conn) = conn else {
        if nonblocking {
            return Err(Errno::EAGAIN);
        }
        return match thread::wait(p, None, None) {
            Waited::Retry => Ok(None),
            Waited::TimedOut => Err(Errno::EAGAIN),
        };
    };
    let nb = if flags & SOCK_NONBLOCK != 0 {
        oflags::O_NONBLOCK
    } else {
        0
    };
    let file = OpenFile::new(FileKind::Socket(conn), oflags::O_RDWR | nb);
    Ok(Some(p.fds.insert(file, flags & SOCK_CLOEXEC != 0)?))
}

/// What an AF_INET/AF_INET6 socket adds to a stream socket.
pub struct Inet {
    /// AF_INET or AF_INET6.
    pub family: u16,
    /// The bound (or accepted-on) address.
    pub local: Option<SocketAddr>,
    /// The peer of an accepted connection.
    pub peer: Option<SocketAddr>,
    /// Set by listen(2).
    pub listener: Option<Arc<Mutex<Listener>>>,
    /// Options set at levels IPPROTO_IP/TCP/IPV6: (level, name, value).
    pub opts: Vec<(u32, u32, i32)>,
    /// The host connection behind an allowed outbound connect.
    pub host: Option<HostStream>,
    /// A nonblocking connect inside the VM answered EINPROGRESS and no
    /// connect has found it done since (the next one is 0, as on Linux).
    pub connecting: bool,
    /// A UDP connect chose the source address of a socket bound to the
    /// unspecified one; disconnecting gives the unspecified one back.
    pub source_by_connect: bool,
}

impl Inet {
    pub(super) fn new(family: u16) -> Self {
        Self {
            family,
            local: None,
            peer: None,
            listener: None,
            opts: Vec::new(),
            host: None,
            connecting: false,
            source_by_connect: false,
        }
    }

    /// A copy for a forked process: a listening socket keeps listening
    /// (with no pending connection: they belong to the original).
    pub fn fork_copy(&self) -> Inet {
        Inet {
            family: self.family,
            local: self.local,
            peer: self.peer,
            listener: self.listener.as_ref().map(Listener::fork_copy),
            opts: self.opts.clone(),
            connecting: self.connecting,
            source_by_connect: self.source_by_connect,
            host: self.host.as_ref().map(|h| {
                tracing::debug!(
                    "a connection made before the snapshot is reset (ECONNRESET) in every fork"
                );
                h.reset_copy()
            }),
        }
    }

    /// The value of an option recorded at `level`, 0 if never set.
    fn opt(&self, level: u64, name: u64) -> i32 {
        self.opts
            .iter()
            .find(|o| (o.0 as u64, o.1 as u64) == (level, name))
            .map_or(0, |o| o.2)
    }

    /// Whether IPV6_V6ONLY is set (an AF_INET6 socket then takes no IPv4).
    pub(super) fn v6only(&self) -> bool {
        self.family == AF_INET6 && self.opt(IPPROTO_IPV6, IPV6_V6ONLY) != 0
    }

    fn unspecified(&self) -> SocketAddr {
        if self.family == AF_INET6 {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
        } else {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
        }
    }
}

/// The next virtual port for bind(port 0) and listen without bind.
pub(super) fn next_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(40000);
    let p = NEXT.fetch_add(1, Ordering::Relaxed);
    if p < 40000 {
        NEXT.store(40001, Ordering::Relaxed);
        40000
    } else {
        p
    }
}

/// Whether `fd` is an AF_INET/AF_INET6 socket (so net.rs routes its call here).
pub(super) fn is_inet(p: &Process, fd: u64) -> bool {
    let Ok(file) = p.fds.get(fd as i32) else {
        return false;
    };
    let of = lock(&file);
    matches!(&of.kind, FileKind::Socket(s) if s.inet.is_some())
}

/// Runs `f` on the socket behind `fd` and its Inet part (EBADF/ENOTSOCK otherwise).
fn with_inet<T>(
    p: &Process,
    fd: u64,
    f: impl FnOnce(&mut Socket, bool) -> Result<T, Errno>,
) -> Result<T, Errno> {
    let file = p.fds.get(fd as i32)?;
    let mut of = lock(&file);
    let nb = of.nonblocking();
    match &mut of.kind {
        FileKind::Socket(s) if s.inet.is_some() => f(s, nb),
        FileKind::Socket(_) => Err(Errno::EINVAL),
        _ => Err(Errno::ENOTSOCK),
    }
}

fn inet_of(s: &mut Socket) -> Result<&mut Inet, Errno> {
    s.inet.as_deref_mut().ok_or(Errno::ENOTSOCK)
}

/// socket(2) for AF_INET/AF_INET6: a virtual TCP or UDP socket; raw refused (EACCES).
pub(super) fn socket(p: &mut Process, a: &Args) -> SysResult {
    let family = a[0] as u32 as u16;
    let ty = a[1] as u32 as u64;
    if ty & !(SOCK_TYPE_MASK | SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    let s = match ((ty & SOCK_TYPE_MASK) as u32, a[2] as u32 as u64) {
        (SOCK_STREAM, 0 | IPPROTO_TCP) => {
            let mut s = Socket::new(SOCK_STREAM);
            s.inet = Some(Box::new(Inet::new(family)));
            s
        }
        (SOCK_DGRAM, 0 | super::udp::IPPROTO_UDP) => super::udp::new_socket(family),
        (SOCK_STREAM | SOCK_DGRAM, _) => return Err(Errno::EPROTONOSUPPORT),
        // No raw network exists.
        _ => return Err(Errno::EACCES),
    };
    let nb = if ty & SOCK_NONBLOCK != 0 {
        oflags::O_NONBLOCK
    } else {
        0
    };
    let file = OpenFile::new(FileKind::Socket(s), oflags::O_RDWR | nb);
    Ok(p.fds.insert(file, ty & SOCK_CLOEXEC != 0)? as u64)
}

/// Decodes a guest `struct sockaddr_in`/`sockaddr_in6` for a socket of `family`.
pub(super) fn read_addr(
    mem: &GuestMemory,
    addr: u64,
    len: u64,
    family: u16,
) -> Result<SocketAddr, Errno> {
    let len = len as u32 as usize;
    if len < 2 {
        return Err(Errno::EINVAL);
    }
    let b = mem.read(addr, len.min(SOCKADDR_IN6) as u64)?;
    let fam = u16::from_le_bytes([b[0], b[1]]);
    match (family, fam) {
        (_, AF_INET) if len >= SOCKADDR_IN => {
            if family == AF_INET6 {
                // Linux: an AF_INET address on an AF_INET6 socket.
                return Err(EAFNOSUPPORT);
            }
            let port = u16::from_be_bytes([b[2], b[3]]);
            let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
            Ok(SocketAddr::new(IpAddr::V4(ip), port))
        }
        (AF_INET6, AF_INET6) if len >= SOCKADDR_IN6 => {
            let port = u16::from_be_bytes([b[2], b[3]]);
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&b[8..24]);
            Ok(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port))
        }
        (AF_INET, AF_INET6) => Err(EAFNOSUPPORT),
        _ if fam != AF_INET && fam != AF_INET6 => Err(EAFNOSUPPORT),
        _ => Err(Errno::EINVAL),
    }
}

/// Encodes `a` as a socket of `family` reports it.
pub(super) fn encode_addr(a: SocketAddr, family: u16) -> Vec<u8> {
    let ip6 = match (a.ip(), family) {
        (IpAddr::V4(v4), AF_INET) => {
            let mut b = vec![0u8; SOCKADDR_IN];
            b[..2].copy_from_slice(&AF_INET.to_le_bytes());
            b[2..4].copy_from_slice(&a.port().to_be_bytes());
            b[4..8].copy_from_slice(&v4.octets());
            return b;
        }
        (IpAddr::V6(v6), AF_INET) => {
            let v4 = v6.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED);
            return encode_addr(SocketAddr::new(IpAddr::V4(v4), a.port()), AF_INET);
        }
        (IpAddr::V4(v4), _) => v4.to_ipv6_mapped(),
        (IpAddr::V6(v6), _) => v6,
    };
    let mut b = vec![0u8; SOCKADDR_IN6];
    b[..2].copy_from_slice(&AF_INET6.to_le_bytes());
    b[2..4].copy_from_slice(&a.port().to_be_bytes());
    b[8..24].copy_from_slice(&ip6.octets());
    b
}

/// Writes an address to the guest's (addr, *len) pair, truncated to its room.
pub(super) fn write_addr(
    mem: &mut GuestMemory,
    addr: u64,
    len_ptr: u64,
    bytes: &[u8],
) -> Result<(), Errno> {
    let room = mem.read_u32(len_ptr)? as i32;
    if room < 0 {
        return Err(Errno::EINVAL);
    }
    let n = (room as usize).min(bytes.len());
    if n > 0 {
        mem.write(addr, &bytes[..n])?;
    }
    mem.write_u32(len_ptr, bytes.len() as u32)?;
    Ok(())
}

/// bind(2): records the address (port 0: a virtual port is picked).
pub(super) fn bind(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let family = with_inet(p, a[0], |s, _| Ok(inet_of(s)?.family))?;
    let mut want = read_addr(mem, a[1], a[2], family)?;
    let ip_ok = match want.ip() {
        IpAddr::V4(v4) => v4.is_unspecified() || v4.is_loopback() || !v4.is_multicast(),
        IpAddr::V6(v6) => !v6.is_multicast(),
    };
    if !ip_ok {
        return Err(Errno(99)); // EADDRNOTAVAIL
    }
    if want.port() == 0 {
        want.set_port(next_port());
    }
    bind_to(p, a[0], want)
}

/// Binds the socket `fd` to an ephemeral port of the unspecified address
/// (a UDP socket's first send or connect).
pub(super) fn bind_any(p: &mut Process, fd: u64) -> Result<(), Errno> {
    let mut any = with_inet(p, fd, |s, _| Ok(inet_of(s)?.unspecified()))?;
    // The virtual ports go round: skip those still held, as Linux does.
    let mut tries = 0;
    loop {
        any.set_port(next_port());
        match bind_to(p, fd, any) {
            Err(EADDRINUSE) if tries < 64 => tries += 1,
            r => return r.map(|_| ()),
        }
    }
}

/// Gives the socket `fd` the address `want` unless a socket of the run of
/// the same type has it.
fn bind_to(p: &mut Process, fd: u64, want: SocketAddr) -> SysResult {
    // Another socket of the run on the same port: EADDRINUSE, unless both
    // set SO_REUSEPORT (servers whose workers each bind the port). TCP and
    // UDP ports are apart; a TCP connection (it has a peer) holds none.
    let me = super::net::socket_ref(p, fd)?;
    let (reuse, v6only, ty) = with_inet(p, fd, |s, _| {
        Ok((reuse_port(s), inet_of(s)?.v6only(), s.ty))
    })?;
    for f in super::net::named_sockets(p) {
        if Arc::ptr_eq(&f, &me) {
            continue;
        }
        if let FileKind::Socket(s) = &lock(&f).kind {
            if let Some(i) = s.inet.as_ref().filter(|_| s.ty == ty) {
                let taken = (ty == SOCK_DGRAM || i.peer.is_none())
                    && i.local.is_some_and(|l| {
                        l.port() == want.port() && overlap(l, i.v6only(), want, v6only)
                    });
                if taken && !(reuse && reuse_port(s)) {
                    return Err(EADDRINUSE);
                }
            }
        }
    }
    with_inet(p, fd, |s, _| {
        let i = inet_of(s)?;
        if i.local.is_some() {
            return Err(Errno::EINVAL);
        }
        i.local = Some(want);
        if s.ty == SOCK_DGRAM {
            super::udp::on_bind(s);
        }
        Ok(0)
    })
}

/// listen(2): the socket takes connections the host pushes.
pub(super) fn listen(p: &mut Process, a: &Args) -> SysResult {
    let pid = super::child::pid_of(p);
    with_inet(p, a[0], |s, _| {
        if s.ty == SOCK_DGRAM {
            return Err(Errno::EOPNOTSUPP);
        }
        if s.connected() {
            return Err(Errno::EINVAL);
        }
        let i = inet_of(s)?;
        if i.local.is_none() {
            let mut any = i.unspecified();
            any.set_port(next_port());
            i.local = Some(any);
        }
        Listener::listen(&mut i.listener, a[1] as i64, pid);
        Ok(0)
    })
}

/// accept(2)/accept4(2) (flags checked by the caller): the next pushed connection, or a wait.
pub(super) fn accept(p: &mut Process, mem: &mut GuestMemory, a: &Args, flags: u64) -> SysResult {
    let (addr, len_ptr) = (a[1], a[2]);
    if addr != 0 {
        let room = mem.read_u32(len_ptr)? as i32;
        if room < 0 {
            return Err(Errno::EINVAL);
        }
    }
    let got = with_inet(p, a[0], |s, nb| {
        if s.ty == SOCK_DGRAM {
            return Err(Errno::EOPNOTSUPP);
        }
        let i = inet_of(s)?;
        let l = i.listener.as_ref().ok_or(Errno::EINVAL)?;
        Ok((lock(l).pending.pop_front(), nb, i.family))
    })?;
    let (conn, nonblocking, family) = got;
    let peer = conn
        .as_ref()
        .and_then(|c| c.inet.as_ref())
        .and_then(|i| i.peer);
    let Some(fd) = install_accepted(p, conn, nonblocking, flags)? else {
        return Ok(0);
    };
    if addr != 0 {
        if let Some(peer) = peer {
            if let Err(e) = write_addr(mem, addr, len_ptr, &encode_addr(peer, family)) {
                let _ = p.fds.close(fd);
                return Err(e);
            }
        }
    }
    Ok(fd as u64)
}

/// connect(2): to a socket of this program listening on a loopback address,
/// a connection inside the VM ([`super::loopback`]); to an address in
/// `--allow-connect`, a host TCP connection
/// (blocking, or EINPROGRESS and writable readiness when nonblocking);
/// anything else ECONNREFUSED, as a firewall's REJECT.
pub(super) fn connect(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if super::udp::family(p, a[0]).is_some() {
        return super::udp::connect(p, mem, a);
    }
    let retry = p.waiting.is_some();
    let (family, connected, listening, timeout) = with_inet(p, a[0], |s, _| {
        let timeout = s.sndtimeo;
        let connected = s.connected();
        let i = inet_of(s)?;
        Ok((i.family, connected, i.listener.is_some(), timeout))
    })?;
    let to = read_addr(mem, a[1], a[2], family)?;
    if listening {
        return Err(Errno::EISCONN);
    }
    // A connect already under way (or done) on a host-backed socket.
    let state = with_inet(p, a[0], |s, nb| {
        let Some(h) = inet_of(s)?.host.as_mut() else {
            return Ok(None);
        };
        Ok(Some((h.still_connecting(), nb)))
    })?;
    match state {
        // Our own blocking connect, made again after a wait.
        Some((true, false)) if retry => return wait_connect(p, timeout),
        Some((false, _)) => {
            // Done: a failed connect reports its error once and leaves the
            // socket unconnected; a good one is 0 for our own wait, else EISCONN.
            // Linux answers 0 to the first connect that finds it connected.
            let (err, confirmed) = with_inet(p, a[0], |s, _| {
                let Some(h) = inet_of(s)?.host.as_mut() else {
                    return Ok((0, true));
                };
                let confirmed = std::mem::replace(&mut h.confirmed, true);
                Ok((h.take_error(), confirmed))
            })?;
            if err != 0 {
                with_inet(p, a[0], |s, _| {
                    let i = inet_of(s)?;
                    (i.host, i.peer) = (None, None);
                    Ok(())
                })?;
                return Err(Errno(err));
            }
            return if retry || !confirmed {
                Ok(0)
            } else {
                Err(Errno::EISCONN)
            };
        }
        Some((true, _)) => return Err(EALREADY),
        None if connected => {
            // The first connect after a nonblocking one finds it done: 0.
            let was = with_inet(p, a[0], |s, _| {
                Ok(std::mem::replace(&mut inet_of(s)?.connecting, false))
            })?;
            return if was { Ok(0) } else { Err(Errno::EISCONN) };
        }
        None => {}
    }
    // One of the program's own listening sockets: a connection inside the VM.
    if let Some(listener) = super::loopback::own_listener(p, to) {
        super::loopback::connect(p, a[0], to, listener)?;
        // Linux's nonblocking connect is EINPROGRESS even on loopback (the
        // handshake is not done by the time it returns); the socket is
        // writable at once, with SO_ERROR 0. Programs wait for that, and
        // some check for the EINPROGRESS itself.
        return with_inet(p, a[0], |s, nb| {
            let i = inet_of(s)?;
            i.connecting = nb;
            Ok(if nb { Err(EINPROGRESS) } else { Ok(0) })
        })?;
    }
    if !p.outbound.check(to) {
        return Err(Errno::ECONNREFUSED);
    }
    let target = super::host_socket::canonical(to);
    let how = with_inet(p, a[0], |s, nb| {
        let i = inet_of(s)?;
        let nodelay = i.opt(IPPROTO_TCP, TCP_NODELAY) != 0;
        let (h, how) = HostStream::connect(target, nodelay)?;
        i.local = h.local_addr();
        i.peer = Some(to);
        i.host = Some(h);
        Ok(match how {
            Connect::Done => None,
            Connect::Pending => Some(nb),
        })
    })?;
    match how {
        None => Ok(0),
        Some(true) => Err(EINPROGRESS),
        Some(false) => wait_connect(p, timeout),
    }
}

/// A blocking connect waits (SO_SNDTIMEO bounds it: then EINPROGRESS, as Linux).
fn wait_connect(p: &mut Process, timeout: Option<std::time::Duration>) -> SysResult {
    match thread::wait(p, timeout, None) {
        Waited::Retry => Ok(0),
        Waited::TimedOut => Err(EINPROGRESS),
    }
}

/// getsockname(2): the bound address (unspecified, port 0, before bind).
pub(super) fn getsockname(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let bytes = with_inet(p, a[0], |s, _| {
        let i = inet_of(s)?;
        Ok(encode_addr(i.local.unwrap_or(i.unspecified()), i.family))
    })?;
    write_addr(mem, a[1], a[2], &bytes)?;
    Ok(0)
}

/// getpeername(2): the client of an accepted connection.
pub(super) fn getpeername(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let bytes = with_inet(p, a[0], |s, _| {
        // Closed by a reset: no peer any more, though its data stays readable.
        let reset = s.tcp_reset();
        let i = inet_of(s)?;
        let peer = i.peer.filter(|_| !reset).ok_or(Errno::ENOTCONN)?;
        Ok(encode_addr(peer, i.family))
    })?;
    write_addr(mem, a[1], a[2], &bytes)?;
    Ok(0)
}

/// setsockopt(2) at IP/TCP/IPv6 levels: recorded. None: not ours (SOL_SOCKET).
pub(super) fn setsockopt(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> Option<SysResult> {
    let [fd, level, name, val, len, _] = *a;
    if !is_inet(p, fd) || level as u32 as u64 == SOL_SOCKET {
        return None;
    }
    let level = level as u32 as u64;
    let udp = super::udp::family(p, fd).is_some();
    let ok = match level {
        IPPROTO_IP | IPPROTO_IPV6 => true,
        IPPROTO_TCP => !udp,
        super::udp::IPPROTO_UDP => udp,
        _ => false,
    };
    if !ok {
        return Some(Err(Errno::ENOPROTOOPT));
    }
    let v = match len as u32 {
        0 => 0,
        l if l >= 4 => match mem.read_u32(val) {
            Ok(v) => v as i32,
            Err(_) => return Some(Err(Errno::EFAULT)),
        },
        _ => match mem.read(val, 1) {
            Ok(b) => i32::from(b[0]),
            Err(_) => return Some(Err(Errno::EFAULT)),
        },
    };
    Some(with_inet(p, fd, |s, _| {
        let i = inet_of(s)?;
        if level == IPPROTO_IPV6 && i.family != AF_INET6 {
            return Err(Errno::ENOPROTOOPT);
        }
        let key = (level as u32, name as u32);
        if let (IPPROTO_TCP, TCP_NODELAY, Some(h)) = (level, name as u32 as u64, &i.host) {
            h.set_nodelay(v != 0);
        }
        match i.opts.iter_mut().find(|o| (o.0, o.1) == key) {
            Some(o) => o.2 = v,
            None => {
                if i.opts.len() >= 64 {
                    return Err(Errno::ENOBUFS);
                }
                i.opts.push((key.0, key.1, v))
            }
        }
        Ok(0)
    }))
}

/// getsockopt(2) at IP/TCP/IPv6 levels and the SOL_SOCKET options whose
/// answers differ for TCP (SO_DOMAIN, SO_PROTOCOL, SO_ACCEPTCONN). None: not ours.
pub(super) fn getsockopt(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> Option<SysResult> {
    let [fd, level, name, val, len_ptr, _] = *a;
    if !is_inet(p, fd) {
        return None;
    }
    let (level, name) = (level as u32 as u64, name as u32 as u64);
    if level == SOL_SOCKET && !matches!(name, SO_DOMAIN | SO_PROTOCOL | SO_ACCEPTCONN) {
        return None;
    }
    let r = with_inet(p, fd, |s, _| {
        let dgram = s.ty == SOCK_DGRAM;
        let i = inet_of(s)?;
        Ok(match (level, name) {
            (SOL_SOCKET, SO_DOMAIN) => i32::from(i.family),
            (SOL_SOCKET, SO_PROTOCOL) if dgram => super::udp::IPPROTO_UDP as i32,
            (SOL_SOCKET, SO_PROTOCOL) => IPPROTO_TCP as i32,
            (SOL_SOCKET, _) => i32::from(i.listener.is_some()),
            (IPPROTO_TCP, _) if dgram => return Err(Errno::ENOPROTOOPT),
            (super::udp::IPPROTO_UDP, _) if !dgram => return Err(Errno::ENOPROTOOPT),
            (IPPROTO_IP | IPPROTO_TCP | IPPROTO_IPV6 | super::udp::IPPROTO_UDP, n) => {
                if level == IPPROTO_IPV6 && i.family != AF_INET6 {
                    return Err(Errno::ENOPROTOOPT);
                }
                let set = i
                    .opts
                    .iter()
                    .find(|o| (o.0 as u64, o.1 as u64) == (level, n));
                match set {
                    Some(o) => o.2,
                    None if level == IPPROTO_TCP && n == 2 => 536, // TCP_MAXSEG
                    None if level == IPPROTO_IPV6 && n == IPV6_V6ONLY => 0,
                    None => 0,
                }
            }
            _ => return Err(Errno::ENOPROTOOPT),
        })
    });
    Some(r.and_then(|v| {
        let room = mem.read_u32(len_ptr)? as i32;
        if room < 0 {
            return Err(Errno::EINVAL);
        }
        let b = v.to_le_bytes();
        let n = (room as usize).min(4);
        if n > 0 {
            mem.write(val, &b[..n])?;
        }
        mem.write_u32(len_ptr, n as u32)?;
        Ok(0)
    }))
}

impl Socket {
    /// The host connection behind this socket, if an outbound connect made one.
    pub fn host_stream(&self) -> Option<&HostStream> {
        self.inet.as_ref()?.host.as_ref()
    }

    /// The same, to change it.
    pub fn host_stream_mut(&mut self) -> Option<&mut HostStream> {
        self.inet.as_mut()?.host.as_mut()
    }
}

/// Whether sockets bound to `a` and `b` (same port; with IPV6_V6ONLY as
/// given) would take the same connections: a dual-stack server binds
/// `0.0.0.0:P` and `[::]:P` with IPV6_V6ONLY, and two specific addresses
/// never clash.
pub(super) fn overlap(a: SocketAddr, a_v6only: bool, b: SocketAddr, b_v6only: bool) -> bool {
    let v4 = |ip: IpAddr| ip.to_canonical().is_ipv4();
    let (ia, ib) = (a.ip(), b.ip());
    // An IPv6-only socket takes no IPv4 connection.
    if (a_v6only && a.is_ipv6() && v4(ib) && b.is_ipv4())
        || (b_v6only && b.is_ipv6() && v4(ia) && a.is_ipv4())
    {
        return false;
    }
    ia.is_unspecified() || ib.is_unspecified() || ia.to_canonical() == ib.to_canonical()
}

/// Whether SO_REUSEPORT is set on `s`.
fn reuse_port(s: &Socket) -> bool {
    const SO_REUSEPORT: i32 = 15;
    s.flags.iter().any(|&(k, v)| k == SO_REUSEPORT && v != 0)
}

/// The first listening socket that `pick` accepts, of `p` or another
/// process of its run: its queue, family and bound address.
pub(super) fn find_listener(
    p: &Process,
    pick: impl Fn(&Inet) -> bool,
) -> Option<(Arc<Mutex<Listener>>, u16, Option<SocketAddr>)> {
    for f in super::net::named_sockets(p) {
        let of = lock(&f);
        let FileKind::Socket(s) = &of.kind else {
            continue;
        };
        let Some(i) = &s.inet else { continue };
        let Some(l) = &i.listener else { continue };
        if pick(i) {
            return Some((l.clone(), i.family, i.local));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::USER_BASE;

    fn setup() -> (Process, GuestMemory) {
        crate::linux::test_setup(crate::linux::Policy::default())
    }

    #[test]
    fn addresses_round_trip() {
        let a: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let b = encode_addr(a, AF_INET);
        assert_eq!(b.len(), 16);
        assert_eq!(&b[2..4], &[0x1f, 0x90]);
        let b6 = encode_addr(a, AF_INET6);
        assert_eq!(b6.len(), 28);
        let (_, mut m) = setup();
        m.write(USER_BASE, &b).unwrap();
        assert_eq!(read_addr(&m, USER_BASE, 16, AF_INET), Ok(a));
        assert_eq!(read_addr(&m, USER_BASE, 8, AF_INET), Err(Errno::EINVAL));
        assert_eq!(read_addr(&m, USER_BASE, 16, AF_INET6), Err(EAFNOSUPPORT));
        m.write(USER_BASE, &b6).unwrap();
        let got = read_addr(&m, USER_BASE, 28, AF_INET6).unwrap();
        assert_eq!(got.port(), 8080);
    }

    #[test]
    fn listen_accept_and_host_end() {
        let (mut p, mut m) = setup();
        let fd = socket(&mut p, &[2, 1 | SOCK_NONBLOCK, 0, 0, 0, 0]).unwrap();
        let sa = USER_BASE;
        m.write(sa, &encode_addr("127.0.0.1:0".parse().unwrap(), AF_INET))
            .unwrap();
        assert_eq!(bind(&mut p, &mut m, &[fd, sa, 16, 0, 0, 0]), Ok(0));
        assert_eq!(listen(&mut p, &[fd, 128, 0, 0, 0, 0]), Ok(0));
        let local = listening_addr(&p).unwrap();
        assert!(local.port() >= 40000);
        let (addr, len) = (USER_BASE + 0x100, USER_BASE + 0x200);
        m.write_u32(len, 16).unwrap();
        assert_eq!(
            accept(&mut p, &mut m, &[fd, addr, len, 0, 0, 0], 0),
            Err(Errno::EAGAIN)
        );
        let peer: SocketAddr = "127.0.0.1:5555".parse().unwrap();
        let mut host = connect_to_listener(&p, peer).unwrap();
        host.push(b"hello");
        host.finish();
        let c = accept(&mut p, &mut m, &[fd, addr, len, 0, 0, 0], SOCK_CLOEXEC).unwrap();
        assert_eq!(read_addr(&m, addr, 16, AF_INET), Ok(peer));
        let file = p.fds.get(c as i32).unwrap();
        let mut of = lock(&file);
        let FileKind::Socket(s) = &mut of.kind else {
            panic!("not a socket")
        };
        let mut buf = [0u8; 16];
        assert_eq!(s.recv(&mut buf, false).unwrap().copied, 5);
        assert_eq!(s.recv(&mut buf, false).unwrap().copied, 0, "EOF");
        assert_eq!(s.send(b"reply", Vec::new()), Ok(5));
        drop(of);
        drop(file);
        let mut out = Vec::new();
        assert!(!host.take(&mut out));
        assert_eq!(out, b"reply");
        p.fds.close(c as i32).unwrap();
        assert!(host.take(&mut out));
        assert!(host.guest_gone());
        // A second bind of the same port: EADDRINUSE.
        let fd2 = socket(&mut p, &[10, 1, 0, 0, 0, 0]).unwrap();
        m.write(sa, &encode_addr(local, AF_INET6)).unwrap();
        assert_eq!(
            bind(&mut p, &mut m, &[fd2, sa, 28, 0, 0, 0]),
            Err(EADDRINUSE)
        );
        // UDP is a datagram socket of the run (see udp.rs); raw stays refused.
        assert!(socket(&mut p, &[2, 2, 0, 0, 0, 0]).is_ok());
        assert_eq!(
            socket(&mut p, &[2, 2, 6, 0, 0, 0]),
            Err(Errno::EPROTONOSUPPORT)
        );
        assert_eq!(socket(&mut p, &[2, 3, 1, 0, 0, 0]), Err(Errno::EACCES));
    }

    fn poll_of(p: &Process, fd: u64) -> i16 {
        let file = p.fds.get(fd as i32).unwrap();
        let of = lock(&file);
        let FileKind::Socket(s) = &of.kind else {
            panic!("not a socket")
        };
        s.poll()
    }

    #[test]
    fn connect_is_refused_unless_allowed_then_a_host_connection() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (mut p, mut m) = setup();
        let sa = USER_BASE;
        m.write(sa, &encode_addr(addr, AF_INET)).unwrap();
        let fd = socket(&mut p, &[2, 1 | SOCK_NONBLOCK, 0, 0, 0, 0]).unwrap();
        let args = [fd, sa, 16, 0, 0, 0];
        assert_eq!(connect(&mut p, &mut m, &args), Err(Errno::ECONNREFUSED));
        p.outbound = crate::linux::host_socket::Outbound::new(vec![addr]);
        let first = connect(&mut p, &mut m, &args);
        assert!(matches!(first, Ok(0) | Err(EINPROGRESS)), "{first:?}");
        let (mut peer, _) = l.accept().unwrap();
        for _ in 0..2000 {
            if poll_of(&p, fd) & 0x4 != 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if first.is_err() {
            // As Linux: 0 from the first connect that finds it connected, then EISCONN.
            assert_eq!(connect(&mut p, &mut m, &args), Ok(0));
        }
        assert_eq!(connect(&mut p, &mut m, &args), Err(Errno::EISCONN));
        let (out, len) = (USER_BASE + 0x100, USER_BASE + 0x200);
        m.write_u32(len, 16).unwrap();
        assert_eq!(getpeername(&mut p, &mut m, &[fd, out, len, 0, 0, 0]), Ok(0));
        assert_eq!(read_addr(&m, out, 16, AF_INET), Ok(addr));
        // Data both ways through the socket's own operations.
        let file = p.fds.get(fd as i32).unwrap();
        {
            let mut of = lock(&file);
            let FileKind::Socket(s) = &mut of.kind else {
                panic!("not a socket")
            };
            assert!(s.connected());
            assert_eq!(s.send(b"hi", Vec::new()), Ok(2));
        }
        let mut b = [0u8; 2];
        peer.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"hi");
        peer.write_all(b"yo").unwrap();
        // A waiting process sleeps until the host socket is readable.
        {
            let mut of = lock(&file);
            let FileKind::Socket(s) = &mut of.kind else {
                panic!("not a socket")
            };
            let mut buf = [0u8; 8];
            let got = s.recv(&mut buf, false);
            if got.is_err() {
                drop(of);
                assert!(crate::linux::host_socket::sleep(
                    &mut p,
                    std::time::Duration::from_secs(30)
                ));
                of = lock(&file);
            }
            let FileKind::Socket(s) = &mut of.kind else {
                panic!("not a socket")
            };
            let n = match got {
                Ok(r) => r.copied,
                Err(_) => s.recv(&mut buf, false).unwrap().copied,
            };
            assert_eq!(&buf[..n], b"yo");
        }
        drop(file);
        // Closing the guest's descriptor closes the host connection.
        p.fds.close(fd as i32).unwrap();
        let mut rest = Vec::new();
        assert_eq!(peer.read_to_end(&mut rest).unwrap(), 0);
    }
}
